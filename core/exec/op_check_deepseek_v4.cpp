// DeepSeek-V4's operators in `day0 opcheck` (OpChecker::deepseekV4Ops). Each check runs the
// engine's own code (deepseek_v4_forward.cpp, deepseek_v4_block.cpp, deepseek_v4_hyper.cpp) on
// random weights of the model's widths twice: on the float engine under the target plan, as
// its step emulates it, and in fp64 (the reference), both fed the same inputs (rounded to the
// activation dtype, as they arrive in a run); the difference is judged as every other row.
// What a check of `tokens` rows cannot hold at the model's size is scaled, and its row says so:
// at most two of the attention's output groups (their heads), and the sliding window, the
// heavily-compressed ratio and the indexer's top-k scaled to the rows, so that each one acts.
// These operators run on the CPU reference only (no backend implements them).
#include "exec/deepseek_v4.h"
#include "exec/deepseek_v4_check.h"
#include "exec/emulated_ops.h"
#include "exec/null_taps.h"
#include "exec/op_check_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

namespace day0::exec::detail {

using numerics::OpKind;
using numerics::Tensor;

namespace {

constexpr std::int64_t kCsaRatio = 4;
const char* const kWhere = "day0-cpu (deepseek_v4_*.cpp; not on backends)";

/// The same weights in fp64 (the reference's) and fp32 (the target's).
struct TwinWeights {
    WeightTable d;
    WeightTable f;

    void put(
        const std::string& name, std::vector<std::int64_t> shape, const std::vector<double>& values)
    {
        d.tensors[name] = Tensor::fromDoubles(shape, values);
        f.tensors[name] = Tensor::fromFloats(shape, OpChecker::toFloat(values));
    }
};

/// `v` as the activation dtype of `mode` stores it, kept in double (both sides' input).
std::vector<double> asStored(const std::vector<double>& v, PrecisionMode mode)
{
    auto f = OpChecker::toFloat(v);
    roundActivations(f, mode);
    return { f.begin(), f.end() };
}

/// What the checks of one model share: the scaled spec (one layer, index 0), its RoPE tables
/// and the plan's rounding state.
struct V4Check {
    OpChecker& c;
    const model::ModelSpec& model;
    const OpCheckOptions& options;
    model::ModelSpec spec; ///< one layer, with the scaled window / ratio / top-k
    std::int64_t t = 0;
    std::int64_t h = 0;
    std::int64_t groups = 0; ///< output groups checked
    std::int64_t heads = 0; ///< the heads of those groups
    std::int64_t window = 0;
    std::int64_t hcaRatio = 0; ///< the heavily-compressed layers' ratio, scaled
    Rope mainRope;
    Rope compressRope;
    std::map<std::pair<std::string, int>, std::vector<float>> rounded;
    DeepseekV4Rounding rounding { options.target, rounded };

    std::vector<double> linearWeight(std::int64_t rows, std::int64_t cols, double gain = 1.0)
    {
        return c.random(rows * cols, gain / std::sqrt(double(cols)));
    }
    std::vector<double> normWeight(std::int64_t n) { return c.random(n, 0.1, 1.0); }

    void addCompressor(TwinWeights& w, const std::string& m, std::int64_t ratio, std::int64_t width)
    {
        const std::int64_t coff = ratio == kCsaRatio ? 2 : 1;
        w.put(m + ".ape", { ratio, coff * width }, c.random(ratio * coff * width));
        w.put(m + ".wkv.weight", { coff * width, h }, linearWeight(coff * width, h));
        w.put(m + ".wgate.weight", { coff * width, h }, linearWeight(coff * width, h));
        w.put(m + ".norm.weight", { width }, normWeight(width));
    }

