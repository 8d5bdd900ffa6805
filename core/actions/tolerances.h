#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/engine.h"
#include "exec/precision.h"
#include "numerics/tolerance_derivation.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// Derive a tolerance table from healthy runs (`day0 tolerances derive`): every checkpoint, in
/// every precision, over `runs` prompts of the model's own text.
struct DeriveTolerancesRequest {
    std::vector<std::filesystem::path> checkpoints;
    std::vector<exec::PrecisionMode> precisions;
    int runs = 4; ///< prompts per checkpoint and precision
    int tokens = 64; ///< prompt length: the start tokens, continued by the fp32 model greedily
    std::uint64_t seed = 1; ///< picks each prompt's second token
    exec::PrecisionMode reference = exec::PrecisionMode::F32;
    /// The table whose rules the derived one keeps for dtypes not run (a bundled name or a file;
    /// empty: day0-default).
    std::string base;
    numerics::DerivationOptions derivation;
    /// Writes the table here (atomically) when set.
    std::filesystem::path out;
    /// Gradient rules instead (`--grad`): per prompt an fp64 gradient pass (`day0 run --grad`)
    /// is the reference, and each precision (bf16, fp16 or fp32) runs the pass propagated and in
    /// inject mode against it; the table keeps `base`'s forward rules. `reference` is unused.
    bool gradients = false;
    /// Gradient runs: where the dumps are written while a run is compared (removed after);
    /// empty: the system's temporary folder.
    std::filesystem::path scratch;
};

struct DeriveTolerancesOutcome {
    nlohmann::json table;
    std::vector<numerics::HealthyRun> runs;
};

/// Runs the reference, the target and the inject-mode target of every (checkpoint, precision,
/// prompt) (forward passes, or gradient passes with `gradients`), then derives the table
/// (numerics::deriveToleranceTable) and writes it when asked. Prompt r of a checkpoint is its BOS
/// token (config.json `bos_token_id`, when it has one) followed by a token picked by the seed (none
/// for r = 0), continued by the fp32 model to `tokens` tokens: text the model itself finds likely,
/// as a trained model's healthy input is. Cancellable; errors name the checkpoint and the run.
Result<DeriveTolerancesOutcome> deriveTolerances(
    const DeriveTolerancesRequest& request, Progress& progress, std::stop_token stop);

/// Prompt r of a checkpoint as deriveTolerances makes it, with how it was made.
struct HealthyPrompt {
    std::vector<std::int64_t> ids;
    std::string label; ///< "1, 17 continued by the fp32 model to 64 tokens"
};

/// Prompt r of a checkpoint, continued greedily by `fp32` (an fp32 engine of that checkpoint,
/// made once for all its prompts).
Result<HealthyPrompt> healthyPrompt(const std::filesystem::path& checkpoint, exec::Engine& fp32,
    std::int64_t vocab, int r, int tokens, std::uint64_t seed, Progress& progress,
    std::stop_token stop);

} // namespace day0::actions
