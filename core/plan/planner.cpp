#include "plan/planner.h"

#include "base/units.h"
#include "plan/cost_kernel.h"
#include "plan/memory_kernel.h"
#include "plan/rank_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace day0::plan {

namespace {

struct RejectionHash {
    std::size_t operator()(const Rejection& r) const noexcept
    {
        std::size_t h = std::size_t(r.kind);
        for (const auto v : { r.a, r.b, r.c }) {
            h = h * 1000003u ^ std::hash<std::int64_t>()(v);
        }
        return h;
    }
};

/// Counts rejections by reason and keeps the closest memory miss of each memory reason.
class RejectTally {
public:
    void add(const Rejection& r, std::int64_t n)
    {
        if (n > 0) {
            m_counts[r] += n;
        }
    }
    void addMemory(RejectKind kind, const Layout& l, int rank, double over)
    {
        const std::size_t k = kind == RejectKind::StatesOverMemory ? 0 : 1;
        ++m_memory[k];
        auto& miss = m_memoryMiss[k];
        if (miss.example.empty() || over < miss.over) {
            miss.over = over;
            miss.example = fmt::format("{}: rank {} over by {}", formatPlan(l.toPlan()), rank,
                formatBytes(Bytes(std::int64_t(over))));
        }
    }
    std::vector<RejectedGroup> groups() const
    {
        std::vector<RejectedGroup> out;
        const RejectKind memoryKinds[2] = { RejectKind::StatesOverMemory, RejectKind::OverMemory };
        for (std::size_t k = 0; k < 2; ++k) {
            if (m_memory[k] > 0) {
                out.push_back({ { memoryKinds[k] }, describeRejection({ memoryKinds[k] }),
                    m_memory[k], m_memoryMiss[k].example });
            }
        }
        for (const auto& [r, n] : m_counts) {
            out.push_back({ r, describeRejection(r), n, {} });
        }
        std::sort(out.begin(), out.end(), [](const RejectedGroup& a, const RejectedGroup& b) {
            return a.count != b.count ? a.count > b.count : a.reason < b.reason;
        });
        return out;
    }

private:
    struct Miss {
        double over = 0;
        std::string example;
    };
    std::unordered_map<Rejection, std::int64_t, RejectionHash> m_counts;
    std::int64_t m_memory[2] = { 0, 0 }; // StatesOverMemory, OverMemory: too frequent to hash
    Miss m_memoryMiss[2];
};

/// Keeps the N fastest layouts without sorting everything.
class TopList {
public:
    TopList(int n, bool distinct)
        : m_n(std::max(1, n))
        , m_distinct(distinct)
    {
    }
    /// True if a layout with this throughput would be kept (so the caller builds it).
    [[nodiscard]] bool wants(double tokensPerSecond) const { return tokensPerSecond > m_floor; }
    void offer(PlannedLayout&& p)
    {
        if (m_distinct) {
            // One entry per parallel structure: the best of its micro-batch, ZeRO, recompute,
            // split and interleaving variants.
            for (auto& item : m_items) {
                if (sameStructure(item.layout, p.layout)) {
                    if (better(p, item)) {
                        item = std::move(p);
                    }
                    return;
                }
            }
        }
        m_items.push_back(std::move(p));
        if (m_items.size() >= std::size_t(m_n) * 4) {
            trim();
        }
    }
    std::vector<PlannedLayout> take()
    {
        trim();
        return std::move(m_items);
    }

private:
    static bool sameStructure(const Layout& a, const Layout& b)
    {
        return a.tp == b.tp && a.pp == b.pp && a.ep == b.ep && a.etp == b.etp && a.dp == b.dp
            && a.cp == b.cp;
    }
    static bool better(const PlannedLayout& a, const PlannedLayout& b)
    {
        return a.tokensPerSecond != b.tokensPerSecond ? a.tokensPerSecond > b.tokensPerSecond
                                                      : a.maxMemory < b.maxMemory;
    }
    void trim()
    {
        std::sort(m_items.begin(), m_items.end(), better);
        if (m_items.size() > std::size_t(m_n)) {
            m_items.resize(std::size_t(m_n));
        }
        if (m_items.size() == std::size_t(m_n)) {
            m_floor = m_items.back().tokensPerSecond;
        }
    }
    int m_n;
    bool m_distinct = true;
    double m_floor = -1.0;
    std::vector<PlannedLayout> m_items;
};

std::vector<int> candidates(const std::vector<int>& wanted, int world)
{
    std::vector<int> out;
    for (const int d : divisorsOf(world)) {
        if (wanted.empty() || std::find(wanted.begin(), wanted.end(), d) != wanted.end()) {
            out.push_back(d);
        }
    }
    return out;
}

struct Split {
    StageSplit policy;
    std::vector<int> start;
};

std::vector<Split> splitsFor(const ModelSummary& m, int pp, bool uneven)
{
    std::vector<Split> out;
    for (const auto policy : { StageSplit::Balanced, StageSplit::LightEnds }) {
        if (policy == StageSplit::LightEnds && (!uneven || pp == 1)) {
            continue;
        }
        const auto counts = splitStages(m.numLayers, pp, policy);
        if (counts.empty()) {
            continue;
        }
        Split s { policy, { 0 } };
        for (const int c : counts) {
            s.start.push_back(s.start.back() + c);
        }
        if (std::none_of(
                out.begin(), out.end(), [&](const Split& o) { return o.start == s.start; })) {
            out.push_back(std::move(s));
        }
    }
    return out;
}

int minStageLayers(const std::vector<int>& start)
{
    int smallest = std::numeric_limits<int>::max();
    for (std::size_t s = 0; s + 1 < start.size(); ++s) {
        smallest = std::min(smallest, start[s + 1] - start[s]);
    }
    return smallest;
}

struct Sweep {
    const ModelSummary& model;
    const hardware::Cluster& cluster;
    const PlannerOptions& opt;
    detail::CostTables tables;
    double capacity = 0;
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
        , top(o.top, o.distinct)
        , domainIsNode(c.domainSize == c.gpusPerNode)
    {
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
                PlannedLayout p;
                p.layout = l;
                p.maxMemory = worst;
                p.mostLoadedStage = worstStage;
                p.mostLoadedRank = RankLayout(l).firstRankOfStage(worstStage);
                p.stepTime = cost.stepTime;
                p.tokensPerSecond = cost.tokensPerSecond;
                p.training = cost;
                top.offer(std::move(p));
            }
        }
    }
}

