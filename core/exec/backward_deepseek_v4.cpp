// DeepSeek-V4's gradient pass (gradient_pass.h, issue #25): the forward of deepseek_v4_forward.cpp
// and deepseek_v4_block.cpp over the prompt's tokens, keeping what the backward reads, then the
// reverse of each op. The residual is hc_mult streams: each block's two hyper-connections (the
// maps from the RMS-normalised streams: pre and post through their sigmoids, comb through its
// softmax and the Sinkhorn steps, each step's input kept) collapse the streams into its input and
// expand its output back; hc_head collapses them before the final norm. Attention: the q latent,
// its norm, wq_b, the per-head weightless RMS and RoPE; the one K=V head (kv_norm, RoPE); the keys
// of a query its window of K=V plus the compressed entries it may see (ratio 4: those its
// Lightning indexer chose), a sink per head; the output's rope lanes rotated back, the grouped
// wo_a, wo_b. The compressor's entries get their gradient through their RoPE, norm and the
// softmax pooling of wkv(x) by wgate(x) + ape. The indexer's choice is discrete: no gradient
// reaches its weights (zero, present), as in the twin's autograd (its top-k indices carry none).
// MoE: the sqrtsoftplus router's scores of the chosen experts (by score + bias, or tid2eid on the
// hash-routed layers: there the choice is a table lookup, but the chosen scores still weight the
// experts, so the router's weight gets a gradient there too, as in the twin) renormalised times
// routed_scaling_factor; the clamped SwiGLU experts and shared expert. The selection bias and
// tid2eid get none (untrainableParameter). The forward's own helpers (deepseek_v4.h) compute the
// compressors' entries, the indexer's choice and the routing, so the choices are the engine's.
// Parameters keep the native checkpoint names the engine reads (layers.3.attn.wq_a.weight);
// checkpointGradients renames them to the twin's HF names (deepseekV4HfName).
#include "exec/backward_deepseek_v4.h"

#include "exec/backward_ops.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace day0::exec::detail {

namespace {

constexpr std::int64_t kCsaRatio = 4;

// --- attention ---------------------------------------------------------------------------

/// The keys of query t (deepseek_v4_forward.cpp keysOf): its window of K=V, then the entries
/// it may see (ratio 4: those chosen), as rows of DeepseekV4Saved::keys.
template <typename T>
void collectKeys(
    const DeepseekV4Step<T>& st, DeepseekV4Saved<T>& a, const std::vector<std::int64_t>& selected)
{
    const auto& layer = st.spec.layers[std::size_t(st.layer)];
    const std::int64_t k = st.spec.compressedAttention->indexerTopK;
    a.keyStart.assign(1, 0);
    a.keyIdx.clear();
    for (std::int64_t t = 0; t < st.n; ++t) {
        for (std::int64_t j = std::max<std::int64_t>(0, t - layer.slidingWindow + 1); j <= t; ++j) {
            a.keyIdx.push_back(j);
        }
        if (layer.compressRatio == kCsaRatio) {
            for (std::int64_t i = 0; i < k; ++i) {
                if (selected[std::size_t(t * k + i)] >= 0) {
                    a.keyIdx.push_back(st.n + selected[std::size_t(t * k + i)]);
                }
            }
        } else if (layer.compressRatio > 0) {
            const std::int64_t visible = std::min((t + 1) / layer.compressRatio, a.entries);
            for (std::int64_t e = 0; e < visible; ++e) {
                a.keyIdx.push_back(st.n + e);
            }
        }
        a.keyStart.push_back(std::int64_t(a.keyIdx.size()));
    }
}

/// Softmax attention of each query over its keys with the head's sink (attendQuery), the
/// probabilities kept; the output's rope lanes rotated back into a.attn.
template <typename T> void attend(const DeepseekV4Step<T>& st, DeepseekV4Saved<T>& a)
{
    const std::int64_t heads = st.spec.numHeads;
    const std::int64_t d = st.spec.headDim;
    const double scale = 1.0 / std::sqrt(double(d));
    const T* sinks = st.w(".attn.attn_sink");
    a.probs.assign(std::size_t(heads * a.keyStart.back()), 0.0);
    a.sinkProbs.assign(std::size_t(st.n * heads), 0.0);
    a.attn.assign(std::size_t(st.n * heads * d), T(0));
    for (std::int64_t t = 0; t < st.n; ++t) {
        const std::int64_t first = a.keyStart[std::size_t(t)];
        const std::int64_t count = a.keyStart[std::size_t(t + 1)] - first;
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            const T* qh = a.q.data() + (t * heads + hd) * d;
            double* p = a.probs.data() + first * heads + hd * count;
            double top = double(sinks[hd]);
            for (std::int64_t k = 0; k < count; ++k) {
                const T* key = a.keys.data() + a.keyIdx[std::size_t(first + k)] * d;
                double dot = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    dot += double(qh[c]) * double(key[c]);
                }
                p[k] = dot * scale;
                top = std::max(top, p[k]);
            }
            double sum = std::exp(double(sinks[hd]) - top);
            const double sink = sum;
            for (std::int64_t k = 0; k < count; ++k) {
                p[k] = std::exp(p[k] - top);
                sum += p[k];
            }
            a.sinkProbs[std::size_t(t * heads + hd)] = sink / sum;
            T* o = a.attn.data() + (t * heads + hd) * d;
            for (std::int64_t c = 0; c < d; ++c) {
                double acc = 0.0;
                for (std::int64_t k = 0; k < count; ++k) {
                    acc += p[k]
                        * double(a.keys[std::size_t(a.keyIdx[std::size_t(first + k)] * d + c)]);
                }
                o[c] = T(acc / sum);
            }
            for (std::int64_t k = 0; k < count; ++k) {
                p[k] /= sum;
            }
        }
        rotateTail(a.attn.data() + t * heads * d, heads, d, t, st.rope(), -1.0);
    }
}

