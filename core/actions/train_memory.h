#pragma once

#include "base/result.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "train/trainer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::actions {

/// One category of a training rank's memory: the bytes the CPU trainer held, the bytes the
/// planner counts for the same configuration, and why they differ.
struct TrainMemoryLine {
    int rank = 0; ///< the training rank (dpRank × tp + tpRank)
    std::string category; ///< "weights", "gradients", "optimizer", "activations"
    std::int64_t trainer = 0; ///< bytes
    std::int64_t planner = 0; ///< bytes
    std::string why;
};

/// A training run's measured memory against the planner's estimate (`day0 train` prints it and
/// records it).
struct TrainMemory {
    /// Every rank's four categories, rank by rank (rank 0's first).
    std::vector<TrainMemoryLine> lines;
    std::int64_t peakRss = 0; ///< the process's peak resident set, bytes (all ranks, the code,
                              ///< the data, the checkpoint as read)
    std::string plannerConfig; ///< what the planner was asked: plan, dtypes, batch
};

/// Sets every rank's buffers of a run of `spec` (`ranks`, in rank order, counted by the trainer
/// from their sizes, with the bytes the backward kept for one sequence in the steps that ran:
/// a rank runs its sequences one after another, so it holds one sequence's at a time) against
/// the planner's per-rank figures (plan::estimateMemory) for the same tp (etp = tp; no
/// sequence parallelism, except for MoE under tp > 1, which the planner lays out only with
/// it), dp, ZeRO stage, sequence length and number formats (weights, gradients and optimizer
/// states in the run's precision, or bf16-mixed's bf16 weights, fp32 gradients and fp32 masters
/// and moments; one sequence per micro-batch), per category, each difference explained;
/// `peakRss` as measured. Pure. Errors: a rank whose
/// activations were not measured (no step ran), the planner's (a plan it cannot lay out).
Result<TrainMemory> compareTrainMemory(const model::ModelSpec& spec,
    const train::TrainOptions& options, const std::vector<train::TrainerBuffers>& ranks,
    std::int64_t peakRss);

/// Adds the comparison to a training run's record: rank 0's as metrics
/// trainer_<category>_bytes and planner_<category>_bytes, the other ranks' as
/// rank<R>_trainer_<category>_bytes and rank<R>_planner_<category>_bytes, peak_rss_bytes (unit
/// B); properties memory_<category> (why they differ, rank 0's) and memory_planner (what the
/// planner was asked).
void recordTrainMemory(const TrainMemory& memory, history::RunRecord& record);

/// The process's peak resident set size so far (getrusage), bytes.
std::int64_t peakRssBytes();

} // namespace day0::actions