    /// Layer 0's attention weights for compress ratio `ratio` (0: sliding only).
    TwinWeights attentionWeights(std::int64_t ratio)
    {
        // The step rounds each projection's weight once per name; these are new weights.
        rounded.clear();
        const auto& ca = *spec.compressedAttention;
        const std::int64_t d = spec.headDim;
        const std::int64_t in = spec.numHeads * d / ca.oGroups;
        TwinWeights w;
        const std::string a = "layers.0.attn";
        w.put(a + ".attn_sink", { heads }, c.random(heads));
        w.put(a + ".wq_a.weight", { ca.qLoraRank, h }, linearWeight(ca.qLoraRank, h));
        w.put(a + ".q_norm.weight", { ca.qLoraRank }, normWeight(ca.qLoraRank));
        w.put(
            a + ".wq_b.weight", { heads * d, ca.qLoraRank }, linearWeight(heads * d, ca.qLoraRank));
        w.put(a + ".wkv.weight", { d, h }, linearWeight(d, h));
        w.put(a + ".kv_norm.weight", { d }, normWeight(d));
        w.put(a + ".wo_a.weight", { groups * ca.oLoraRank, in },
            linearWeight(groups * ca.oLoraRank, in));
        w.put(a + ".wo_b.weight", { h, groups * ca.oLoraRank },
            linearWeight(h, groups * ca.oLoraRank));
        if (ratio > 0) {
            addCompressor(w, a + ".compressor", ratio, d);
        }
        if (ratio == kCsaRatio) {
            const std::int64_t ih = ca.indexerHeads * ca.indexerHeadDim;
            w.put(a + ".indexer.wq_b.weight", { ih, ca.qLoraRank }, linearWeight(ih, ca.qLoraRank));
            w.put(a + ".indexer.weights_proj.weight", { ca.indexerHeads, h },
                linearWeight(ca.indexerHeads, h));
            addCompressor(w, a + ".indexer.compressor", kCsaRatio, ca.indexerHeadDim);
        }
        return w;
    }

    void setRatio(std::int64_t ratio) { spec.layers[0].compressRatio = ratio; }

    template <typename T> typename DeepseekV4Cache<T>::Layer cache()
    {
        typename DeepseekV4Cache<T>::Layer layer;
        deepseekV4SizeLayer<T>(layer, spec, 0, t, mainRope, compressRope);
        return layer;
    }