/// The attention's forward on a.xn1 into a.attnOut (deepseek_v4_forward.cpp attentionStep).
template <typename T>
void v4AttentionForward(const DeepseekV4Step<T>& st, DeepseekV4Saved<T>& a,
    std::vector<std::pair<std::string, numerics::Tensor>>& routing)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t heads = spec.numHeads;
    const std::int64_t d = spec.headDim;
    const std::int64_t ratio = spec.layers[std::size_t(st.layer)].compressRatio;
    const Rope& rope = st.rope();
    a.qa.resize(std::size_t(n * ca.qLoraRank));
    linear<T>(a.xn1.data(), st.w(".attn.wq_a.weight"), nullptr, a.qa.data(), n, h, ca.qLoraRank);
    a.qan.resize(a.qa.size());
    rmsNorm<T>(
        a.qa.data(), st.w(".attn.q_norm.weight"), a.qan.data(), n, ca.qLoraRank, spec.normEps);
    a.qb.resize(std::size_t(n * heads * d));
    linear<T>(
        a.qan.data(), st.w(".attn.wq_b.weight"), nullptr, a.qb.data(), n, ca.qLoraRank, heads * d);
    a.q.resize(a.qb.size());
    rmsNorm<T>(a.qb.data(), nullptr, a.q.data(), n * heads, d, spec.normEps);
    a.kvp.resize(std::size_t(n * d));
    linear<T>(a.xn1.data(), st.w(".attn.wkv.weight"), nullptr, a.kvp.data(), n, h, d);
    std::vector<T> kv(a.kvp.size());
    rmsNorm<T>(a.kvp.data(), st.w(".attn.kv_norm.weight"), kv.data(), n, d, spec.normEps);
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(a.q.data() + t * heads * d, heads, d, t, rope);
        rotateTail(kv.data() + t * d, 1, d, t, rope);
    }
    const auto sizeCompressor
        = [&](typename DeepseekV4Cache<T>::Compressor& c, std::int64_t width) {
              const std::int64_t coff = ratio == kCsaRatio ? 2 : 1;
              c.ratio = ratio;
              c.width = width;
              c.count = 0;
              c.kv.assign(std::size_t(n * coff * width), T(0));
              c.gate.assign(std::size_t(n * coff * width), T(0));
              c.entries.assign(std::size_t((n / ratio + 1) * width), T(0));
          };
    a.entries = 0;
    std::vector<std::int64_t> selected;
    if (ratio > 0) {
        sizeCompressor(a.compressor, d);
        deepseekV4Compress<T>(a.compressor, st.name(".attn.compressor"), st.ctx.table, a.xn1.data(),
            n, 0, h, spec.normEps, rope);
        a.entries = a.compressor.count;
    }
    if (ratio == kCsaRatio) {
        typename DeepseekV4Cache<T>::Compressor indexer;
        sizeCompressor(indexer, ca.indexerHeadDim);
        deepseekV4Compress<T>(indexer, st.name(".attn.indexer.compressor"), st.ctx.table,
            a.xn1.data(), n, 0, h, spec.normEps, rope);
        deepseekV4Select<T>(indexer, st.name(".attn.indexer"), st.ctx.table, spec, a.xn1.data(),
            a.qan.data(), n, 0, rope, selected);
        routing.emplace_back(
            fmt::format("model.layers.{}.self_attn.compressor.indexer#topk", st.layer),
            numerics::Tensor::fromInts({ n, ca.indexerTopK }, selected));
    }
    a.keys.assign(std::size_t((n + a.entries) * d), T(0));
    std::copy(kv.begin(), kv.end(), a.keys.begin());
    std::copy_n(a.compressor.entries.begin(), a.entries * d, a.keys.begin() + n * d);
    collectKeys(st, a, selected);
    attend(st, a);
    // The grouped output projection: group g's heads through its block of wo_a, then wo_b.
    const std::int64_t groups = ca.oGroups;
    const std::int64_t rank = ca.oLoraRank;
    const std::int64_t in = heads * d / groups;
    const T* woA = st.w(".attn.wo_a.weight");
    a.low.assign(std::size_t(n * groups * rank), T(0));
    std::vector<T> slice(std::size_t(n * in));
    std::vector<T> part(std::size_t(n * rank));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(a.attn.data() + t * heads * d + g * in, in, slice.data() + t * in);
        }
        linear<T>(slice.data(), woA + g * rank * in, nullptr, part.data(), n, in, rank);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.data() + t * rank, rank, a.low.data() + (t * groups + g) * rank);
        }
    }
    a.attnOut.resize(std::size_t(n * h));
    linear<T>(
        a.low.data(), st.w(".attn.wo_b.weight"), nullptr, a.attnOut.data(), n, groups * rank, h);
}

