// Gated DeltaNet (Qwen3-Next, Qwen3.5, Qwen3.6 linear_attention layers): the kernels of
// gated_delta_net.h and the layer of Forward.
//
// The math is transformers' Qwen3NextGatedDeltaNet (modeling_qwen3_next.py) and Qwen3.5's
// Qwen3_5GatedDeltaNet (modular_qwen3_5.py, which only splits the input projections):
// - Qwen3-Next projects in_proj_qkvz, whose rows are grouped per key head (the group's q, k,
//   its nv/nk value heads' v, their z), and in_proj_ba (per key head: its b, then its a);
//   Qwen3.5 projects in_proj_qkv ([q | k | v]), in_proj_z, in_proj_b and in_proj_a.
// - The q|k|v channels pass a causal depthwise conv1d (linear_conv_kernel_dim taps, no bias)
//   and SiLU; the conv window (the last K − 1 inputs) is carried across steps.
// - q and k are L2-normalised per head (eps 1e-6, use_qk_l2norm_in_kernel), value head j reads
//   key head j / (nv / nk) (repeat_interleave), q is scaled by keyDim^-1/2; β = σ(b), the log
//   decay g = −exp(A_log) · softplus(a + dt_bias).
// - The gated delta rule keeps a [nv, dk, dv] state per layer, carried across steps: the chunked
//   form for steps of more than one token (prefill), the recurrent one for decode steps.
// - The output passes the gated RMSNorm (Qwen3NextRMSNormGated: norm over one value head, times
//   the weight as stored, times silu(z)) and out_proj.
// Precision: transformers computes the delta rule in fp32 whatever the model dtype and keeps the
// state it returns, so the state is kept in the compute type (fp32, or fp64 for the reference)
// and only the rule's inputs and output are rounded to an emulated dtype; a plan's state dtype
// (vLLM's mamba_ssm_cache_dtype) rounds the state after each step (recurrent_state.cpp).
#include "exec/gated_delta_net.h"

#include "exec/batch_decode.h"
#include "exec/forward.h"
#include "exec/gated_head_norm.h"
#include "exec/kimi_delta.h"
#include "exec/ops.h"
#include "exec/recurrent_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec {

namespace {

} // namespace

template <typename T>
void causalConv1dSilu(const T* x, T* y, std::int64_t tokens, std::int64_t channels, const T* w,
    std::int64_t kernel, T* window)
{
    const std::int64_t past = kernel - 1;
    // in[i] for i in [0, past + tokens): the window, then x.
    const auto input = [&](std::int64_t i, std::int64_t c) {
        return i < past ? window[i * channels + c] : x[(i - past) * channels + c];
    };
    for (std::int64_t t = 0; t < tokens; ++t) {
        for (std::int64_t c = 0; c < channels; ++c) {
            T sum = T(0);
            for (std::int64_t j = 0; j < kernel; ++j) {
                sum += w[c * kernel + j] * input(t + j, c);
            }
            y[t * channels + c] = sum * sigmoid(sum);
        }
    }
    // The new window: the last `past` inputs of window ++ x.
    std::vector<T> next(static_cast<std::size_t>(past * channels));
    for (std::int64_t i = 0; i < past; ++i) {
        for (std::int64_t c = 0; c < channels; ++c) {
            next[std::size_t(i * channels + c)] = input(tokens + i, c);
        }
    }
    std::copy(next.begin(), next.end(), window);
}

template <typename T> void l2NormalizeRows(T* x, std::int64_t rows, std::int64_t dim, double eps)
{
    for (std::int64_t r = 0; r < rows; ++r) {
        T* row = x + r * dim;
        double sum = 0.0;
        for (std::int64_t c = 0; c < dim; ++c) {
            sum += double(row[c]) * double(row[c]);
        }
        const T inv = T(1.0 / std::sqrt(sum + eps));
        for (std::int64_t c = 0; c < dim; ++c) {
            row[c] *= inv;
        }
    }
}

