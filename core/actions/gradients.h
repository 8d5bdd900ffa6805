#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/backward.h"
#include "history/run_record.h"
#include "model/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// One gradient pass of a checkpoint (`day0 run CKPT --grad`): the next-token loss of a token
/// sequence and its gradients on the CPU reference (exec/backward.h).
struct GradientRequest {
    std::string checkpoint; ///< a checkpoint folder or file
    bool fp64 = true; ///< fp64 reference or fp32
    /// BF16 or F16: the whole pass in that emulated precision (exec::GradientOptions::emulated;
    /// fp64 false); F32: none.
    exec::PrecisionMode emulated = exec::PrecisionMode::F32;
    std::vector<std::int64_t> ids;
    /// One target per id (negative: not counted); empty: the next token (HF labels=input_ids).
    std::vector<std::int64_t> targets;
    bool activations = true; ///< also every anchor's "<anchor>#grad"
    std::filesystem::path dump; ///< writes exec::gradientDump here; empty: no dump
    /// Inject mode (exec::GradientOptions::inject): the reference gradient dump of the same
    /// model, ids and targets whose gradient replaces this pass's at every module boundary; the
    /// dump written is then mode "inject", each capture's own error against that reference.
    /// Empty: none.
    std::filesystem::path inject;
    /// Emulated low precision in these decoder layers' backward (exec::GradientOptions).
    std::vector<int> roundedLayers;
    DType roundedTo = DType::BF16;
};

/// What the pass produced.
struct GradientOutcome {
    model::ModelSpec spec;
    exec::GradientResult result;
    std::vector<std::int64_t> targets; ///< the targets used
    double gradNorm = 0.0; ///< the global L2 norm over every parameter gradient
    /// Parameter gradients under the checkpoint's names, as the dump holds them
    /// (exec::checkpointGradients: gpt-oss's per-expert gradients fused into its packed tensors).
    std::size_t checkpointParameters = 0;
    double seconds = 0.0; ///< the pass, weights loaded
    /// The run (kind run, property gradients=true): checkpoint, ids, loss, counted positions,
    /// parameter count, global gradient norm, time; the dump folder as an artifact.
    history::RunRecord record { history::RunKind::Run };
};

/// Loads the checkpoint (refusing by name what the backward lacks before reading weights), runs
/// the gradient pass and writes the dump when asked. Errors name the checkpoint, the weight or
/// the operator. Cancellable.
Result<GradientOutcome> checkpointGradients(
    const GradientRequest& request, Progress& progress, std::stop_token stop);

} // namespace day0::actions