/// The compressor's backward from its entries' gradients `dentries` [m, d] (their RoPE, norm and
/// the softmax pooling, recomputed from the kept projections): wkv's, wgate's, ape's and the
/// norm's gradients accumulated, the input's added to `dxn1`.
template <typename T>
void compressorBackward(
    const DeepseekV4Step<T>& st, const DeepseekV4Saved<T>& a, std::vector<T> dentries, T* dxn1)
{
    const auto& c = a.compressor;
    const std::int64_t r = c.ratio;
    const std::int64_t d = c.width;
    const bool overlap = r == kCsaRatio;
    const std::int64_t cw = (overlap ? 2 : 1) * d;
    const std::string m = ".attn.compressor";
    const T* ape = st.w(m + ".ape");
    T* dape = st.dw(m + ".ape");
    std::vector<T> dkv(std::size_t(st.n * cw), T(0));
    std::vector<T> dgate(std::size_t(st.n * cw), T(0));
    std::vector<T> pooled(static_cast<std::size_t>(d));
    std::vector<T> dpooled(static_cast<std::size_t>(d));
    std::vector<std::vector<double>> probs(static_cast<std::size_t>(d));
    std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(d));
    for (std::int64_t entry = 0; entry < a.entries; ++entry) {
        const std::int64_t first = entry * r;
        // The pooled entry before its norm, as deepseekV4Compress computes it.
        for (std::int64_t ch = 0; ch < d; ++ch) {
            auto& idx = slots[std::size_t(ch)];
            idx.clear();
            if (overlap && entry > 0) {
                for (std::int64_t j = 0; j < r; ++j) {
                    idx.push_back((first - r + j) * cw + ch);
                    idx.push_back(j * cw + ch);
                }
            }
            const std::int64_t half = overlap ? d : 0;
            for (std::int64_t j = 0; j < r; ++j) {
                idx.push_back((first + j) * cw + half + ch);
                idx.push_back(j * cw + half + ch);
            }
            auto& p = probs[std::size_t(ch)];
            p.clear();
            double top = -std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < idx.size(); i += 2) {
                p.push_back(double(c.gate[std::size_t(idx[i])]) + double(ape[idx[i + 1]]));
                top = std::max(top, p.back());
            }
            double sum = 0.0;
            double acc = 0.0;
            for (std::size_t i = 0; i < p.size(); ++i) {
                p[i] = std::exp(p[i] - top);
                sum += p[i];
                acc += p[i] * double(c.kv[std::size_t(idx[2 * i])]);
            }
            for (double& v : p) {
                v /= sum;
            }
            pooled[std::size_t(ch)] = T(acc / sum);
        }
        T* de = dentries.data() + entry * d;
        rotateTail(de, 1, d, first, st.rope(), -1.0);
        std::fill(dpooled.begin(), dpooled.end(), T(0));
        rmsNormBackward<T>(pooled.data(), st.w(m + ".norm.weight"), de, dpooled.data(),
            st.dw(m + ".norm.weight"), 1, d, st.spec.normEps);
        for (std::int64_t ch = 0; ch < d; ++ch) {
            const auto& idx = slots[std::size_t(ch)];
            const auto& p = probs[std::size_t(ch)];
            const double dp = double(dpooled[std::size_t(ch)]);
            const double mean = double(pooled[std::size_t(ch)]);
            for (std::size_t i = 0; i < p.size(); ++i) {
                const double v = double(c.kv[std::size_t(idx[2 * i])]);
                const double dl = p[i] * (v - mean) * dp;
                dkv[std::size_t(idx[2 * i])] += T(p[i] * dp);
                dgate[std::size_t(idx[2 * i])] += T(dl);
                dape[idx[2 * i + 1]] += T(dl);
            }
        }
    }
    const std::int64_t h = st.spec.hiddenSize;
    linearBackward<T>(a.xn1.data(), st.w(m + ".wkv.weight"), dkv.data(), dxn1,
        st.dw(m + ".wkv.weight"), nullptr, st.n, h, cw, true);
    linearBackward<T>(a.xn1.data(), st.w(m + ".wgate.weight"), dgate.data(), dxn1,
        st.dw(m + ".wgate.weight"), nullptr, st.n, h, cw, true);
}

