// DeepSeek-V4's step on the reference engine: hyper-connections around each block, the
// compressed attention, the MoE; written from transformers' modeling_deepseek_v4.py
// @ 019760818965c71b0a4d38e95820ee0b6cee4240 (see deepseek_v4_block.cpp for the sources and
// what is refused). Captures are recorded under the Hugging Face module names of the twin
// (plugins/torch/day0_torch_deepseek_v4.py): model.layers.{i}.self_attn, .mlp, ...
//
// Under an emulated precision plan (float engine only) the step rounds as the other MoE families
// do (forward.cpp, ffn_block.cpp): the projections the released checkpoint stores quantised
// (attention wq_a, wq_b, wkv, wo_a, wo_b; routed experts' and the shared expert's w1, w2, w3)
// compute in the plan's Linear mode (fp8 with its scaling, nvfp4, mxfp4, int4, or bf16), their
// weights rounded once (wo_a as one tensor, sliced per group afterwards, as its block scales are
// stored); the embedding, norms, attention output, activations, MoE sum, hyper-connection
// outputs and head are rounded to the activation dtype (bf16 under a quantised plan). Kept on the
// fp32 reference, their inputs as they arrive: the router (as DeepSeek-V3's, an fp32 linear;
// an override of it is refused), the hyper-connection maps (fp32 parameters mixed in fp32), and
// the compressors and the Lightning indexer (their pooling softmax and top-k scores; the
// released checkpoint keeps the compressors' projections and weights_proj unquantised). The
// attention's scores and probabilities are computed in fp32/fp64 as a fused kernel keeps them,
// its q, K=V and output rounded.
#include "exec/deepseek_v4.h"
#include "exec/deepseek_v4_check.h"
#include "exec/emulated_ops.h"
#include "exec/forward.h"
#include "exec/null_taps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

constexpr std::int64_t kCsaRatio = 4;

template <typename T> const T* tensorOf(const WeightTable& w, const std::string& name)
{
    return w.tensors.at(name).template data<T>();
}

/// The mode of an op of `kind` in layer `layer` (the references without a plan or in fp64).
template <typename T> PrecisionMode modeOf(const DeepseekV4Rounding* r, OpKind kind, int layer)
{
    if constexpr (std::is_same_v<T, float>) {
        return r != nullptr ? r->plan.modeFor(kind, layer) : PrecisionMode::F32;
    } else {
        return PrecisionMode::F64;
    }
}

/// Rounds `count` values to the activation dtype of `kind`'s mode (no-op for the references).
template <typename T>
void roundTo(const DeepseekV4Rounding* r, OpKind kind, int layer, T* p, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        if (r != nullptr) {
            roundActivations({ p, std::size_t(count) }, modeOf<T>(r, kind, layer));
        }
    } else {
        (void)kind;
        (void)layer;
        (void)p;
        (void)count;
    }
}

/// The weight `name` [rows, cols] as a projection of layer `layer` reads it: rounded for its
/// Linear mode once (a released FP8 weight already on its block grid is read as stored).
template <typename T>
const T* projectionWeight(
    const WeightTable& w, const std::string& name, const DeepseekV4Rounding* r, int layer)
{
    const auto& tensor = w.tensors.at(name);
    const T* raw = tensor.template data<T>();
    if constexpr (std::is_same_v<T, float>) {
        const PrecisionMode mode = modeOf<T>(r, OpKind::Linear, layer);
        if (!isEmulated(mode)) {
            return raw;
        }
        const bool fp8 = mode == PrecisionMode::F8E4M3 || mode == PrecisionMode::F8E5M2;
        if (fp8 && w.exactFp8.contains(name)) {
            return raw;
        }
        auto& slot = r->weights[{ name, int(mode) }];
        if (slot.empty()) {
            const std::int64_t rows = tensor.shape()[0];
            const std::int64_t cols = tensor.numel() / rows;
            slot.assign(raw, raw + rows * cols);
            roundGemmInput(slot, rows, cols, mode, r->plan.fp8Scaling, true);
        }
        return slot.data();
    } else {
        return raw;
    }
}

