#pragma once

#include "history/run_record.h"
#include "train/trainer.h"

#include <string>

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

} // namespace day0::actions
