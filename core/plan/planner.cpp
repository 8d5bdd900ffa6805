#include "plan/planner.h"

#include "base/units.h"
#include "plan/cost_kernel.h"
#include "plan/memory_kernel.h"
#include "plan/planner_support.h"
#include "plan/rank_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

namespace day0::plan {

namespace {

using detail::RejectTally;
using detail::TopList;

/// A layout that fits, with its most loaded stage and its time figures (training: step time and
/// tokens trained; serving: time per output token and output tokens).
PlannedLayout planned(
    const Layout& l, double maxMemory, int stage, double stepTime, double tokensPerSecond)
{
    PlannedLayout p;
    p.layout = l;
    p.maxMemory = maxMemory;
    p.mostLoadedStage = stage;
    p.mostLoadedRank = RankLayout(l).firstRankOfStage(stage);
    p.stepTime = stepTime;
    p.tokensPerSecond = tokensPerSecond;
    return p;
}

struct Sweep {
    const ModelSummary& model;
    const hardware::Cluster& cluster;
    const PlannerOptions& opt;
    detail::CostTables tables;
    double capacity = 0;
    Workload reserved; ///< inference: each sequence holds what the runtime reserves for it
    Workload decoding; ///< inference: each sequence attends over its average context
    RejectTally tally;
    TopList top;
    std::int64_t evaluated = 0;
    std::int64_t feasible = 0;
    bool domainIsNode = true;

    Sweep(const ModelSummary& m, const hardware::Cluster& c, const PlannerOptions& o)
        : model(m)
        , cluster(c)
        , opt(o)
        , tables(detail::makeCostTables(m, o.workload, c))
        , capacity(c.deviceMemory() * (1.0 - o.headroom))
        , reserved(o.workload)
        , decoding(o.workload)
        , top(o.top, o.distinct)
        , domainIsNode(c.domainSize == c.gpusPerNode)
    {
        // The prompt is pinned before the contexts change, as it defaults to context − output.
        reserved.promptLength = decoding.promptLength = o.workload.prompt();
        reserved.context = reservedTokens(o.workload, o.serving.reservation);
        decoding.context = averageContext(o.workload);
    }

    void reject(const Rejection& r, std::int64_t n)
    {
        evaluated += n;
        tally.add(r, n);
    }

    // Scratch buffers reused across layouts.
    std::vector<double> states;
    std::vector<double> zeroBuffers;
    std::vector<double> transient;
    std::vector<double> activations;
    std::vector<detail::StageWork> work;
    std::vector<detail::StageTime> times;

