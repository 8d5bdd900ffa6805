#pragma once

// The engine against its independent PyTorch twin (plugins/torch, Debian's python3-torch):
// shared by the tests of each family that has one.

#include "base/result.h"
#include "checkpoint/shrink.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace day0::test {

/// The Python that has torch and numpy (Debian's, not the first on PATH).
inline constexpr const char* kPython = "/usr/bin/python3";

/// plugins/torch/day0_dump.py.
std::filesystem::path bridgeScript();

/// Whether kPython imports torch and numpy (checked once).
bool torchAvailable();

/// Element-wise max relative error of our logits against PyTorch's, with denominators floored
/// at 1% of the largest |logit|: fp32 rounding leaves ~3e-7 of the logits' scale in every
/// element, which near-zero logits would otherwise turn into large relative numbers.
double logitsMaxRel(const numerics::Tensor& theirs, const numerics::Tensor& ours);

/// How the engine's dump and the twin's agree.
struct Agreement {
    /// max |Δ| / max |logit| over the logits: the bound for fp32 against the twin.
    double logitsMaxAbsOverMax = 0.0;
    double logitsMaxRel = 0.0;
    double logitsRelL2 = 0.0;
    double worstCaptureRelL2 = 0.0;
    std::string worstCapture;
    std::size_t common = 0; ///< captures both hold
    /// Rows of the selection captures (`#topk`: router experts, DSA keys) both hold, and those
    /// whose selected set differs.
    std::size_t selectionRows = 0;
    std::size_t selectionRowsDiffering = 0;
};

/// Runs the checkpoint in `dir / "ckpt"` on the fp32 engine (3 new tokens after `prompt`) and in
/// the twin in float64 with `twinEnv` set before it (the twins' DAY0_TWIN_WITHOUT=feature
/// computes the model without one feature, to show a test depends on it), writing the twin's
/// dump to `dir / "torch"`; measures the logits' and every common capture's agreement. With
/// `fp64` the engine runs in fp64: for models whose fp32 rounding noise is above the fp32 bounds
/// (PyTorch's own fp32 misses its float64 by as much), the math is then checked exactly.
/// `linearAttentionChunk`: the engine's chunk of the chunked delta rule (Gated DeltaNet).
Agreement checkpointAgainstTorch(const std::filesystem::path& dir, const std::string& twinEnv,
    const std::vector<std::int64_t>& prompt, bool fp64 = false,
    std::int64_t linearAttentionChunk = 64);

/// Shrinks the bundled `model` into `dir / "ckpt"` (clearing `dir` first) and reads its spec back,
/// for a family's twin test.
Result<model::ModelSpec> shrinkForTwin(const std::string& model, const std::filesystem::path& dir,
    const checkpoint::ShrinkOptions& options = {});

/// Each feature of `features`, switched off in the twin (DAY0_TWIN_WITHOUT), must break the
/// agreement with the engine (logits max rel > 1e-3): the family's comparison would then catch
/// an engine that lacked it. Prints each miss.
void expectEachFeatureMatters(const std::filesystem::path& dir,
    const std::vector<std::string>& features, const std::vector<std::int64_t>& prompt,
    bool fp64 = false, std::int64_t linearAttentionChunk = 64);

} // namespace day0::test