/// y = x · wᵀ as a projection of layer `layer` computes it; `weight` from projectionWeight.
template <typename T>
void project(const DeepseekV4Rounding* r, int layer, const T* x, const T* weight, T* y,
    std::int64_t n, std::int64_t in, std::int64_t out)
{
    if constexpr (std::is_same_v<T, float>) {
        const PrecisionMode mode = modeOf<T>(r, OpKind::Linear, layer);
        if (isEmulated(mode)) {
            emulatedLinear(x, weight, nullptr, y, n, in, out, mode, r->plan.fp8Scaling);
            return;
        }
    }
    linear<T>(x, weight, nullptr, y, n, in, out);
}

/// RMSNorm of layer `layer` (emulatedRmsNorm in its Norm mode); `w` may be null (no weight).
template <typename T>
void normOf(const DeepseekV4Rounding* r, int layer, const T* x, const T* w, T* y, std::int64_t n,
    std::int64_t dim, double eps)
{
    if constexpr (std::is_same_v<T, float>) {
        const PrecisionMode mode = modeOf<T>(r, OpKind::Norm, layer);
        if (isEmulated(mode) && w != nullptr) {
            emulatedRmsNorm(x, w, y, n, dim, eps, mode);
            return;
        }
        rmsNorm<T>(x, w, y, n, dim, eps);
        roundTo(r, OpKind::Norm, layer, y, n * dim);
    } else {
        rmsNorm<T>(x, w, y, n, dim, eps);
    }
}

} // namespace

// SwiGLU with DeepSeek-V4's clamp (DeepseekV4MLP / DeepseekV4Experts._apply_gate): the gate
// clamped from above and up both ways at swiglu_limit (0: none), silu(gate) · up, then w2.
// Emulated: w1, w3 and w2 are projections; silu(gate) and the product each rounded in the Mlp
// mode (HF's act_fn(gate) * up in the model's dtype).
template <typename T>
void deepseekV4ClampedMlp(const WeightTable& w, const std::string& m, const T* x, T* out,
    std::int64_t n, std::int64_t h, std::int64_t width, double limit,
    const DeepseekV4Rounding* rounding, int layer)
{
    const auto* r = rounding;
    std::vector<T> g(std::size_t(n * width));
    std::vector<T> u(std::size_t(n * width));
    project(r, layer, x, projectionWeight<T>(w, m + ".w1.weight", r, layer), g.data(), n, h, width);
    project(r, layer, x, projectionWeight<T>(w, m + ".w3.weight", r, layer), u.data(), n, h, width);
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (limit > 0) {
            g[i] = std::min(g[i], T(limit));
            u[i] = std::clamp(u[i], T(-limit), T(limit));
        }
        g[i] = g[i] / (T(1) + std::exp(-g[i]));
    }
    roundTo(r, OpKind::Mlp, layer, g.data(), n * width);
    for (std::size_t i = 0; i < g.size(); ++i) {
        g[i] *= u[i];
    }
    roundTo(r, OpKind::Mlp, layer, g.data(), n * width);
    project(
        r, layer, g.data(), projectionWeight<T>(w, m + ".w2.weight", r, layer), out, n, width, h);
}

