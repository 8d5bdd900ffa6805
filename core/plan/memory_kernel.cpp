#include "plan/memory_kernel.h"

#include "plan/activation_model.h"
#include "plan/memory_why.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
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

// Where a block's bytes per bucket come from, as an input of the weights formula.
std::string bytesSource(const Layout& l, const std::string& label)
{
    if (l.checkpointWeights) {
        return fmt::format(
            "checkpoint: stored bytes of the {} (checkpoint dtypes, scales included)", label);
    }
    return fmt::format("derived: {} as block-FP8 (128×128 FP32 scales), the rest BF16", label);
}

// Records the terms of one block: per bucket, count × parameters (× bytes/param) ÷ its split.
void recordBlock(StageWeightsWhy& why, const BlockWeights& w, const Layout& l, double count,
    const FormulaInput& countInput, const std::string& label)
{
    const bool perParam
        = !l.checkpointWeights && l.weights != DType::F8E4M3 && l.weights != DType::F8E5M2;
    const ShardSplit bytes = bytesAt(w, l);
    struct Bucket {
        const char* what;
        double params;
        double bytes;
        const char* split;
    };
    for (const Bucket& b : { Bucket { "TP-split", w.params.tp, bytes.tp, "tp" },
             Bucket { "replicated on TP ranks", w.params.replicated, bytes.replicated, nullptr },
             Bucket { "routed experts", w.params.expert, bytes.expert, "ep" } }) {
        if (b.params == 0 && b.bytes == 0) {
            continue;
        }
        FormulaTerm params;
        params.what = fmt::format("{}, {}", label, b.what);
        if (count != 1.0) {
            params.inputs.push_back(countInput);
        }
        params.inputs.push_back(detail::times("params", b.params, "",
            fmt::format(
                "model: parameters of one {} ({}), from the tensor shapes", label, b.what)));
        FormulaTerm weights = params;
        // Stored at the checkpoint's dtype: parameters × its size, as a Megatron user reads it.
        const double stored = dtypeSize(why.checkpointDtype);
        if (perParam) {
            weights.inputs.push_back(detail::times("bytes_per_param", dtypeSize(l.weights), "B",
                detail::dtypeSource("weights", l.weights)));
        } else if (l.checkpointWeights && std::abs(b.params * stored - b.bytes) < 0.5) {
            weights.inputs.push_back(detail::times("bytes_per_param", stored, "B",
                fmt::format("checkpoint: stored as {}", shortDtypeName(why.checkpointDtype))));
        } else {
            weights.inputs.back() = detail::times("bytes", b.bytes, "B", bytesSource(l, label));
        }
        for (FormulaTerm* t : { &params, &weights }) {
            if (b.split != nullptr && std::string_view(b.split) == "tp") {
                t->inputs.push_back(detail::per("tp", l.tp, "plan: tp"));
            } else if (b.split != nullptr) {
                t->inputs.push_back(detail::per("ep", l.ep, "plan: ep"));
                t->inputs.push_back(detail::per("etp", l.etp, "plan: etp"));
            }
        }
        why.params.terms.push_back(std::move(params));
        why.bytes.terms.push_back(std::move(weights));
    }
}

void addBlock(StageWeights& out, const BlockWeights& w, const Layout& l, double times = 1.0,
    StageWeightsWhy* why = nullptr, const char* label = nullptr)
{
    const Share p = shareOf(w.params, l);
    const Share b = shareOf(bytesAt(w, l), l);
    out.denseParams += times * p.dense;
    out.expertParams += times * p.expert;
    out.denseBytes += times * b.dense;
    out.expertBytes += times * b.expert;
    if (why != nullptr) {
        recordBlock(*why, w, l, times,
            detail::times("copies", times, "", "model: this block counted that many times"), label);
    }
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

FormulaInput prefillTokensInput(const Layout& l, const Workload& wl)
{
    return times("prefill_tokens", prefillTokens(l, wl), "tokens",
        fmt::format("derived: min(prefill_chunk {}, batch {} × prompt {}) ÷ cp {} (workload)",
            wl.prefillChunk, l.microBatch, wl.prompt(), l.cp));
}

} // namespace

