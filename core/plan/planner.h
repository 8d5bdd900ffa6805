#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "hardware/cluster.h"
#include "plan/cost_model.h"
#include "plan/layout.h"
#include "plan/model_summary.h"
#include "plan/published_measurements.h"
#include "plan/serving.h"
#include "plan/workload.h"

#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::plan {

/// What the planner searches and how it ranks. Empty lists mean "every value that can work".
struct PlannerOptions {
    Workload workload;
    MemoryOptions memory;
    CostOptions cost;
    int top = 10; ///< layouts to keep, fastest first
    bool distinct = true; ///< keep only the best variant of each (tp, pp, ep, etp, dp, cp)
    double headroom = 0.0; ///< fraction of device memory to leave free beyond the estimate
    std::vector<int> tp; ///< candidate sizes; empty: every divisor of the GPU count
    std::vector<int> pp;
    std::vector<int> cp;
    std::vector<int> ep;
    std::vector<int> microBatches { 1, 2, 4, 8 }; ///< training micro-batch sizes
    std::vector<int> zero { 0, 1, 2, 3 };
    std::vector<Recompute> recompute { Recompute::None, Recompute::Selective, Recompute::Full };
    std::vector<int> vpp { 1, 2, 4 }; ///< interleaving depths tried when pp > 1
    bool unevenSplits = true; ///< also try the light-ends stage split
    bool searchEtp = true; ///< try every divisor of tp as etp (else etp = tp)
    /// Inference: how the serving runtime admits sequences; each layout serves as many as its
    /// KV pool holds, fewer when that breaks the time-per-output-token bound.
    ServingRuntime serving;
    /// Inference: sequences every layout must serve together (the session's batch, which the
    /// workbench's memory and topology panels show); a layout whose KV pool or latency bound
    /// allows fewer is rejected rather than ranked at a smaller batch. 0: as many as each admits.
    int requiredBatch = 0;
    /// Weight dtype of every layout (FP8: FP8 GEMMs in training, FP8 weights in serving);
    /// empty: BF16 in training, the checkpoint's own dtypes in serving.
    std::optional<DType> weights;
    std::optional<DType> kv; ///< KV-cache dtype; empty: BF16
};

/// One feasible layout with its estimates.
struct PlannedLayout {
    Layout layout;
    double maxMemory = 0; ///< bytes on the most loaded rank
    int mostLoadedRank = 0;
    int mostLoadedStage = 0;
    double stepTime = 0; ///< training: seconds per step; inference: seconds per output token
    double tokensPerSecond
        = 0; ///< training: tokens trained; inference: output tokens (all replicas)
    TrainingCost training; ///< filled in training mode
    InferenceCost inference; ///< filled in inference mode
    /// Inference: how many sequences the runtime admits on this layout (`layout.microBatch`
    /// may be fewer, when the latency bound caps it).
    Admission admission;
    /// How far this layout's time figures can be trusted: the held-out published measurements
    /// comparable with it, narrowed to those using its parallel dimensions when two or more do.
    TimeErrorBar timeError;
};

/// Layouts rejected for the same reason.
struct RejectedGroup {
    Rejection rejection; ///< the reason with its numbers (memory reasons: the kind only)
    std::string reason; ///< "tp=16 > 8 GPUs per node", "does not fit in device memory ..."
    std::int64_t count = 0;
    std::string
        example; ///< for memory: the closest miss, "tp=8,pp=8,...: rank 17 over by 12.4 GiB"
};

/// Result of a sweep.
struct PlanResult {
    std::int64_t evaluated = 0; ///< layouts considered (feasible + rejected)
    std::int64_t feasible = 0;
    std::vector<PlannedLayout> layouts; ///< the `top` fastest, fastest first
    std::vector<RejectedGroup> rejected; ///< most common reason first
    std::vector<std::string> notes; ///< assumptions of the estimates
    double seconds = 0; ///< wall time of the sweep
    bool partial = false; ///< the model was read partially: `ignored` is left out
    std::vector<std::string> ignored;
    /// How far every time figure of `layouts` (step time, tokens/s, MFU, TTFT, TPOT) can be
    /// trusted: the held-out published measurements comparable with this model and cluster.
    TimeErrorBar timeError;
};

/// Enumerates every layout of the cluster for the workload (TP, PP with even and uneven splits,
/// VPP, CP, EP, ETP, DP; training: micro-batch, ZeRO stage, recompute; inference: batch size),
/// keeps those that fit in memory with the headroom, and ranks them by throughput. Per-model
/// tables are built once; no layer graph is rebuilt per layout. Cancellable: returns
/// Error::cancelled() when `stop` is requested. Progress counts (tp, pp, cp) combinations.
Result<PlanResult> planLayouts(const ModelSummary& model, const hardware::Cluster& cluster,
    const PlannerOptions& options, Progress& progress, std::stop_token stop = {});

/// Indices of the layouts on the memory/throughput Pareto front: no other layout uses less (or
/// equal) memory on its most loaded rank while training or serving faster. Sorted by memory.
std::vector<std::size_t> paretoFront(const std::vector<PlannedLayout>& layouts);

/// Every divisor of n, ascending.
std::vector<int> divisorsOf(int n);

} // namespace day0::plan
