#pragma once

// A slice of the decoder layers (`day0 run CKPT --layers A-B --slice-input DUMP`): layers A..B
// run over the tokens of a prior run's dump, their input being that dump's residual stream
// entering layer A, so a long model can be checked in parts or in parallel processes. The
// slice's captures are those of a whole run, bit for bit, for the same tokens.

#include "base/progress.h"
#include "base/result.h"
#include "exec/engine.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"
#include "numerics/dump.h"

#include <stop_token>
#include <string>
#include <string_view>

namespace day0::exec {

/// Decoder layers [first, last] fed from `input`.
struct LayerSlice {
    int first = 0;
    int last = 0;
    /// The dump holding the residual stream entering `first`; must outlive the run.
    const numerics::Dump* input = nullptr;
    /// Set by prepareLayerSlice: the capture read ("model.layers.<first − 1>", or
    /// "model.embed_tokens" for layer 0, or else "model.layers.<first>#in0").
    std::string inputCapture;
    /// The anchor after which the forward takes its input (the module before `first`).
    std::string entryAnchor;
};

/// "A-B" or "A" → [first, last] within the model's `layers`; the error names the text.
Result<std::pair<int, int>> parseLayerRange(std::string_view text, std::int64_t layers);

/// Checks that `slice.input` can feed the slice of `spec` run in `options`' precision (same
/// model fingerprint and precision plan; the input capture present and stored, [tokens, hidden]
/// in the compute type, tokens = the dump's input ids) and sets the prompt and teacher-forced
/// tokens of `options` from the dump: the slice runs the dump's prefill and decode steps. A
/// prompt already in `options` must be the dump's, and `options.newTokens` (0: any) its step
/// count. Errors name the dump's capture and what differs.
Result<void> prepareLayerSlice(
    const model::ModelSpec& spec, RunOptions& options, LayerSlice& slice);

/// Why the slice cannot run on `spec` or with `options`, by name; success when it can.
Result<void> refuseUnsliceable(const model::ModelSpec& spec, const RunOptions& options);

/// Runs a prepared slice over `weights`, reading only the weights of its layers. The result
/// has no logits and no greedy picks (the dump's tokens are fed). Cancellable.
Result<RunResult> runLayerSlice(const model::ModelSpec& spec, const WeightSource& weights,
    const RunOptions& options, const LayerSlice& slice, Progress& progress, std::stop_token stop);

/// The decoder layer a checkpoint weight belongs to ("model.layers.7.mlp..." → 7); -1 for the
/// embedding, the final norm, the head and anything else.
int layerOfWeight(std::string_view name);

} // namespace day0::exec
