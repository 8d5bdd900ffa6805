#include "plan/cost_model.h"

#include "plan/activation_model.h"
#include "plan/cost_kernel.h"
#include "plan/rank_layout.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace day0::plan {

namespace detail {

namespace {

/// ⌈log2 n⌉: steps of a tree-like collective phase.
double log2Steps(int n) { return n <= 1 ? 0.0 : double(std::bit_width(unsigned(n - 1))); }

/// Σ_{i=1..s} min(i, w): keys attended over a causal sequence of s tokens with window w.
double causalSpanSum(double s, double w)
{
    if (w <= 0 || w >= s) {
        return s * s / 2.0;
    }
    return s * w - w * w / 2.0;
}

double attentionLinearMacs(const LayerShape& s)
{
    const double h = s.hidden;
    const double a = s.heads;
    if (s.attention == model::AttentionKind::MLA) {
        const double q = s.qLoraRank > 0 ? h * s.qLoraRank + s.qLoraRank * a * s.qkHeadDim
                                         : h * a * s.qkHeadDim;
        return q + h * (s.kvLoraRank + s.ropeDim)
            + s.kvLoraRank * a * (s.qkHeadDim - s.ropeDim + s.vHeadDim) + a * s.vHeadDim * h;
    }
    return h * (a * s.qkHeadDim + s.kvHeads * (s.qkHeadDim + s.vHeadDim)) + a * s.vHeadDim * h;
}

double mlpMatrices(const LayerShape& s) { return s.gated ? 3.0 : 2.0; }

// Attention-score and value FLOPs per token averaged over a causal sequence of `keys` tokens: a
// token attends to half the sequence on average (within its window), and its indexer scores
// half of it.
double coreFlops(const LayerShape& s, double keys)
{
    if (keys <= 0) {
        return 0.0;
    }
    return mixerCoreFlops(s, causalSpanSum(keys, s.window) / keys, keys / 2.0);
}

ClassFlops classFlops(const LayerShape& s, double keys)
{
    ClassFlops f;
    if (usesWeightMacs(s)) {
        f.dense = 2.0 * s.weightMacs;
        f.routed = s.moe ? 2.0 * s.expertMacs * s.topK : 0.0;
    } else {
        f.dense = 2.0 * attentionLinearMacs(s);
        if (s.moe) {
            f.dense += 2.0 * s.hidden * s.sharedFfn * mlpMatrices(s) + 2.0 * s.hidden * s.experts;
            f.routed = 2.0 * s.hidden * s.expertFfn * mlpMatrices(s) * s.topK;
        } else {
            f.dense += 2.0 * s.hidden * s.ffn * mlpMatrices(s);
        }
    }
    f.core = coreFlops(s, keys);
    return f;
}

/// How much of the large-GEMM rate a GEMM of `rows` rows reaches: halves at gemmHalfRows.
double rowsEfficiency(double rows, const CostOptions& o) { return rows / (rows + o.gemmHalfRows); }

} // namespace

double mixerCoreFlops(const LayerShape& s, double span, double scored)
{
    using model::MixerKind;
    const double perKey = 2.0 * s.heads * (s.qkHeadDim + s.vHeadDim);
    switch (s.mixer) {
    case MixerKind::GatedDeltaNet:
    case MixerKind::KimiDelta:
    case MixerKind::Mamba2:
        return s.stateFlopsPerToken;
    case MixerKind::Linear:
    case MixerKind::None:
        return 0.0;
    case MixerKind::Compressed:
        // The window plus the compressed entries (all of them, or the indexer's selection).
        if (s.compressRatio > 0) {
            const double compressed = scored / s.compressRatio;
            span += s.selectedKeys > 0 ? std::min(compressed, s.selectedKeys) : compressed;
        }
        return perKey * span + s.indexerFlopsPerKey * scored;
    default:
        break;
    }
    if (s.selectedKeys > 0) {
        span = std::min(span, s.selectedKeys);
    }
    return perKey * span + s.indexerFlopsPerKey * scored;
}

Network networkOf(const hardware::Cluster& cluster)
{
    Network n;
    n.intraBandwidth = cluster.intraNode.effectiveBandwidth();
    n.intraLatency = cluster.intraNode.latency;
    n.interBandwidth = cluster.interNodeLink().effectiveBandwidth();
    n.interLatency = cluster.interNodeLink().latency;
    n.domainSize = cluster.domainSize;
    return n;
}

double collectiveTime(double bytes, int stride, int size, const Network& net, int phases)
{
    if (size <= 1 || bytes <= 0) {
        return 0.0;
    }
    const GroupSpan span = groupSpan(stride, size, net.domainSize);
    const double k = span.perDomain;
    const double g = span.domains;
    double t = 0.0;
    if (k > 1) {
        t += (k - 1.0) / k * bytes / net.intraBandwidth
            + net.intraLatency * log2Steps(span.perDomain);
    }
    if (g > 1) {
        t += (g - 1.0) / g * (bytes / k) / net.interBandwidth
            + net.interLatency * log2Steps(span.domains);
    }
    return t * phases;
}

double allToAllTime(double bytes, int stride, int size, const Network& net)
{
    if (size <= 1 || bytes <= 0) {
        return 0.0;
    }
    const GroupSpan span = groupSpan(stride, size, net.domainSize);
    const double intra = bytes * (span.perDomain - 1.0) / size / net.intraBandwidth;
    const double inter = bytes * double(size - span.perDomain) / size / net.interBandwidth;
    return std::max(intra, inter) + (span.domains > 1 ? net.interLatency : net.intraLatency);
}

double expertExchangeTime(double tokens, const LayerShape& s, double tokenBytes, int stride,
    int size, const Network& net, bool nodeDedup)
{
    const double copies = tokens * s.topK * tokenBytes;
    const GroupSpan span = groupSpan(stride, size, net.domainSize);
    if (!nodeDedup || span.domains <= 1) {
        return allToAllTime(copies, stride, size, net);
    }
    const double nodes = span.domains;
    // Nodes a token may reach: all of them, or under group-limited routing with whole groups
    // per node, those holding its chosen groups (expected distinct nodes of M groups out of G,
    // g per node: nodes · (1 − C(G−g, M) / C(G, M))).
    double reachable = nodes;
    const double groups = s.expertGroups;
    const double chosen = s.groupsPerToken;
    if (groups > 1 && chosen > 0 && std::fmod(groups, nodes) == 0.0) {
        const double perNode = groups / nodes;
        double missed = 1.0; // C(G−g, M) / C(G, M) as a product
        for (int i = 0; i < int(chosen); ++i) {
            missed *= std::max(0.0, groups - perNode - i) / (groups - i);
        }
        reachable = nodes * (1.0 - missed);
    }
    // Distinct nodes among top-k uniform picks over the reachable ones; the sender's own node
    // is one of them in 1 of `nodes` cases.
    const double reached = reachable * (1.0 - std::pow(1.0 - 1.0 / reachable, s.topK));
    const double remote = reached * (nodes - 1.0) / nodes;
    const double inter = tokens * remote * tokenBytes / net.interBandwidth;
    const double intra = copies * (1.0 - 1.0 / span.perDomain) / net.intraBandwidth;
    return std::max(intra, inter) + net.interLatency;
}

double sendTime(double bytes, int distance, const Network& net)
{
    const bool sameDomain
        = distance < net.domainSize && net.domainSize % std::max(1, distance) == 0;
    return sameDomain ? net.intraLatency + bytes / net.intraBandwidth
                      : net.interLatency + bytes / net.interBandwidth;
}

CostTables makeCostTables(
    const ModelSummary& model, const Workload& workload, const hardware::Cluster& cluster)
{
    CostTables t;
    const double keys = workload.mode == Mode::Train ? workload.seqLength : workload.context;
    for (const auto& c : model.classes) {
        t.classes.push_back(classFlops(c.shape, keys));
    }
    t.headFlops = 2.0 * model.hidden * model.vocab;
    t.mtpExtraFlops = 2.0 * 2.0 * model.hidden * model.hidden + t.headFlops;
    t.net = networkOf(cluster);
    t.peakBf16 = cluster.device.bf16Flops;
    t.peakFp8 = cluster.device.peakFlops(true);
    t.hbmBandwidth = cluster.device.hbmBandwidth;
    t.modelFlopsPerSequence
        = megatronModelFlops(model, workload.seqLength, 1.0, workload.includeMtp);
    return t;
}

double gemmRate(const CostTables& tables, bool fp8, const CostOptions& options)
{
    return fp8 ? tables.peakFp8 * options.fp8ComputeEfficiency
               : tables.peakBf16 * options.computeEfficiency;
}

namespace {

/// Exposed data-parallel time and optimizer time of one stage (once per step).
std::pair<double, double> stepTail(const CostTables& tab, const Layout& l, const CostOptions& o,
    const StageWeights& w, const StageTime& st)
{
    const Network& net = tab.net;
    const double gradBytes = dtypeSize(l.grads);
    const int denseGroup = l.dp * l.cp;
    const int expertGroup = l.expertDp();
    double reduce = 0;
    double gather = 0;
    if (l.zero == 0) {
        reduce = collectiveTime(w.denseParams * gradBytes, l.tp, denseGroup, net, 2)
            + collectiveTime(w.expertParams * gradBytes, l.etp * l.ep, expertGroup, net, 2);
    } else if (l.zero <= 2) {
        // ZeRO-1 reduce-scatters the accumulated gradients once per step; ZeRO-2 keeps no full
        // gradient buffer and reduce-scatters every micro-batch (see zeroPerMicroBatch).
        if (l.zero == 1) {
            reduce = collectiveTime(w.denseParams * gradBytes, l.tp, denseGroup, net, 1)
                + collectiveTime(w.expertParams * gradBytes, l.etp * l.ep, expertGroup, net, 1);
        }
        gather = collectiveTime(w.denseBytes, l.tp, denseGroup, net, 1)
            + collectiveTime(w.expertBytes, l.etp * l.ep, expertGroup, net, 1);
    }
    const double backward = st.compute - st.forward;
    const double dp = (o.overlapGradReduce ? std::max(0.0, reduce - backward) : reduce)
        + (o.overlapParamGather ? std::max(0.0, gather - st.forward) : gather);
    const double owned = l.zero >= 1 ? w.denseParams / denseGroup + w.expertParams / expertGroup
                                     : w.denseParams + w.expertParams;
    // Adam reads and writes FP32 master weights and moments, reads the gradient and writes the
    // BF16 weight: about 30 bytes per parameter.
    const double optimizer = owned * 30.0 / (tab.hbmBandwidth * o.memoryEfficiency);
    return { dp, optimizer };
}

/// Exposed per-micro-batch data-parallel traffic of ZeRO-2 and ZeRO-3. ZeRO-2 partitions the
/// gradients, so every micro-batch's gradients are reduce-scattered during its backward pass.
/// ZeRO-3 (FSDP) also gathers the stage's weights for the forward and again for the backward,
/// overlapped with that micro-batch's compute.
double zeroPerMicroBatch(
    const CostTables& tab, const Layout& l, const StageWeights& w, const StageTime& st)
{
    if (l.zero < 2) {
        return 0.0;
    }
    const Network& net = tab.net;
    const double grads
        = collectiveTime(w.denseParams * dtypeSize(l.grads), l.tp, l.dp * l.cp, net, 1)
        + collectiveTime(w.expertParams * dtypeSize(l.grads), l.etp * l.ep, l.expertDp(), net, 1);
    if (l.zero == 2) {
        return std::max(0.0, grads - (st.compute - st.forward));
    }
    const double gather = collectiveTime(w.denseBytes, l.tp, l.dp * l.cp, net, 1)
        + collectiveTime(w.expertBytes, l.etp * l.ep, l.expertDp(), net, 1);
    return std::max(0.0, 2.0 * gather + grads - st.compute);
}

} // namespace

void stageWork(const ModelSummary& m, const CostTables& tab, const Layout& l, const Workload& wl,
    const CostOptions& o, StageWork* out)
{
    const Network& net = tab.net;
    const double tokens = double(l.microBatch) * wl.seqLength / l.cp; // per CP rank
    const double perTp = tokens / l.tp;
    const double peak = gemmRate(tab, l.weights == DType::F8E4M3, o);
    const double denseEff = rowsEfficiency(tokens, o);
    const double load = o.expertLoadFactor;
    const double hiddenBytes = tokens * m.hidden * 2.0;
    const double tpCollective = collectiveTime(hiddenBytes, 1, l.tp, net, 1);
    const GroupSpan cpSpan = groupSpan(l.tp, l.cp, net.domainSize);
    // Memory-bound kernels (norms, activation functions, residual adds, dropout, softmax) move
    // about `elementwisePasses` times the bytes a layer keeps for its backward pass.
    ActivationContext actCtx;
    actCtx.tokens = tokens;
    actCtx.keys = double(wl.seqLength) / l.cp;
    actCtx.tp = l.tp;
    actCtx.sp = l.sp;
    actCtx.etp = l.etp;
    actCtx.flash = o.flashAttention;
    actCtx.dropout = o.dropout;
    actCtx.expertLoad = o.expertLoadFactor;
    const double elementwise = o.elementwisePasses / (tab.hbmBandwidth * o.memoryEfficiency);

    // One layer of each class, computed once for all stages.
    ScratchArray<StageWork> perClass(m.classes.size());
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const auto& s = m.classes[c].shape;
        const auto& f = tab.classes[c];
        StageWork& lc = perClass[c];
        const double denseGemm = perTp * f.dense / (peak * denseEff);
        lc.dense = denseGemm + elementwise * layerActivationBytes(s, actCtx);
        lc.core = perTp * f.core / (tab.peakBf16 * o.computeEfficiency);
        // SP: an all-gather before and a reduce-scatter after attention and after the MLP (or
        // the shared experts); without SP the same volume moves as two all-reduces.
        lc.tp = (2.0 + (!s.moe || s.sharedFfn > 0 ? 2.0 : 0.0)) * tpCollective;
        if (o.tpCommOverlap && l.tp > 1) {
            // Each collective is cut into tp chunks pipelined with the GEMM that consumes or
            // produces it: one chunk stays exposed, the rest only where it outlasts the GEMMs.
            lc.tp = std::max(lc.tp / l.tp, lc.tp - denseGemm);
        }
        if (s.moe) {
            const double sent = perTp * s.topK * load; // routed copies this rank dispatches
            const double rowsPerExpert = sent * l.etp * l.ep / std::max(1.0, s.experts);
            lc.routed = perTp * f.routed * load / (peak * rowsEfficiency(rowsPerExpert, o))
                + o.moeLayerOverhead + o.moeExpertOverhead * s.experts / l.ep;
            lc.ep = 2.0
                * expertExchangeTime(
                    perTp * load, s, s.hidden * 2.0, l.etp, l.ep, net, o.epNodeDedup);
            if (o.epCommOverlap) {
                // Another micro-batch computes this layer while this one's tokens travel.
                lc.ep = std::max(0.0, lc.ep - (lc.dense + lc.core + lc.routed));
            }
            lc.tp += 2.0 * collectiveTime(sent * l.etp * s.hidden * 2.0, 1, l.etp, net, 1);
        }
        if (l.cp > 1) {
            const double block = tokens * s.kvHeads / l.tp * (s.qkHeadDim + s.vHeadDim) * 2.0;
            const double hop = cpSpan.domains > 1 ? net.interLatency + block / net.interBandwidth
                                                  : net.intraLatency + block / net.intraBandwidth;
            // Forward passes K/V around the ring; backward passes K/V and dK/dV.
            lc.cp = (l.cp - 1) * hop * 1.5;
        }
    }
    // Megatron's scatter/gather pipeline hand-off: each TP rank sends 1/tp of the boundary
    // activation (and all-gathers it over NVLink on the receiving stage), with or without SP.
    const double send
        = l.pp > 1 ? 2.0 * l.vpp * sendTime(hiddenBytes / l.tp, l.tp * l.cp * l.dp, net) : 0.0;

