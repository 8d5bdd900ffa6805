#include "plan/memory_estimator.h"

#include "plan/memory_kernel.h"
#include "plan/memory_why.h"
#include "plan/rank_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::plan {

namespace {

Bytes bytes(double v) { return Bytes(std::int64_t(std::llround(v))); }

// An element count as a reader wants it: whole counts with separators, fractions (a
// compressed layer's share of a token) to four significant digits.
std::string elements(double v)
{
    if (v == std::floor(v) && std::abs(v) < 1e15) {
        return formatExact(std::int64_t(v));
    }
    return fmt::format("{:.4g}", v);
}

// Which kinds of layers keep what: "KV/state per layer kind: 36 attention layers K+V
// 1,024/token; 12 gated_deltanet layers fixed 1.0 MiB state per sequence; ...".
std::string cacheKindsNote(const ModelSummary& m)
{
    std::string out = "KV/state per layer kind:";
    std::vector<model::MixerKind> seen;
    for (const auto& c : m.classes) {
        if (c.count == 0 || std::find(seen.begin(), seen.end(), c.shape.mixer) != seen.end()) {
            continue;
        }
        seen.push_back(c.shape.mixer);
        int layers = 0;
        for (const auto& d : m.classes) {
            layers += d.shape.mixer == c.shape.mixer ? d.count : 0;
        }
        std::string terms;
        for (const auto& t : c.shape.cache) {
            terms += terms.empty() ? "" : " + ";
            if (t.elementsPerToken > 0) {
                terms += fmt::format("{} {}/token", t.what, elements(t.elementsPerToken));
                if (t.window > 0) {
                    terms += fmt::format(" (last {} tokens)", t.window);
                }
            } else {
                terms += fmt::format("{} {}/sequence{}", t.what, elements(t.elementsPerSequence),
                    t.dtype ? " " + shortDtypeName(*t.dtype) : std::string());
            }
        }
        out += fmt::format(" {} {} layer(s): {};", layers, model::mixerKindName(c.shape.mixer),
            terms.empty() ? std::string("nothing") : terms);
    }
    out.pop_back();
    return out + " (elements; KV at the cache dtype)";
}

std::vector<std::string> notesFor(
    const ModelSummary& m, const Layout& l, const Workload& wl, const MemoryOptions& o)
{
    std::vector<std::string> notes = m.notes;
    const auto& s = m.representativeShape();
    const bool train = l.mode == Mode::Train;
    if (train) {
        notes.push_back(fmt::format(
            "activations: Korthikanti et al. 2022 per layer, {}, recompute={}, {}",
            l.tp > 1 ? fmt::format("tp={} with sequence parallelism {}", l.tp, l.sp ? "on" : "off")
                     : std::string("no tensor parallelism"),
            recomputeName(l.recompute),
            o.flashAttention ? "fused attention (no s×s scores kept)"
                             : "unfused attention (s×s scores kept)"));
        if (s.attention == model::AttentionKind::GQA || s.attention == model::AttentionKind::MQA) {
            notes.push_back(
                fmt::format("models more than Megatron: K/V activations at {:.0f} KV heads (GQA), "
                            "not the full hidden width",
                    s.kvHeads));
        }
        if (s.attention == model::AttentionKind::MLA) {
            notes.push_back(
                "models more than Megatron: MLA latents (q/kv LoRA ranks, RoPE key) and "
                "per-head Q/K/V activations");
        }
        if (s.attention == model::AttentionKind::MLA && l.tp > 1) {
            notes.push_back(
                "differs from Megatron's formula: the MLA down-projections (q_a, kv_a) are "
                "held whole on every TP rank, as Megatron-Core builds them; the formula "
                "divides them by TP");
        }
        if (s.gated) {
            notes.push_back("models more than Megatron: SwiGLU fc1 output is 2×ffn wide (Megatron "
                            "counts a 2-matrix MLP)");
        }
        if (m.hasMoe()) {
            notes.push_back(fmt::format(
                "models more than Megatron: MoE activations — {:.0f} routed copies per token, FP32 "
                "router scores, expert-load factor {:.2f}, all-to-all buffers",
                s.topK, o.expertLoadFactor));
        }
        if (l.cp > 1) {
            notes.push_back(fmt::format(
                "models more than Megatron: context parallelism splits activations by cp={}, adds "
                "a "
                "K/V ring buffer and shards ZeRO states over dp×cp={} (Megatron's formula ignores "
                "CP and divides by dp={})",
                l.cp, l.dp * l.cp, l.dp));
        }
        if (l.vpp > 1) {
            notes.push_back(fmt::format("interleaved 1F1B with vpp={}: the first stage holds "
                                        "{:.2f} micro-batches of activations",
                l.vpp, detail::inFlightMicroBatches(l, 0)));
        }
        notes.push_back(fmt::format(
            "model states: {} weights, {} gradients, FP32 master weights and {} Adam moments; "
            "zero={} shards {} over dp×cp={} (experts over edp={})",
            shortDtypeName(l.weights), shortDtypeName(l.grads), shortDtypeName(l.optimizer), l.zero,
            l.zero == 0 ? "nothing"
                        : (l.zero == 1 ? "optimizer states"
                                       : (l.zero == 2 ? "optimizer states and gradients"
                                                      : "optimizer states, gradients and weights")),
            l.dp * l.cp, l.expertDp()));
        if (l.weights == DType::F8E4M3) {
            notes.push_back(
                "models more than Megatron: FP8 primary weights with 128×128 FP32 block scales");
        }
    } else {
        notes.push_back(fmt::format("KV cache: {} sequence{} × {} tokens at {}{}", l.microBatch,
            l.microBatch == 1 ? "" : "s", wl.context, shortDtypeName(l.kv),
            s.attention == model::AttentionKind::MLA
                ? fmt::format("; MLA keeps the {:.0f}-wide latent, whole on every TP rank",
                    s.kvLoraRank + s.ropeDim)
                : (s.kvHeads < l.tp ? fmt::format(
                       "; {:.0f} KV heads < tp={}: heads are replicated", s.kvHeads, l.tp)
                                    : std::string())));
        notes.push_back(cacheKindsNote(m));
        notes.push_back(
            fmt::format("activations: workspace of one layer for a prefill chunk of {} tokens",
                std::min(double(wl.prefillChunk), double(l.microBatch) * wl.prompt())));
        notes.push_back(l.checkpointWeights
                ? fmt::format("weights at the checkpoint's dtypes{}",
                    m.blockFp8Checkpoint ? " (block-FP8 with scales)" : "")
                : fmt::format("weights at {}", shortDtypeName(l.weights)));
    }
    bool uneven = false;
    for (int st = 1; st < l.pp; ++st) {
        uneven = uneven || l.stageLayers(st) != l.stageLayers(0);
    }
    if (uneven) {
        std::string split;
        for (int st = 0; st < l.pp; ++st) {
            if (st > 0) {
                split += '/';
            }
            split += std::to_string(l.stageLayers(st));
        }
        notes.push_back("models more than Megatron: uneven pipeline stages " + split);
    }
    notes.push_back(fmt::format(
        "buffers: CUDA context {:.2f} GiB + NCCL {:.2f} GiB × {} communicators, fragmentation "
        "headroom {:.0f}% of allocations",
        o.cudaContext / 1073741824.0, o.ncclPerGroup / 1073741824.0,
        detail::communicatorCount(l, m.hasMoe()), o.fragmentation * 100.0));
    return notes;
}

// The figures' derivations in RankMemory's order, each with the bytes RankMemory reports.
std::vector<Derivation> derivationsOf(const RankMemory& r, const Layout& l, const MemoryOptions& o,
    double allocated, detail::ModelStatesWhy states, Derivation activations, Derivation kv,
    std::vector<Derivation> kvKinds, detail::BuffersWhy buffers)
{
    const bool train = l.mode == Mode::Train;
    std::vector<Derivation> out;
    auto add = [&](Derivation d, const char* figure, Bytes value, std::string formula) {
        d.figure = figure;
        d.bytes = value;
        d.formula = std::move(formula);
        out.push_back(std::move(d));
    };
    add(std::move(states.weights), "weights", r.weights,
        train && l.zero >= 3
            ? "weights = Σ blocks on the stage: (params_tp ÷ tp + params_replicated) × bytes/param "
              "÷ (dp·cp) + params_expert ÷ (ep·etp) × bytes/param ÷ edp   (ZeRO-3)"
            : "weights = Σ blocks on the stage: params_tp × bytes/param ÷ tp + params_replicated "
              "× bytes/param + params_expert × bytes/param ÷ (ep·etp); blocks = layers of each "
              "class on the stage, embedding on the first stage, head (and MTP) on the last");
    if (train) {
        add(std::move(states.gradients), "gradients", r.gradients,
            fmt::format("gradients = params_on_rank × grad bytes/param{}",
                l.zero >= 2 ? " ÷ (dp·cp) for dense, ÷ edp for experts (ZeRO-2/3)" : ""));
        add(std::move(states.optimizer), "optimizer", r.optimizer,
            fmt::format("optimizer = params_on_rank × (4 B FP32 master + 2 Adam moments){}",
                l.zero >= 1 ? " ÷ (dp·cp) for dense, ÷ edp for experts (distributed optimizer, "
                              "ZeRO-1+)"
                            : ""));
        add(std::move(activations), "activations", r.activations,
            "activations = Σ layers × (mb·seq ÷ cp) × bytes/token/layer (Korthikanti 2022) × "
            "in-flight micro-batches (+ embedding; + head and loss, MTP on the last stage; + one "
            "layer's working set under full recompute)");
    } else {
        add(std::move(activations), "activations", r.activations,
            "activations = prefill workspace of the widest layer: prefill_tokens × bytes/token "
            "(+ FP32 logits of each sequence's last position on the last stage)");
        add(std::move(kv), "kv_cache", r.kvCache,
            "kv_cache = Σ layers × sequences × elements kept (per token × context, or fixed "
            "state) × bytes/element × heads_on_rank ÷ heads; for GQA K+V = 2 × kv_heads × "
            "head_dim per token");
        for (auto& k : kvKinds) {
            out.push_back(std::move(k));
        }
    }
    add(std::move(buffers.runtime), "runtime_reserve", r.runtimeReserve,
        "runtime_reserve = CUDA context + NCCL buffers × communicators");
    add(std::move(buffers.comm), "comm_buffers", r.commBuffers,
        "comm_buffers = pipeline send/receive 2 × 2 B × hidden × tokens (÷ tp with SP) + "
        "context-parallel K/V ring");
    add(std::move(buffers.moeDispatch), "moe_dispatch", r.moeDispatch,
        "moe_dispatch = 2 (send + receive) × tokens × routed rows per token × hidden × 2 B");
    add(std::move(states.zeroBuffers), "zero_buffers", r.zeroBuffers,
        "zero_buffers = ZeRO-3 prefetch 2 × largest layer + ZeRO-2/3 reduce-scatter bucket "
        "min(params, 40M) × grad bytes");
    Derivation frag;
    frag.terms.push_back({ "allocator headroom",
        { detail::times("fragmentation", o.fragmentation, "", "option: --fragmentation"),
            detail::times("allocated", allocated, "B",
                "derived: weights + gradients + optimizer + activations + kv_cache + "
                "zero_buffers + comm_buffers + moe_dispatch") } });
    add(std::move(frag), "fragmentation", r.fragmentation,
        "fragmentation = fraction × bytes allocated by tensors and buffers");
    auto sumOf = [&](std::initializer_list<const char*> parts) {
        Derivation d;
        for (const char* p : parts) {
            const Derivation* part = findDerivation(out, p);
            if (part == nullptr) {
                continue; // a figure the mode does not have (gradients at inference)
            }
            d.terms.push_back({ p,
                { detail::times(
                    p, double(part->bytes.value), "B", fmt::format("figure: {}", p)) } });
        }
        return d;
    };
    add(sumOf(
            { "runtime_reserve", "comm_buffers", "moe_dispatch", "zero_buffers", "fragmentation" }),
        "buffers", r.buffers,
        "buffers = runtime_reserve + comm_buffers + moe_dispatch + zero_buffers + fragmentation");
    add(sumOf({ "weights", "gradients", "optimizer", "activations", "kv_cache", "buffers" }),
        "total", r.total,
        "total = weights + gradients + optimizer + activations + kv_cache + buffers");
    return out;
}

} // namespace

