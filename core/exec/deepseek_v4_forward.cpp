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

/// The maps of one hyper-connection (DeepseekV4HyperConnection) for each row.
struct HyperMaps {
    std::vector<double> pre; ///< [n, S]
    std::vector<double> post; ///< [n, S]
    std::vector<double> comb; ///< [n, S, S], comb[j][k]: stream j's share in new stream k
};

// From the streams [n, S, h] flattened and RMS-normalised (no weight, rms_norm_eps): mixes =
// fn · x; pre = σ(mix·scale₀ + base) + hc_eps; post = 2σ(mix·scale₁ + base); comb = softmax
// over its last axis of mix·scale₂ + base, + hc_eps, then Sinkhorn-normalised: columns once,
// then hc_sinkhorn_iters - 1 times rows and columns (each divided by its sum + hc_eps).
// `rows` = 1 (the head: pre only, one scale).
template <typename T>
HyperMaps hyperMaps(const WeightTable& w, const std::string& p, const T* streams, std::int64_t n,
    std::int64_t s, std::int64_t h, const model::ModelSpec& spec, bool head)
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
    const auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = mixes.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            m.pre[std::size_t(t * s + j)]
                = sig(double(row[j]) * double(scale[0]) + double(base[j])) + hc.eps;
        }
        if (head) {
            continue;
        }
        for (std::int64_t j = 0; j < s; ++j) {
            m.post[std::size_t(t * s + j)]
                = 2.0 * sig(double(row[s + j]) * double(scale[1]) + double(base[s + j]));
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
        const auto columns = [&] {
            for (std::int64_t k = 0; k < s; ++k) {
                double sum = 0.0;
                for (std::int64_t j = 0; j < s; ++j) {
                    sum += c[j * s + k];
                }
                for (std::int64_t j = 0; j < s; ++j) {
                    c[j * s + k] /= sum + hc.eps;
                }
            }
        };
        columns();
        for (std::int64_t it = 0; it + 1 < hc.sinkhornIters; ++it) {
            for (std::int64_t j = 0; j < s; ++j) {
                double sum = 0.0;
                for (std::int64_t k = 0; k < s; ++k) {
                    sum += c[j * s + k];
                }
                for (std::int64_t k = 0; k < s; ++k) {
                    c[j * s + k] /= sum + hc.eps;
                }
            }
            columns();
        }
    }
    return m;
}