namespace {

/// What one layer's step reads: its weights (native names), spec, cache and step rows.
template <typename T> struct LayerStep {
    const WeightTable& weights;
    const model::ModelSpec& spec;
    const model::LayerSpec& layer;
    typename DeepseekV4Cache<T>::Layer& cache;
    std::string native; ///< "layers.3"
    std::string hf; ///< "model.layers.3": the capture names of the twin
    std::int64_t n = 0;
    std::int64_t start = 0;
    Taps<T>& taps;
    std::int64_t heads = 0; ///< query heads held (a TP rank's share, or all)
    std::int64_t groups = 0; ///< output groups held
    int layerIndex = 0;
    const DeepseekV4Rounding* rounding = nullptr; ///< null: the reference

    const T* w(const std::string& name) const { return tensorOf<T>(weights, native + name); }
    /// y = x · Wᵀ for the projection `name` (".attn.wq_a.weight") in the layer's Linear mode.
    void project(const std::string& name, const T* x, T* y, std::int64_t n, std::int64_t in,
        std::int64_t out) const
    {
        detail::project(rounding, layerIndex, x,
            projectionWeight<T>(weights, native + name, rounding, layerIndex), y, n, in, out);
    }
    void norm(const T* x, const T* weight, T* y, std::int64_t n, std::int64_t dim) const
    {
        normOf(rounding, layerIndex, x, weight, y, n, dim, spec.normEps);
    }
    void round(OpKind kind, T* p, std::int64_t count) const
    {
        roundTo(rounding, kind, layerIndex, p, count);
    }
};

// q = wq_b(q_norm(wq_a(x))) RMS-normalised per head without weight, and the one K=V head
// kv_norm(wkv(x)), both rotated at their positions; kv is cached. Returns q [n, H, d]; leaves
// the q latent (the indexer's input) in `qLatent`.
template <typename T>
std::vector<T> projectQkv(const LayerStep<T>& st, const T* x, std::vector<T>& qLatent)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t heads = st.heads;
    const std::int64_t d = spec.headDim;
    qLatent.resize(std::size_t(n * ca.qLoraRank));
    st.project(".attn.wq_a.weight", x, qLatent.data(), n, h, ca.qLoraRank);
    st.norm(qLatent.data(), st.w(".attn.q_norm.weight"), qLatent.data(), n, ca.qLoraRank);
    std::vector<T> q(std::size_t(n * heads * d));
    st.project(".attn.wq_b.weight", qLatent.data(), q.data(), n, ca.qLoraRank, heads * d);
    st.norm(q.data(), nullptr, q.data(), n * heads, d);
    T* kv = st.cache.kv.data() + st.start * d;
    st.project(".attn.wkv.weight", x, kv, n, h, d);
    st.norm(kv, st.w(".attn.kv_norm.weight"), kv, n, d);
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(q.data() + t * heads * d, heads, d, st.start + t, *st.cache.rope);
        rotateTail(kv + t * d, 1, d, st.start + t, *st.cache.rope);
    }
    // The rotated q and K=V are stored in the activation dtype.
    st.round(OpKind::Attention, q.data(), n * heads * d);
    st.round(OpKind::Attention, kv, n * d);
    return q;
}

// The keys of the query at `pos`: its window (pos - j < sliding_window) of the cached K=V, then
// the compressed entries it may see (w < (pos + 1) / ratio; ratio 4: those the indexer chose).
template <typename T>
void keysOf(const LayerStep<T>& st, std::int64_t pos, const std::int64_t* chosen,
    std::vector<const T*>& keys)
{
    const std::int64_t d = st.spec.headDim;
    const std::int64_t ratio = st.layer.compressRatio;
    const auto& entries = st.cache.compressor.entries;
    keys.clear();
    for (std::int64_t j = std::max<std::int64_t>(0, pos - st.layer.slidingWindow + 1); j <= pos;
         ++j) {
        keys.push_back(st.cache.kv.data() + j * d);
    }
    if (ratio == kCsaRatio) {
        for (std::int64_t k = 0; k < st.spec.compressedAttention->indexerTopK; ++k) {
            if (chosen[k] >= 0) {
                keys.push_back(entries.data() + chosen[k] * d);
            }
        }
    } else if (ratio > 0) {
        const std::int64_t visible = std::min((pos + 1) / ratio, st.cache.compressor.count);
        for (std::int64_t e = 0; e < visible; ++e) {
            keys.push_back(entries.data() + e * d);
        }
    }
}