StageWeights stageWeights(
    const ModelSummary& m, const Layout& l, const Workload& wl, int stage, StageWeightsWhy* why)
{
    StageWeights w;
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    w.layers = last - first;
    if (why != nullptr) {
        why->checkpointDtype = m.checkpointDtype;
    }
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n == 0) {
            continue;
        }
        const auto& cls = m.classes[c];
        addBlock(w, cls.weights, l, n);
        if (why != nullptr) {
            const std::string label = classLabel(m, int(c));
            recordBlock(*why, cls.weights, l, n,
                times("layers", n, "", stageLayersSource(l, stage) + ", of them of this class"),
                label);
        }
        const Share b = shareOf(bytesAt(cls.weights, l), l);
        w.largestLayerBytes = std::max(w.largestLayerBytes, b.dense + b.expert);
        w.hasMoe = w.hasMoe || cls.shape.moe;
    }
    if (stage == 0) {
        w.embedding = true;
        addBlock(w, m.embedding, l, 1.0, why, "input embedding (vocab × hidden)");
        addBlock(w, m.vision, l, 1.0, why, "vision tower");
    }
    if (stage == l.pp - 1) {
        w.head = true;
        addBlock(w, m.finalNorm, l, 1.0, why, "final norm");
        // A tied head on a different stage than the embedding keeps its own copy (Megatron).
        addBlock(w, m.tiedEmbeddings && l.pp > 1 ? m.embedding : m.lmHead, l, 1.0, why,
            m.tiedEmbeddings && l.pp > 1 ? "output head (tied: own copy on the last stage)"
                                         : "output head (hidden × vocab)");
        if (wl.includeMtp && m.numMtp > 0) {
            w.mtpLayers = m.numMtp;
            addBlock(w, m.mtpLayer, l, m.numMtp, why, "MTP layer (workload: MTP kept)");
            if (l.mode == Mode::Train) {
                // Training frameworks share the MTP's embedding and head with the main model.
                addBlock(w, m.mtpShared, l, -double(m.numMtp), why,
                    "MTP embedding/head shared with the main model (subtracted)");
            }
            w.hasMoe
                = w.hasMoe || (m.mtpClass >= 0 && m.classes[std::size_t(m.mtpClass)].shape.moe);
        }
    }
    return w;
}

namespace {

bool isExpertTerm(const FormulaTerm& t)
{
    return std::any_of(
        t.inputs.begin(), t.inputs.end(), [](const FormulaInput& i) { return i.name == "ep"; });
}

// The terms of `from`, each times `factor` (when given) and divided by its ZeRO shards.
void scaledTerms(const Derivation& from, const FormulaInput* factor, bool sharded, const Layout& l,
    Derivation& to)
{
    for (FormulaTerm t : from.terms) {
        if (factor != nullptr) {
            t.inputs.push_back(*factor);
        }
        if (sharded && isExpertTerm(t)) {
            t.inputs.push_back(per("edp", l.expertDp(),
                fmt::format(
                    "plan: expert data-parallel size = world / (ep·etp·pp) = {} / ({}·{}·{}), "
                    "zero={} shards it",
                    l.world, l.ep, l.etp, l.pp, l.zero)));
        } else if (sharded) {
            t.inputs.push_back(per("dp", l.dp, fmt::format("plan: dp, zero={} shards it", l.zero)));
            if (l.cp > 1) {
                t.inputs.push_back(per("cp", l.cp, "plan: cp (ZeRO shards over dp×cp)"));
            }
        }
        to.terms.push_back(std::move(t));
    }
}

} // namespace

ModelStates modelStates(
    const StageWeights& w, const Layout& l, const StageWeightsWhy* weightsWhy, ModelStatesWhy* why)
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
    if (why != nullptr && weightsWhy != nullptr) {
        scaledTerms(weightsWhy->bytes, nullptr, l.zero >= 3, l, why->weights);
        const FormulaInput gradBytes
            = times("grad_bytes_per_param", grad, "B", dtypeSource("grads", l.grads));
        scaledTerms(weightsWhy->params, &gradBytes, l.zero >= 2, l, why->gradients);
        const FormulaInput stateBytes = times("state_bytes_per_param", states, "B",
            fmt::format("plan: {} B FP32 master weights{} + 2 Adam moments × {} B (optimizer={})",
                master, master == 0 ? " (weights are FP32 already)" : "", dtypeSize(l.optimizer),
                shortDtypeName(l.optimizer)));
        scaledTerms(weightsWhy->params, &stateBytes, l.zero >= 1, l, why->optimizer);
        if (s.zeroPrefetch > 0) {
            why->zeroBuffers.terms.push_back({ "ZeRO-3 prefetch: two gathered layers",
                { times("layers_gathered", 2, "", "ZeRO-3 gathers the next layer while one runs"),
                    times("largest_layer_bytes", w.largestLayerBytes, "B",
                        "derived: weight bytes of the stage's largest decoder layer on a "
                        "rank") } });
        }
        if (s.gradBucket > 0) {
            why->zeroBuffers.terms.push_back({ "ZeRO-2/3 reduce-scatter bucket",
                { times("bucket_params", std::min(w.denseParams + w.expertParams, 40e6), "",
                      "derived: min(parameters on the rank, 40M bucket)"),
                    gradBytes } });
        }
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

void trainingActivationsAll(const ModelSummary& m, const Layout& l, const Workload& wl,
    const MemoryOptions& o, double* out, Derivation* why, int whyStage)
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
    if (why != nullptr) {
        trainingActivationTerms(
            m, l, wl, o, ctx.tokens, perClass, work, embedding, output, whyStage, *why);
    }
}

