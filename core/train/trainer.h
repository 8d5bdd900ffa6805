#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "base/units.h"
#include "train/checkpoints.h"
#include "train/compression.h"
#include "train/optimizer.h"
#include "train/synthetic_corpus.h"
#include "train/trainable_model.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::train {

/// Number formats of a training run.
enum class TrainPrecision {
    F64, ///< weights, optimizer and compute in fp64
    F32, ///< weights, optimizer and compute in fp32
    MixedBf16, ///< fp32 master weights and optimizer; the model computes on a bf16-rounded copy
};

/// "f64", "f32", "bf16-mixed".
std::string precisionName(TrainPrecision precision);
Result<TrainPrecision> parsePrecision(const std::string& text);

/// A fault injected into a run, on its first attempt only.
enum class DrillKind {
    Kill, ///< the rank stops at the start of the step (the job restarts from a checkpoint)
    Fail, ///< the rank aborts the communicator during the step's gradient all-reduce
    Hang, ///< the rank stops answering before the all-reduce (the others time out)
};

/// A drill: which fault, at which 0-based step, on which rank.
struct Drill {
    DrillKind kind = DrillKind::Kill;
    std::int64_t step = 0;
    int rank = 0;

    /// "kill-at=STEP", "fail-at=STEP" or "hang-at=STEP", each with an optional ",rank=R".
    static Result<Drill> parse(const std::string& text);
};

/// One data-parallel replica's gradient of a step, handed to GradientTap::write after the
/// data-parallel reduction and before clipping: what the optimizer received.
struct TappedGradient {
    std::int64_t step = 0; ///< 0-based, as StepRecord
    int dpRank = 0; ///< the replica (its slice of the step's global batch)
    int dp = 1; ///< replicas in the run
    const Batch* batch = nullptr; ///< the replica's sequences of the step
    /// The whole model's weights the step computed on (with tp, the replica's shards put
    /// together), in the model's flat layout.
    std::span<const double> weights;
    /// The whole model's gradient of the step's loss: the mean over the replicas, in the
    /// run's arithmetic, before clipping.
    std::span<const double> gradient;
    double replicaLoss = 0.0; ///< the replica's own mean loss (before the mean over replicas)
    double stepLoss = 0.0; ///< the step's loss (the mean over the replicas)
};

/// Hands chosen steps' gradients to the caller (`day0 train --grad-dump`).
struct GradientTap {
    std::vector<std::int64_t> steps; ///< the 0-based steps tapped
    /// Called once per replica and tapped step, on the thread of the replica's TP rank 0
    /// (replicas at once: it must be thread-safe); an error ends the run. Null: no tap. The
    /// replica's peers wait for it at their next collective: a write longer than the
    /// communicator's timeout fails the run.
    std::function<Result<void>(const TappedGradient&)> write;
};

/// Everything a training run is configured by.
struct TrainOptions {
    std::int64_t steps = 100;
    int globalBatch = 16; ///< sequences per step over all data-parallel ranks
    int sequenceLength = 32;
    std::uint64_t seed = 1; ///< initial weights and the data order
    LrSchedule schedule { ScheduleKind::WarmupCosine, 1e-2, 1e-3, 10, 100 };
    AdamWOptions adamw;
    double maxGradNorm = 1.0; ///< global-norm clipping bound; 0 turns clipping off
    TrainPrecision precision = TrainPrecision::F64;
    int dp = 1; ///< data-parallel ranks (threads over an in-process communicator)
    /// Tensor-parallel ranks per data-parallel replica (TrainableModel::tensorParallel); the
    /// run has dp × tp ranks, rank = dpRank × tp + tpRank (TP fastest, as checkpoint::rankCoord).
    int tp = 1;
    /// 0 or 1 (optimizer state, and fp32 master weights, sharded over dp within each TP
    /// position)
    int zero = 0;
    CompressionOptions compression;

    std::filesystem::path checkpointDir; ///< empty: no checkpoints
    std::int64_t checkpointEvery = 0; ///< K: a checkpoint after every K steps
    int keepLast = 2; ///< N: the newest N checkpoints are kept
    bool resume = false; ///< start from the newest valid checkpoint in checkpointDir
    int maxRestarts = 0; ///< a failed attempt restarts from the newest valid checkpoint
    std::optional<Drill> drill;
    Seconds commTimeout { 60.0 }; ///< the communicator's timeout (a silent rank's detection)
    /// What the run trains on and from (the checkpoint, the data file); part of the
    /// configuration key, so a resume on other data or another checkpoint is refused.
    std::string source;
    GradientTap gradientTap; ///< not part of the configuration key
};

/// The bytes of a rank's training buffers, counted from their sizes. Every one holds doubles,
/// whatever the precision (values are rounded to it, then stored as doubles).
struct TrainerBuffers {
    std::int64_t weights = 0; ///< the model copy the rank computes on (the whole buffer)
    std::int64_t master = 0; ///< master weights (the rank's ZeRO-1 shard, else the whole buffer)
    std::int64_t moments = 0; ///< AdamW's two moments (same range as the master weights)
    std::int64_t gradients = 0; ///< the step's gradient (the whole buffer, all-reduced in place)
    std::int64_t residual = 0; ///< error feedback of compression (empty without it)
    /// Bytes the model's forward kept for its backward, the largest over the attempt's steps
    /// (StepFootprint; in the compute type, not doubles); 0: the model does not measure it.
    std::int64_t keptActivations = 0;
};

/// What a training run produced.
struct TrainResult {
    std::vector<StepRecord> history; ///< every step, including those before a resume
    std::vector<std::string> events; ///< resumes, restarts, checkpoints refused (with why)
    int restarts = 0;
    std::int64_t resumedFromStep = -1; ///< the step the last attempt started from (-1: fresh)
    /// The whole model's weights after the last step (rank 0's; with tp, its replica's TP
    /// shards put together).
    std::vector<double> finalWeights;
    CompressionStats compression; ///< rank 0's traffic in the last step
    /// Per rank, the bytes of optimizer state it held, counted as the planner counts them
    /// (plan/memory_kernel: the two moments, plus fp32 master weights when the model's weights
    /// are not the optimizer's dtype), from the sizes of the rank's actual buffers.
    std::vector<std::int64_t> optimizerBytesPerRank;
    /// Rank 0's buffers at the end of the run, each from its own size (actions/train_memory.h
    /// sets them against the planner's figures).
    TrainerBuffers buffers;
    /// Every rank's, in rank order (rank = dpRank × tp + tpRank); the first is `buffers`.
    std::vector<TrainerBuffers> buffersPerRank;
};

/// The configuration a checkpoint must have been written by to resume this run.
std::string configurationKey(const TrainableModel& model, const TrainOptions& options);

/// Trains `model` on `corpus` with AdamW, the schedule, clipping and the precision of
/// `options`, over `options.dp` data-parallel ranks (one thread each, in-process communicator):
/// gradients averaged by a (compressed) all-reduce, with ZeRO-1 each rank updating only its
/// shard of the optimizer state and the weights all-gathered after the step. With tp > 1 each
/// replica is tp ranks holding the model's tensor-parallel shards: the data-parallel reduction
/// and ZeRO-1 run among the ranks of one TP position, clipping uses the global norm over the
/// shards (replicated parameters counted once). Checkpoints,
/// resume, restarts and drills as TrainOptions says. Progress counts steps; a stop request
/// ends the run with Error::cancelled(). Errors name the step and rank at fault.
Result<TrainResult> runTraining(const TrainableModel& model, const TrainingData& corpus,
    const TrainOptions& options, Progress* progress = nullptr, std::stop_token stop = {});

} // namespace day0::train