/// The attention's backward from `dout` [n, h]: every weight's gradient accumulated (the
/// indexer's stay zero), the input's added to `dxn1`.
template <typename T>
void v4AttentionBackward(
    const DeepseekV4Step<T>& st, const DeepseekV4Saved<T>& a, const T* dout, T* dxn1)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t heads = spec.numHeads;
    const std::int64_t d = spec.headDim;
    const std::int64_t groups = ca.oGroups;
    const std::int64_t rank = ca.oLoraRank;
    const std::int64_t in = heads * d / groups;
    const Rope& rope = st.rope();
    std::vector<T> dlow(a.low.size());
    linearBackward<T>(a.low.data(), st.w(".attn.wo_b.weight"), dout, dlow.data(),
        st.dw(".attn.wo_b.weight"), nullptr, n, groups * rank, h, false);
    std::vector<T> dattn(a.attn.size());
    std::vector<T> slice(std::size_t(n * in));
    std::vector<T> dslice(std::size_t(n * in));
    std::vector<T> dpart(std::size_t(n * rank));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(a.attn.data() + t * heads * d + g * in, in, slice.data() + t * in);
            std::copy_n(dlow.data() + (t * groups + g) * rank, rank, dpart.data() + t * rank);
        }
        linearBackward<T>(slice.data(), st.w(".attn.wo_a.weight") + g * rank * in, dpart.data(),
            dslice.data(), st.dw(".attn.wo_a.weight") + g * rank * in, nullptr, n, in, rank, false);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(dslice.data() + t * in, in, dattn.data() + t * heads * d + g * in);
        }
    }
    // The output was rotated back (−θ): its transpose rotates forward.
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dattn.data() + t * heads * d, heads, d, t, rope, 1.0);
    }
    const double scale = 1.0 / std::sqrt(double(d));
    std::vector<T> dq(a.q.size(), T(0));
    std::vector<double> dkeys(a.keys.size(), 0.0);
    T* dsinks = st.dw(".attn.attn_sink");
    std::vector<double> dp;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t first = a.keyStart[std::size_t(t)];
        const std::int64_t count = a.keyStart[std::size_t(t + 1)] - first;
        dp.assign(std::size_t(count), 0.0);
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            const T* qh = a.q.data() + (t * heads + hd) * d;
            const T* dctx = dattn.data() + (t * heads + hd) * d;
            const double* p = a.probs.data() + first * heads + hd * count;
            double dot = 0.0;
            for (std::int64_t k = 0; k < count; ++k) {
                const T* key = a.keys.data() + a.keyIdx[std::size_t(first + k)] * d;
                double v = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    v += double(dctx[c]) * double(key[c]);
                }
                dp[std::size_t(k)] = v;
                dot += p[k] * v;
            }
            // The sink joins the softmax with no value: ∂L/∂sink = −p_sink · Σ_k p_k dp_k.
            dsinks[hd] += T(-a.sinkProbs[std::size_t(t * heads + hd)] * dot);
            T* dqh = dq.data() + (t * heads + hd) * d;
            for (std::int64_t k = 0; k < count; ++k) {
                const std::int64_t row = a.keyIdx[std::size_t(first + k)];
                const T* key = a.keys.data() + row * d;
                double* dkey = dkeys.data() + row * d;
                const double dl = p[k] * (dp[std::size_t(k)] - dot) * scale;
                for (std::int64_t c = 0; c < d; ++c) {
                    dqh[c] += T(dl * double(key[c]));
                    dkey[c] += dl * double(qh[c]) + p[k] * double(dctx[c]);
                }
            }
        }
    }
    // q: RoPE, the per-head weightless RMS, wq_b, q_norm, wq_a.
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dq.data() + t * heads * d, heads, d, t, rope, -1.0);
    }
    std::vector<T> dqb(a.qb.size(), T(0));
    rmsNormBackward<T>(
        a.qb.data(), nullptr, dq.data(), dqb.data(), nullptr, n * heads, d, spec.normEps);
    std::vector<T> dqan(a.qan.size());
    linearBackward<T>(a.qan.data(), st.w(".attn.wq_b.weight"), dqb.data(), dqan.data(),
        st.dw(".attn.wq_b.weight"), nullptr, n, ca.qLoraRank, heads * d, false);
    std::vector<T> dqa(a.qa.size(), T(0));
    rmsNormBackward<T>(a.qa.data(), st.w(".attn.q_norm.weight"), dqan.data(), dqa.data(),
        st.dw(".attn.q_norm.weight"), n, ca.qLoraRank, spec.normEps);
    linearBackward<T>(a.xn1.data(), st.w(".attn.wq_a.weight"), dqa.data(), dxn1,
        st.dw(".attn.wq_a.weight"), nullptr, n, h, ca.qLoraRank, true);
    // K=V: RoPE, kv_norm, wkv.
    std::vector<T> dkv(std::size_t(n * d));
    for (std::int64_t i = 0; i < n * d; ++i) {
        dkv[std::size_t(i)] = T(dkeys[std::size_t(i)]);
    }
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dkv.data() + t * d, 1, d, t, rope, -1.0);
    }
    std::vector<T> dkvp(a.kvp.size(), T(0));
    rmsNormBackward<T>(a.kvp.data(), st.w(".attn.kv_norm.weight"), dkv.data(), dkvp.data(),
        st.dw(".attn.kv_norm.weight"), n, d, spec.normEps);
    linearBackward<T>(a.xn1.data(), st.w(".attn.wkv.weight"), dkvp.data(), dxn1,
        st.dw(".attn.wkv.weight"), nullptr, n, h, d, true);
    if (a.entries > 0) {
        std::vector<T> dentries(std::size_t(a.entries * d));
        for (std::int64_t i = 0; i < a.entries * d; ++i) {
            dentries[std::size_t(i)] = T(dkeys[std::size_t(n * d + i)]);
        }
        compressorBackward(st, a, std::move(dentries), dxn1);
    }
}

} // namespace