    std::string checkedWith(std::int64_t ratio) const
    {
        std::string s = fmt::format("checked with {} of {} output groups, window {}", groups,
            spec.compressedAttention->oGroups, window);
        if (ratio == kCsaRatio) {
            s += fmt::format(", index top-{}", spec.compressedAttention->indexerTopK);
        } else if (ratio > 0) {
            s += fmt::format(", ratio {}", ratio);
        }
        return s;
    }
};

// The two hyper-connections around a block and the head's: their maps (fp32 under every plan),
// the collapse of the streams into the block's input and the expansion of its output back.
void hyperConnectionRows(V4Check& k)
{
    auto& c = k.c;
    const auto& hc = *k.spec.hyperConnections;
    const std::int64_t s = hc.streams;
    const std::int64_t h = k.h;
    const std::int64_t t = k.t;
    const std::int64_t mix = (2 + s) * s;
    TwinWeights w;
    w.put("layers.0.hc_attn_fn", { mix, s * h }, k.linearWeight(mix, s * h));
    w.put("layers.0.hc_attn_base", { mix }, c.random(mix, 0.5));
    w.put("layers.0.hc_attn_scale", { 3 }, c.random(3, 0.1, 1.0));
    w.put("hc_head_fn", { s, s * h }, k.linearWeight(s, s * h));
    w.put("hc_head_base", { s }, c.random(s, 0.5));
    w.put("hc_head_scale", { 1 }, c.random(1, 0.1, 1.0));
    const PrecisionMode residual = c.mode(OpKind::DecoderLayer);
    const auto streams = asStored(c.random(t * s * h), residual);
    const auto out = asStored(c.random(t * h), residual);
    const auto streamsF = OpChecker::toFloat(streams);
    const auto outF = OpChecker::toFloat(out);

    const auto mapsD = deepseekV4HyperMaps<double>(
        w.d, "layers.0.hc_attn", streams.data(), t, s, h, k.spec, false);
    const auto mapsF = deepseekV4HyperMaps<float>(
        w.f, "layers.0.hc_attn", streamsF.data(), t, s, h, k.spec, false);
    const auto flat = [](const HyperMaps& m) {
        std::vector<double> v = m.pre;
        v.insert(v.end(), m.post.begin(), m.post.end());
        v.insert(v.end(), m.comb.begin(), m.comb.end());
        return v;
    };
    c.add(fmt::format("hyper-connection maps (hc_mult {}: pre, post, comb with {} Sinkhorn "
                      "iterations; fp32 under every plan)",
              s, hc.sinkhornIters),
        fmt::format("[{}, {}] · [{}, {}]ᵀ", t, s * h, mix, s * h), OpKind::Other,
        PrecisionMode::F32, kWhere, flat(mapsD), OpChecker::toFloat(flat(mapsF)));

    // Collapse into the block's input, expand the block's output back; both stored in the
    // residual dtype, as the step stores them.
    std::vector<double> inD(std::size_t(t * h));
    std::vector<float> inF(inD.size());
    deepseekV4Collapse<double>(mapsD, streams.data(), t, s, h, inD.data());
    deepseekV4Collapse<float>(mapsF, streamsF.data(), t, s, h, inF.data());
    roundActivations(inF, residual);
    auto nextD = streams;
    auto nextF = streamsF;
    deepseekV4Expand<double>(mapsD, nextD.data(), out.data(), t, s, h);
    deepseekV4Expand<float>(mapsF, nextF.data(), outF.data(), t, s, h);
    roundActivations(nextF, residual);
    inD.insert(inD.end(), nextD.begin(), nextD.end());
    inF.insert(inF.end(), nextF.begin(), nextF.end());
    c.add("hyper-connection collapse and expand (block input, new streams)",
        fmt::format("[{}, {}, {}] -> [{}, {}] -> [{}, {}, {}]", t, s, h, t, h, t, s, h),
        OpKind::DecoderLayer, residual, kWhere, inD, inF);

    const auto headD
        = deepseekV4HyperMaps<double>(w.d, "hc_head", streams.data(), t, s, h, k.spec, true);
    const auto headF
        = deepseekV4HyperMaps<float>(w.f, "hc_head", streamsF.data(), t, s, h, k.spec, true);
    std::vector<double> finalD(std::size_t(t * h));
    std::vector<float> finalF(finalD.size());
    deepseekV4Collapse<double>(headD, streams.data(), t, s, h, finalD.data());
    deepseekV4Collapse<float>(headF, streamsF.data(), t, s, h, finalF.data());
    roundActivations(finalF, residual);
    c.add("hyper-connection head (hc_head: pre maps only, collapse)",
        fmt::format("[{}, {}, {}] -> [{}, {}]", t, s, h, t, h), OpKind::DecoderLayer, residual,
        kWhere, finalD, finalF);
}

// A compressor's pooled entries (fp32 under every plan), the ratio-4 one's indexer scores, and
// the whole attention of a layer of that ratio (`ratio` 0: sliding only).
void attentionRows(V4Check& k, std::int64_t ratio, std::int64_t modelRatio)
{
    auto& c = k.c;
    const auto& ca = *k.spec.compressedAttention;
    const std::int64_t t = k.t;
    const std::int64_t h = k.h;
    k.setRatio(ratio);
    const TwinWeights w = k.attentionWeights(ratio);
    const auto x = asStored(c.random(t * h), c.mode(OpKind::Norm));
    const auto xf = OpChecker::toFloat(x);
    const std::string a = "layers.0.attn";
    if (ratio > 0) {
        auto cd = k.cache<double>();
        auto cf = k.cache<float>();
        deepseekV4Compress<double>(
            cd.compressor, a + ".compressor", w.d, x.data(), t, 0, h, k.spec.normEps, *cd.rope);
        deepseekV4Compress<float>(
            cf.compressor, a + ".compressor", w.f, xf.data(), t, 0, h, k.spec.normEps, *cf.rope);
        const std::int64_t count = cd.compressor.count;
        const std::int64_t width = cd.compressor.width;
        const std::vector<double> ref(
            cd.compressor.entries.begin(), cd.compressor.entries.begin() + count * width);
        const std::vector<float> tgt(
            cf.compressor.entries.begin(), cf.compressor.entries.begin() + count * width);
        c.add(fmt::format("kv compressor (ratio {}{}; fp32 under every plan{})", modelRatio,
                  ratio == kCsaRatio ? ", overlapping windows" : "",
                  ratio != modelRatio ? fmt::format("; checked with ratio {}", ratio) : ""),
            fmt::format("[{}, {}] -> [{}, {}]", t, h, count, width), OpKind::Attention,
            PrecisionMode::F32, kWhere, ref, tgt);
    }
    if (ratio == kCsaRatio) {
        auto cd = k.cache<double>();
        auto cf = k.cache<float>();
        const std::string ix = a + ".indexer";
        deepseekV4Compress<double>(
            cd.indexer, ix + ".compressor", w.d, x.data(), t, 0, h, k.spec.normEps, *cd.rope);
        deepseekV4Compress<float>(
            cf.indexer, ix + ".compressor", w.f, xf.data(), t, 0, h, k.spec.normEps, *cf.rope);
        const auto latent = asStored(c.random(t * ca.qLoraRank), c.mode(OpKind::Norm));
        const auto latentF = OpChecker::toFloat(latent);
        const auto sd = deepseekV4IndexScores<double>(
            cd.indexer, ix, w.d, k.spec, x.data(), latent.data(), t, 0, *cd.rope);
        const auto sf = deepseekV4IndexScores<float>(
            cf.indexer, ix, w.f, k.spec, xf.data(), latentF.data(), t, 0, *cf.rope);
        std::vector<std::int64_t> selD;
        std::vector<std::int64_t> selF;
        deepseekV4Select<double>(
            cd.indexer, ix, w.d, k.spec, x.data(), latent.data(), t, 0, *cd.rope, selD);
        deepseekV4Select<float>(
            cf.indexer, ix, w.f, k.spec, xf.data(), latentF.data(), t, 0, *cf.rope, selF);
        // The visible entries' scores are compared; the selections they move are counted.
        std::vector<double> ref;
        std::vector<float> tgt;
        for (std::size_t i = 0; i < sd.size(); ++i) {
            if (std::isfinite(sd[i])) {
                ref.push_back(sd[i]);
                tgt.push_back(float(sf[i]));
            }
        }
        const std::int64_t topK = ca.indexerTopK;
        std::int64_t moved = 0;
        for (std::int64_t i = 0; i < t; ++i) {
            const std::set<std::int64_t> a1(selD.begin() + i * topK, selD.begin() + (i + 1) * topK);
            const std::set<std::int64_t> b1(selF.begin() + i * topK, selF.begin() + (i + 1) * topK);
            moved += a1 == b1 ? 0 : 1;
        }
        c.add(fmt::format("lightning indexer (relu scores of {} heads, top-{}; fp32 under every "
                          "plan; checked with top-{})",
                  ca.indexerHeads, k.model.compressedAttention->indexerTopK, topK),
            fmt::format("q [{}, {}, {}] over {} entries; {} of {} queries select other entries", t,
                ca.indexerHeads, ca.indexerHeadDim, cd.indexer.count, moved, t),
            OpKind::Attention, PrecisionMode::F32, kWhere, ref, tgt);
    }
    auto cd = k.cache<double>();
    auto cf = k.cache<float>();
    NullTaps<double> tapsD;
    NullTaps<float> tapsF;
    std::vector<double> outD(std::size_t(t * h));
    std::vector<float> outF(outD.size());
    deepseekV4Attention<double>(w.d, k.spec, 0, cd, x.data(), t, 0, tapsD, outD.data());
    deepseekV4Attention<float>(
        w.f, k.spec, 0, cf, xf.data(), t, 0, tapsF, outF.data(), &k.rounding);
    const std::string kind = modelRatio == 0 ? "sliding"
        : modelRatio == kCsaRatio            ? fmt::format(
                         "compressed ratio 4, indexer top-{}", k.model.compressedAttention->indexerTopK)
                                  : fmt::format("heavily compressed ratio {}", modelRatio);
    c.add(fmt::format("attention ({}: MQA K=V, window {}, sinks, output rope undone, grouped "
                      "output projection; {})",
              kind, k.model.layers.front().slidingWindow, k.checkedWith(ratio)),
        fmt::format("x [{}, {}], q [{}, {}, {}]", t, h, t, k.heads, k.spec.headDim),
        OpKind::Attention, c.mode(OpKind::Linear), kWhere, outD, outF);
}

// The grouped output projection alone: each group's heads through its rank-r block of wo_a,
// the concatenation through wo_b (both projections in the plan's Linear mode). Judged by the
// attention's rule: it is the attention's output projection, two projections in series (int8's
// per-projection limit would fail it by construction).
void groupedOutputRow(V4Check& k)
{
    auto& c = k.c;
    const auto& ca = *k.spec.compressedAttention;
    const std::int64_t width = k.heads * k.spec.headDim;
    k.setRatio(0);
    const TwinWeights w = k.attentionWeights(0);
    const auto attn = asStored(c.random(k.t * width), c.mode(OpKind::Attention));
    const auto attnF = OpChecker::toFloat(attn);
    std::vector<double> ref(std::size_t(k.t * k.h));
    std::vector<float> tgt(ref.size());
    deepseekV4GroupedOutput<double>(w.d, k.spec, 0, attn.data(), k.t, ref.data());
    deepseekV4GroupedOutput<float>(w.f, k.spec, 0, attnF.data(), k.t, tgt.data(), &k.rounding);
    c.add(fmt::format("grouped output projection ({} groups of rank {}; checked with {})",
              ca.oGroups, ca.oLoraRank, k.groups),
        fmt::format(
            "[{}, {}] -> [{}, {}] -> [{}, {}]", k.t, width, k.t, k.groups * ca.oLoraRank, k.t, k.h),
        OpKind::Attention, c.mode(OpKind::Linear), kWhere, ref, tgt);
}

// The router (fp32 under every plan, as the step runs it): sqrtsoftplus scores, top-k of
// score + bias or the token's tid2eid row, renormalised, times routed_scaling_factor. Compared
// as dense [tokens, experts] combine weights, so a flipped expert shows as a large error.
void routerRow(V4Check& k, bool hash)
{
    auto& c = k.c;
    const auto& moe = *k.spec.moe;
    const std::int64_t t = k.t;
    const std::int64_t h = k.h;
    const std::int64_t e = moe.numExperts;
    const std::int64_t topK = moe.topK;
    k.spec.layers[0].hashRouted = hash;
    TwinWeights w;
    const std::string f = "layers.0.ffn.gate";
    w.put(f + ".weight", { e, h }, k.linearWeight(e, h));
    const std::int64_t vocab = std::min(k.spec.vocabSize, k.options.maxOutputs);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(t));
    // The checker's normal draws make the token ids (their magnitudes scaled and folded into
    // the vocabulary) and, for a hash layer, each token's expert order.
    const auto draws = c.random(t + vocab * e);
    for (std::int64_t i = 0; i < t; ++i) {
        ids[std::size_t(i)] = std::int64_t(std::fabs(draws[std::size_t(i)]) * 1e6) % vocab;
    }
    if (hash) {
        // Each token's experts: a random choice of k distinct ones (tid2eid as a checkpoint holds
        // it).
        std::vector<double> table(std::size_t(vocab * topK));
        std::vector<std::int64_t> order(static_cast<std::size_t>(e));
        for (std::int64_t v = 0; v < vocab; ++v) {
            std::iota(order.begin(), order.end(), 0);
            const double* key = draws.data() + t + v * e;
            std::partial_sort(order.begin(), order.begin() + topK, order.end(),
                [&](std::int64_t a, std::int64_t b) { return key[a] > key[b]; });
            for (std::int64_t j = 0; j < topK; ++j) {
                table[std::size_t(v * topK + j)] = double(order[std::size_t(j)]);
            }
        }
        w.put(f + ".tid2eid", { vocab, topK }, table);
    } else {
        w.put(f + ".bias", { e }, c.random(e, 0.1));
    }
    const auto x = asStored(c.random(t * h), c.mode(OpKind::Norm));
    const auto xf = OpChecker::toFloat(x);
    std::vector<std::int64_t> chosenD;
    std::vector<std::int64_t> chosenF;
    std::vector<double> weightsD;
    std::vector<double> weightsF;
    deepseekV4Route<double>(w.d, k.spec, 0, ids, x.data(), t, chosenD, weightsD);
    deepseekV4Route<float>(w.f, k.spec, 0, ids, xf.data(), t, chosenF, weightsF);
    std::vector<double> ref(std::size_t(t * e), 0.0);
    std::vector<float> tgt(ref.size(), 0.0f);
    std::int64_t same = 0;
    for (std::int64_t i = 0; i < t; ++i) {
        std::set<std::int64_t> a;
        std::set<std::int64_t> b;
        for (std::int64_t j = 0; j < topK; ++j) {
            const auto s = std::size_t(i * topK + j);
            ref[std::size_t(i * e + chosenD[s])] = weightsD[s];
            tgt[std::size_t(i * e + chosenF[s])] = float(weightsF[s]);
            a.insert(chosenD[s]);
            b.insert(chosenF[s]);
        }
        same += a == b ? 1 : 0;
    }
    const std::string name = hash
        ? fmt::format("router (hash-routed layers: tid2eid experts, sqrtsoftplus weights; first {} "
                      "layers; fp32 under every plan)",
            moe.numHashLayers)
        : std::string("router (sqrtsoftplus, top-k of score + e_score_correction_bias, "
                      "renormalised, routed_scaling_factor; fp32 under every plan)");
    auto& row = c.add(name,
        fmt::format("[{}, {}] · [{}, {}]ᵀ, top-{}; {} of {} tokens pick the same experts", t, h, e,
            h, topK, same, t),
        OpKind::Router, PrecisionMode::F32, kWhere, ref, tgt);
    row.expertAgreement = double(same) / double(t);
}

// One expert's MLP with the clamped SwiGLU, its inputs spread past the limit so that the clamps
// act: w1, w3 and w2 in the plan's Linear mode, silu(gate) and the product in its Mlp mode.
void clampedMlpRow(V4Check& k)
{
    auto& c = k.c;
    const auto& moe = *k.spec.moe;
    const std::int64_t t = k.t;
    const std::int64_t h = k.h;
    const std::int64_t inter = moe.expertIntermediate;
    const double limit = k.spec.swigluLimit;
    TwinWeights w;
    k.rounded.clear();
    const std::string m = "layers.0.ffn.experts.0";
    // Gate and up of standard deviation ~1.2 · limit: a fair share beyond ±limit.
    const double gain = limit > 0 ? 1.2 * limit : 1.0;
    w.put(m + ".w1.weight", { inter, h }, k.linearWeight(inter, h, gain));
    w.put(m + ".w3.weight", { inter, h }, k.linearWeight(inter, h, gain));
    w.put(m + ".w2.weight", { h, inter }, k.linearWeight(h, inter));
    const auto x = asStored(c.random(t * h), c.mode(OpKind::Norm));
    const auto xf = OpChecker::toFloat(x);
    std::vector<double> ref(std::size_t(t * h));
    std::vector<float> tgt(ref.size());
    deepseekV4ClampedMlp<double>(w.d, m, x.data(), ref.data(), t, h, inter, limit);
    deepseekV4ClampedMlp<float>(w.f, m, xf.data(), tgt.data(), t, h, inter, limit, &k.rounding, 0);
    c.add(fmt::format("expert MLP (clamped SwiGLU: silu, limit {})", limit),
        fmt::format("[{}, {}] -> [{}, {}] -> [{}, {}]", t, h, t, inter, t, h), OpKind::Mlp,
        c.mode(OpKind::Linear), kWhere, ref, tgt);
}

} // namespace

