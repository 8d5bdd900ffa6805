#pragma once

#include "base/result.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "train/trainer.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace day0::actions {

/// One category of a training rank's memory: the bytes the CPU trainer held, the bytes the
/// planner counts for the same configuration, and why they differ.
struct TrainMemoryLine {
    std::string category; ///< "weights", "gradients", "optimizer", "activations"
    std::int64_t trainer = 0; ///< bytes
    std::int64_t planner = 0; ///< bytes
    std::string why;
};

/// A training run's measured memory against the planner's estimate (`day0 train` prints it and
/// records it).
struct TrainMemory {
    std::vector<TrainMemoryLine> lines;
    std::int64_t peakRss = 0; ///< the process's peak resident set, bytes (all ranks, the code,
                              ///< the data, the checkpoint as read)
    std::string plannerConfig; ///< what the planner was asked: plan, dtypes, batch
};

/// Sets rank 0's buffers of a run of `spec` (`buffers`, counted by the trainer from their sizes)
/// and the activations the backward kept for one sequence (`keptActivations`, bytes; a rank
/// runs its sequences one after another, so it holds one sequence's at a time) against
/// plan::estimateMemory for the same dp, ZeRO stage, sequence length and number formats
/// (weights, gradients and optimizer states in the run's precision, one sequence per
/// micro-batch), per category, each difference explained; `peakRss` as measured. Pure. Errors:
/// bf16-mixed (not compared), the planner's (a plan it cannot lay out).
Result<TrainMemory> compareTrainMemory(const model::ModelSpec& spec,
    const train::TrainOptions& options, const train::TrainerBuffers& buffers,
    std::int64_t keptActivations, std::int64_t peakRss);

/// The bytes the CPU reference's backward keeps for one sequence of `length` tokens of
/// `checkpoint` (exec::GradientResult::keptBytes), in fp64 or fp32: one gradient pass over its
/// own weights. Errors name the checkpoint.
Result<std::int64_t> measureKeptActivations(
    const std::filesystem::path& checkpoint, int length, bool fp64);

/// Adds the comparison to a training run's record: metrics trainer_<category>_bytes,
/// planner_<category>_bytes and peak_rss_bytes (unit B); properties
/// memory_<category> (why they differ) and memory_planner (what the planner was asked).
void recordTrainMemory(const TrainMemory& memory, history::RunRecord& record);

/// The process's peak resident set size so far (getrusage), bytes.
std::int64_t peakRssBytes();

} // namespace day0::actions