double trainingActivations(const ModelSummary& m, const Layout& l, const Workload& wl,
    const MemoryOptions& o, int stage, Derivation* why)
{
    std::vector<double> all(static_cast<std::size_t>(l.pp));
    trainingActivationsAll(m, l, wl, o, all.data(), why, stage);
    return all[std::size_t(stage)];
}

double inferenceKvCache(
    const ModelSummary& m, const Layout& l, const Workload& wl, int stage, Derivation* why)
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
            if (why != nullptr) {
                kvCacheTerms(m.classes[c].shape, n, classLabel(m, int(c)), l, wl, *why);
            }
        }
    }
    if (stage == l.pp - 1 && wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
        total += m.numMtp * perLayer(m.classes[std::size_t(m.mtpClass)].shape);
        if (why != nullptr) {
            kvCacheTerms(
                m.classes[std::size_t(m.mtpClass)].shape, m.numMtp, "MTP layers", l, wl, *why);
        }
    }
    return total;
}

std::vector<CacheShare> inferenceKvCacheByKind(const ModelSummary& m, const Layout& l,
    const Workload& wl, int stage, std::vector<Derivation>* why)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const int kvBytes = dtypeSize(l.kv);
    std::vector<CacheShare> out;
    auto add = [&](const LayerShape& s, int layers, const std::string& label) {
        if (s.cache.empty()) {
            return; // no mixer (Nemotron-H's MoE and MLP layers), or one that keeps nothing
        }
        auto it = std::find_if(
            out.begin(), out.end(), [&](const CacheShare& c) { return c.kind == s.mixer; });
        if (it == out.end()) {
            out.push_back({ s.mixer, 0, Bytes(0) });
            it = out.end() - 1;
            if (why != nullptr) {
                Derivation d;
                d.figure = "kv_cache." + model::mixerKindName(s.mixer);
                d.formula = fmt::format("kv_cache[{}] = Σ layers × sequences × elements kept "
                                        "(per token × context, or fixed state) × bytes/element × "
                                        "heads_on_rank ÷ heads",
                    model::mixerKindName(s.mixer));
                why->push_back(std::move(d));
            }
        }
        it->layers += layers;
        const double each = double(l.microBatch)
            * model::cacheBytes(s.cache, double(wl.context) / l.cp, l.tp, kvBytes);
        it->bytes += Bytes(std::int64_t(std::llround(layers * each)));
        if (why != nullptr) {
            Derivation& d = (*why)[std::size_t(it - out.begin())];
            kvCacheTerms(s, layers, label, l, wl, d);
            d.bytes = it->bytes;
        }
    };
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n > 0) {
            add(m.classes[c].shape, n, why != nullptr ? classLabel(m, int(c)) : std::string());
        }
    }
    if (stage == l.pp - 1 && wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
        add(m.classes[std::size_t(m.mtpClass)].shape, m.numMtp, "MTP layers");
    }
    return out;
}

