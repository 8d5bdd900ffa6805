#pragma once

#include "actions/train_grad_dump.h"
#include "actions/train_memory.h"
#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "train/trainer.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stop_token>
#include <string>

namespace day0::actions {

/// The built-in task of `day0 train`: NextTokenMlp on SyntheticCorpus. Any other model name is a
/// checkpoint, trained through the LLM backward of core/exec (CheckpointTrainable).
inline constexpr const char* kBuiltinTrainModel = "next-token-mlp";

/// The largest vocabulary a checkpoint is trained on without `--data`: the synthetic order-2
/// chain over its ids holds vocab² × 3 successors (2048: 48 MiB).
inline constexpr std::int64_t kMaxSyntheticVocab = 2048;

/// What to train and how.
struct TrainRequest {
    std::string model = kBuiltinTrainModel;
    std::string plan; ///< plan string; only dp, tp and zero (0 or 1) are modelled
    /// A checkpoint's data: a token-id file (train/token_file.h); empty: the synthetic order-2
    /// chain over the checkpoint's own vocabulary, drawn from the seed (SyntheticCorpus).
    std::filesystem::path data;
    train::TrainOptions options;
    /// A checkpoint's gradient dumps (TrainGradientDumps) go here; empty: none.
    std::filesystem::path gradDump;
    GradDumpSteps gradSteps; ///< which steps write one (default: the last)
};

/// What a training job produced.
struct TrainOutcome {
    train::TrainResult result;
    /// With compression: the same run (seed, steps, plan) uncompressed, and the verdict.
    std::optional<train::TrainResult> baseline;
    std::optional<train::ConvergenceVerdict> verdict;
    /// A checkpoint's run: every rank's buffers against the planner's estimate, and the peak RSS
    /// (none for the built-in task, which has no architecture the planner models).
    std::optional<TrainMemory> memory;
    /// Why a checkpoint's run has no memory comparison (no step ran: a resume at the last
    /// step), else empty.
    std::string memoryNotCompared;
    /// The gradient dumps written (request.gradDump), in step and replica order.
    std::vector<GradDumpRef> gradDumps;
    /// The chosen steps the last attempt did not run (a resume started after them): no dump.
    std::vector<std::int64_t> gradStepsNotRun;
    history::RunRecord record; ///< trainRunRecord, with the verdict (Failed when it does not
                               ///< converge) and the memory comparison
};

/// Applies a plan string to the options: dp, tp and zero; any other field that differs from a
/// single-rank plan (pp, ep, cp, sp, zero>=2, ...) is refused by name as not modelled.
Result<void> applyTrainPlan(const std::string& plan, train::TrainOptions& options);

/// Trains `request.model` (the one place `day0 train` and, later, a Training panel call): the
/// run, and with compression the uncompressed twin and the convergence verdict; builds the run
/// record. A model other than kBuiltinTrainModel is a checkpoint (CheckpointTrainable, starting
/// from its own weights): families the backward does not cover, and under bf16-mixed what the
/// emulated backward does not (exec::emulatedBackwardUnsupported), are refused (Unsupported) by
/// name.
/// With `gradDump`, the chosen steps' gradient dumps are written (atomically: none on a cancel or
/// failure) and recorded with the run; the built-in task, which has no anchors, refuses it.
/// Progress counts the steps of the run, then of its uncompressed twin.
Result<TrainOutcome> trainModel(
    const TrainRequest& request, Progress& progress, const std::stop_token& stop = {});

} // namespace day0::actions