// One query's heads over `keys`: softmax of q·k / sqrt(d) with the head's sink in the
// denominator, the weighted K=V, then its rope lanes rotated back at the query's position
// (K = V carried the keys' rotation into the output).
template <typename T>
void attendQuery(
    const LayerStep<T>& st, const T* q, std::int64_t pos, const std::vector<const T*>& keys, T* out)
{
    const std::int64_t heads = st.heads;
    const std::int64_t d = st.spec.headDim;
    const double scale = 1.0 / std::sqrt(double(d));
    const T* sinks = st.w(".attn.attn_sink");
    std::vector<double> p(keys.size());
    for (std::int64_t hd = 0; hd < heads; ++hd) {
        const T* qh = q + hd * d;
        double top = double(sinks[hd]);
        for (std::size_t k = 0; k < keys.size(); ++k) {
            double dot = 0.0;
            for (std::int64_t ch = 0; ch < d; ++ch) {
                dot += double(qh[ch]) * double(keys[k][ch]);
            }
            p[k] = dot * scale;
            top = std::max(top, p[k]);
        }
        double sum = std::exp(double(sinks[hd]) - top);
        for (double& v : p) {
            v = std::exp(v - top);
            sum += v;
        }
        T* o = out + hd * d;
        for (std::int64_t ch = 0; ch < d; ++ch) {
            double acc = 0.0;
            for (std::size_t k = 0; k < keys.size(); ++k) {
                acc += p[k] * double(keys[k][ch]);
            }
            o[ch] = T(acc / sum);
        }
    }
    rotateTail(out, heads, d, pos, *st.cache.rope, -1.0);
}

// Grouped output projection: group g (heads [g·H/G, (g+1)·H/G)) through its rank-r block of
// wo_a, the groups' outputs concatenated through wo_b.
template <typename T> void projectOutput(const LayerStep<T>& st, const T* attn, T* out)
{
    const auto& ca = *st.spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t groups = st.groups;
    const std::int64_t rank = ca.oLoraRank;
    const std::int64_t width = st.heads * st.spec.headDim;
    const std::int64_t in = st.spec.numHeads * st.spec.headDim / ca.oGroups;
    const T* woA = projectionWeight<T>(
        st.weights, st.native + ".attn.wo_a.weight", st.rounding, st.layerIndex);
    std::vector<T> low(std::size_t(n * groups * rank));
    std::vector<T> part(std::size_t(n * rank));
    std::vector<T> slice(std::size_t(n * in));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(attn + t * width + g * in, in, slice.data() + t * in);
        }
        project(st.rounding, st.layerIndex, slice.data(), woA + g * rank * in, part.data(), n, in,
            rank);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.data() + t * rank, rank, low.data() + (t * groups + g) * rank);
        }
    }
    st.project(".attn.wo_b.weight", low.data(), out, n, groups * rank, st.spec.hiddenSize);
}

// The attention of one layer's step (DeepseekV4Attention): x [n, hidden] → out [n, hidden].
template <typename T> void attentionStep(LayerStep<T>& st, const T* x, T* out)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t ratio = st.layer.compressRatio;
    const std::int64_t width = st.heads * spec.headDim;
    std::vector<T> qLatent;
    const std::vector<T> q = projectQkv(st, x, qLatent);
    const Rope& rope = *st.cache.rope;
    std::vector<std::int64_t> selected;
    if (ratio > 0) {
        deepseekV4Compress<T>(st.cache.compressor, st.native + ".attn.compressor", st.weights, x,
            st.n, st.start, spec.hiddenSize, spec.normEps, rope);
    }
    if (ratio == kCsaRatio) {
        deepseekV4Compress<T>(st.cache.indexer, st.native + ".attn.indexer.compressor", st.weights,
            x, st.n, st.start, spec.hiddenSize, spec.normEps, rope);
        deepseekV4Select<T>(st.cache.indexer, st.native + ".attn.indexer", st.weights, spec, x,
            qLatent.data(), st.n, st.start, rope, selected);
        st.taps.recordIds(
            st.hf + ".self_attn.compressor.indexer#topk", selected, { st.n, ca.indexerTopK });
    }
    std::vector<T> attn(std::size_t(st.n * width));
    std::vector<const T*> keys;
    for (std::int64_t t = 0; t < st.n; ++t) {
        keysOf(st, st.start + t, selected.empty() ? nullptr : selected.data() + t * ca.indexerTopK,
            keys);
        attendQuery(st, q.data() + t * width, st.start + t, keys, attn.data() + t * width);
    }
    st.round(OpKind::Attention, attn.data(), st.n * width);
    projectOutput(st, attn.data(), out);
}