    for (int stage = 0; stage < l.pp; ++stage) {
        const int first = l.stageStart[std::size_t(stage)];
        const int last = l.stageStart[std::size_t(stage) + 1];
        StageWork sum;
        auto add = [&](const StageWork& lc, double n) {
            sum.dense += n * lc.dense;
            sum.core += n * lc.core;
            sum.routed += n * lc.routed;
            sum.tp += n * lc.tp;
            sum.ep += n * lc.ep;
            sum.cp += n * lc.cp;
        };
        for (std::size_t c = 0; c < m.classes.size(); ++c) {
            const int n = m.countInRange(int(c), first, last);
            if (n > 0) {
                add(perClass[c], n);
            }
        }
        if (stage == l.pp - 1) {
            sum.dense += perTp * tab.headFlops / (peak * denseEff);
            if (wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
                add(perClass[std::size_t(m.mtpClass)], m.numMtp);
                sum.dense += m.numMtp * perTp * tab.mtpExtraFlops / (peak * denseEff);
            }
        }
        sum.pp = send;
        out[stage] = sum;
    }
}

void stageTimes(const Layout& l, const StageWork* work, StageTime* out)
{
    const double passes = l.recompute == Recompute::Full ? 3.0 : 2.0; // fwd, bwd, recomputed fwd
    for (int stage = 0; stage < l.pp; ++stage) {
        const StageWork& w = work[stage];
        StageTime& st = out[stage];
        st = StageTime {};
        st.forward = w.dense + w.core + w.routed;
        st.compute = 3.0 * st.forward;
        if (l.recompute == Recompute::Selective) {
            st.compute += w.core;
        } else if (l.recompute == Recompute::Full) {
            st.compute += st.forward;
        }
        st.tp = w.tp * passes;
        st.ep = w.ep * passes;
        // Ring attention overlaps its transfers with the attention blocks it computes.
        st.cp = std::max(0.0, w.cp * passes / 2.0 - 3.0 * w.core);
        st.pp = w.pp;
    }
}