    /// Every layout of one (tp, pp, cp): splits, interleaving, experts, then training or
    /// inference variants.
    void shape(int tp, int pp, int cp, const std::vector<int>& etps,
        const std::optional<Rejection>& tpReject, Layout& l,
        std::vector<detail::StageWeights>& weights);
    void training(Layout& l, std::vector<detail::StageWeights>& weights);
    void inference(Layout& l, std::vector<detail::StageWeights>& weights);
};

void Sweep::training(Layout& l, std::vector<detail::StageWeights>& weights)
{
    const auto& wl = opt.workload;
    const auto& mo = opt.memory;
    const int pp = l.pp;
    for (int s = 0; s < pp; ++s) {
        weights[std::size_t(s)] = detail::stageWeights(model, l, wl, s);
    }
    // Model states per ZeRO stage and stage do not depend on micro-batch or recompute.
    const std::size_t nz = opt.zero.size();
    states.resize(nz * std::size_t(pp));
    zeroBuffers.resize(nz * std::size_t(pp));
    for (std::size_t z = 0; z < nz; ++z) {
        l.zero = opt.zero[z];
        for (int s = 0; s < pp; ++s) {
            const auto st = detail::modelStates(weights[std::size_t(s)], l);
            states[z * pp + std::size_t(s)] = st.weights + st.gradients + st.optimizer;
            zeroBuffers[z * pp + std::size_t(s)] = st.zeroPrefetch + st.gradBucket;
        }
    }
    const double runtime
        = mo.cudaContext + mo.ncclPerGroup * detail::communicatorCount(l, model.hasMoe());
    const double grow = 1.0 + mo.fragmentation;
    const std::int64_t perMb = std::int64_t(opt.recompute.size() * nz);
    transient.resize(std::size_t(pp));
    activations.resize(std::size_t(pp));
    work.resize(std::size_t(pp));
    times.resize(std::size_t(pp));
    const int globalBatch = wl.globalBatch;
    for (const int mb : opt.microBatches) {
        const std::int64_t perStep = std::int64_t(l.dp) * mb;
        if (globalBatch % perStep != 0) {
            reject({ RejectKind::GlobalBatch, globalBatch, perStep }, perMb);
            continue;
        }
        l.microBatch = mb;
        l.globalBatch = globalBatch;
        l.numMicroBatches = int(globalBatch / perStep);
        if (l.vpp > 1 && l.numMicroBatches % pp != 0) {
            reject({ RejectKind::VppMicroBatches, l.numMicroBatches, pp }, perMb);
            continue;
        }
        for (int s = 0; s < pp; ++s) {
            const auto b = detail::stageBuffers(model, l, wl, mo, s);
            transient[std::size_t(s)] = b.comm + b.moeDispatch;
        }
        // What a micro-batch costs each stage depends on neither recompute nor ZeRO: computed
        // once, the first time a layout of this micro-batch size fits.
        bool worked = false;
        for (const Recompute rc : opt.recompute) {
            l.recompute = rc;
            detail::trainingActivationsAll(model, l, wl, mo, activations.data());
            // Stage times do not depend on the ZeRO stage: computed once, when a layout fits.
            bool timed = false;
            double bestPossible = 0;
            for (std::size_t z = 0; z < nz; ++z) {
                l.zero = opt.zero[z];
                ++evaluated;
                double worst = 0;
                double worstStates = 0;
                int worstStage = 0;
                for (int s = 0; s < pp; ++s) {
                    const std::size_t i = z * pp + std::size_t(s);
                    const double total = (states[i] + zeroBuffers[i] + activations[std::size_t(s)]
                                             + transient[std::size_t(s)])
                            * grow
                        + runtime;
                    if (total > worst) {
                        worst = total;
                        worstStage = s;
                    }
                    worstStates = std::max(worstStates, states[i] * grow + runtime);
                }
                if (worst > capacity) {
                    const int rank = RankLayout(l).firstRankOfStage(worstStage);
                    tally.addMemory(worstStates > capacity ? RejectKind::StatesOverMemory
                                                           : RejectKind::OverMemory,
                        l, rank, worst - capacity);
                    continue;
                }
                ++feasible;
                if (!timed) {
                    if (!worked) {
                        detail::stageWork(model, tables, l, wl, opt.cost, work.data());
                        worked = true;
                    }
                    detail::stageTimes(l, work.data(), times.data());
                    bestPossible = double(l.globalBatch) * wl.seqLength
                        / detail::pipelineLowerBound(l, times.data());
                    timed = true;
                }
                // Data-parallel, optimizer and ZeRO-3 time only add: skip what cannot enter the
                // list.
                if (!top.wants(bestPossible)) {
                    continue;
                }
                const TrainingCost cost = detail::combineStageTimes(
                    tables, l, wl, opt.cost, weights.data(), times.data());
                if (!top.wants(cost.tokensPerSecond)) {
                    continue;
                }
                PlannedLayout p
                    = planned(l, worst, worstStage, cost.stepTime, cost.tokensPerSecond);
                p.training = cost;
                top.offer(std::move(p));
            }
        }
    }
}

void Sweep::inference(Layout& l, std::vector<detail::StageWeights>& weights)
{
    const auto& mo = opt.memory;
    const int pp = l.pp;
    ++evaluated;
    for (int s = 0; s < pp; ++s) {
        weights[std::size_t(s)] = detail::stageWeights(model, l, reserved, s);
    }
    // The runtime admits as many sequences as its KV pool holds ...
    const Admission admitted
        = admitSequences(model, l, reserved, mo, capacity, opt.serving, weights);
    if (admitted.sequences < 1) {
        l.microBatch = 1;
        tally.addMemory(RejectKind::OverMemory, l, RankLayout(l).firstRankOfStage(admitted.stage),
            admitted.shortfall);
        return;
    }
    if (opt.requiredBatch > 0 && admitted.sequences < opt.requiredBatch) {
        // The KV pool holds fewer sequences than the session's batch: what it lacks for the rest.
        l.microBatch = opt.requiredBatch;
        tally.addMemory(RejectKind::OverMemory, l, RankLayout(l).firstRankOfStage(admitted.stage),
            double(opt.requiredBatch - admitted.sequences) * admitted.perSequence);
        return;
    }
    auto costAt = [&](int batch) {
        l.microBatch = batch;
        l.globalBatch = batch * l.dp;
        return estimateInferenceCost(model, l, decoding, cluster, opt.cost);
    };
    // ... or, when they would break the latency bound, as many as keep to it (the time per
    // output token grows with the batch, so the largest such batch is found by bisection).
    const double bound = opt.workload.tpotBound;
    int batch = admitted.sequences;
    InferenceCost cost = costAt(batch);
    if (cost.tpot > bound && opt.requiredBatch > 0) {
        tally.add({ RejectKind::LatencyBound }, 1); // the session's batch breaks the bound
        return;
    }
    if (cost.tpot > bound) {
        InferenceCost low = costAt(1);
        if (low.tpot > bound) {
            tally.add({ RejectKind::LatencyBound }, 1);
            return;
        }
        int lo = 1;
        int hi = batch;
        while (hi - lo > 1) {
            const int mid = lo + (hi - lo) / 2;
            const InferenceCost c = costAt(mid);
            if (c.tpot <= bound) {
                lo = mid;
                low = c;
            } else {
                hi = mid;
            }
        }
        batch = lo;
        cost = low;
    }
    l.microBatch = batch;
    l.globalBatch = batch * l.dp;
    const double runtime
        = mo.cudaContext + mo.ncclPerGroup * detail::communicatorCount(l, model.hasMoe());
    double worst = 0;
    int worstStage = 0;
    for (int s = 0; s < pp; ++s) {
        const auto& w = weights[std::size_t(s)];
        const auto b = detail::stageBuffers(model, l, reserved, mo, s);
        const double total
            = (w.denseBytes + w.expertBytes + detail::inferenceKvCache(model, l, reserved, s)
                  + detail::inferenceWorkspace(model, l, reserved, mo, s) + b.comm + b.moeDispatch)
                * (1.0 + mo.fragmentation)
            + runtime;
        if (total > worst) {
            worst = total;
            worstStage = s;
        }
    }
    ++feasible;
    if (!top.wants(cost.tokensPerSecond)) {
        return;
    }
    PlannedLayout best = planned(l, worst, worstStage, cost.tpot, cost.tokensPerSecond);
    best.inference = cost;
    best.admission = admitted;
    top.offer(std::move(best));
}

void Sweep::shape(int tp, int pp, int cp, const std::vector<int>& etps,
    const std::optional<Rejection>& tpReject, Layout& l, std::vector<detail::StageWeights>& weights)
{
    const bool train = opt.workload.mode == Mode::Train;
    const int world = cluster.worldSize();
    const int dp = int(world / (std::int64_t(tp) * pp * cp));
    const std::int64_t perLayout = train
        ? std::int64_t(opt.microBatches.size() * opt.zero.size() * opt.recompute.size())
        : 1;
    const auto splits = detail::splitsFor(model, pp, opt.unevenSplits);
    std::vector<int> vpps { 1 };
    if (train && pp > 1 && !opt.vpp.empty()) {
        vpps = opt.vpp;
    }
    std::vector<int> eps { 1 };
    if (model.hasMoe()) {
        // Training: EP × ETP × EDP = tp·cp·dp ranks of a stage; inference engines spread
        // experts over the tp·dp ranks that serve attention.
        eps = detail::candidates(opt.ep, train ? world / pp : tp * dp);
    }
    const std::int64_t etpCount = train ? std::int64_t(etps.size()) : 1;
    const std::int64_t perVpp = std::int64_t(eps.size()) * etpCount * perLayout;
    const std::int64_t leaves = std::max<std::int64_t>(1, std::int64_t(splits.size()))
        * std::int64_t(vpps.size()) * perVpp;
    if (tpReject) {
        reject(*tpReject, leaves);
        return;
    }
    if (splits.empty()) {
        reject({ RejectKind::PpLayers, pp, model.numLayers }, leaves);
        return;
    }
    if (train && cp > 1 && opt.workload.seqLength % (2 * cp) != 0) {
        reject({ RejectKind::CpSequence, cp, opt.workload.seqLength }, leaves);
        return;
    }
    l.tp = tp;
    l.pp = pp;
    l.cp = cp;
    l.dp = dp;
    l.sp = train && tp > 1;
    weights.resize(std::size_t(pp));
    for (const auto& split : splits) {
        l.stageStart = split.start;
        const int smallest = detail::minStageLayers(split.start);
        for (const int vpp : vpps) {
            if (vpp > 1 && smallest < vpp) {
                reject({ RejectKind::VppLayers, vpp, smallest }, perVpp);
                continue;
            }
            l.vpp = vpp;
            for (const int ep : eps) {
                const std::vector<int> inferEtp { ep > 1 ? 1 : tp };
                for (const int etp : train ? etps : inferEtp) {
                    if (auto r = checkExperts(model, tp, cp, dp, ep, etp)) {
                        reject(*r, perLayout);
                        continue;
                    }
                    l.ep = ep;
                    l.etp = etp;
                    if (train) {
                        training(l, weights);
                    } else {
                        inference(l, weights);
                    }
                }
            }
        }
    }
}

std::vector<std::string> sweepNotes(
    const ModelSummary& m, const hardware::Cluster& c, const PlannerOptions& o)
{
    std::vector<std::string> notes;
    const bool train = o.workload.mode == Mode::Train;
    notes.push_back(fmt::format(
        "GEMMs at {:.0f}% of the dense BF16 peak and FP8 GEMMs at {:.0f}% of the FP8 peak "
        "(less for small expert GEMMs), memory-bound kernels moving {:.0f}× the kept "
        "activations at {:.0f}% of HBM bandwidth (chosen on the 'fit' cases of the published "
        "measurements); collectives by an alpha-beta model at {:.0f}% of link bandwidth",
        o.cost.computeEfficiency * 100.0, o.cost.fp8ComputeEfficiency * 100.0,
        o.cost.elementwisePasses, o.cost.memoryEfficiency * 100.0, c.intraNode.efficiency * 100.0));
    notes.push_back("ranks are laid out in Megatron order tp-cp-ep-dp-pp: TP groups are "
                    "neighbouring GPUs, PP stages the farthest apart");
    if (train) {
        notes.push_back(fmt::format("training: {} sequences of {} tokens per step; 1F1B pipeline "
                                    "(interleaved when vpp > 1), "
                                    "DP gradient reduce-scatter overlapped with the last backward; "
                                    "TP collectives {}; expert all-to-all {}, {}",
            o.workload.globalBatch, o.workload.seqLength,
            o.cost.tpCommOverlap ? "pipelined with the GEMMs (--tp-comm-overlap)"
                                 : "exposed (--tp-comm-overlap pipelines them with the GEMMs)",
            o.cost.epCommOverlap
                ? "overlapped with another micro-batch's compute (--ep-comm-overlap)"
                : "exposed (--ep-comm-overlap overlaps it with another micro-batch)",
            o.cost.epNodeDedup
                ? "a token sent once per node it reaches (--ep-node-dedup)"
                : "one copy per routed expert (--ep-node-dedup sends one per node)"));
    } else {
        notes.push_back(fmt::format(
            "inference: prompt {} + output {} tokens per request; each layout serves as many "
            "sequences as its runtime admits ({} per replica at most; {:.0f}% of the memory free "
            "after loading holds the KV cache, each sequence reserving {} tokens as the {} "
            "scheduler does), fewer when that breaks the time-per-output-token bound of {}; "
            "decode attends over {} tokens on average; "
            "{:.0f}% of the shorter of a pass's FLOP and HBM time does not overlap the longer; "
            "the runtime adds {} per decode step and {} per sequence in it",
            o.workload.prompt(), o.workload.outputLength, o.serving.maxBatch,
            100.0 * o.serving.kvCacheFraction, reservedTokens(o.workload, o.serving.reservation),
            schedulerName(o.serving.reservation), formatDuration(Seconds(o.workload.tpotBound)),
            averageContext(o.workload), 100.0 * o.cost.rooflineOverlapLoss,
            formatDuration(Seconds(o.cost.decodeStepOverhead)),
            formatDuration(Seconds(o.cost.decodeSequenceOverhead))));
    }
    if (c.mixedInterNode()) {
        notes.push_back(
            "mixed scale-out links: collectives leaving a fast domain are costed at the "
            "slowest group's bandwidth");
    }
    if (o.workload.mode != Mode::Train && o.requiredBatch > 0) {
        notes.push_back(fmt::format("every layout serves the session's {} sequences together; a "
                                    "layout whose KV pool or latency bound allows fewer is "
                                    "rejected, not ranked at a smaller batch",
            o.requiredBatch));
    }
    if (o.headroom > 0) {
        notes.push_back(
            fmt::format("layouts must leave {:.0f}% of device memory free", o.headroom * 100));
    }
    if (m.partial) {
        std::string list;
        for (const auto& i : m.ignored) {
            list += (list.empty() ? "" : ", ") + i;
        }
        notes.insert(notes.begin(),
            "PARTIAL: the model was read partially; every estimate "
            "leaves out "
                + list);
    }
    for (const auto& n : m.notes) {
        notes.push_back(n);
    }
    return notes;
}

} // namespace

std::vector<int> divisorsOf(int n)
{
    std::vector<int> out;
    for (int d = 1; d <= n; ++d) {
        if (n % d == 0) {
            out.push_back(d);
        }
    }
    return out;
}

Result<PlanResult> planLayouts(const ModelSummary& model, const hardware::Cluster& cluster,
    const PlannerOptions& options, Progress& progress, std::stop_token stop)
{
    const auto started = std::chrono::steady_clock::now();
    if (options.workload.mode == Mode::Train
        && (options.workload.seqLength <= 0 || options.workload.globalBatch <= 0)) {
        return Error::badInput("planner: sequence length and global batch must be positive");
    }
    Sweep sweep(model, cluster, options);
    const bool train = options.workload.mode == Mode::Train;
    const int world = cluster.worldSize();
    const auto tps = detail::candidates(options.tp, world);
    const auto pps = detail::candidates(options.pp, world);
    const auto cps = train ? detail::candidates(options.cp, world) : std::vector<int> { 1 };

    std::int64_t triples = 0;
    for (const int tp : tps) {
        for (const int pp : pps) {
            for (const int cp : cps) {
                triples += world % (std::int64_t(tp) * pp * cp) == 0 ? 1 : 0;
            }
        }
    }
    progress.setTotal(triples);
    progress.setDone(0);
    progress.setStage("planning layouts");

    Layout l;
    l.mode = options.workload.mode;
    l.world = world;
    l.weights = options.weights.value_or(train ? DType::BF16 : model.checkpointDtype);
    l.checkpointWeights = !train && !options.weights;
    l.kv = options.kv.value_or(DType::BF16);
    std::vector<detail::StageWeights> weights;
    for (const int tp : tps) {
        const auto tpReject
            = checkTensorParallel(model, tp, cluster.domainSize, sweep.domainIsNode);
        std::vector<int> etps;
        for (const int d : divisorsOf(tp)) {
            if (model.hasMoe() && (options.searchEtp || d == tp)) {
                etps.push_back(d);
            }
        }
        if (etps.empty()) {
            etps.push_back(tp);
        }
        for (const int pp : pps) {
            for (const int cp : cps) {
                const std::int64_t modelRanks = std::int64_t(tp) * pp * cp;
                if (world % modelRanks != 0) {
                    continue;
                }
                if (stop.stop_requested()) {
                    return Error::cancelled();
                }
                progress.advance();
                sweep.shape(tp, pp, cp, etps, tpReject, l, weights);
            }
        }
    }

    PlanResult result;
    result.evaluated = sweep.evaluated;
    result.feasible = sweep.feasible;
    result.layouts = sweep.top.take();
    result.rejected = sweep.tally.groups();
    result.notes = sweepNotes(model, cluster, options);
    result.partial = model.partial;
    result.ignored = model.ignored;
    result.seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.timeError = timeErrorBar(model, cluster, options.workload.mode);
    for (auto& p : result.layouts) {
        const auto& pl = p.layout;
        p.timeError = timeErrorBar(
            model, cluster, options.workload.mode, parallelDimsOf(pl.tp, pl.pp, pl.cp, pl.ep));
    }
    return result;
}

std::vector<std::size_t> paretoFront(const std::vector<PlannedLayout>& layouts)
{
    std::vector<std::size_t> order(layouts.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    // Ascending memory, and among equal memory the fastest first: a layout is on the front when
    // it is faster than everything that needs no more memory.
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const auto& la = layouts[a];
        const auto& lb = layouts[b];
        return la.maxMemory != lb.maxMemory ? la.maxMemory < lb.maxMemory
                                            : la.tokensPerSecond > lb.tokensPerSecond;
    });
    std::vector<std::size_t> front;
    double best = -1.0;
    for (const auto i : order) {
        if (layouts[i].tokensPerSecond > best) {
            best = layouts[i].tokensPerSecond;
            front.push_back(i);
        }
    }
    return front;
}

} // namespace day0::plan
