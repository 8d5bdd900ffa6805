#pragma once

#include "exec/engine.h"
#include "exec/weight_source.h"
#include "numerics/dump_compare.h"
#include "pipeline/day0_steps.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace day0::pipeline::detail {

/// What the steps of one validation hand to each other. Steps run one after another on one
/// thread; `finished` is appended to by the pipeline observer on that same thread.
struct ValidationState {
    ValidateOptions options;
    std::filesystem::path work;
    std::filesystem::path source; ///< the checkpoint step 1 checked
    bool shrunk = false;
    std::filesystem::path runnable; ///< the checkpoint the engine runs (after dequantisation)
    std::filesystem::path sharded;
    std::optional<model::ModelSpec> spec;
    std::string modelName; ///< the model as the user knows it (not the conversion's folder)
    std::unique_ptr<exec::WeightSource> weights;
    std::optional<exec::Engine> engine; ///< loaded by the smoke step; none when streamed
    /// Streamed (ValidateOptions::stream): what the engine steps' streams read, summed, with the
    /// largest layer and the budget.
    std::optional<exec::StreamStats> stream;
    std::optional<exec::PrecisionPlan> target;
    std::vector<std::int64_t> promptIds;
    std::optional<exec::RunResult> smoke;
    std::int64_t residentBeforeEngine = 0; ///< bytes resident before the engine loaded
    std::optional<numerics::DumpComparison> comparison;
    history::LayerMetrics layers;
    std::vector<history::MemoryEntry> memory;
    std::optional<history::RunRecord> servingBench; ///< the serving step's bench run
    std::vector<StepRecord> finished;
    std::vector<ReportFigure> figures;
    FigureRenderer renderer;
};

/// Peak resident set size of this process so far (getrusage), bytes.
std::int64_t peakResidentBytes();
/// Resident set size of this process now (/proc/self/statm; 0 where unavailable), bytes.
std::int64_t residentBytes();

/// One run of `options` on the validation's model: on the smoke step's engine (which must be
/// loaded in the plan's arithmetic), or streamed layer by layer when the validation streams
/// (its reads added to state.stream).
Result<exec::RunResult> runModel(ValidationState& state, const exec::RunOptions& options,
    Progress& progress, std::stop_token stop);

/// Adds a streamed run's reads to state.stream (peak figures: the largest).
void addStreamStats(ValidationState& state, const exec::StreamStats& stats);

/// Steps 1-4: weights and integrity, architecture and conversion, sharding, single-rank smoke.
Step weightsStep(ValidationState& state);
Step convertStep(ValidationState& state);
Step shardStep(ValidationState& state);
Step smokeStep(ValidationState& state);
/// Steps 5-8: multi-rank, precision, performance, report.
Step multiRankStep(ValidationState& state);
Step precisionStep(ValidationState& state);
Step performanceStep(ValidationState& state);
Step reportStep(ValidationState& state);
/// The optional serving step (ValidateOptions::serve).
Step servingStep(ValidationState& state);

} // namespace day0::pipeline::detail
