#pragma once

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

/// A training run of the store: its header, checkpoint (empty for the built-in task) and curves.
struct StoredTrainingRun {
    history::RunInfo info;
    std::string checkpoint;
    TrainingCurve curve;
};

/// The training runs of the store `file`, newest first, among its newest `scanLimit` runs of
/// kind run (0: all): the Training view's list. A missing store is an empty list, never created.
/// Errors name the store (or the run whose rows are malformed); Cancelled on `stop`. Opens its
/// own connection: safe on any thread.
Result<std::vector<StoredTrainingRun>> readTrainingRuns(
    const std::filesystem::path& file, std::int64_t scanLimit, std::stop_token stop = {});

} // namespace day0::actions