void Sweep::inference(Layout& l, std::vector<detail::StageWeights>& weights)
{
    const auto& wl = opt.workload;
    const auto& mo = opt.memory;
    const int pp = l.pp;
    ++evaluated;
    for (int s = 0; s < pp; ++s) {
        weights[std::size_t(s)] = detail::stageWeights(model, l, wl, s);
    }
    const double runtime
        = mo.cudaContext + mo.ncclPerGroup * detail::communicatorCount(l, model.hasMoe());
    bool anyFits = false;
    double closestOver = std::numeric_limits<double>::max();
    int closestRank = 0;
    PlannedLayout best;
    best.tokensPerSecond = -1;
    for (const int batch : opt.batches) {
        l.microBatch = batch;
        l.globalBatch = batch * l.dp;
        double worst = 0;
        int worstStage = 0;
        for (int s = 0; s < pp; ++s) {
            const auto& w = weights[std::size_t(s)];
            const auto b = detail::stageBuffers(model, l, wl, mo, s);
            const double total
                = (w.denseBytes + w.expertBytes + detail::inferenceKvCache(model, l, wl, s)
                      + detail::inferenceWorkspace(model, l, wl, mo, s) + b.comm + b.moeDispatch)
                    * (1.0 + mo.fragmentation)
                + runtime;
            if (total > worst) {
                worst = total;
                worstStage = s;
            }
        }
        if (worst > capacity) {
            if (worst - capacity < closestOver) {
                closestOver = worst - capacity;
                closestRank = RankLayout(l).firstRankOfStage(worstStage);
            }
            break; // a larger batch only needs more KV cache
        }
        anyFits = true;
        const InferenceCost cost = estimateInferenceCost(model, l, wl, cluster, opt.cost);
        if (cost.tpot > wl.tpotBound || cost.tokensPerSecond <= best.tokensPerSecond) {
            continue;
        }
        best.layout = l;
        best.maxMemory = worst;
        best.mostLoadedStage = worstStage;
        best.mostLoadedRank = RankLayout(l).firstRankOfStage(worstStage);
        best.stepTime = cost.tpot;
        best.tokensPerSecond = cost.tokensPerSecond;
        best.inference = cost;
    }
    if (!anyFits) {
        l.microBatch = opt.batches.empty() ? 1 : opt.batches.front();
        tally.addMemory(RejectKind::OverMemory, l, closestRank, closestOver);
        return;
    }
    if (best.tokensPerSecond < 0) {
        tally.add({ RejectKind::LatencyBound }, 1);
        return;
    }
    ++feasible;
    if (top.wants(best.tokensPerSecond)) {
        top.offer(std::move(best));
    }
}