template <typename T>
void gatedDeltaRecurrent(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& s)
{
    // One decay per head is Kimi Delta Attention's per-channel rule with the head's decay on
    // every key channel: the same products in the same order.
    std::vector<T> channels(static_cast<std::size_t>(s.tokens * s.heads * s.keyDim));
    for (std::int64_t row = 0; row < s.tokens * s.heads; ++row) {
        std::fill_n(channels.begin() + row * s.keyDim, s.keyDim, g[row]);
    }
    kimiDeltaRecurrent(q, k, v, channels.data(), beta, state, out, s);
}

template <typename T>
void gatedDeltaChunked(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& s, std::int64_t chunk)
{
    const std::int64_t dk = s.keyDim;
    const std::int64_t dv = s.valueDim;
    const std::int64_t c = std::max<std::int64_t>(1, chunk);
    std::vector<T> kc(static_cast<std::size_t>(c * dk));
    std::vector<T> qc(static_cast<std::size_t>(c * dk));
    std::vector<T> vc(static_cast<std::size_t>(c * dv));
    std::vector<T> kk(static_cast<std::size_t>(c * c));
    std::vector<T> qk(static_cast<std::size_t>(c * c));
    std::vector<T> ks(static_cast<std::size_t>(c * dv)); // Sᵀk_i as rows, then Sᵀq_i
    std::vector<T> delta(static_cast<std::size_t>(c * dv));
    std::vector<T> kdT(static_cast<std::size_t>(dk * c));
    std::vector<T> cum(static_cast<std::size_t>(c));
    for (std::int64_t h = 0; h < s.heads; ++h) {
        T* st = state + h * dk * dv;
        for (std::int64_t first = 0; first < s.tokens; first += c) {
            const std::int64_t len = std::min(c, s.tokens - first);
            T total = T(0);
            for (std::int64_t i = 0; i < len; ++i) {
                const std::int64_t row = (first + i) * s.heads + h;
                std::copy_n(k + row * dk, dk, kc.begin() + i * dk);
                std::copy_n(q + row * dk, dk, qc.begin() + i * dk);
                std::copy_n(v + row * dv, dv, vc.begin() + i * dv);
                total += g[row];
                cum[std::size_t(i)] = total;
            }
            // Right-hand sides β_i (v_i − e^{G_i} Sᵀk_i), then the forward substitution.
            matmul(kc.data(), st, ks.data(), len, dv, dk);
            matmulTransB(kc.data(), kc.data(), kk.data(), len, len, dk);
            for (std::int64_t i = 0; i < len; ++i) {
                const T b = beta[(first + i) * s.heads + h];
                const T gi = cum[std::size_t(i)];
                const T decay = std::exp(gi);
                T* d = delta.data() + i * dv;
                for (std::int64_t j = 0; j < dv; ++j) {
                    d[j] = b * (vc[std::size_t(i * dv + j)] - decay * ks[std::size_t(i * dv + j)]);
                }
                for (std::int64_t m = 0; m < i; ++m) {
                    const T coeff
                        = b * std::exp(gi - cum[std::size_t(m)]) * kk[std::size_t(i * len + m)];
                    const T* dm = delta.data() + m * dv;
                    for (std::int64_t j = 0; j < dv; ++j) {
                        d[j] -= coeff * dm[j];
                    }
                }
            }
            // o_i = e^{G_i} Sᵀq_i + Σ_{j≤i} e^{G_i − G_j} (q_i·k_j) δ_j, with S at the chunk's
            // start.
            matmul(qc.data(), st, ks.data(), len, dv, dk);
            matmulTransB(qc.data(), kc.data(), qk.data(), len, len, dk);
            for (std::int64_t i = 0; i < len; ++i) {
                const T gi = cum[std::size_t(i)];
                for (std::int64_t j = 0; j < len; ++j) {
                    qk[std::size_t(i * len + j)] = j <= i
                        ? qk[std::size_t(i * len + j)] * std::exp(gi - cum[std::size_t(j)])
                        : T(0);
                }
                T* o = out + ((first + i) * s.heads + h) * dv;
                const T decay = std::exp(gi);
                for (std::int64_t j = 0; j < dv; ++j) {
                    o[j] = decay * ks[std::size_t(i * dv + j)];
                }
            }
            for (std::int64_t i = 0; i < len; ++i) {
                // One row at a time: out rows of a head are strided by heads × dv.
                T* o = out + ((first + i) * s.heads + h) * dv;
                matmul(qk.data() + i * len, delta.data(), o, 1, dv, len, true);
            }
            // S ← e^{G_L} S + Σ_j e^{G_L − G_j} k_j δ_jᵀ.
            const T last = cum[std::size_t(len - 1)];
            for (std::int64_t j = 0; j < len; ++j) {
                const T decay = std::exp(last - cum[std::size_t(j)]);
                for (std::int64_t i = 0; i < dk; ++i) {
                    kdT[std::size_t(i * len + j)] = decay * kc[std::size_t(j * dk + i)];
                }
            }
            const T endDecay = std::exp(last);
            for (std::int64_t i = 0; i < dk * dv; ++i) {
                st[i] *= endDecay;
            }
            matmul(kdT.data(), delta.data(), st, dk, dv, len, true);
        }
    }
}

