// What the backward tests share (backward_test.cpp, backward_gemma4_test.cpp): our fp64
// gradients of a checkpoint against the float64 twin's (plugins/torch, day0_dump.py --grad).
#pragma once

#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace day0::test {

/// max |ours − theirs| / max |theirs| over one tensor (0 when both are zero; 1 when only ours
/// is, or when ours has values where theirs is all zero).
double maxRel(const numerics::Tensor& theirs, const numerics::Tensor& ours);

struct TwinAgreement {
    double params = 0.0; ///< worst parameter gradient max rel
    std::string worstParam;
    double activations = 0.0; ///< worst anchor gradient max rel
    std::string worstActivation;
    std::size_t paramsCompared = 0;
    std::size_t activationsCompared = 0;
    /// Expert weights whose gradient is zero (for packed experts, zero expert slices).
    std::size_t zeroExperts = 0;
    std::size_t paramsOurs = 0; ///< our parameter gradients under the checkpoint's names
    double lossDiff = 1.0;
};

/// Expert weights (or, in a packed expert tensor [E, ...], expert slices) all zero in `grad`.
std::size_t zeroExpertsIn(const std::string& name, const numerics::Tensor& grad);

/// `ours` (fp64 gradients of the checkpoint in `dir / "ckpt"` of `spec` on `ids`) against the
/// float64 twin's, by the checkpoint's names (exec::checkpointGradients).
/// `twinEnv` ("DAY0_TWIN_WITHOUT=feature", the twins' switch) is set before the twin runs: its
/// gradients are then those of the model without that feature, and the logits are not checked.
TwinAgreement againstTwin(const std::filesystem::path& dir, const model::ModelSpec& spec,
    const exec::GradientResult& ours, const std::vector<std::int64_t>& ids,
    double forwardBound = 1e-12, const std::string& twinEnv = "");

/// A shrunk checkpoint of `config` (a bundled name or a config path, written to `dir / "ckpt"` by
/// shrinkForTwin with `options`): its spec, the weights its fp64 engine read and our fp64
/// gradients (activations too) of the next-token loss on `ids`. A step that fails is a test
/// failure and leaves the later fields empty.
struct ShrunkGradients {
    model::ModelSpec spec;
    std::map<std::string, numerics::Tensor> weights;
    exec::GradientResult ours;
};
ShrunkGradients shrunkGradients(const std::string& config, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, const checkpoint::ShrinkOptions& options = {});

/// shrunkGradients of the bundled config `bundled` (resources/configs) without its
/// quantization_config, with `edit` applied to its JSON first (the edited config written beside
/// `dir`, in `dir` + "_config").
ShrunkGradients shrunkEditedGradients(const std::string& bundled, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, const checkpoint::ShrinkOptions& options,
    const std::function<void(nlohmann::ordered_json&)>& edit);

/// backwardUnsupported's lines for `spec`, joined.
std::string refusals(const model::ModelSpec& spec);

} // namespace day0::test
