#include "plan/memory_why.h"

#include "plan/memory_kernel.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::plan::detail {

FormulaInput times(std::string name, double value, std::string unit, std::string source)
{
    return { std::move(name), value, std::move(unit), std::move(source), false };
}

FormulaInput per(std::string name, double value, std::string source)
{
    return { std::move(name), value, std::string(), std::move(source), true };
}

std::string classLabel(const ModelSummary& m, int cls)
{
    const auto& s = m.classes[std::size_t(cls)].shape;
    const std::string mixer = s.mixer == model::MixerKind::Attention
        ? model::attentionKindName(s.attention) + " attention"
        : model::mixerKindName(s.mixer);
    return fmt::format("decoder layers of class {} ({}, {})", cls, mixer,
        s.moe ? "MoE" : (s.ffn > 0 ? "dense MLP" : "no MLP"));
}

std::string stageLayersSource(const Layout& l, int stage)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    return fmt::format(
        "plan: pp={} puts decoder layers {}-{} on stage {}", l.pp, first, last - 1, stage);
}

std::string dtypeSource(std::string_view what, DType dtype)
{
    return fmt::format("plan: {}={}", what, shortDtypeName(dtype));
}

void kvCacheTerms(const LayerShape& s, int layers, const std::string& label, const Layout& l,
    const Workload& wl, Derivation& why)
{
    const double context = double(wl.context) / l.cp;
    for (const auto& t : s.cache) {
        if (t.elementsPerToken <= 0 && t.elementsPerSequence <= 0) {
            continue; // keeps nothing, as model::cacheBytes counts it
        }
        FormulaTerm term;
        term.what = fmt::format("{} of {}", t.what, label);
        term.inputs.push_back(
            times("layers", layers, "", "plan: layers of the class on the stage"));
        term.inputs.push_back(times(
            "sequences", l.microBatch, "", "workload: batch (concurrent sequences per replica)"));
        const bool windowed = t.window > 0 && double(t.window) < context;
        if (t.elementsPerToken > 0) {
            term.inputs.push_back(times("elements_per_token", t.elementsPerToken, "",
                fmt::format("model: '{}' of all heads per token of one layer", t.what)));
            if (windowed) {
                term.inputs.push_back(times("window", double(t.window), "tokens",
                    "config: sliding window (the layer keeps the last tokens only)"));
            } else {
                term.inputs.push_back(
                    times("context", double(wl.context), "tokens", "workload: context"));
                if (l.cp > 1) {
                    term.inputs.push_back(per("cp", l.cp, "plan: cp splits the context"));
                }
            }
        }
        if (t.elementsPerSequence > 0) {
            if (t.elementsPerToken > 0) {
                // A term with both parts: keep the arithmetic a product by stating the sum.
                const double tokens = windowed ? double(t.window) : context;
                term.inputs.clear();
                term.inputs.push_back(
                    times("layers", layers, "", "plan: layers of the class on the stage"));
                term.inputs.push_back(times("sequences", l.microBatch, "", "workload: batch"));
                term.inputs.push_back(
                    times("elements", t.elementsPerToken * tokens + t.elementsPerSequence, "",
                        fmt::format("derived: {} per token × {} tokens + {} per sequence",
                            t.elementsPerToken, tokens, t.elementsPerSequence)));
            } else {
                term.inputs.push_back(times("elements_per_sequence", t.elementsPerSequence, "",
                    fmt::format("model: '{}' fixed state of all heads of one layer", t.what)));
            }
        }
        const double each = t.dtype ? double(dtypeSize(*t.dtype)) : double(dtypeSize(l.kv));
        term.inputs.push_back(times("bytes_per_element", each, "B",
            t.dtype ? fmt::format("model: the state is kept in {}", shortDtypeName(*t.dtype))
                    : dtypeSource("kv", l.kv)));
        // Same split as model::cacheBytes: heads over TP, one whole head when tp > heads.
        const double heads = double(std::max<std::int64_t>(t.heads, 1));
        const double here = std::min(std::max(1.0, heads / double(std::max(l.tp, 1))), heads);
        if (heads > 1 || l.tp > 1) {
            term.inputs.push_back(times("heads_on_rank", here, "",
                fmt::format("derived: max(1, heads / tp) = max(1, {} / {}){}", heads, l.tp,
                    t.heads <= 1 ? " (not split: every TP rank keeps it whole)" : "")));
            term.inputs.push_back(per(
                "heads", heads, fmt::format("model: heads '{}' is split into under TP", t.what)));
        }
        why.terms.push_back(std::move(term));
    }
}

