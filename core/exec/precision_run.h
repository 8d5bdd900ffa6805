#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/engine.h"
#include "exec/layer_stream.h"
#include "numerics/dump_compare.h"

#include <filesystem>
#include <optional>
#include <stop_token>
#include <vector>

namespace day0::exec {

/// A target run, optionally with its reference, inject-mode run and comparison (`day0 run
/// --reference`, the precision panel's "run and compare").
struct PrecisionRunOptions {
    PrecisionPlan target;
    std::optional<PrecisionMode> reference; ///< fp32 or fp64; nullopt: target only
    bool inject = false; ///< also run the target with every layer fed the reference's inputs
    std::vector<std::int64_t> promptIds;
    std::int64_t newTokens = 8;
    /// Tokens per chunk of the Gated DeltaNet delta rule in a prefill (RunOptions), every run.
    std::int64_t linearAttentionChunk = 64;
    std::optional<ImageInput> image; ///< vision-language models: the image of the prompt
    CaptureOptions capture;
    const numerics::ToleranceTable* table = nullptr; ///< needed with a reference
    /// Where the target (and inject-mode) runs compute (see RunOptions::backend); null: the CPU
    /// reference. The reference run is always the CPU's.
    Backend* backend = nullptr;
    /// The fp32 leg: also run the target's backend in fp32 and judge it against the reference
    /// by the fp32 rules. A structural fault of the target (a misread config, a norm epsilon or
    /// a RoPE frequency off) shows there at fp32's noise floor, where in bf16 it can lie below
    /// the rounding noise. Needs a reference, a lower-precision target and a backend: on the
    /// CPU the target's fp32 is the reference itself.
    bool fp32Leg = false;
    /// Non-empty: the runs on the CPU (the reference, the target and the inject-mode run, in
    /// any precision) stream their weights layer by layer from this checkpoint (runStreamed)
    /// instead of loading an engine. A backend's target and the fp32 leg still load theirs
    /// whole; PrecisionRunResult says which runs streamed.
    std::filesystem::path streamFrom;
    StreamOptions streamOptions; ///< with `streamFrom`: the memory budget
};

/// What a precision run produced.
struct PrecisionRunResult {
    RunResult target;
    std::optional<RunResult> reference;
    std::optional<RunResult> injected;
    std::optional<numerics::DumpComparison> comparison;
    std::optional<RunResult> fp32Leg; ///< the target's backend in fp32 (fp32Leg)
    std::optional<numerics::DumpComparison> fp32LegComparison; ///< it against the reference
    bool referenceStreamed = false; ///< its weights were streamed layer by layer
    bool targetStreamed = false;
    /// The streamed runs' reads, summed (peak figures: the largest); nullopt: none streamed.
    std::optional<StreamStats> stream;
};

/// The fp32 leg's verdict in words: "pass", or "fail: 2 of 40 captures failed, first at
/// <capture>: <the verdict's reason>".
std::string fp32LegSummary(const numerics::DumpComparison& leg);

/// Whether a precision run's checks passed: its comparison and its fp32 leg (when run) hold
/// no failed capture.
bool precisionRunPassed(const PrecisionRunResult& result);

/// Runs the reference first (greedy), then the target teacher-forced with the reference's tokens
/// so both see the same context, then (if asked) the inject-mode target, and compares them.
/// Engines are loaded from `weights` once per arithmetic (fp64 and/or fp32). Progress stages name
/// the run under way.
Result<PrecisionRunResult> runWithReference(const model::ModelSpec& spec,
    const WeightSource& weights, const PrecisionRunOptions& options, Progress& progress,
    std::stop_token stop);

/// Writes the dumps of a precision run: into `dir` itself when there is no reference, else into
/// `dir/reference`, `dir/target`, `dir/target-inject` and `dir/target-fp32` (the fp32 leg).
Result<void> writeRunDumps(const PrecisionRunResult& result, const std::filesystem::path& dir);

} // namespace day0::exec
