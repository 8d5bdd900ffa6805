#include "plan/memory_kernel.h"

#include "plan/activation_model.h"

#include <algorithm>
#include <array>
#include <vector>

namespace day0::plan::detail {

namespace {

/// Bytes of a block per bucket at the layout's weight dtype.
ShardSplit bytesAt(const BlockWeights& w, const Layout& l)
{
    if (l.checkpointWeights) {
        return w.checkpointBytes;
    }
    if (l.weights == DType::F8E4M3 || l.weights == DType::F8E5M2) {
        return w.fp8Bytes;
    }
    return w.params.scaled(dtypeSize(l.weights));
}

struct Share {
    double dense = 0;
    double expert = 0;
};

Share shareOf(const ShardSplit& s, const Layout& l)
{
    return { s.tp / l.tp + s.replicated, s.expert / (double(l.ep) * l.etp) };
}

void addBlock(StageWeights& out, const BlockWeights& w, const Layout& l, double times = 1.0)
{
    const Share p = shareOf(w.params, l);
    const Share b = shareOf(bytesAt(w, l), l);
    out.denseParams += times * p.dense;
    out.expertParams += times * p.expert;
    out.denseBytes += times * b.dense;
    out.expertBytes += times * b.expert;
}

ActivationContext trainingContext(const Layout& l, const Workload& wl, const MemoryOptions& o)
{
    ActivationContext c;
    c.tokens = double(l.microBatch) * wl.seqLength / l.cp;
    c.keys = double(wl.seqLength) / l.cp;
    c.tp = l.tp;
    c.sp = l.sp;
    c.etp = l.etp;
    c.recompute = l.recompute;
    c.flash = o.flashAttention;
    c.dropout = o.dropout;
    c.expertLoad = o.expertLoadFactor;
    return c;
}

double prefillTokens(const Layout& l, const Workload& wl)
{
    const double wanted = double(l.microBatch) * wl.prompt();
    return std::min(double(wl.prefillChunk), wanted) / l.cp;
}

} // namespace

StageWeights stageWeights(const ModelSummary& m, const Layout& l, const Workload& wl, int stage)
{
    StageWeights w;
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    w.layers = last - first;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n == 0) {
            continue;
        }
        const auto& cls = m.classes[c];
        addBlock(w, cls.weights, l, n);
        const Share b = shareOf(bytesAt(cls.weights, l), l);
        w.largestLayerBytes = std::max(w.largestLayerBytes, b.dense + b.expert);
        w.hasMoe = w.hasMoe || cls.shape.moe;
    }
    if (stage == 0) {
        w.embedding = true;
        addBlock(w, m.embedding, l);
        addBlock(w, m.vision, l);
    }
    if (stage == l.pp - 1) {
        w.head = true;
        addBlock(w, m.finalNorm, l);
        // A tied head on a different stage than the embedding keeps its own copy (Megatron).
        addBlock(w, m.tiedEmbeddings && l.pp > 1 ? m.embedding : m.lmHead, l);
        if (wl.includeMtp && m.numMtp > 0) {
            w.mtpLayers = m.numMtp;
            addBlock(w, m.mtpLayer, l, m.numMtp);
            if (l.mode == Mode::Train) {
                // Training frameworks share the MTP's embedding and head with the main model.
                addBlock(w, m.mtpShared, l, -double(m.numMtp));
            }
            w.hasMoe
                = w.hasMoe || (m.mtpClass >= 0 && m.classes[std::size_t(m.mtpClass)].shape.moe);
        }
    }
    return w;
}