double pipelineLowerBound(const Layout& l, const StageTime* times)
{
    double sum = 0;
    double worst = 0;
    for (int s = 0; s < l.pp; ++s) {
        const double t = times[s].total();
        sum += t;
        worst = std::max(worst, t);
    }
    return l.numMicroBatches * worst + (sum - worst) / l.vpp;
}

TrainingCost combineStageTimes(const CostTables& tab, const Layout& l, const Workload& wl,
    const CostOptions& o, const StageWeights* weights, const StageTime* times)
{
    TrainingCost cost;
    double sum = 0;
    double worst = -1;
    StageTime slowest;
    double dp = 0;
    double optimizer = 0;
    for (int s = 0; s < l.pp; ++s) {
        StageTime st = times[s];
        st.zero = zeroPerMicroBatch(tab, l, weights[s], st);
        const double t = st.total();
        sum += t;
        if (t > worst) {
            worst = t;
            slowest = st;
            cost.slowestStage = s;
        }
        const auto [stageDp, stageOpt] = stepTail(tab, l, o, weights[s], st);
        dp = std::max(dp, stageDp);
        optimizer = std::max(optimizer, stageOpt);
    }
    const double micro = l.numMicroBatches;
    auto& b = cost.breakdown;
    b.compute = micro * slowest.compute;
    b.tp = micro * slowest.tp;
    b.ep = micro * slowest.ep;
    b.cp = micro * slowest.cp;
    b.pp = micro * slowest.pp;
    b.bubble = (sum - worst) / l.vpp;
    b.dp = micro * slowest.zero + dp;
    b.optimizer = optimizer;
    cost.stepTime = b.compute + b.tp + b.ep + b.cp + b.pp + b.bubble + b.dp + b.optimizer;
    const double sequences = l.globalBatch;
    cost.tokensPerSecond = sequences * wl.seqLength / cost.stepTime;
    cost.modelFlops = tab.modelFlopsPerSequence * sequences;
    cost.mfu = cost.modelFlops / (cost.stepTime * l.world * tab.peakBf16);
    return cost;
}