MemoryReport estimateMemory(const ModelSummary& m, const Layout& l, const Workload& wl,
    const hardware::Cluster& cluster, const MemoryOptions& o, Derive derive)
{
    const bool record = derive == Derive::WithDerivations;
    MemoryReport report;
    report.layout = l;
    report.deviceMemory = bytes(cluster.deviceMemory());
    const RankLayout ranks(l);
    const bool train = l.mode == Mode::Train;
    for (int stage = 0; stage < l.pp; ++stage) {
        detail::StageWeightsWhy weightsWhy;
        detail::BuffersWhy buffersWhy;
        const auto w = detail::stageWeights(m, l, wl, stage, record ? &weightsWhy : nullptr);
        const auto buffers
            = detail::stageBuffers(m, l, wl, o, stage, record ? &buffersWhy : nullptr);
        RankMemory r;
        r.rank = ranks.firstRankOfStage(stage);
        r.ppStage = stage;
        r.ranks = l.tp * l.cp * l.dp;
        r.layers = w.layers;
        r.embedding = w.embedding;
        r.head = w.head;
        r.mtpLayers = w.mtpLayers;
        double weights = 0;
        double grads = 0;
        double optimizer = 0;
        double activations = 0;
        double kv = 0;
        double zeroBuffers = 0;
        detail::ModelStatesWhy statesWhy;
        Derivation activationsWhy;
        Derivation kvWhy;
        std::vector<Derivation> kvKindsWhy;
        if (train) {
            const auto states = detail::modelStates(
                w, l, record ? &weightsWhy : nullptr, record ? &statesWhy : nullptr);
            weights = states.weights;
            grads = states.gradients;
            optimizer = states.optimizer;
            zeroBuffers = states.zeroPrefetch + states.gradBucket;
            activations = detail::trainingActivations(
                m, l, wl, o, stage, record ? &activationsWhy : nullptr);
            r.inFlightMicroBatches = detail::inFlightMicroBatches(l, stage);
        } else {
            weights = w.denseBytes + w.expertBytes;
            statesWhy.weights = std::move(weightsWhy.bytes);
            kv = detail::inferenceKvCache(m, l, wl, stage, record ? &kvWhy : nullptr);
            r.kvByKind
                = detail::inferenceKvCacheByKind(m, l, wl, stage, record ? &kvKindsWhy : nullptr);
            activations = detail::inferenceWorkspace(
                m, l, wl, o, stage, record ? &activationsWhy : nullptr);
        }
        const double allocated = weights + grads + optimizer + activations + kv + zeroBuffers
            + buffers.comm + buffers.moeDispatch;
        const double fragmentation = o.fragmentation * allocated;
        r.weights = bytes(weights);
        r.gradients = bytes(grads);
        r.optimizer = bytes(optimizer);
        r.activations = bytes(activations);
        r.kvCache = bytes(kv);
        r.runtimeReserve = bytes(buffers.runtime);
        r.commBuffers = bytes(buffers.comm);
        r.moeDispatch = bytes(buffers.moeDispatch);
        r.zeroBuffers = bytes(zeroBuffers);
        r.fragmentation = bytes(fragmentation);
        r.buffers
            = r.runtimeReserve + r.commBuffers + r.moeDispatch + r.zeroBuffers + r.fragmentation;
        r.total = r.weights + r.gradients + r.optimizer + r.activations + r.kvCache + r.buffers;
        if (record) {
            r.derivations
                = derivationsOf(r, l, o, allocated, std::move(statesWhy), std::move(activationsWhy),
                    std::move(kvWhy), std::move(kvKindsWhy), std::move(buffersWhy));
        }
        report.perRank.push_back(std::move(r));
    }
    std::stable_sort(report.perRank.begin(), report.perRank.end(),
        [](const RankMemory& a, const RankMemory& b) { return a.total > b.total; });
    report.maxTotal = report.perRank.front().total;
    report.fits = report.maxTotal <= report.deviceMemory;
    report.notes = notesFor(m, l, wl, o);
    report.partial = m.partial;
    report.ignored = m.ignored;
    if (m.partial) {
        report.notes.insert(
            report.notes.begin(),
            "PARTIAL: the model was read partially; these figures leave out " + [&] {
                std::string list;
                for (const auto& i : m.ignored) {
                    list += (list.empty() ? "" : ", ") + i;
                }
                return list;
            }());
    }
    return report;
}

Result<MemoryReport> estimateMemory(const ModelSummary& model, const ParallelPlan& plan,
    const Workload& workload, const hardware::Cluster& cluster, const MemoryOptions& options,
    Derive derive)
{
    auto layout = resolveLayout(plan, model, workload, cluster);
    if (!layout) {
        return layout.error();
    }
    return estimateMemory(model, *layout, workload, cluster, options, derive);
}

} // namespace day0::plan
