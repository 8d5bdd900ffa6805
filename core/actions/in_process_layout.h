#pragma once

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "plan/parallel_plan.h"

#include <string>

namespace day0::actions {

/// In-process ranks are threads of one process; a plan beyond this runs under mpirun.
inline constexpr int kMaxInProcessRanks = 32;

/// The layout a plan runs with on in-process ranks, and what was changed to get there.
struct InProcessLayout {
    checkpoint::ShardLayout layout; ///< what runs
    int planRanks = 0; ///< the plan's ranks on the cluster (pp × dp × tp, dp resolved)
    bool scaled = false; ///< true when `layout` is smaller than the plan
    /// One line for the user: "scaled tp=8,pp=8,ep=32,dp=4 (256 ranks) to tp=4,pp=2,… (32
    /// ranks): same kinds of parallelism, smaller degrees"; empty when not scaled.
    std::string note;
};

/// The plan's layout for a run on in-process ranks (the topology panel's *Run with this plan*,
/// which must run what the planner proposes): dp 0, "the rest of the cluster", resolved to
/// clusterRanks / (tp × pp × cp); then, when that is more than `maxRanks`, scaled down to a
/// group that keeps its shape: every degree above 1 stays above 1 while it can, the largest
/// halved first, and expert parallelism × expert TP keeps dividing dp × tp. BadInput when the
/// plan's own degrees do not fit together (shardLayoutFromPlan's checks).
Result<InProcessLayout> inProcessLayout(const plan::ParallelPlan& plan, plan::Mode mode,
    int clusterRanks, int maxRanks = kMaxInProcessRanks);

} // namespace day0::actions
