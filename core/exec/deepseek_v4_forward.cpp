// DeepSeek-V4's step on the reference engine: hyper-connections around each block, the
// compressed attention, the MoE; written from transformers' modeling_deepseek_v4.py
// @ 019760818965c71b0a4d38e95820ee0b6cee4240 (see deepseek_v4_block.cpp for the sources and
// what is refused). Captures are recorded under the Hugging Face module names of the twin
// (plugins/torch/day0_torch_deepseek_v4.py): model.layers.{i}.self_attn, .mlp, ...
#include "exec/deepseek_v4.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace day0::exec::detail {

namespace {

constexpr std::int64_t kCsaRatio = 4;

template <typename T> const T* tensorOf(const WeightTable& w, const std::string& name)
{
    return w.tensors.at(name).template data<T>();
}

} // namespace

// From the streams [n, S, h] flattened and RMS-normalised (no weight, rms_norm_eps): mixes =
// fn · x; pre = σ(mix·scale₀ + base) + hc_eps; post = 2σ(mix·scale₁ + base); comb = softmax
// over its last axis of mix·scale₂ + base, + hc_eps, then Sinkhorn-normalised: columns once,
// then hc_sinkhorn_iters - 1 times rows and columns (each divided by its sum + hc_eps).
// `head`: the final collapse (hc_head: pre only, one scale).
template <typename T>
HyperMaps deepseekV4HyperMaps(const WeightTable& w, const std::string& p, const T* streams,
    std::int64_t n, std::int64_t s, std::int64_t h, const model::ModelSpec& spec, bool head)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* fn = tensorOf<T>(w, p + "_fn");
    const T* base = tensorOf<T>(w, p + "_base");
    const T* scale = tensorOf<T>(w, p + "_scale");
    std::vector<T> normed(std::size_t(n * s * h));
    rmsNorm<T>(streams, nullptr, normed.data(), n, s * h, spec.normEps);
    std::vector<T> mixes(std::size_t(n * mix));
    linear<T>(normed.data(), fn, nullptr, mixes.data(), n, s * h, mix);
    HyperMaps m;
    m.pre.resize(std::size_t(n * s));
    if (!head) {
        m.post.resize(std::size_t(n * s));
        m.comb.resize(std::size_t(n * s * s));
    }
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = mixes.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            m.pre[std::size_t(t * s + j)]
                = sigmoid(double(row[j]) * double(scale[0]) + double(base[j])) + hc.eps;
        }
        if (head) {
            continue;
        }
        for (std::int64_t j = 0; j < s; ++j) {
            m.post[std::size_t(t * s + j)]
                = 2.0 * sigmoid(double(row[s + j]) * double(scale[1]) + double(base[s + j]));
        }
        double* c = m.comb.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double top = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                c[j * s + k] = double(row[i]) * double(scale[2]) + double(base[i]);
                top = std::max(top, c[j * s + k]);
            }
            double sum = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                c[j * s + k] = std::exp(c[j * s + k] - top);
                sum += c[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                c[j * s + k] = c[j * s + k] / sum + hc.eps;
            }
        }
        // Sinkhorn: each column (then each row and column again) divided by its sum + eps.
        const auto normalise = [&](bool rows) {
            const auto at = [&](std::int64_t a, std::int64_t b) -> double& {
                return rows ? c[a * s + b] : c[b * s + a];
            };
            for (std::int64_t a = 0; a < s; ++a) {
                double sum = 0.0;
                for (std::int64_t b = 0; b < s; ++b) {
                    sum += at(a, b);
                }
                for (std::int64_t b = 0; b < s; ++b) {
                    at(a, b) /= sum + hc.eps;
                }
            }
        };
        normalise(false);
        for (std::int64_t it = 0; it + 1 < hc.sinkhornIters; ++it) {
            normalise(true);
            normalise(false);
        }
    }
    return m;
}

// collapsed[t] = Σ_j pre[t, j] · streams[t, j].
template <typename T>
void deepseekV4Collapse(
    const HyperMaps& m, const T* streams, std::int64_t n, std::int64_t s, std::int64_t h, T* out)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            double acc = 0.0;
            for (std::int64_t j = 0; j < s; ++j) {
                acc += m.pre[std::size_t(t * s + j)] * double(streams[(t * s + j) * h + c]);
            }
            out[t * h + c] = T(acc);
        }
    }
}