ModelStates modelStates(const StageWeights& w, const Layout& l)
{
    ModelStates s;
    const double denseShards = double(l.dp) * l.cp;
    const double expertShards = l.expertDp();
    const double grad = dtypeSize(l.grads);
    const double master = l.weights == DType::F32 ? 0.0 : 4.0;
    const double states = master + 2.0 * dtypeSize(l.optimizer);
    auto shard = [&](double dense, double expert, bool sharded) {
        return sharded ? dense / denseShards + expert / expertShards : dense + expert;
    };
    s.weights = shard(w.denseBytes, w.expertBytes, l.zero >= 3);
    s.gradients = shard(w.denseParams * grad, w.expertParams * grad, l.zero >= 2);
    s.optimizer = shard(w.denseParams * states, w.expertParams * states, l.zero >= 1);
    if (l.zero >= 3) {
        s.zeroPrefetch = 2.0 * w.largestLayerBytes;
    }
    if (l.zero >= 2) {
        s.gradBucket = std::min(w.denseParams + w.expertParams, 40e6) * grad;
    }
    return s;
}

double inFlightMicroBatches(const Layout& l, int stage)
{
    const double m = l.numMicroBatches;
    if (l.vpp <= 1) {
        return std::min(double(l.pp - stage), m);
    }
    const double chunks
        = std::min(m * l.vpp, 2.0 * (l.pp - stage - 1) + double(l.vpp - 1) * l.pp + 1.0);
    return chunks / l.vpp;
}

void trainingActivationsAll(
    const ModelSummary& m, const Layout& l, const Workload& wl, const MemoryOptions& o, double* out)
{
    const ActivationContext ctx = trainingContext(l, wl, o);
    const std::size_t classes = m.classes.size();
    // One layer of each class, computed once for all stages.
    std::array<double, 16> perClassSmall {};
    std::array<double, 16> workSmall {};
    std::vector<double> perClassBig;
    std::vector<double> workBig;
    double* perClass = perClassSmall.data();
    double* work = workSmall.data();
    if (classes > perClassSmall.size()) {
        perClassBig.resize(classes);
        workBig.resize(classes);
        perClass = perClassBig.data();
        work = workBig.data();
    }
    for (std::size_t c = 0; c < classes; ++c) {
        perClass[c] = layerActivationBytes(m.classes[c].shape, ctx);
        work[c] = l.recompute == Recompute::Full ? fullRecomputeWorkingSet(m.classes[c].shape, ctx)
                                                 : 0.0;
    }
    const double embedding = embeddingActivationBytes(m.hidden, ctx);
    const double output = outputActivationBytes(m.hidden, m.vocab, ctx);
    for (int stage = 0; stage < l.pp; ++stage) {
        const int first = l.stageStart[std::size_t(stage)];
        const int last = l.stageStart[std::size_t(stage) + 1];
        double perMicroBatch = stage == 0 ? embedding : 0.0;
        double workingSet = 0.0;
        for (std::size_t c = 0; c < classes; ++c) {
            const int n = m.countInRange(int(c), first, last);
            if (n > 0) {
                perMicroBatch += n * perClass[c];
                workingSet = std::max(workingSet, work[c]);
            }
        }
        double total = perMicroBatch * inFlightMicroBatches(l, stage) + workingSet;
        if (stage == l.pp - 1) {
            // The last stage runs the head and loss right before the backward pass: one
            // micro-batch.
            total += output;
            if (wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
                const double u = l.sp ? l.tp : 1.0;
                // Per MTP layer: its transformer layer, the two norm inputs and the concatenated
                // eh_proj input (2h wide), and its own logits.
                const double extra
                    = ctx.tokens * (2.0 * 2.0 * m.hidden / u + 2.0 * 2.0 * m.hidden / u);
                total += m.numMtp * (perClass[std::size_t(m.mtpClass)] + extra + output);
            }
        }
        out[stage] = total;
    }
}

double trainingActivations(
    const ModelSummary& m, const Layout& l, const Workload& wl, const MemoryOptions& o, int stage)
{
    std::vector<double> all(static_cast<std::size_t>(l.pp));
    trainingActivationsAll(m, l, wl, o, all.data());
    return all[std::size_t(stage)];
}

