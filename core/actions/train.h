#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "train/trainer.h"

#include <optional>
#include <stop_token>
#include <string>

namespace day0::actions {

/// The model `day0 train` can train today: NextTokenMlp on SyntheticCorpus (the LLM backward of
/// core/exec is not wired to the trainer yet).
inline constexpr const char* kBuiltinTrainModel = "next-token-mlp";

/// What to train and how.
struct TrainRequest {
    std::string model = kBuiltinTrainModel;
    std::string plan; ///< plan string; only dp and zero (0 or 1) are modelled
    train::TrainOptions options;
};

/// What a training job produced.
struct TrainOutcome {
    train::TrainResult result;
    /// With compression: the same run (seed, steps, plan) uncompressed, and the verdict.
    std::optional<train::TrainResult> baseline;
    std::optional<train::ConvergenceVerdict> verdict;
    history::RunRecord record; ///< trainRunRecord, with the verdict (Failed when it does not
                               ///< converge)
};

/// Applies a plan string to the options: dp and zero; any other field that differs from a
/// single-rank plan (tp, pp, ep, cp, zero>=2, ...) is refused by name as not modelled.
Result<void> applyTrainPlan(const std::string& plan, train::TrainOptions& options);

/// Trains `request.model` (the one place `day0 train` and, later, a Training panel call): the
/// run, and with compression the uncompressed twin and the convergence verdict; builds the run
/// record. A model other than kBuiltinTrainModel is refused (Unsupported) naming why. Progress
/// counts the steps of the run, then of its uncompressed twin.
Result<TrainOutcome> trainModel(
    const TrainRequest& request, Progress& progress, const std::stop_token& stop = {});

} // namespace day0::actions