// streams[t, k] ← post[t, k] · out[t] + Σ_j comb[t, j, k] · streams[t, j] (HF: comb consumed
// transposed).
template <typename T>
void deepseekV4Expand(
    const HyperMaps& m, T* streams, const T* out, std::int64_t n, std::int64_t s, std::int64_t h)
{
    std::vector<double> next(std::size_t(s * h));
    for (std::int64_t t = 0; t < n; ++t) {
        T* st = streams + t * s * h;
        const double* c = m.comb.data() + t * s * s;
        for (std::int64_t k = 0; k < s; ++k) {
            for (std::int64_t ch = 0; ch < h; ++ch) {
                double acc = m.post[std::size_t(t * s + k)] * double(out[t * h + ch]);
                for (std::int64_t j = 0; j < s; ++j) {
                    acc += c[j * s + k] * double(st[j * h + ch]);
                }
                next[std::size_t(k * h + ch)] = acc;
            }
        }
        for (std::int64_t i = 0; i < s * h; ++i) {
            st[i] = T(next[std::size_t(i)]);
        }
    }
}

// SwiGLU with DeepSeek-V4's clamp (DeepseekV4MLP / DeepseekV4Experts._apply_gate): the gate
// clamped from above and up both ways at swiglu_limit (0: none), silu(gate) · up, then w2.
template <typename T>
void deepseekV4ClampedMlp(const WeightTable& w, const std::string& m, const T* x, T* out,
    std::int64_t n, std::int64_t h, std::int64_t width, double limit)
{
    std::vector<T> g(std::size_t(n * width));
    std::vector<T> u(std::size_t(n * width));
    linear<T>(x, tensorOf<T>(w, m + ".w1.weight"), nullptr, g.data(), n, h, width);
    linear<T>(x, tensorOf<T>(w, m + ".w3.weight"), nullptr, u.data(), n, h, width);
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (limit > 0) {
            g[i] = std::min(g[i], T(limit));
            u[i] = std::clamp(u[i], T(-limit), T(limit));
        }
        g[i] = g[i] / (T(1) + std::exp(-g[i])) * u[i];
    }
    linear<T>(g.data(), tensorOf<T>(w, m + ".w2.weight"), nullptr, out, n, width, h);
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

    const T* w(const std::string& name) const { return tensorOf<T>(weights, native + name); }
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
    const double eps = spec.normEps;
    qLatent.resize(std::size_t(n * ca.qLoraRank));
    linear<T>(x, st.w(".attn.wq_a.weight"), nullptr, qLatent.data(), n, h, ca.qLoraRank);
    rmsNorm<T>(qLatent.data(), st.w(".attn.q_norm.weight"), qLatent.data(), n, ca.qLoraRank, eps);
    std::vector<T> q(std::size_t(n * heads * d));
    linear<T>(
        qLatent.data(), st.w(".attn.wq_b.weight"), nullptr, q.data(), n, ca.qLoraRank, heads * d);
    rmsNorm<T>(q.data(), nullptr, q.data(), n * heads, d, eps);
    T* kv = st.cache.kv.data() + st.start * d;
    linear<T>(x, st.w(".attn.wkv.weight"), nullptr, kv, n, h, d);
    rmsNorm<T>(kv, st.w(".attn.kv_norm.weight"), kv, n, d, eps);
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(q.data() + t * heads * d, heads, d, st.start + t, *st.cache.rope);
        rotateTail(kv + t * d, 1, d, st.start + t, *st.cache.rope);
    }
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
    const T* woA = st.w(".attn.wo_a.weight");
    std::vector<T> low(std::size_t(n * groups * rank));
    std::vector<T> part(std::size_t(n * rank));
    std::vector<T> slice(std::size_t(n * in));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(attn + t * width + g * in, in, slice.data() + t * in);
        }
        linear<T>(slice.data(), woA + g * rank * in, nullptr, part.data(), n, in, rank);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.data() + t * rank, rank, low.data() + (t * groups + g) * rank);
        }
    }
    linear<T>(
        low.data(), st.w(".attn.wo_b.weight"), nullptr, out, n, groups * rank, st.spec.hiddenSize);
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
                x + t * h, one.data(), 1, h, moe.expertIntermediate, st.spec.swigluLimit);
            for (std::int64_t ch = 0; ch < h; ++ch) {
                acc[std::size_t(t * h + ch)]
                    += weights[std::size_t(t * k + j)] * double(one[std::size_t(ch)]);
            }
        }
    }
    deepseekV4ClampedMlp(st.weights, st.native + ".ffn.shared_experts", x, out, st.n, h,
        moe.sharedIntermediate, st.spec.swigluLimit);
    st.taps.record(st.hf + ".mlp.shared_experts", out, { st.n, h });
    for (std::int64_t i = 0; i < st.n * h; ++i) {
        out[i] = T(acc[std::size_t(i)] + double(out[i]));
    }
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
    Taps<T>& taps, T* out)
{
    LayerStep<T> st { weights, spec, spec.layers[std::size_t(layer)], cache,
        fmt::format("layers.{}", layer), fmt::format("model.layers.{}", layer), n, start, taps };
    st.layerIndex = layer;
    const auto& ca = *spec.compressedAttention;
    st.heads = weights.tensors.at(st.native + ".attn.wq_b.weight").shape()[0] / spec.headDim;
    st.groups = weights.tensors.at(st.native + ".attn.wo_a.weight").shape()[0] / ca.oLoraRank;
    attentionStep(st, x, out);
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
    std::vector<T> x(std::size_t(n * h));
    DAY0_TRY(embedding<T>(ids, weight("embed.weight"), spec.vocabSize, h, x.data()));
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
        // Each block: its hyper-connection collapses the streams into its input, then
        // expands its output back into them.
        auto maps = deepseekV4HyperMaps(
            m_weights, st.native + ".hc_attn", streams.data(), n, s, h, spec, false);
        deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
        rmsNorm<T>(x.data(), st.w(".attn_norm.weight"), normed.data(), n, h, spec.normEps);
        taps.record(st.hf + ".input_layernorm", normed.data(), { n, h });
        attentionStep(st, normed.data(), out.data());
        taps.record(st.hf + ".self_attn", out.data(), { n, h });
        deepseekV4Expand(maps, streams.data(), out.data(), n, s, h);

        maps = deepseekV4HyperMaps(
            m_weights, st.native + ".hc_ffn", streams.data(), n, s, h, spec, false);
        deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
        rmsNorm<T>(x.data(), st.w(".ffn_norm.weight"), normed.data(), n, h, spec.normEps);
        taps.record(st.hf + ".post_attention_layernorm", normed.data(), { n, h });
        mixtureOfExperts(st, ids, normed.data(), out.data());
        taps.record(st.hf + ".mlp", out.data(), { n, h }, "moe");
        deepseekV4Expand(maps, streams.data(), out.data(), n, s, h);
        taps.record(st.hf, streams.data(), { n, s, h });
    }
    // The head: hc_head collapses the streams (pre only), then norm and head.
    const auto maps = deepseekV4HyperMaps(
        m_weights, std::string("hc_head"), streams.data(), n, s, h, spec, true);
    deepseekV4Collapse(maps, streams.data(), n, s, h, x.data());
    rmsNorm<T>(x.data(), weight("norm.weight"), normed.data(), n, h, spec.normEps);
    taps.record("model.norm", normed.data(), { n, h });
    std::vector<T> logits(std::size_t(n * spec.vocabSize));
    exec::linear<T>(
        normed.data(), weight("head.weight"), nullptr, logits.data(), n, h, spec.vocabSize);
    taps.record("lm_head", logits.data(), { n, spec.vocabSize });
    return logits;
}