double inferenceKvCache(const ModelSummary& m, const Layout& l, const Workload& wl, int stage)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const int kvBytes = dtypeSize(l.kv);
    auto perLayer = [&](const LayerShape& s) {
        // Context parallelism splits the tokens of a sequence, not its fixed states.
        return double(l.microBatch)
            * model::cacheBytes(s.cache, double(wl.context) / l.cp, l.tp, kvBytes);
    };
    double total = 0.0;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n > 0) {
            total += n * perLayer(m.classes[c].shape);
        }
    }
    if (stage == l.pp - 1 && wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
        total += m.numMtp * perLayer(m.classes[std::size_t(m.mtpClass)].shape);
    }
    return total;
}

std::vector<CacheShare> inferenceKvCacheByKind(
    const ModelSummary& m, const Layout& l, const Workload& wl, int stage)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const int kvBytes = dtypeSize(l.kv);
    std::vector<CacheShare> out;
    auto add = [&](const LayerShape& s, int layers) {
        if (s.cache.empty()) {
            return; // no mixer (Nemotron-H's MoE and MLP layers), or one that keeps nothing
        }
        auto it = std::find_if(
            out.begin(), out.end(), [&](const CacheShare& c) { return c.kind == s.mixer; });
        if (it == out.end()) {
            out.push_back({ s.mixer, 0, Bytes(0) });
            it = out.end() - 1;
        }
        it->layers += layers;
        const double each = double(l.microBatch)
            * model::cacheBytes(s.cache, double(wl.context) / l.cp, l.tp, kvBytes);
        it->bytes += Bytes(std::int64_t(std::llround(layers * each)));
    };
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n > 0) {
            add(m.classes[c].shape, n);
        }
    }
    if (stage == l.pp - 1 && wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
        add(m.classes[std::size_t(m.mtpClass)].shape, m.numMtp);
    }
    return out;
}

double inferenceWorkspace(
    const ModelSummary& m, const Layout& l, const Workload& wl, const MemoryOptions& o, int stage)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const double tokens = prefillTokens(l, wl);
    double peak = 0.0;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        if (m.countInRange(int(c), first, last) > 0) {
            peak = std::max(peak,
                prefillWorkspaceBytes(m.classes[c].shape, tokens, l.tp, l.etp, o.expertLoadFactor));
        }
    }
    if (stage == l.pp - 1) {
        // FP32 logits of the last position of every sequence, for sampling.
        peak += double(l.microBatch) * m.vocab / l.tp * 4.0;
    }
    return peak;
}

int communicatorCount(const Layout& l, bool experts)
{
    int n = 0;
    for (const int size : { l.tp, l.cp, l.dp * l.cp, l.pp }) {
        n += size > 1 ? 1 : 0;
    }
    if (experts) {
        for (const int size : { l.ep, l.etp, l.expertDp() }) {
            n += size > 1 ? 1 : 0;
        }
    }
    return n;
}

Buffers stageBuffers(
    const ModelSummary& m, const Layout& l, const Workload& wl, const MemoryOptions& o, int stage)
{
    Buffers b;
    b.runtime = o.cudaContext + o.ncclPerGroup * communicatorCount(l, m.hasMoe());
    const bool train = l.mode == Mode::Train;
    const double tokens = train ? double(l.microBatch) * wl.seqLength / l.cp : prefillTokens(l, wl);
    const double u = l.sp ? l.tp : 1.0;
    if (l.pp > 1) {
        // Send and receive buffers of the stage boundary activations.
        b.comm += 2.0 * 2.0 * m.hidden * tokens / u;
    }
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    double ring = 0.0;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        if (m.countInRange(int(c), first, last) == 0) {
            continue;
        }
        const auto& s = m.classes[c].shape;
        if (l.cp > 1 && train) {
            // Ring attention double-buffers the K/V block it forwards.
            const double kvWidth = s.kvHeads * (s.qkHeadDim + s.vHeadDim) / l.tp;
            ring = std::max(ring, 2.0 * 2.0 * tokens * kvWidth);
        }
        if (s.moe && l.ep > 1) {
            const double rows = tokens * routedRowsPerToken(s, l.tp, l.etp, o.expertLoadFactor);
            b.moeDispatch = std::max(b.moeDispatch, 2.0 * rows * s.hidden * 2.0);
        }
    }
    b.comm += ring;
    return b;
}

} // namespace day0::plan::detail