// The MoE of one layer's step (DeepseekV4SparseMoeBlock): the routed experts weighted, plus
// the shared expert, all with the clamped SwiGLU.
template <typename T>
void mixtureOfExperts(LayerStep<T>& st, std::span<const std::int64_t> ids, const T* x, T* out)
{
    const auto& moe = *st.spec.moe;
    const std::int64_t h = st.spec.hiddenSize;
    const std::int64_t k = moe.topK;
    std::vector<std::int64_t> chosen;
    std::vector<double> weights;
    deepseekV4Route(st.weights, st.spec, st.layerIndex, ids, x, st.n, chosen, weights);
    st.taps.recordIds(st.hf + ".mlp.gate#topk", chosen, { st.n, k });
    std::vector<double> acc(std::size_t(st.n * h), 0.0);
    std::vector<T> one(static_cast<std::size_t>(h));
    for (std::int64_t t = 0; t < st.n; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
            deepseekV4ClampedMlp(st.weights,
                fmt::format("{}.ffn.experts.{}", st.native, chosen[std::size_t(t * k + j)]),
                x + t * h, one.data(), 1, h, moe.expertIntermediate, st.spec.swigluLimit,
                st.rounding, st.layerIndex);
            for (std::int64_t ch = 0; ch < h; ++ch) {
                acc[std::size_t(t * h + ch)]
                    += weights[std::size_t(t * k + j)] * double(one[std::size_t(ch)]);
            }
        }
    }
    deepseekV4ClampedMlp(st.weights, st.native + ".ffn.shared_experts", x, out, st.n, h,
        moe.sharedIntermediate, st.spec.swigluLimit, st.rounding, st.layerIndex);
    st.taps.record(st.hf + ".mlp.shared_experts", out, { st.n, h });
    for (std::int64_t i = 0; i < st.n * h; ++i) {
        out[i] = T(acc[std::size_t(i)] + double(out[i]));
    }
    st.round(OpKind::Moe, out, st.n * h);
}

} // namespace

// The router (DeepseekV4TopKRouter / DeepseekV4HashRouter): scores sqrt(softplus(x·Wᵀ));
// the experts of the top-k of score + bias, or those tid2eid lists for the token on hash
// layers; weights the chosen scores renormalised (sum + 1e-20) times routed_scaling_factor.
template <typename T>
void deepseekV4Route(const WeightTable& w, const model::ModelSpec& spec, int layer,
    std::span<const std::int64_t> ids, const T* x, std::int64_t n,
    std::vector<std::int64_t>& chosen, std::vector<double>& weights)
{
    const auto& moe = *spec.moe;
    const model::LayerSpec& ls = spec.layers[std::size_t(layer)];
    const std::string f = fmt::format("layers.{}.ffn.gate", layer);
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = moe.topK;
    std::vector<T> logits(std::size_t(n * e));
    linear<T>(x, tensorOf<T>(w, f + ".weight"), nullptr, logits.data(), n, spec.hiddenSize, e);
    chosen.resize(std::size_t(n * k));
    weights.resize(std::size_t(n * k));
    const T* bias = ls.hashRouted ? nullptr : tensorOf<T>(w, f + ".bias");
    const T* table = ls.hashRouted ? tensorOf<T>(w, f + ".tid2eid") : nullptr;
    std::vector<double> score(static_cast<std::size_t>(e));
    std::vector<std::int64_t> order(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < e; ++j) {
            score[std::size_t(j)] = std::sqrt(softplus(double(logits[std::size_t(t * e + j)])));
        }
        std::int64_t* pick = chosen.data() + t * k;
        if (table != nullptr) {
            for (std::int64_t j = 0; j < k; ++j) {
                pick[j] = std::int64_t(table[ids[std::size_t(t)] * k + j]);
            }
        } else {
            const auto ranked
                = [&](std::int64_t i) { return score[std::size_t(i)] + double(bias[i]); };
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(
                order.begin(), order.begin() + k, order.end(), [&](std::int64_t a, std::int64_t b) {
                    return ranked(a) > ranked(b) || (ranked(a) == ranked(b) && a < b);
                });
            std::copy_n(order.begin(), k, pick);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
            sum += score[std::size_t(pick[j])];
        }
        for (std::int64_t j = 0; j < k; ++j) {
            const double wj = score[std::size_t(pick[j])];
            weights[std::size_t(t * k + j)]
                = (moe.normTopkProb ? wj / (sum + 1e-20) : wj) * moe.routedScalingFactor;
        }
    }
}