std::vector<std::string> sweepNotes(
    const ModelSummary& m, const hardware::Cluster& c, const PlannerOptions& o)
{
    std::vector<std::string> notes;
    const bool train = o.workload.mode == Mode::Train;
    notes.push_back(fmt::format(
        "compute at {:.0f}% of dense {} peak for large GEMMs, less for small expert GEMMs; "
        "collectives by an alpha-beta model at {:.0f}% of link bandwidth",
        o.cost.computeEfficiency * 100.0, "BF16", c.intraNode.efficiency * 100.0));
    notes.push_back("ranks are laid out in Megatron order tp-cp-ep-dp-pp: TP groups are "
                    "neighbouring GPUs, PP stages the farthest apart");
    if (train) {
        notes.push_back(fmt::format("training: {} sequences of {} tokens per step; 1F1B pipeline "
                                    "(interleaved when vpp > 1), "
                                    "DP gradient reduce-scatter overlapped with the last backward",
            o.workload.globalBatch, o.workload.seqLength));
    } else {
        notes.push_back(fmt::format(
            "inference: prompt {} + output {} tokens, KV for {} tokens per sequence; each layout "
            "serves the largest batch that fits and keeps time per output token under {}",
            o.workload.prompt(), o.workload.outputLength, o.workload.context,
            formatDuration(Seconds(o.workload.tpotBound))));
    }
    if (c.mixedInterNode()) {
        notes.push_back(
            "mixed scale-out links: collectives leaving a fast domain are costed at the "
            "slowest group's bandwidth");
    }
    if (o.headroom > 0) {
        notes.push_back(
            fmt::format("layouts must leave {:.0f}% of device memory free", o.headroom * 100));
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
    const auto tps = candidates(options.tp, world);
    const auto pps = candidates(options.pp, world);
    const auto cps = train ? candidates(options.cp, world) : std::vector<int> { 1 };
    const std::int64_t perLayout = train
        ? std::int64_t(options.microBatches.size() * options.zero.size() * options.recompute.size())
        : 1;

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
    l.weights = train ? DType::BF16 : model.checkpointDtype;
    l.checkpointWeights = !train;
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
                const int dp = int(world / modelRanks);
                const auto splits = splitsFor(model, pp, options.unevenSplits);
                std::vector<int> vpps { 1 };
                if (train && pp > 1) {
                    vpps.clear();
                    for (const int v : options.vpp) {
                        vpps.push_back(v);
                    }
                    if (vpps.empty()) {
                        vpps.push_back(1);
                    }
                }
                std::vector<int> eps { 1 };
                if (model.hasMoe()) {
                    eps = candidates(options.ep, world / pp);
                    if (!train) {
                        eps = candidates(options.ep, tp * dp);
                    }
                }
                const std::int64_t etpCount = train ? std::int64_t(etps.size()) : 1;
                const std::int64_t perSplit
                    = std::int64_t(vpps.size()) * std::int64_t(eps.size()) * etpCount * perLayout;
                const std::int64_t leaves
                    = std::max<std::int64_t>(1, std::int64_t(splits.size())) * perSplit;
                if (tpReject) {
                    sweep.reject(*tpReject, leaves);
                    continue;
                }
                if (splits.empty()) {
                    sweep.reject({ RejectKind::PpLayers, pp, model.numLayers }, leaves);
                    continue;
                }
                if (train && cp > 1 && options.workload.seqLength % (2 * cp) != 0) {
                    sweep.reject(
                        { RejectKind::CpSequence, cp, options.workload.seqLength }, leaves);
                    continue;
                }
                l.tp = tp;
                l.pp = pp;
                l.cp = cp;
                l.dp = dp;
                l.sp = train && tp > 1;
                weights.resize(std::size_t(pp));
                for (const auto& split : splits) {
                    l.stageStart = split.start;
                    const int smallest = minStageLayers(split.start);
                    for (const int vpp : vpps) {
                        if (vpp > 1 && smallest < vpp) {
                            sweep.reject({ RejectKind::VppLayers, vpp, smallest },
                                std::int64_t(eps.size()) * etpCount * perLayout);
                            continue;
                        }
                        l.vpp = vpp;
                        for (const int ep : eps) {
                            const std::vector<int> inferEtp { ep > 1 ? 1 : tp };
                            for (const int etp : train ? etps : inferEtp) {
                                if (auto r = checkExperts(model, tp, cp, dp, ep, etp)) {
                                    sweep.reject(*r, perLayout);
                                    continue;
                                }
                                l.ep = ep;
                                l.etp = etp;
                                if (train) {
                                    sweep.training(l, weights);
                                } else {
                                    sweep.inference(l, weights);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    PlanResult result;
    result.evaluated = sweep.evaluated;
    result.feasible = sweep.feasible;
    result.layouts = sweep.top.take();
    result.rejected = sweep.tally.groups();
    result.notes = sweepNotes(model, cluster, options);
    result.seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

} // namespace day0::plan
