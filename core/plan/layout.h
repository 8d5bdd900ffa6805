#pragma once

#include "base/result.h"
#include "hardware/cluster.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"
#include "plan/workload.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::plan {

/// A plan with every derived value filled in for one model, cluster and workload: what the
/// estimator, cost model and planner work on. Value type.
struct Layout {
    Mode mode = Mode::Train;
    int world = 1; ///< ranks used: tp·cp·dp·pp
    int tp = 1;
    int pp = 1;
    int ep = 1;
    int etp = 1;
    int dp = 1;
    int cp = 1;
    int vpp = 1;
    int zero = 0;
    bool sp = false;
    Recompute recompute = Recompute::None;
    int microBatch = 1; ///< training: sequences per micro-batch; inference: concurrent sequences
                        ///< per replica
    int numMicroBatches = 1; ///< per step per DP rank (training)
    int globalBatch = 1; ///< sequences per step (training)
    DType weights = DType::BF16;
    bool checkpointWeights = false; ///< weights at the checkpoint's own dtypes (inference default)
    DType kv = DType::BF16;
    DType grads = DType::F32;
    DType optimizer = DType::F32;
    std::vector<int> stageStart; ///< pp + 1 entries; stage s holds decoder layers
                                 ///< [stageStart[s], stageStart[s+1])

    /// Expert data-parallel size: world / (etp·ep·pp).
    [[nodiscard]] int expertDp() const { return world / (etp * ep * pp); }
    /// Decoder layers on stage s.
    [[nodiscard]] int stageLayers(int s) const
    {
        return stageStart[std::size_t(s) + 1] - stageStart[std::size_t(s)];
    }
    /// The plan that reproduces this layout (all keys written out that matter).
    [[nodiscard]] ParallelPlan toPlan() const;
};

/// Why a layout cannot run. The numbers a, b, c are the ones the message quotes.
enum class RejectKind : std::uint8_t {
    TpHeads, ///< a=tp does not divide b=heads
    TpKvHeads, ///< a=tp and b=kv heads: neither divides the other
    TpWidth, ///< a=tp does not divide the MLP width b
    TpDomain, ///< a=tp > b devices per fast domain; c=1 when that domain is a node
    EpDense, ///< a=ep > 1 on a model without experts
    EpExperts, ///< a=ep does not divide b=experts
    EtpWidth, ///< a=etp does not divide the expert MLP width b
    ExpertGroup, ///< a=ep·etp does not divide b=tp·cp·dp
    MoeNeedsSp, ///< MoE with a=tp > 1 needs sequence parallelism
    PpLayers, ///< a=pp > b=layers
    StageLayers, ///< explicit split of a layers over b stages does not match c=layers / pp
    VppPipeline, ///< a=vpp > 1 needs pp > 1
    VppLayers, ///< a=vpp > b=layers on the smallest stage
    VppMicroBatches, ///< a=micro-batches not divisible by b=pp for interleaving
    WorldSize, ///< a=tp·pp·cp·dp does not fit b=GPUs (c=1: does not divide)
    GlobalBatch, ///< a=global batch not divisible by b=dp·micro-batch
    CpSequence, ///< a=cp does not divide b=sequence into 2·cp chunks
    InferZero, ///< zero=a in inference
    StatesOverMemory, ///< weights+gradients+optimizer alone exceed device memory (a=rank)
    OverMemory, ///< the most loaded rank a does not fit
    LatencyBound, ///< no batch size meets the time-per-output-token bound
    TpMixerHeads, ///< a=tp does not divide b=linear-attention / Mamba heads (c=1: key heads)
};

/// A rejection with the numbers its message quotes; cheap to copy and hash.
struct Rejection {
    RejectKind kind = RejectKind::TpHeads;
    std::int64_t a = 0;
    std::int64_t b = 0;
    std::int64_t c = 0;
    bool operator==(const Rejection&) const = default;
};

/// "tp=3 does not divide 64 attention heads", "tp=16 > 8 GPUs per node", ...
/// Memory rejections give the category only; the planner adds "rank 17 over by 12.4 GiB".
std::string describeRejection(const Rejection& rejection);

/// Decoder layers per stage for a split policy; empty when pp stages cannot each get a layer.
std::vector<int> splitStages(int layers, int pp, StageSplit split);

/// Checks that depend on tp only (heads, KV heads, widths, fast-domain size).
std::optional<Rejection> checkTensorParallel(
    const ModelSummary& model, int tp, int domainSize, bool domainIsNode);
/// Checks of ep and etp against the experts and the ranks that host them.
std::optional<Rejection> checkExperts(
    const ModelSummary& model, int tp, int cp, int dp, int ep, int etp);

/// Resolves a plan for a model, workload and cluster: derives dp, etp, sp, micro-batches and
/// the stage split, and checks that the layout can run. The error (BadInput) names the plan and
/// what is wrong. The plan may use fewer ranks than the cluster has when dp is given.
Result<Layout> resolveLayout(const ParallelPlan& plan, const ModelSummary& model,
    const Workload& workload, const hardware::Cluster& cluster);

} // namespace day0::plan