template <typename T>
void deepseekV4Attention(const WeightTable& weights, const model::ModelSpec& spec, int layer,
    typename DeepseekV4Cache<T>::Layer& cache, const T* x, std::int64_t n, std::int64_t start,
    Taps<T>& taps, T* out, const DeepseekV4Rounding* rounding)
{
    LayerStep<T> st { weights, spec, spec.layers[std::size_t(layer)], cache,
        fmt::format("layers.{}", layer), fmt::format("model.layers.{}", layer), n, start, taps };
    st.layerIndex = layer;
    st.rounding = rounding;
    const auto& ca = *spec.compressedAttention;
    st.heads = weights.tensors.at(st.native + ".attn.wq_b.weight").shape()[0] / spec.headDim;
    st.groups = weights.tensors.at(st.native + ".attn.wo_a.weight").shape()[0] / ca.oLoraRank;
    attentionStep(st, x, out);
}

template <typename T>
void deepseekV4GroupedOutput(const WeightTable& weights, const model::ModelSpec& spec, int layer,
    const T* attn, std::int64_t n, T* out, const DeepseekV4Rounding* rounding)
{
    typename DeepseekV4Cache<T>::Layer unused;
    NullTaps<T> taps;
    LayerStep<T> st { weights, spec, spec.layers[std::size_t(layer)], unused,
        fmt::format("layers.{}", layer), fmt::format("model.layers.{}", layer), n, 0, taps };
    st.layerIndex = layer;
    st.rounding = rounding;
    const auto& ca = *spec.compressedAttention;
    st.groups = weights.tensors.at(st.native + ".attn.wo_a.weight").shape()[0] / ca.oLoraRank;
    st.heads = st.groups * (spec.numHeads / ca.oGroups);
    projectOutput(st, attn, out);
}