// --- the pass ----------------------------------------------------------------------------

std::string deepseekV4HfName(const std::string& native)
{
    static const std::map<std::string, std::string> top {
        { "embed.weight", "model.embed_tokens.weight" }, { "head.weight", "lm_head.weight" },
        { "norm.weight", "model.norm.weight" }, { "hc_head_fn", "model.hc_head.hc_fn" },
        { "hc_head_base", "model.hc_head.hc_base" }, { "hc_head_scale", "model.hc_head.hc_scale" }
    };
    if (const auto it = top.find(native); it != top.end()) {
        return it->second;
    }
    if (!native.starts_with("layers.")) {
        return native;
    }
    const auto dot = native.find('.', 7);
    const std::string prefix = "model." + native.substr(0, dot);
    std::string rest = native.substr(dot + 1);
    static const std::pair<const char*, const char*> moved[] {
        { "attn_norm.", "input_layernorm." },
        { "ffn_norm.", "post_attention_layernorm." },
        { "hc_attn_", "attn_hc." },
        { "hc_ffn_", "ffn_hc." },
        { "attn.indexer.compressor.", "self_attn.compressor.indexer.compressor." },
        { "attn.indexer.", "self_attn.compressor.indexer." },
        { "attn.attn_sink", "self_attn.sinks" },
        { "attn.", "self_attn." },
        { "ffn.gate.bias", "mlp.gate.e_score_correction_bias" },
        { "ffn.", "mlp." },
    };
    for (const auto& [from, to] : moved) {
        if (rest.starts_with(from)) {
            rest = to + rest.substr(std::string_view(from).size());
            break;
        }
    }
    static const std::map<std::string, std::string> leaves { { "wq_a", "q_a_proj" },
        { "q_norm", "q_a_norm" }, { "wq_b", "q_b_proj" }, { "wkv", "kv_proj" },
        { "wo_a", "o_a_proj" }, { "wo_b", "o_b_proj" }, { "wgate", "gate_proj" },
        { "ape", "position_bias" }, { "w1", "gate_proj" }, { "w2", "down_proj" },
        { "w3", "up_proj" } };
    std::vector<std::string> pieces;
    for (std::size_t at = 0;;) {
        const auto next = rest.find('.', at);
        pieces.push_back(rest.substr(at, next == std::string::npos ? next : next - at));
        if (next == std::string::npos) {
            break;
        }
        at = next + 1;
    }
    bool compressor = false;
    for (auto& piece : pieces) {
        compressor = compressor || piece == "compressor";
        if (const auto it = leaves.find(piece); it != leaves.end()) {
            piece = it->second;
        }
    }
    // The compressors' norm is their kv_norm; the attention's own kv_norm keeps its name.
    if (pieces.size() >= 2 && compressor && pieces[pieces.size() - 2] == "norm") {
        pieces[pieces.size() - 2] = "kv_norm";
    }
    return fmt::format("{}.{}", prefix, fmt::join(pieces, "."));
}