namespace {

std::string contextDescription(const Layout& l, const MemoryOptions& o)
{
    return fmt::format("tp={}, sp={}, recompute={}, {}{}", l.tp, l.sp ? "on" : "off",
        recomputeName(l.recompute), o.flashAttention ? "fused attention" : "unfused attention",
        o.dropout ? ", dropout masks kept" : "");
}

// The terms of the micro-batch tokens a training stage processes: mb × seq ÷ cp.
std::vector<FormulaInput> trainingTokens(const Layout& l, const Workload& wl)
{
    std::vector<FormulaInput> in { times("micro_batch", l.microBatch, "", "plan: mb"),
        times("seq_length", wl.seqLength, "tokens", "workload: seq") };
    if (l.cp > 1) {
        in.push_back(per("cp", l.cp, "plan: cp splits the sequence"));
    }
    return in;
}

} // namespace

void trainingActivationTerms(const ModelSummary& m, const Layout& l, const Workload& wl,
    const MemoryOptions& o, double tokens, const double* perClass, const double* work,
    double embedding, double output, int stage, Derivation& why)
{
    const int first = l.stageStart[std::size_t(stage)];
    const int last = l.stageStart[std::size_t(stage) + 1];
    const double inFlight = inFlightMicroBatches(l, stage);
    const FormulaInput inFlightInput = times("in_flight_micro_batches", inFlight, "",
        l.vpp > 1
            ? fmt::format("derived: interleaved 1F1B, min(m·vpp, 2(pp−stage−1) + (vpp−1)·pp + 1) "
                          "/ vpp with pp={}, vpp={}, m={}, stage={}",
                l.pp, l.vpp, l.numMicroBatches, stage)
            : fmt::format("derived: 1F1B, min(pp − stage, m) = min({} − {}, {})", l.pp, stage,
                l.numMicroBatches));
    auto term = [&](std::string what, double count, const std::string& countSource,
                    double perTokenBytes, const std::string& perTokenSource, bool inFlightToo) {
        FormulaTerm t;
        t.what = std::move(what);
        if (count != 1.0) {
            t.inputs.push_back(times("layers", count, "", countSource));
        }
        for (auto& i : trainingTokens(l, wl)) {
            t.inputs.push_back(std::move(i));
        }
        t.inputs.push_back(times("bytes_per_token", perTokenBytes, "B", perTokenSource));
        if (inFlightToo) {
            t.inputs.push_back(inFlightInput);
        }
        why.terms.push_back(std::move(t));
    };
    const std::string ctxText = contextDescription(l, o);
    if (stage == 0) {
        term("embedding: token ids (int64) and dropout mask", 1.0, {}, embedding / tokens,
            "derived: activation_model embeddingActivationBytes per token, " + ctxText, true);
    }
    int widest = -1;
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        const int n = m.countInRange(int(c), first, last);
        if (n == 0) {
            continue;
        }
        term(classLabel(m, int(c)), n, stageLayersSource(l, stage) + ", of them of this class",
            perClass[c] / tokens,
            fmt::format("derived: Korthikanti et al. 2022 Table 2 per token of one layer "
                        "(attention + MLP/MoE, extended to GQA/MLA/SwiGLU/MoE) at h={}, {}",
                m.classes[c].shape.hidden, ctxText),
            true);
        if (widest < 0 || work[c] > work[std::size_t(widest)]) {
            widest = int(c);
        }
    }
    if (widest >= 0 && work[std::size_t(widest)] > 0) {
        term("full recompute: one layer's activations while it is recomputed", 1.0, {},
            work[std::size_t(widest)] / tokens,
            fmt::format("derived: the widest layer on the stage ({}) without recompute, {}",
                classLabel(m, widest), ctxText),
            false);
    }
    if (stage == l.pp - 1) {
        term("final norm, head input and FP32 logits (one micro-batch)", 1.0, {}, output / tokens,
            fmt::format("derived: 2h/u + 2h/u + 4·vocab/t per token with h={}, vocab={}, {}",
                m.hidden, m.vocab, ctxText),
            false);
        if (wl.includeMtp && m.numMtp > 0 && m.mtpClass >= 0) {
            const double u = l.sp ? l.tp : 1.0;
            const double extra = 2.0 * 2.0 * m.hidden / u + 2.0 * 2.0 * m.hidden / u;
            term("MTP layers: layer, norms, eh_proj input and own logits", m.numMtp,
                "config: num_nextn_predict_layers (workload keeps MTP)",
                (perClass[std::size_t(m.mtpClass)] + output) / tokens + extra,
                "derived: one MTP layer's activations + 8h/u + logits per token, " + ctxText,
                false);
        }
    }
}

} // namespace day0::plan::detail