template <typename T>
Result<std::vector<T>> Forward<T>::deepseekV4Step(
    std::span<const std::int64_t> ids, std::int64_t start, Taps<T>& taps, std::stop_token stop)
{
    const auto& spec = m_spec;
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t s = spec.hyperConnections->streams;
    if (start + n > m_capacity) {
        return Error::internal(
            fmt::format("KV cache holds {} tokens, step needs {}", m_capacity, start + n));
    }
    // The float engine emulates the plan (the fp32 plan rounds nothing); fp64 is the reference.
    DeepseekV4Rounding emulation { m_plan, m_rounded };
    const DeepseekV4Rounding* r = std::is_same_v<T, float> ? &emulation : nullptr;
    std::vector<T> x(std::size_t(n * h));
    DAY0_TRY(embedding<T>(ids, weight("embed.weight"), spec.vocabSize, h, x.data()));
    roundTo(r, OpKind::Embedding, -1, x.data(), n * h);
    taps.record("model.embed_tokens", x.data(), { n, h });
    // Every stream starts as the embedding.
    std::vector<T> streams(std::size_t(n * s * h));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            std::copy_n(x.data() + t * h, h, streams.data() + (t * s + j) * h);
        }
    }
    std::vector<T> normed(std::size_t(n * h));
    std::vector<T> out(std::size_t(n * h));
    for (int l = 0; l < int(spec.numLayers); ++l) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        LayerStep<T> st { m_weights, spec, spec.layers[std::size_t(l)],
            m_v4->layers[std::size_t(l)], fmt::format("layers.{}", l),
            fmt::format("model.layers.{}", l), n, start, taps };
        st.layerIndex = l;
        st.heads = spec.numHeads;
        st.groups = spec.compressedAttention->oGroups;
        st.rounding = r;
        // Each block: its hyper-connection collapses the streams into its input, then
        // expands its output back into them (both stored in the activation dtype).
        auto maps = deepseekV4HyperMaps(
            m_weights, st.native + ".hc_attn", streams.data(), n, s, h, spec, false);
        deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
        st.round(OpKind::DecoderLayer, x.data(), n * h);
        st.norm(x.data(), st.w(".attn_norm.weight"), normed.data(), n, h);
        taps.record(st.hf + ".input_layernorm", normed.data(), { n, h });
        attentionStep(st, normed.data(), out.data());
        taps.record(st.hf + ".self_attn", out.data(), { n, h });
        deepseekV4Expand(maps, streams.data(), out.data(), n, s, h);
        st.round(OpKind::DecoderLayer, streams.data(), n * s * h);

        maps = deepseekV4HyperMaps(
            m_weights, st.native + ".hc_ffn", streams.data(), n, s, h, spec, false);
        deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
        st.round(OpKind::DecoderLayer, x.data(), n * h);
        st.norm(x.data(), st.w(".ffn_norm.weight"), normed.data(), n, h);
        taps.record(st.hf + ".post_attention_layernorm", normed.data(), { n, h });
        mixtureOfExperts(st, ids, normed.data(), out.data());
        taps.record(st.hf + ".mlp", out.data(), { n, h }, "moe");
        deepseekV4Expand(maps, streams.data(), out.data(), n, s, h);
        st.round(OpKind::DecoderLayer, streams.data(), n * s * h);
        taps.record(st.hf, streams.data(), { n, s, h });
    }
    // The head: hc_head collapses the streams (pre only), then norm and head.
    const auto maps = deepseekV4HyperMaps(
        m_weights, std::string("hc_head"), streams.data(), n, s, h, spec, true);
    deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
    roundTo(r, OpKind::DecoderLayer, -1, x.data(), n * h);
    normOf(r, -1, x.data(), weight("norm.weight"), normed.data(), n, h, spec.normEps);
    taps.record("model.norm", normed.data(), { n, h });
    std::vector<T> logits(std::size_t(n * spec.vocabSize));
    // lm_head in the Logits mode (bf16 under a quantised plan), as the other families' head.
    const PrecisionMode headMode = modeOf<T>(r, OpKind::Logits, -1);
    if constexpr (std::is_same_v<T, float>) {
        if (isEmulated(headMode)) {
            auto& slot = m_rounded[{ "head.weight", int(headMode) }];
            if (slot.empty()) {
                const T* raw = weight("head.weight");
                slot.assign(raw, raw + spec.vocabSize * h);
                roundGemmInput(slot, spec.vocabSize, h, headMode, m_plan.fp8Scaling, true);
            }
            emulatedLinear(normed.data(), slot.data(), nullptr, logits.data(), n, h, spec.vocabSize,
                headMode, m_plan.fp8Scaling);
        }
    }
    if (!isEmulated(headMode)) {
        exec::linear<T>(
            normed.data(), weight("head.weight"), nullptr, logits.data(), n, h, spec.vocabSize);
    }
    taps.record("lm_head", logits.data(), { n, spec.vocabSize });
    return logits;
}

template Result<std::vector<float>> Forward<float>::deepseekV4Step(
    std::span<const std::int64_t>, std::int64_t, Taps<float>&, std::stop_token);
template Result<std::vector<double>> Forward<double>::deepseekV4Step(
    std::span<const std::int64_t>, std::int64_t, Taps<double>&, std::stop_token);

#define DAY0_DEEPSEEK_V4_EXPORTS(T)                                                                \
    template void deepseekV4Attention<T>(const WeightTable&, const model::ModelSpec&, int,         \
        DeepseekV4Cache<T>::Layer&, const T*, std::int64_t, std::int64_t, Taps<T>&, T*,            \
        const DeepseekV4Rounding*);                                                                \
    template void deepseekV4Route<T>(const WeightTable&, const model::ModelSpec&, int,             \
        std::span<const std::int64_t>, const T*, std::int64_t, std::vector<std::int64_t>&,         \
        std::vector<double>&);                                                                     \
    template void deepseekV4ClampedMlp<T>(const WeightTable&, const std::string&, const T*, T*,    \
        std::int64_t, std::int64_t, std::int64_t, double, const DeepseekV4Rounding*, int);         \
    template void deepseekV4GroupedOutput<T>(const WeightTable&, const model::ModelSpec&, int,     \
        const T*, std::int64_t, T*, const DeepseekV4Rounding*);
DAY0_DEEPSEEK_V4_EXPORTS(float)
DAY0_DEEPSEEK_V4_EXPORTS(double)
#undef DAY0_DEEPSEEK_V4_EXPORTS

} // namespace day0::exec::detail
