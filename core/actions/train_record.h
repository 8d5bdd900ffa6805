#pragma once

#include "actions/train_grad_dump.h"
#include "base/result.h"
#include "history/run_record.h"
#include "train/trainer.h"

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// The run of a training job (kind run, property tool=train; a kind of its own would need a
/// store migration): the model's name, precision ("f64", "f32", "bf16-mixed"), the plan string
/// ("dp=2,zero=1"), the schedule, AdamW, clipping, compression, batch, seed and checkpoint
/// settings as properties; metrics steps, initial_loss, final_loss, final_grad_norm, restarts,
/// resumed_from_step and, with compression, sent_bytes_per_step; the curve as per-step rows
/// (anchor "step.N", layer N, metrics loss, grad_norm, lr) so the Runs panel and `runs compare`
/// plot and overlay loss curves the way they do error-versus-depth; the trainer's events
/// (resumes, restarts, checkpoints refused and why) as warnings. Pure.
history::RunRecord trainRunRecord(const std::string& modelName, const train::TrainOptions& options,
    const train::TrainResult& result, double seconds);

/// A training run's curves as trainRunRecord stores them, in step order.
struct TrainingCurve {
    std::vector<std::int64_t> steps; ///< 0-based
    std::vector<double> loss; ///< nats, before the step's update
    std::vector<double> gradNorm; ///< global L2 norm before clipping
    std::vector<double> lr;
};

/// True for a run trainRunRecord built (property tool=train).
bool isTrainingRun(const history::RunRecord& record);

/// The curves of a training run read back from its per-step rows ("step.N": loss, grad_norm,
/// lr). BadInput naming the run when a step row lacks one of the three or a step repeats. Pure.
Result<TrainingCurve> trainingCurve(const history::RunRecord& record);

/// One rank's memory in a training run: what the trainer held at the step's peak (its buffers
/// and the activations the backward kept, the four categories of compareTrainMemory added up)
/// against the planner's estimate of the same categories, bytes.
struct RankMemory {
    int rank = 0;
    std::int64_t trainer = 0;
    std::int64_t planner = 0;
};

/// Every rank's memory of a training run from its memory table (recordTrainMemory's
/// trainer_<category> and planner_<category> rows), in rank order; empty when the run has none
/// (the built-in task, or no step ran).
std::vector<RankMemory> rankMemory(const history::RunRecord& record);

/// A training run of the store: its header, checkpoint (empty for the built-in task), curves,
/// gradient dumps (gradDumpsOf) and per-rank memory (rankMemory).
struct StoredTrainingRun {
    history::RunInfo info;
    std::string checkpoint;
    TrainingCurve curve;
    std::vector<GradDumpRef> gradDumps;
    std::vector<RankMemory> memory;
};

/// The training runs of the store `file` (kind run, tool train), its newest `scanLimit` of them
/// (0: all), newest first: the Training view's list. A missing store is an empty list, never
/// created. Errors name the store (or the run whose rows are malformed); Cancelled on `stop`. Opens
/// its own connection: safe on any thread.
Result<std::vector<StoredTrainingRun>> readTrainingRuns(
    const std::filesystem::path& file, std::int64_t scanLimit, std::stop_token stop = {});

} // namespace day0::actions