TrainingCost trainingCost(const ModelSummary& m, const CostTables& tab, const Layout& l,
    const Workload& wl, const CostOptions& o, const StageWeights* weights)
{
    std::vector<StageWork> work(static_cast<std::size_t>(l.pp));
    std::vector<StageTime> times(static_cast<std::size_t>(l.pp));
    stageWork(m, tab, l, wl, o, work.data());
    stageTimes(l, work.data(), times.data());
    return combineStageTimes(tab, l, wl, o, weights, times.data());
}

} // namespace detail

double layerForwardFlopsPerToken(const LayerShape& shape, double keys)
{
    const auto f = detail::classFlops(shape, keys);
    return f.dense + f.core + f.routed;
}

double megatronModelFlops(
    const ModelSummary& m, double seqLength, double sequences, bool includeMtp)
{
    // Megatron's transformer_flops(): 3 (fwd + wgrad + dgrad) × 2 (FMA) × token-linear GEMMs
    // (attention projections with its +1 norm terms for MLA, dense/shared MLP, top-k experts,
    // MTP eh_proj + norms, logits × (MTP + 1)) + causal core attention over s².
    const int mtp = includeMtp ? m.numMtp : 0;
    double linear = 0;
    double core = 0;
    auto addLayer = [&](const LayerShape& s, double n) {
        double attn = 0;
        if (s.attention == model::AttentionKind::MLA) {
            const double nope = s.qkHeadDim - s.ropeDim;
            const double q = s.qLoraRank > 0
                ? s.qLoraRank * (s.hidden + s.heads * s.qkHeadDim + 1.0)
                : s.hidden * s.heads * s.qkHeadDim;
            attn = q + s.kvLoraRank * (s.hidden + s.heads * (nope + s.vHeadDim) + 1.0)
                + s.hidden * s.ropeDim + s.heads * s.vHeadDim * s.hidden;
            core += n * 6.0 * (s.heads * s.qkHeadDim / 2.0 + s.heads * s.vHeadDim / 2.0);
        } else {
            const double q = s.heads * s.qkHeadDim;
            attn = s.hidden * (q + 2.0 * s.kvHeads * s.qkHeadDim) + q * s.hidden;
            core += n * 6.0 * q;
        }
        const double ffnExp = s.gated ? 3.0 : 2.0;
        const double mlp = s.moe ? s.hidden * (s.expertFfn * s.topK + s.sharedFfn) * ffnExp
                                 : s.hidden * s.ffn * ffnExp;
        linear += n * 6.0 * (attn + mlp);
    };
    for (const auto& c : m.classes) {
        addLayer(c.shape, c.count);
    }
    if (mtp > 0 && m.mtpClass >= 0) {
        addLayer(m.classes[std::size_t(m.mtpClass)].shape, mtp);
        linear += 6.0 * mtp * (3.0 * m.hidden + 2.0 * m.hidden * m.hidden);
    }
    linear += 6.0 * m.hidden * m.vocab * (mtp + 1);
    return sequences * seqLength * linear + sequences * seqLength * seqLength * core;
}

TrainingCost estimateTrainingCost(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const hardware::Cluster& cluster, const CostOptions& options)
{
    const auto tables = detail::makeCostTables(model, workload, cluster);
    std::vector<detail::StageWeights> weights;
    for (int s = 0; s < layout.pp; ++s) {
        weights.push_back(detail::stageWeights(model, layout, workload, s));
    }
    return detail::trainingCost(model, tables, layout, workload, options, weights.data());
}

} // namespace day0::plan