double inferenceWorkspace(const ModelSummary& m, const Layout& l, const Workload& wl,
    const MemoryOptions& o, int stage, Derivation* why)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const double tokens = prefillTokens(l, wl);
    double peak = 0.0;
    int widest = -1;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        if (m.countInRange(int(c), first, last) > 0) {
            const double bytes = prefillWorkspaceBytes(
                m.classes[c].shape, tokens, l.tp, l.etp, o.expertLoadFactor);
            if (widest < 0 || bytes > peak) {
                widest = int(c);
            }
            peak = std::max(peak, bytes);
        }
    }
    if (why != nullptr && widest >= 0 && peak > 0) {
        why->terms.push_back({ "one layer's prefill workspace (the widest layer on the stage)",
            { prefillTokensInput(l, wl),
                times("bytes_per_token", peak / tokens, "B",
                    fmt::format("derived: residual + normed input + the widest of attention and "
                                "MLP/MoE intermediates of {} at tp={}, etp={}, expert load {}",
                        classLabel(m, widest), l.tp, l.etp, o.expertLoadFactor)) } });
    }
    if (stage == l.pp - 1) {
        // FP32 logits of the last position of every sequence, for sampling.
        peak += double(l.microBatch) * m.vocab / l.tp * 4.0;
        if (why != nullptr) {
            why->terms.push_back({ "FP32 logits of each sequence's last position (sampling)",
                { times("sequences", l.microBatch, "", "workload: batch"),
                    times("vocab", m.vocab, "", "config: vocab_size (rows as stored)"),
                    per("tp", l.tp, "plan: tp (vocabulary-parallel head)"),
                    times("bytes_per_logit", 4, "B", "FP32 logits") } });
        }
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

Buffers stageBuffers(const ModelSummary& m, const Layout& l, const Workload& wl,
    const MemoryOptions& o, int stage, BuffersWhy* why)
{
    Buffers b;
    const int communicators = communicatorCount(l, m.hasMoe());
    b.runtime = o.cudaContext + o.ncclPerGroup * communicators;
    const bool train = l.mode == Mode::Train;
    const double tokens = train ? double(l.microBatch) * wl.seqLength / l.cp : prefillTokens(l, wl);
    const double u = l.sp ? l.tp : 1.0;
    auto tokensInput = [&] {
        if (!train) {
            return prefillTokensInput(l, wl);
        }
        return times("tokens", tokens, "tokens",
            fmt::format("derived: mb {} × seq {} ÷ cp {} (plan, workload)", l.microBatch,
                wl.seqLength, l.cp));
    };
    if (why != nullptr) {
        why->runtime.terms.push_back({ "CUDA context and library workspaces",
            { times("cuda_context", o.cudaContext, "B", "option: --reserve") } });
        why->runtime.terms.push_back({ "NCCL buffers per communicator",
            { times("communicators", communicators, "",
                  "derived: process groups with more than one rank the rank joins (tp, cp, dp×cp, "
                  "pp; ep, etp, edp with experts)"),
                times("nccl_per_communicator", o.ncclPerGroup, "B", "option: --nccl") } });
    }
    if (l.pp > 1) {
        // Send and receive buffers of the stage boundary activations.
        b.comm += 2.0 * 2.0 * m.hidden * tokens / u;
        if (why != nullptr) {
            FormulaTerm t { "pipeline send and receive buffers of the stage-boundary activations",
                { times("buffers", 2, "", "send + receive"),
                    times("bytes_per_element", 2, "B", "BF16 activations"),
                    times("hidden", m.hidden, "", "config: hidden_size"), tokensInput() } };
            if (l.sp && l.tp > 1) {
                t.inputs.push_back(per("tp", l.tp, "plan: tp with sequence parallelism"));
            }
            why->comm.terms.push_back(std::move(t));
        }
    }
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    double ring = 0.0;
    int ringClass = -1;
    int dispatchClass = -1;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        if (m.countInRange(int(c), first, last) == 0) {
            continue;
        }
        const auto& s = m.classes[c].shape;
        if (l.cp > 1 && train) {
            // Ring attention double-buffers the K/V block it forwards.
            const double kvWidth = s.kvHeads * (s.qkHeadDim + s.vHeadDim) / l.tp;
            if (2.0 * 2.0 * tokens * kvWidth > ring) {
                ringClass = int(c);
            }
            ring = std::max(ring, 2.0 * 2.0 * tokens * kvWidth);
        }
        if (s.moe && l.ep > 1) {
            const double rows = tokens * routedRowsPerToken(s, l.tp, l.etp, o.expertLoadFactor);
            if (2.0 * rows * s.hidden * 2.0 > b.moeDispatch) {
                dispatchClass = int(c);
            }
            b.moeDispatch = std::max(b.moeDispatch, 2.0 * rows * s.hidden * 2.0);
        }
    }
    b.comm += ring;
    if (why != nullptr && ringClass >= 0) {
        const auto& s = m.classes[std::size_t(ringClass)].shape;
        why->comm.terms.push_back({ "context-parallel ring: double-buffered K/V block",
            { times("buffers", 2, "", "double buffering"),
                times("bytes_per_element", 2, "B", "BF16 K/V"), tokensInput(),
                times("kv_heads", s.kvHeads, "", "config: num_key_value_heads (MLA: heads)"),
                times("qk_plus_v_head_dim", s.qkHeadDim + s.vHeadDim, "",
                    "config: head dims of K and V"),
                per("tp", l.tp, "plan: tp") } });
    }
    if (why != nullptr && dispatchClass >= 0) {
        const auto& s = m.classes[std::size_t(dispatchClass)].shape;
        why->moeDispatch.terms.push_back({ "expert all-to-all send and receive buffers",
            { times("buffers", 2, "", "send + receive"), tokensInput(),
                times("routed_rows_per_token",
                    routedRowsPerToken(s, l.tp, l.etp, o.expertLoadFactor), "",
                    fmt::format("derived: top-k {} × expert load {} × etp {} ÷ tp {}", s.topK,
                        o.expertLoadFactor, l.etp, l.tp)),
                times("hidden", s.hidden, "", "config: hidden_size"),
                times("bytes_per_element", 2, "B", "BF16 tokens") } });
    }
    return b;
}

} // namespace day0::plan::detail