void OpChecker::deepseekV4Ops()
{
    const auto ropes = deepseekV4Ropes(m_spec);
    if (!ropes) {
        keep(ropes.error());
        return;
    }
    const auto& ca = *m_spec.compressedAttention;
    V4Check k { *this, m_spec, m_options, m_spec };
    k.t = m_options.tokens;
    k.h = m_spec.hiddenSize;
    k.groups = std::min<std::int64_t>(ca.oGroups, 2);
    k.heads = k.groups * (m_spec.numHeads / ca.oGroups);
    k.mainRope = ropes->first;
    k.compressRope = ropes->second;
    // One layer, index 0 (the plan's layer-0 modes, as every other row): the model's first
    // layer with the window scaled to a quarter of the rows and the index top-k to half of the
    // entries a ratio-4 compressor pools from them.
    model::LayerSpec layer = m_spec.layers.front();
    k.window = std::max<std::int64_t>(1, std::min(layer.slidingWindow, k.t / 4));
    layer.slidingWindow = k.window;
    layer.hashRouted = false;
    k.spec.layers = { layer };
    k.spec.numLayers = 1;
    k.spec.compressedAttention->indexerTopK
        = std::max<std::int64_t>(1, std::min(ca.indexerTopK, k.t / kCsaRatio / 2));

    hyperConnectionRows(k);
    std::set<std::int64_t> ratios;
    for (const auto& l : m_spec.layers) {
        ratios.insert(l.compressRatio);
    }
    for (const std::int64_t r : ratios) {
        // A heavily-compressed ratio is scaled to pool two entries from the rows; it must not
        // land on 4, which is the overlapping compressor with the indexer.
        std::int64_t used = r;
        if (r > 0 && r != kCsaRatio) {
            used = std::clamp<std::int64_t>(k.t / 2, 2, r);
            used = used == kCsaRatio ? 3 : used;
        }
        attentionRows(k, used, r);
    }
    groupedOutputRow(k);
    if (m_spec.moe) {
        routerRow(k, false);
        if (m_spec.moe->numHashLayers > 0) {
            routerRow(k, true);
        }
        clampedMlpRow(k);
    }
}

} // namespace day0::exec::detail