#define DAY0_DELTA_RULE(T)                                                                         \
    template void causalConv1dSilu<T>(                                                             \
        const T*, T*, std::int64_t, std::int64_t, const T*, std::int64_t, T*);                     \
    template void l2NormalizeRows<T>(T*, std::int64_t, std::int64_t, double);                      \
    template void gatedDeltaRecurrent<T>(                                                          \
        const T*, const T*, const T*, const T*, const T*, T*, T*, const DeltaRuleShape&);          \
    template void gatedDeltaChunked<T>(const T*, const T*, const T*, const T*, const T*, T*, T*,   \
        const DeltaRuleShape&, std::int64_t);
DAY0_DELTA_RULE(float)
DAY0_DELTA_RULE(double)
#undef DAY0_DELTA_RULE

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

bool isQwenNext(const model::ModelSpec& spec)
{
    return spec.family == model::Family::Qwen3Next || spec.family == model::Family::Qwen35
        || spec.family == model::Family::Qwen35Moe;
}

bool zeroCentredNorm(const model::ModelSpec& spec, const std::string& weightName)
{
    if (!spec.normOffset || !weightName.ends_with(".weight")) {
        return false;
    }
    // MiniMax-M3's use_gemma_norm: every RMSNorm (decoder, final, per-head q/k, index q/k).
    if (spec.family == model::Family::MiniMaxM3) {
        return weightName.ends_with("norm.weight");
    }
    if (!isQwenNext(spec)) {
        return false;
    }
    // Qwen3NextRMSNorm: the decoder norms, the final norm, the attention's q/k norms; the gated
    // norm of the linear attention (Qwen3NextRMSNormGated) multiplies by its weight as stored.
    return weightName.ends_with("layernorm.weight") || weightName.ends_with(".q_norm.weight")
        || weightName.ends_with(".k_norm.weight") || weightName == "model.norm.weight";
}

void addGatedDeltaNetWeights(
    const model::ModelSpec& spec, int layer, std::vector<WeightRequirement>& w)
{
    const auto& la = *spec.linearAttention;
    const std::string p = fmt::format("model.layers.{}.linear_attn", layer);
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t keyDim = la.keyHeads * la.keyHeadDim;
    const std::int64_t valueDim = la.valueHeads * la.valueHeadDim;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    if (spec.family == model::Family::Qwen3Next) {
        add(p + ".in_proj_qkvz.weight", { 2 * keyDim + 2 * valueDim, h });
        add(p + ".in_proj_ba.weight", { 2 * la.valueHeads, h });
    } else {
        add(p + ".in_proj_qkv.weight", { 2 * keyDim + valueDim, h });
        add(p + ".in_proj_z.weight", { valueDim, h });
        add(p + ".in_proj_b.weight", { la.valueHeads, h });
        add(p + ".in_proj_a.weight", { la.valueHeads, h });
    }
    add(p + ".conv1d.weight", { 2 * keyDim + valueDim, 1, la.convKernel });
    add(p + ".dt_bias", { la.valueHeads });
    add(p + ".A_log", { la.valueHeads });
    add(p + ".norm.weight", { la.valueHeadDim });
    add(p + ".out_proj.weight", { h, valueDim });
}