template Result<std::vector<float>> Forward<float>::deepseekV4Step(
    std::span<const std::int64_t>, std::int64_t, Taps<float>&, std::stop_token);
template Result<std::vector<double>> Forward<double>::deepseekV4Step(
    std::span<const std::int64_t>, std::int64_t, Taps<double>&, std::stop_token);

#define DAY0_DEEPSEEK_V4_EXPORTS(T)                                                                \
    template HyperMaps deepseekV4HyperMaps<T>(const WeightTable&, const std::string&, const T*,    \
        std::int64_t, std::int64_t, std::int64_t, const model::ModelSpec&, bool);                  \
    template void deepseekV4Collapse<T>(                                                           \
        const HyperMaps&, const T*, std::int64_t, std::int64_t, std::int64_t, T*);                 \
    template void deepseekV4Expand<T>(                                                             \
        const HyperMaps&, T*, const T*, std::int64_t, std::int64_t, std::int64_t);                 \
    template void deepseekV4Attention<T>(const WeightTable&, const model::ModelSpec&, int,         \
        DeepseekV4Cache<T>::Layer&, const T*, std::int64_t, std::int64_t, Taps<T>&, T*);           \
    template void deepseekV4Route<T>(const WeightTable&, const model::ModelSpec&, int,             \
        std::span<const std::int64_t>, const T*, std::int64_t, std::vector<std::int64_t>&,         \
        std::vector<double>&);                                                                     \
    template void deepseekV4ClampedMlp<T>(const WeightTable&, const std::string&, const T*, T*,    \
        std::int64_t, std::int64_t, std::int64_t, double);
DAY0_DEEPSEEK_V4_EXPORTS(float)
DAY0_DEEPSEEK_V4_EXPORTS(double)
#undef DAY0_DEEPSEEK_V4_EXPORTS

} // namespace day0::exec::detail
