#include "actions/in_process_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace day0::actions {

namespace {

std::string degrees(const checkpoint::ShardLayout& l)
{
    return fmt::format("tp={},pp={},ep={},etp={},dp={}", l.tp, l.pp, l.ep, l.etp(), l.dp);
}

bool expertsFit(const checkpoint::ShardLayout& l)
{
    const int ranks = l.dp * l.tp;
    return l.ep > 0 && ranks % l.ep == 0 && ranks % (l.ep * l.etp()) == 0;
}

enum class Degree { Dp, Pp, Ep, Tp };

int& degree(checkpoint::ShardLayout& l, Degree d)
{
    switch (d) {
    case Degree::Dp:
        return l.dp;
    case Degree::Pp:
        return l.pp;
    case Degree::Ep:
        return l.ep;
    case Degree::Tp:
        break;
    }
    return l.tp;
}

// One step down: the largest degree that can shrink (by its smallest prime factor) and still
// leave a valid layout; a degree at `floor` or below is left alone.
bool shrinkOnce(checkpoint::ShardLayout& l, int floor)
{
    std::array<Degree, 4> order { Degree::Dp, Degree::Pp, Degree::Ep, Degree::Tp };
    std::stable_sort(order.begin(), order.end(),
        [&](Degree a, Degree b) { return degree(l, a) > degree(l, b); });
    for (const Degree d : order) {
        const int v = degree(l, d);
        if (v <= floor) {
            continue;
        }
        int factor = 2;
        while (v % factor != 0) {
            ++factor;
        }
        checkpoint::ShardLayout next = l;
        degree(next, d) = v / factor;
        // An explicit expert TP equal to tp (Megatron's training default) follows tp.
        if (d == Degree::Tp && next.etpGiven == v) {
            next.etpGiven = next.tp;
        }
        next.etpGiven = std::min(next.etpGiven, next.tp);
        if (expertsFit(next)) {
            l = next;
            return true;
        }
    }
    return false;
}

} // namespace

Result<InProcessLayout> inProcessLayout(
    const plan::ParallelPlan& plan, plan::Mode mode, int clusterRanks, int maxRanks)
{
    plan::ParallelPlan resolved = plan;
    if (resolved.dp <= 0) {
        const int perReplica = std::max(1, plan.tp * plan.pp * std::max(1, plan.cp));
        if (clusterRanks < perReplica || clusterRanks % perReplica != 0) {
            return Error::badInput(fmt::format(
                "--plan: tp × pp × cp = {} does not divide the cluster's {} GPUs, so dp cannot "
                "be derived; give dp",
                perReplica, clusterRanks));
        }
        resolved.dp = clusterRanks / perReplica;
    }
    auto layout = checkpoint::shardLayoutFromPlan(resolved, mode);
    if (!layout) {
        return layout.error();
    }
    InProcessLayout out;
    out.layout = *layout;
    out.planRanks = layout->worldSize();
    if (out.planRanks <= maxRanks) {
        return out;
    }
    checkpoint::ShardLayout& l = out.layout;
    while (l.worldSize() > maxRanks && (shrinkOnce(l, 2) || shrinkOnce(l, 1))) { }
    if (l.worldSize() > maxRanks) {
        return Error::unsupported(
            fmt::format("--plan: {} has {} ranks and no smaller group of its shape fits in {} "
                        "in-process ranks; run it under mpirun",
                degrees(*layout), out.planRanks, maxRanks));
    }
    // The scaled layout's stage split follows the shrunk model, not the plan's explicit one.
    l.stageLayerCounts.clear();
    out.scaled = true;
    out.note = fmt::format("scaled {} ({} ranks) to {} ({} ranks): the same kinds of "
                           "parallelism at smaller degrees, to fit {} in-process ranks",
        degrees(*layout), out.planRanks, degrees(l), l.worldSize(), maxRanks);
    return out;
}

} // namespace day0::actions