template <typename T> void Forward<T>::gatedDeltaNetInit()
{
    m_deltaStates.assign(std::size_t(m_spec.numLayers), {});
    if (!m_spec.linearAttention) {
        return;
    }
    const auto& la = *m_spec.linearAttention;
    const std::int64_t convDim = 2 * la.keyHeads * la.keyHeadDim + la.valueHeads * la.valueHeadDim;
    for (std::size_t l = 0; l < m_deltaStates.size(); ++l) {
        if (m_spec.layers[l].mixer != model::MixerKind::GatedDeltaNet) {
            continue;
        }
        m_deltaStates[l].window.assign(std::size_t((la.convKernel - 1) * convDim), T(0));
        m_deltaStates[l].state.assign(
            std::size_t(la.valueHeads * la.keyHeadDim * la.valueHeadDim), T(0));
    }
}

template <typename T>
void Forward<T>::gatedDeltaNetBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps)
{
    const auto& la = *m_spec.linearAttention;
    const std::string p = fmt::format("model.layers.{}.linear_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t nk = la.keyHeads;
    const std::int64_t nv = la.valueHeads;
    const std::int64_t dk = la.keyHeadDim;
    const std::int64_t dv = la.valueHeadDim;
    const std::int64_t r = nv / nk;
    const std::int64_t keyDim = nk * dk;
    const std::int64_t valueDim = nv * dv;
    const std::int64_t convDim = 2 * keyDim + valueDim;
    std::vector<T> mixed(static_cast<std::size_t>(n * convDim));
    std::vector<T> z(static_cast<std::size_t>(n * valueDim));
    std::vector<T> b(static_cast<std::size_t>(n * nv));
    std::vector<T> a(static_cast<std::size_t>(n * nv));
    if (m_spec.family == model::Family::Qwen3Next) {
        const std::int64_t group = 2 * dk + 2 * r * dv;
        std::vector<T> qkvz(static_cast<std::size_t>(n * nk * group));
        std::vector<T> ba(static_cast<std::size_t>(n * 2 * nv));
        linear(p + ".in_proj_qkvz", x, qkvz.data(), n, h, nk * group, OpKind::Linear, layer, taps,
            true);
        linear(p + ".in_proj_ba", x, ba.data(), n, h, 2 * nv, OpKind::Linear, layer, taps, true);
        for (std::int64_t t = 0; t < n; ++t) {
            T* row = mixed.data() + t * convDim;
            for (std::int64_t kh = 0; kh < nk; ++kh) {
                const T* src = qkvz.data() + (t * nk + kh) * group;
                std::copy_n(src, dk, row + kh * dk);
                std::copy_n(src + dk, dk, row + keyDim + kh * dk);
                std::copy_n(src + 2 * dk, r * dv, row + 2 * keyDim + kh * r * dv);
                std::copy_n(src + 2 * dk + r * dv, r * dv, z.data() + t * valueDim + kh * r * dv);
                const T* bsrc = ba.data() + t * 2 * nv + kh * 2 * r;
                std::copy_n(bsrc, r, b.data() + t * nv + kh * r);
                std::copy_n(bsrc + r, r, a.data() + t * nv + kh * r);
            }
        }
    } else {
        linear(
            p + ".in_proj_qkv", x, mixed.data(), n, h, convDim, OpKind::Linear, layer, taps, true);
        linear(p + ".in_proj_z", x, z.data(), n, h, valueDim, OpKind::Linear, layer, taps, true);
        linear(p + ".in_proj_b", x, b.data(), n, h, nv, OpKind::Linear, layer, taps, true);
        linear(p + ".in_proj_a", x, a.data(), n, h, nv, OpKind::Linear, layer, taps, true);
    }
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    if constexpr (std::is_same_v<T, float>) {
        m_ops.hostOnly("Gated DeltaNet conv1d, delta rule and gated norm"); // no Backend operator
    }
    // The recurrent parts (the conv window, the delta rule's state) run per sequence: in a
    // batched step (batch_decode.h) each sequence's rows over its own Forward's state, in order,
    // as that sequence alone would; the projections and row-wise maths take every row at once.
    const std::vector<SequenceRows<T>> rows = stepSequenceRows(this, n);
    std::vector<T> conv(static_cast<std::size_t>(n * convDim));
    for (const SequenceRows<T>& seq : rows) {
        DeltaState& own = seq.seq->m_deltaStates[std::size_t(layer)];
        causalConv1dSilu(mixed.data() + seq.offset * convDim, conv.data() + seq.offset * convDim,
            seq.count, convDim, weight(p + ".conv1d.weight"), la.convKernel, own.window.data());
    }
    roundAct(conv.data(), n * convDim, mode);

    // Unit q and k per key head, repeated onto the value heads; q scaled by dk^-1/2.
    std::vector<T> qk(static_cast<std::size_t>(n * 2 * keyDim));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(conv.data() + t * convDim, 2 * keyDim, qk.data() + t * 2 * keyDim);
    }
    l2NormalizeRows(qk.data(), n * 2 * nk, dk, 1e-6);
    roundAct(qk.data(), n * 2 * keyDim, mode);
    std::vector<T> q(static_cast<std::size_t>(n * nv * dk));
    std::vector<T> k(static_cast<std::size_t>(n * nv * dk));
    std::vector<T> v(static_cast<std::size_t>(n * valueDim));
    const T scale = T(1.0 / std::sqrt(double(dk)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < nv; ++j) {
            const T* qs = qk.data() + t * 2 * keyDim + (j / r) * dk;
            const T* ks = qs + keyDim;
            T* qd = q.data() + (t * nv + j) * dk;
            for (std::int64_t i = 0; i < dk; ++i) {
                qd[i] = qs[i] * scale;
            }
            std::copy_n(ks, dk, k.data() + (t * nv + j) * dk);
        }
        std::copy_n(conv.data() + t * convDim + 2 * keyDim, valueDim, v.data() + t * valueDim);
    }
    const T* aLog = weight(p + ".A_log");
    const T* dtBias = weight(p + ".dt_bias");
    std::vector<T> g(static_cast<std::size_t>(n * nv));
    std::vector<T> beta(static_cast<std::size_t>(n * nv));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < nv; ++j) {
            const std::size_t i = std::size_t(t * nv + j);
            beta[i] = sigmoid(b[i]);
            g[i] = -std::exp(aLog[j]) * softplus(a[i] + dtBias[j]);
        }
    }
    roundAct(beta.data(), n * nv, mode);

    std::vector<T> core(static_cast<std::size_t>(n * valueDim));
    for (const SequenceRows<T>& seq : rows) {
        DeltaState& own = seq.seq->m_deltaStates[std::size_t(layer)];
        const DeltaRuleShape shape { seq.count, nv, dk, dv };
        const std::int64_t o = seq.offset;
        T* state = own.state.data();
        if (seq.count == 1) {
            gatedDeltaRecurrent(q.data() + o * nv * dk, k.data() + o * nv * dk,
                v.data() + o * valueDim, g.data() + o * nv, beta.data() + o * nv, state,
                core.data() + o * valueDim, shape);
        } else {
            gatedDeltaChunked(q.data() + o * nv * dk, k.data() + o * nv * dk,
                v.data() + o * valueDim, g.data() + o * nv, beta.data() + o * nv, state,
                core.data() + o * valueDim, shape, m_deltaChunk);
        }
        storeRecurrentState(state, std::int64_t(own.state.size()), m_plan);
    }
    if (rows.size() == 1) {
        const DeltaState& st = rows.front().seq->m_deltaStates[std::size_t(layer)];
        recordRecurrentState(taps, p, st.state.data(), { nv, dk, dv }, st.window.data(),
            { la.convKernel - 1, convDim });
    }
    roundAct(core.data(), n * valueDim, mode);

    // Gated RMSNorm over each value head: norm(o) · w, rounded, times silu(z) in fp32.
    const PrecisionMode normMode = m_plan.modeFor(OpKind::Norm, layer);
    gatedHeadNorm(core.data(), z.data(), weight(p + ".norm.weight"), n * nv, dv, m_spec.normEps,
        HeadGate::Silu, [&](T* values, std::int64_t count) { roundAct(values, count, normMode); });
    linear(p + ".out_proj", core.data(), out, n, valueDim, h, OpKind::Linear, layer, taps, true);
}

template void Forward<float>::gatedDeltaNetInit();
template void Forward<double>::gatedDeltaNetInit();
template void Forward<float>::gatedDeltaNetBlock(
    int, const float*, float*, std::int64_t, Taps<float>&);
template void Forward<double>::gatedDeltaNetBlock(
    int, const double*, double*, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