// collapsed[t] = Σ_j pre[t, j] · streams[t, j].
template <typename T>
void collapse(
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
void expand(
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
void clampedMlp(const WeightTable& w, const std::string& m, const T* x, T* out, std::int64_t n,
    std::int64_t h, std::int64_t width, double limit)
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

} // namespace

template <typename T>
Result<std::vector<T>> Forward<T>::deepseekV4Step(
    std::span<const std::int64_t> ids, std::int64_t start, Taps<T>& taps, std::stop_token stop)
{
    const auto& spec = m_spec;
    const auto& ca = *spec.compressedAttention;
    const auto& moe = *spec.moe;
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t s = spec.hyperConnections->streams;
    const std::int64_t heads = spec.numHeads;
    const std::int64_t d = spec.headDim;
    const double eps = spec.normEps;
    if (start + n > m_capacity) {
        return Error::internal(
            fmt::format("KV cache holds {} tokens, step needs {}", m_capacity, start + n));
    }
    auto& cache = *m_v4;
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
        const std::string p = fmt::format("layers.{}", l);
        const std::string hf = fmt::format("model.layers.{}", l);
        auto& c = cache.layers[std::size_t(l)];
        const model::LayerSpec& layer = spec.layers[std::size_t(l)];
        const Rope& rope = *c.rope;

        // --- attention ---
        auto maps = hyperMaps(m_weights, p + ".hc_attn", streams.data(), n, s, h, spec, false);
        collapse(maps, streams.data(), n, s, h, x.data());
        rmsNorm<T>(x.data(), weight(p + ".attn_norm.weight"), normed.data(), n, h, eps);
        taps.record(hf + ".input_layernorm", normed.data(), { n, h });
        const std::string a = p + ".attn";
        // q: wq_b(q_norm(wq_a(x))), RMS-normalised per head without weight, rotated.
        std::vector<T> qLatent(std::size_t(n * ca.qLoraRank));
        exec::linear<T>(
            normed.data(), weight(a + ".wq_a.weight"), nullptr, qLatent.data(), n, h, ca.qLoraRank);
        rmsNorm<T>(
            qLatent.data(), weight(a + ".q_norm.weight"), qLatent.data(), n, ca.qLoraRank, eps);
        std::vector<T> q(std::size_t(n * heads * d));
        exec::linear<T>(qLatent.data(), weight(a + ".wq_b.weight"), nullptr, q.data(), n,
            ca.qLoraRank, heads * d);
        rmsNorm<T>(q.data(), nullptr, q.data(), n * heads, d, eps);
        // The one K=V head: kv_norm(wkv(x)), rotated, cached at its position.
        T* kv = c.kv.data() + start * d;
        exec::linear<T>(normed.data(), weight(a + ".wkv.weight"), nullptr, kv, n, h, d);
        rmsNorm<T>(kv, weight(a + ".kv_norm.weight"), kv, n, d, eps);
        for (std::int64_t t = 0; t < n; ++t) {
            rotateTail(q.data() + t * heads * d, heads, d, start + t, rope);
            rotateTail(kv + t * d, 1, d, start + t, rope);
        }
        std::vector<std::int64_t> selected;
        if (layer.compressRatio > 0) {
            deepseekV4Compress<T>(
                c.compressor, a + ".compressor", m_weights, normed.data(), n, start, h, eps, rope);
        }
        if (layer.compressRatio == kCsaRatio) {
            deepseekV4Compress<T>(c.indexer, a + ".indexer.compressor", m_weights, normed.data(), n,
                start, h, eps, rope);
            deepseekV4Select<T>(c.indexer, a + ".indexer", m_weights, spec, normed.data(),
                qLatent.data(), n, start, rope, selected);
            taps.recordIds(
                hf + ".self_attn.compressor.indexer#topk", selected, { n, ca.indexerTopK });
        }
        // Scores over the window (i - j < sliding_window), then the compressed entries each
        // query may see (w < (p + 1) / ratio; ratio 4: those the indexer chose), with the
        // head's sink in the softmax's denominator.
        std::vector<T> attn(std::size_t(n * heads * d));
        const double scale = 1.0 / std::sqrt(double(d));
        const T* sinks = weight(a + ".attn_sink");
        std::vector<const T*> keys;
        std::vector<double> logits;
        for (std::int64_t t = 0; t < n; ++t) {
            const std::int64_t pos = start + t;
            keys.clear();
            for (std::int64_t j = std::max<std::int64_t>(0, pos - layer.slidingWindow + 1);
                 j <= pos; ++j) {
                keys.push_back(c.kv.data() + j * d);
            }
            if (layer.compressRatio == kCsaRatio) {
                for (std::int64_t k = 0; k < ca.indexerTopK; ++k) {
                    const std::int64_t e = selected[std::size_t(t * ca.indexerTopK + k)];
                    if (e >= 0) {
                        keys.push_back(c.compressor.entries.data() + e * d);
                    }
                }
            } else if (layer.compressRatio > 0) {
                const std::int64_t visible
                    = std::min((pos + 1) / layer.compressRatio, c.compressor.count);
                for (std::int64_t e = 0; e < visible; ++e) {
                    keys.push_back(c.compressor.entries.data() + e * d);
                }
            }
            logits.resize(keys.size());
            for (std::int64_t hd = 0; hd < heads; ++hd) {
                const T* qh = q.data() + (t * heads + hd) * d;
                double top = double(sinks[hd]);
                for (std::size_t k = 0; k < keys.size(); ++k) {
                    double dot = 0.0;
                    for (std::int64_t ch = 0; ch < d; ++ch) {
                        dot += double(qh[ch]) * double(keys[k][ch]);
                    }
                    logits[k] = dot * scale;
                    top = std::max(top, logits[k]);
                }
                double sum = std::exp(double(sinks[hd]) - top);
                for (double& v : logits) {
                    v = std::exp(v - top);
                    sum += v;
                }
                T* o = attn.data() + (t * heads + hd) * d;
                for (std::int64_t ch = 0; ch < d; ++ch) {
                    double acc = 0.0;
                    for (std::size_t k = 0; k < keys.size(); ++k) {
                        acc += logits[k] * double(keys[k][ch]);
                    }
                    o[ch] = T(acc / sum);
                }
            }
            // K = V carried the keys' rotation into the output: undone at the query's position.
            rotateTail(attn.data() + t * heads * d, heads, d, pos, rope, -1.0);
        }
        // Grouped output projection: group g (heads [g·H/G, (g+1)·H/G)) through its rank-r
        // block of wo_a, the groups' outputs concatenated through wo_b.
        const std::int64_t groups = ca.oGroups;
        const std::int64_t in = heads * d / groups;
        const T* woA = weight(a + ".wo_a.weight");
        std::vector<T> low(std::size_t(n * groups * ca.oLoraRank));
        std::vector<T> part(std::size_t(n * ca.oLoraRank));
        std::vector<T> slice(std::size_t(n * in));
        for (std::int64_t g = 0; g < groups; ++g) {
            for (std::int64_t t = 0; t < n; ++t) {
                std::copy_n(attn.data() + t * heads * d + g * in, in, slice.data() + t * in);
            }
            exec::linear<T>(slice.data(), woA + g * ca.oLoraRank * in, nullptr, part.data(), n, in,
                ca.oLoraRank);
            for (std::int64_t t = 0; t < n; ++t) {
                std::copy_n(part.data() + t * ca.oLoraRank, ca.oLoraRank,
                    low.data() + (t * groups + g) * ca.oLoraRank);
            }
        }
        exec::linear<T>(low.data(), weight(a + ".wo_b.weight"), nullptr, out.data(), n,
            groups * ca.oLoraRank, h);
        taps.record(hf + ".self_attn", out.data(), { n, h });
        expand(maps, streams.data(), out.data(), n, s, h);

        // --- MoE ---
        maps = hyperMaps(m_weights, p + ".hc_ffn", streams.data(), n, s, h, spec, false);
        collapse(maps, streams.data(), n, s, h, x.data());
        rmsNorm<T>(x.data(), weight(p + ".ffn_norm.weight"), normed.data(), n, h, eps);
        taps.record(hf + ".post_attention_layernorm", normed.data(), { n, h });
        const std::string f = p + ".ffn";
        const std::int64_t e = moe.numExperts;
        const std::int64_t k = moe.topK;
        std::vector<T> logitsE(std::size_t(n * e));
        exec::linear<T>(
            normed.data(), weight(f + ".gate.weight"), nullptr, logitsE.data(), n, h, e);
        std::vector<std::int64_t> chosen(std::size_t(n * k));
        std::vector<double> gateW(std::size_t(n * k));
        const T* bias = layer.hashRouted ? nullptr : weight(f + ".gate.bias");
        const T* table = layer.hashRouted ? weight(f + ".gate.tid2eid") : nullptr;
        std::vector<double> score(static_cast<std::size_t>(e));
        std::vector<std::int64_t> order(static_cast<std::size_t>(e));
        for (std::int64_t t = 0; t < n; ++t) {
            // sqrtsoftplus: sqrt(softplus(logit)), softplus as torch's (x above 20 kept).
            for (std::int64_t j = 0; j < e; ++j) {
                const double v = double(logitsE[std::size_t(t * e + j)]);
                score[std::size_t(j)] = std::sqrt(v > 20.0 ? v : std::log1p(std::exp(v)));
            }
            std::int64_t* pick = chosen.data() + t * k;
            if (table != nullptr) {
                // Hash routing: the experts tid2eid lists for the token id.
                for (std::int64_t j = 0; j < k; ++j) {
                    pick[j] = std::int64_t(table[ids[std::size_t(t)] * k + j]);
                }
            } else {
                std::iota(order.begin(), order.end(), 0);
                const auto ranked = [&](std::int64_t i) {
                    return score[std::size_t(i)] + (bias != nullptr ? double(bias[i]) : 0.0);
                };
                std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](std::int64_t x1, std::int64_t x2) {
                        return ranked(x1) > ranked(x2) || (ranked(x1) == ranked(x2) && x1 < x2);
                    });
                std::copy_n(order.begin(), k, pick);
            }
            double sum = 0.0;
            for (std::int64_t j = 0; j < k; ++j) {
                sum += score[std::size_t(pick[j])];
            }
            for (std::int64_t j = 0; j < k; ++j) {
                const double wj = score[std::size_t(pick[j])];
                gateW[std::size_t(t * k + j)]
                    = (moe.normTopkProb ? wj / (sum + 1e-20) : wj) * moe.routedScalingFactor;
            }
        }
        taps.recordIds(hf + ".mlp.gate#topk", chosen, { n, k });
        std::vector<double> acc(std::size_t(n * h), 0.0);
        std::vector<T> one(static_cast<std::size_t>(h));
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t j = 0; j < k; ++j) {
                clampedMlp(m_weights,
                    fmt::format("{}.experts.{}", f, chosen[std::size_t(t * k + j)]),
                    normed.data() + t * h, one.data(), 1, h, moe.expertIntermediate,
                    spec.swigluLimit);
                for (std::int64_t ch = 0; ch < h; ++ch) {
                    acc[std::size_t(t * h + ch)]
                        += gateW[std::size_t(t * k + j)] * double(one[std::size_t(ch)]);
                }
            }
        }
        clampedMlp(m_weights, f + ".shared_experts", normed.data(), out.data(), n, h,
            moe.sharedIntermediate, spec.swigluLimit);
        taps.record(hf + ".mlp.shared_experts", out.data(), { n, h });
        for (std::int64_t i = 0; i < n * h; ++i) {
            out[std::size_t(i)] = T(acc[std::size_t(i)] + double(out[std::size_t(i)]));
        }
        taps.record(hf + ".mlp", out.data(), { n, h }, "moe");
        expand(maps, streams.data(), out.data(), n, s, h);
        taps.record(hf, streams.data(), { n, s, h });
    }
    // The head: hc_head collapses the streams (pre only), then norm and head.
    const auto maps
        = hyperMaps(m_weights, std::string("hc_head"), streams.data(), n, s, h, spec, true);
    collapse(maps, streams.data(), n, s, h, x.data());
    rmsNorm<T>(x.data(), weight("norm.weight"), normed.data(), n, h, eps);
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

} // namespace day0::exec::detail
