#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/layer_stream.h"
#include "exec/precision_run.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "numerics/tolerance.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// One run of a checkpoint on one rank, optionally against a reference (`day0 run CKPT`, the
/// precision panel's Run).
struct RunRequest {
    std::string checkpoint; ///< a checkpoint folder or file (not a bundled config)
    /// Precisions, prompt, tokens, captures, image and backend; `table` is set by the action.
    exec::PrecisionRunOptions options;
    /// With a reference: the tolerance table, a bundled name or a JSON file; empty: day0-default.
    std::string tolerances;
    /// Writes the run's dumps here (exec::writeRunDumps) and keeps the folder as an artifact of
    /// the record; empty: no dump.
    std::filesystem::path dump;
    /// Streams the weights layer by layer (exec::runStreamed): every run on the CPU (the
    /// target alone or beside the reference and its inject-mode run, in any precision); a
    /// backend's target and its fp32 leg load their engine whole (PrecisionRunResult says which
    /// streamed). What it cannot do is refused by name.
    bool stream = false;
    exec::StreamOptions streamOptions; ///< with `stream`: the memory budget
    /// "A-B": run decoder layers A..B only (exec::LayerSlice), fed from the dump in
    /// `sliceInput` (its residual stream entering layer A), streamed or not; empty: every layer.
    std::string layers;
    std::filesystem::path sliceInput; ///< with `layers`: a prior run's --dump folder
};

/// What the run produced: the model, the runs and their comparison, the tolerance table it was
/// judged with (null without a reference) and the run record (precisionRunRecord, kind run).
struct RunOutcome {
    model::ModelSpec spec;
    exec::PrecisionRunResult result;
    std::shared_ptr<const numerics::ToleranceTable> table;
    double seconds = 0.0; ///< the runs, from the opened weights to the last token
    history::RunRecord record;
    std::optional<exec::StreamStats> stream; ///< a streamed run's reads and peak memory
    std::optional<exec::LayerSlice> slice; ///< the layers that ran, when a slice ran
    /// Parts of the model the forward does not compute, each named (notRunParts).
    std::vector<std::string> notRun;
};

/// What of `spec` no run computes, one sentence each: its multi-token-prediction blocks
/// (num_nextn_predict_layers), which predict further tokens for speculative decoding and are not
/// part of the main forward. Empty when every part runs.
std::vector<std::string> notRunParts(const model::ModelSpec& spec);

/// Loads the checkpoint, runs the target (and the reference and inject-mode target when asked),
/// compares them, writes the dumps when asked and builds the record. An annotation scope per
/// phase ("open checkpoint", "run"). Errors name the checkpoint, the option or the operator.
/// Cancellable.
Result<RunOutcome> runCheckpoint(
    const RunRequest& request, Progress& progress, std::stop_token stop);

/// The checkpoint a model source runs: the source itself when it holds weights (a
/// .safetensors/.gguf file or a folder with one), else the demo's shrunk checkpoint of its
/// architecture in the shared cache (exec::cachedShrunkCheckpoint, made on first use).
Result<std::filesystem::path> checkpointForSource(
    const std::string& modelSource, Progress& progress, std::stop_token stop);

} // namespace day0::actions
