// Inference latency and throughput: a roofline per pipeline stage for decode (weights and KV
// cache read from HBM versus FLOPs) and prefill (FLOPs), plus alpha-beta communication.
#include "plan/activation_model.h"
#include "plan/cost_kernel.h"
#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

namespace day0::plan {

namespace {

struct PassTime {
    double compute = 0;
    double memory = 0;
    double tp = 0;
    double ep = 0;
    double pp = 0;
    double fullRate = 0; ///< the FLOPs at the large-GEMM rate (no small-batch penalty)
    double overlapLoss = 0; ///< share of the shorter of FLOPs and reads that is not hidden
    [[nodiscard]] double total() const
    {
        // The small-batch penalty of `compute` already stands for GEMMs waiting on HBM, so
        // only the FLOPs at the full rate can fail to hide behind the reads.
        return std::max(compute, memory) + overlapLoss * std::min(fullRate, memory) + tp + ep + pp;
    }
};

/// Attention work of one new token over `keys` cached keys (decode: no causal averaging): the
/// window caps the keys attended, the indexer scores every (compressed) key.
double decodeCoreFlops(const LayerShape& s, double keys)
{
    return detail::mixerCoreFlops(s, s.window > 0 ? std::min(keys, s.window) : keys, keys);
}

/// One forward pass of `tokens` new tokens per sequence for `sequences` sequences through stage
/// `stage`, attending over `keys` cached keys per sequence.
PassTime stagePass(const ModelSummary& m, const detail::CostTables& tab, const Layout& l,
    const Workload& wl, const CostOptions& o, int stage, double sequences, double tokens,
    double keys)
{
    PassTime p;
    p.overlapLoss = o.rooflineOverlapLoss;
    const auto& net = tab.net;
    const double rows = sequences * tokens; // per replica (TP group)
    const bool fp8 = l.weights == DType::F8E4M3 || (l.checkpointWeights && m.blockFp8Checkpoint);
    const double fullRate = detail::gemmRate(tab, fp8, o);
    const double rate = fullRate * rows / (rows + o.gemmHalfRows);
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const auto w = detail::stageWeights(m, l, wl, stage);
    double flops = 0;
    double kvBytes = 0;
    double tpTime = 0;
    double epTime = 0;
    double expertFraction = 0;
    double moeLayers = 0;
    const double tpCollective = detail::collectiveTime(rows * m.hidden * 2.0, 1, l.tp, net, 2);
    auto addLayers = [&](const LayerShape& s, const detail::ClassFlops& f, double n) {
        // Decode: each new token attends to the whole cache of its sequence.
        const double core = decodeCoreFlops(s, keys);
        flops += n * rows / l.tp * (f.dense + f.routed * o.expertLoadFactor + core);
        kvBytes += n * sequences / l.cp * model::cacheBytes(s.cache, keys, l.tp, dtypeSize(l.kv));
        tpTime += n * 2.0 * tpCollective;
        if (s.moe) {
            epTime += n * 2.0
                * detail::expertExchangeTime(
                    rows / l.tp, s, s.hidden * 2.0, l.etp, l.ep, net, o.epNodeDedup);
            // Distinct experts a rank must read: each of the tokens its EP group routes picks
            // top-k of E experts.
            const double groupTokens = rows * std::max(1.0, double(l.ep) * l.etp / l.tp);
            expertFraction += n * (1.0 - std::pow(1.0 - s.topK / s.experts, groupTokens));
            moeLayers += n;
        }
    };
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n > 0) {
            addLayers(m.classes[c].shape, tab.classes[c], n);
        }
    }
    if (stage == l.pp - 1) {
        // Logits for the last position of each sequence only.
        flops += sequences * tab.headFlops / l.tp;
    }
    const double hit = moeLayers > 0 ? expertFraction / moeLayers : 0.0;
    const double weightBytes = w.denseBytes + w.expertBytes * hit;
    p.compute = flops / rate;
    p.fullRate = flops / fullRate;
    p.memory = (weightBytes + kvBytes) / (tab.hbmBandwidth * o.memoryEfficiency);
    p.tp = tpTime;
    p.ep = epTime;
    if (l.pp > 1 && stage + 1 < l.pp) {
        p.pp = detail::sendTime(rows * m.hidden * 2.0, l.tp * l.cp * l.dp, net);
    }
    return p;
}

} // namespace

InferenceCost estimateInferenceCost(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const hardware::Cluster& cluster, const CostOptions& options)
{
    InferenceCost cost;
    const auto tables = detail::makeCostTables(model, workload, cluster);
    const double batch = layout.microBatch;
    // Decode keeps the pipeline full with pp micro-batches of batch/pp sequences each.
    const double perMicro = std::max(1.0, batch / layout.pp);
    const double keys = workload.context;
    const double prompt = workload.prompt();
    const double out = workload.outputLength;
    auto& b = cost.breakdown;
    for (int s = 0; s < layout.pp; ++s) {
        const PassTime d
            = stagePass(model, tables, layout, workload, options, s, perMicro, 1.0, keys);
        cost.tpot += d.total();
        b.decodeCompute += d.compute;
        b.decodeMemory += d.memory;
        b.tp += d.tp;
        b.ep += d.ep;
        b.pp += d.pp;
        // Prefill attends over half the prompt on average (causal).
        const PassTime one
            = stagePass(model, tables, layout, workload, options, s, 1.0, prompt, prompt / 2.0);
        cost.ttft += one.total();
        const PassTime all
            = stagePass(model, tables, layout, workload, options, s, batch, prompt, prompt / 2.0);
        b.prefill += all.total();
    }
    // What the runtime spends per decode step beyond the GPU work.
    b.runtime = options.decodeStepOverhead + options.decodeSequenceOverhead * batch;
    cost.tpot += b.runtime;
    const double replicas = layout.dp;
    // One cycle of the batch: every sequence's prefill, then its output tokens.
    const double cycle = b.prefill + out * cost.tpot;
    cost.tokensPerSecond = replicas * batch * out / cycle;
    return cost;
}

} // namespace day0::plan