template <typename T>
Result<void> GradientPass<T>::deepseekV4Init(const std::map<std::string, numerics::Tensor>& weights)
{
    if (!m_rounded.empty()) {
        return Error::unsupported("gradients of deepseek_v4 with rounded layers (the emulated "
                                  "backward of its hyper-connections, compressors and router "
                                  "is not modelled)");
    }
    auto ctx = std::make_shared<DeepseekV4Context>();
    auto ropes = deepseekV4Ropes(m_spec);
    if (!ropes) {
        return ropes.error();
    }
    ctx->mainRope = std::move(ropes->first);
    ctx->compressRope = std::move(ropes->second);
    // The forward's helpers read a WeightTable: the tensors the pass computes with.
    for (const auto& [name, value] : m_p.values) {
        (void)value;
        const auto converted = m_converted.find(name);
        ctx->table.tensors.emplace(
            name, converted != m_converted.end() ? converted->second : weights.at(name));
    }
    m_v4 = std::move(ctx);
    return success();
}

template <typename T>
Result<GradientResult> GradientPass<T>::deepseekV4Run(
    std::span<const std::int64_t> ids, std::span<const std::int64_t> targets)
{
    using numerics::Tensor;
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t s = m_spec.hyperConnections->streams;
    const std::int64_t vocab = m_spec.vocabSize;
    const int layers = int(m_spec.numLayers);
    std::vector<T> x(std::size_t(n * h));
    DAY0_TRY(embedding<T>(ids, m_p.value("embed.weight"), vocab, h, x.data()));
    std::vector<T> streams(std::size_t(n * s * h));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            std::copy_n(x.data() + t * h, h, streams.data() + (t * s + j) * h);
        }
    }
    std::vector<DeepseekV4Saved<T>> saved(static_cast<std::size_t>(layers));
    m_routing.clear();
    if (m_progress != nullptr) {
        m_progress->setTotal(2 * m_spec.numLayers);
        m_progress->setStage("forward");
    }
    for (int l = 0; l < layers; ++l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        DeepseekV4Step<T> st { m_spec, m_p, *m_v4, n, l };
        auto& a = saved[std::size_t(l)];
        a.streamsIn = streams;
        a.attnHc
            = deepseekV4HyperForward(m_p, st.name(".hc_attn"), streams.data(), n, m_spec, false);
        a.x1.resize(std::size_t(n * h));
        deepseekV4Collapse(a.attnHc.maps, streams.data(), n, s, h, a.x1.data());
        a.xn1.resize(a.x1.size());
        rmsNorm<T>(a.x1.data(), st.w(".attn_norm.weight"), a.xn1.data(), n, h, m_spec.normEps);
        v4AttentionForward(st, a, m_routing);
        deepseekV4Expand(a.attnHc.maps, streams.data(), a.attnOut.data(), n, s, h);
        a.streamsMid = streams;
        a.ffnHc = deepseekV4HyperForward(m_p, st.name(".hc_ffn"), streams.data(), n, m_spec, false);
        a.x2.resize(std::size_t(n * h));
        deepseekV4Collapse(a.ffnHc.maps, streams.data(), n, s, h, a.x2.data());
        a.xn2.resize(a.x2.size());
        rmsNorm<T>(a.x2.data(), st.w(".ffn_norm.weight"), a.xn2.data(), n, h, m_spec.normEps);
        deepseekV4MoeForward(st, a, ids, m_routing);
        deepseekV4Expand(a.ffnHc.maps, streams.data(), a.moeOut.data(), n, s, h);
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    // The head: hc_head collapses the streams, then norm and head.
    const auto headHc
        = deepseekV4HyperForward(m_p, std::string("hc_head"), streams.data(), n, m_spec, true);
    std::vector<T> finalIn(std::size_t(n * h));
    deepseekV4Collapse(headHc.maps, streams.data(), n, s, h, finalIn.data());
    std::vector<T> xf(finalIn.size());
    rmsNorm<T>(finalIn.data(), m_p.value("norm.weight"), xf.data(), n, h, m_spec.normEps);
    std::vector<T> logits(std::size_t(n * vocab));
    linear<T>(xf.data(), m_p.value("head.weight"), nullptr, logits.data(), n, h, vocab);

    GradientResult result;
    std::int64_t kept = 0;
    for (const auto& a : saved) {
        kept += a.bytes();
    }
    result.keptBytes = kept
        + std::int64_t((streams.size() + finalIn.size() + xf.size() + logits.size()) * sizeof(T));
    std::vector<T> dlogits(logits.size());
    auto loss = crossEntropyOf(logits, targets, dlogits, result.counted);
    if (!loss) {
        return loss.error();
    }
    result.loss = *loss;
    result.logits = Tensor::zeros({ n, vocab }, computeType<T>());
    std::copy(logits.begin(), logits.end(), result.logits.template data<T>());

    // Backward.
    DAY0_TRY(m_acts.recordAndInject("lm_head", dlogits.data(), { n, vocab }));
    std::vector<T> dxf(std::size_t(n * h));
    linearBackward<T>(xf.data(), m_p.value("head.weight"), dlogits.data(), dxf.data(),
        m_p.grad("head.weight"), nullptr, n, h, vocab, false);
    DAY0_TRY(m_acts.recordAndInject("model.norm", dxf.data(), { n, h }));
    std::vector<T> dfinal(std::size_t(n * h), T(0));
    rmsNormBackward<T>(finalIn.data(), m_p.value("norm.weight"), dxf.data(), dfinal.data(),
        m_p.grad("norm.weight"), n, h, m_spec.normEps);
    std::vector<T> dstreams(streams.size(), T(0));
    const auto dpreHead = deepseekV4CollapseBackward(
        headHc.maps, streams.data(), dfinal.data(), n, s, h, dstreams.data());
    deepseekV4HyperBackward(m_p, std::string("hc_head"), headHc, streams.data(), n, m_spec,
        dpreHead, {}, {}, dstreams.data());
    if (m_progress != nullptr) {
        m_progress->setStage("backward");
    }
    std::vector<double> dpost;
    std::vector<double> dcomb;
    std::vector<T> dprev;
    for (int l = layers - 1; l >= 0; --l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        DeepseekV4Step<T> st { m_spec, m_p, *m_v4, n, l };
        const auto& a = saved[std::size_t(l)];
        const std::string anchor = fmt::format("model.layers.{}", l);
        DAY0_TRY(m_acts.recordAndInject(anchor, dstreams.data(), { n, s, h }));
        // The MoE's hyper-connection and block.
        auto dmoe = deepseekV4ExpandBackward(a.ffnHc.maps, a.streamsMid.data(), a.moeOut.data(),
            dstreams.data(), n, s, h, dpost, dcomb, dprev);
        m_acts.record(anchor + ".mlp", dmoe.data(), { n, h });
        m_acts.record(anchor + ".mlp.shared_experts", dmoe.data(), { n, h });
        std::vector<T> dxn(std::size_t(n * h), T(0));
        deepseekV4MoeBackward(st, a, dmoe.data(), dxn.data());
        m_acts.record(anchor + ".post_attention_layernorm", dxn.data(), { n, h });
        std::vector<T> dx(std::size_t(n * h), T(0));
        rmsNormBackward<T>(a.x2.data(), st.w(".ffn_norm.weight"), dxn.data(), dx.data(),
            st.dw(".ffn_norm.weight"), n, h, m_spec.normEps);
        auto dpre = deepseekV4CollapseBackward(
            a.ffnHc.maps, a.streamsMid.data(), dx.data(), n, s, h, dprev.data());
        deepseekV4HyperBackward(m_p, st.name(".hc_ffn"), a.ffnHc, a.streamsMid.data(), n, m_spec,
            dpre, dpost, dcomb, dprev.data());
        dstreams.swap(dprev);
        // The attention's.
        auto dattn = deepseekV4ExpandBackward(a.attnHc.maps, a.streamsIn.data(), a.attnOut.data(),
            dstreams.data(), n, s, h, dpost, dcomb, dprev);
        m_acts.record(anchor + ".self_attn", dattn.data(), { n, h });
        std::fill(dxn.begin(), dxn.end(), T(0));
        v4AttentionBackward(st, a, dattn.data(), dxn.data());
        m_acts.record(anchor + ".input_layernorm", dxn.data(), { n, h });
        std::fill(dx.begin(), dx.end(), T(0));
        rmsNormBackward<T>(a.x1.data(), st.w(".attn_norm.weight"), dxn.data(), dx.data(),
            st.dw(".attn_norm.weight"), n, h, m_spec.normEps);
        dpre = deepseekV4CollapseBackward(
            a.attnHc.maps, a.streamsIn.data(), dx.data(), n, s, h, dprev.data());
        deepseekV4HyperBackward(m_p, st.name(".hc_attn"), a.attnHc, a.streamsIn.data(), n, m_spec,
            dpre, dpost, dcomb, dprev.data());
        dstreams.swap(dprev);
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    // Every stream started as the embedding.
    std::vector<T> dembed(std::size_t(n * h), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            for (std::int64_t c = 0; c < h; ++c) {
                dembed[std::size_t(t * h + c)] += dstreams[std::size_t((t * s + j) * h + c)];
            }
        }
    }
    DAY0_TRY(m_acts.recordAndInject("model.embed_tokens", dembed.data(), { n, h }));
    T* dtable = m_p.grad("embed.weight");
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            dtable[ids[std::size_t(t)] * h + c] += dembed[std::size_t(t * h + c)];
        }
    }
    for (auto& [name, grad] : m_p.grads) {
        Tensor t = Tensor::zeros(m_p.shapes[name], computeType<T>());
        std::copy(grad.begin(), grad.end(), t.template data<T>());
        result.parameters.emplace(name, std::move(t));
    }
    result.activations = std::move(m_acts.list);
    result.routing = std::move(m_routing);
    return result;
}

#define DAY0_GRADIENT_DEEPSEEK_V4(T)                                                               \
    template Result<void> GradientPass<T>::deepseekV4Init(                                         \
        const std::map<std::string, numerics::Tensor>&);                                           \
    template Result<GradientResult> GradientPass<T>::deepseekV4Run(                                \
        std::span<const std::int64_t>, std::span<const std::int64_t>);

DAY0_GRADIENT_DEEPSEEK_V4(float)
DAY0_GRADIENT_DEEPSEEK_V4(double)

#undef DAY0_GRADIENT_DEEPSEEK_V4

} // namespace day0::exec::detail
