// Kimi Delta Attention (Kimi-Linear's KDA layers): the kernels of kimi_delta.h and the layer of
// Forward.
//
// The layer is vLLM's KimiDeltaAttention (vllm/model_executor/layers/kda.py) and FLA's
// (fla/layers/kda.py), with the gate of fla/ops/kda/gate.py (kda_gate_ref):
// - q_proj, k_proj, v_proj (hidden → heads·head_dim, no bias), each through its own causal
//   depthwise conv1d (short_conv_kernel_size taps, no bias) and SiLU (ShortConvolution,
//   activation "silu"); each conv window (its last K − 1 inputs) is carried across steps.
// - q and k L2-normalised per head (use_qk_l2norm_in_kernel, FLA's l2norm eps 1e-6); q scaled by
//   head_dim^-1/2 (chunk_kda's default scale).
// - The forget gate per key channel: g = −exp(A_log[h]) · softplus(f_b_proj(f_a_proj(x)) +
//   dt_bias) (kda_gate_ref: A_log one value per head, also when Kimi-K3 stores it padded to
//   head_dim (addKimiDeltaWeights), dt_bias one per channel; torch softplus
//   with threshold 20); with linear_attn_config.gate_lower_bound (Kimi-K3's safe gate, FLA's
//   fused_kda_gate lower_bound) g = lower_bound · σ(exp(A_log[h]) · (f_b_proj(f_a_proj(x)) +
//   dt_bias)), in (lower_bound, 0).
// - β = σ(b_proj(x)), one per head.
// - The delta rule keeps a [heads, head_dim, head_dim] state per layer, carried across steps: the
//   chunked form for steps of more than one token (chunk_kda), the recurrent one for decode steps
//   (fused_recurrent_kda).
// - The output passes o_norm (FusedRMSNormGated, activation "sigmoid", eps rms_norm_eps): RMS
//   norm over one head, times its weight, times σ(g_b_proj(g_a_proj(x))) (Kimi-K3's
//   use_full_rank_gate: σ(g_proj(x)), vLLM kda.py); then o_proj.
// Precision: vLLM keeps the recurrent state in fp32 (kda_state_dtype), so the state is kept in
// the compute type and only the rule's inputs and output are rounded to an emulated dtype.
#include "exec/kimi_delta.h"

#include "exec/batch_decode.h"
#include "exec/forward.h"
#include "exec/gated_head_norm.h"
#include "exec/ops.h"
#include "exec/recurrent_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace day0::exec {

template <typename T>
void kimiDeltaRecurrent(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& s)
{
    const std::int64_t dk = s.keyDim;
    const std::int64_t dv = s.valueDim;
    std::vector<T> delta(static_cast<std::size_t>(dv));
    for (std::int64_t t = 0; t < s.tokens; ++t) {
        for (std::int64_t h = 0; h < s.heads; ++h) {
            T* st = state + h * dk * dv;
            const std::int64_t row = t * s.heads + h;
            const T* kt = k + row * dk;
            const T* qt = q + row * dk;
            const T* vt = v + row * dv;
            const T* gt = g + row * dk;
            for (std::int64_t i = 0; i < dk; ++i) {
                const T decay = std::exp(gt[i]);
                for (std::int64_t j = 0; j < dv; ++j) {
                    st[i * dv + j] *= decay;
                }
            }
            // δ = β (v − Sᵀk)
            std::copy_n(vt, dv, delta.begin());
            for (std::int64_t i = 0; i < dk; ++i) {
                for (std::int64_t j = 0; j < dv; ++j) {
                    delta[std::size_t(j)] -= kt[i] * st[i * dv + j];
                }
            }
            const T b = beta[row];
            T* o = out + row * dv;
            std::fill_n(o, dv, T(0));
            for (std::int64_t i = 0; i < dk; ++i) {
                for (std::int64_t j = 0; j < dv; ++j) {
                    st[i * dv + j] += kt[i] * b * delta[std::size_t(j)];
                    o[j] += qt[i] * st[i * dv + j];
                }
            }
        }
    }
}

template <typename T>
void kimiDeltaChunked(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& s, std::int64_t chunk)
{
    const std::int64_t dk = s.keyDim;
    const std::int64_t dv = s.valueDim;
    const std::int64_t c = std::max<std::int64_t>(1, chunk);
    std::vector<T> cum(static_cast<std::size_t>(c * dk)); // G_i per channel
    std::vector<T> decayed(static_cast<std::size_t>(c * dk)); // e^{G_i} ⊙ k_i, then ⊙ q_i
    std::vector<T> start(static_cast<std::size_t>(c * dv)); // Sᵀ(e^{G_i} ⊙ ·) as rows
    std::vector<T> delta(static_cast<std::size_t>(c * dv));
    std::vector<T> kdT(static_cast<std::size_t>(dk * c));
    const auto pair = [&](const T* a, std::int64_t i, const T* kj, std::int64_t j) {
        // (e^{G_i − G_j} ⊙ a)·k_j, j ≤ i
        const T* gi = cum.data() + i * dk;
        const T* gj = cum.data() + j * dk;
        T sum = T(0);
        for (std::int64_t x = 0; x < dk; ++x) {
            sum += a[x] * kj[x] * std::exp(gi[x] - gj[x]);
        }
        return sum;
    };
    for (std::int64_t h = 0; h < s.heads; ++h) {
        T* st = state + h * dk * dv;
        for (std::int64_t first = 0; first < s.tokens; first += c) {
            const std::int64_t len = std::min(c, s.tokens - first);
            const auto rowOf = [&](std::int64_t i) { return (first + i) * s.heads + h; };
            for (std::int64_t i = 0; i < len; ++i) {
                const T* gi = g + rowOf(i) * dk;
                for (std::int64_t x = 0; x < dk; ++x) {
                    cum[std::size_t(i * dk + x)]
                        = (i > 0 ? cum[std::size_t((i - 1) * dk + x)] : T(0)) + gi[x];
                }
            }
            // Right-hand sides β_i (v_i − Sᵀ(e^{G_i} ⊙ k_i)), then the forward substitution.
            for (std::int64_t i = 0; i < len; ++i) {
                const T* ki = k + rowOf(i) * dk;
                for (std::int64_t x = 0; x < dk; ++x) {
                    decayed[std::size_t(i * dk + x)]
                        = ki[x] * std::exp(cum[std::size_t(i * dk + x)]);
                }
            }
            matmul(decayed.data(), st, start.data(), len, dv, dk);
            for (std::int64_t i = 0; i < len; ++i) {
                const T b = beta[rowOf(i)];
                const T* vi = v + rowOf(i) * dv;
                const T* ki = k + rowOf(i) * dk;
                T* d = delta.data() + i * dv;
                for (std::int64_t j = 0; j < dv; ++j) {
                    d[j] = b * (vi[j] - start[std::size_t(i * dv + j)]);
                }
                for (std::int64_t m = 0; m < i; ++m) {
                    const T coeff = b * pair(ki, i, k + rowOf(m) * dk, m);
                    const T* dm = delta.data() + m * dv;
                    for (std::int64_t j = 0; j < dv; ++j) {
                        d[j] -= coeff * dm[j];
                    }
                }
            }
            // o_i = Sᵀ(e^{G_i} ⊙ q_i) + Σ_{j≤i} ((e^{G_i − G_j} ⊙ q_i)·k_j) δ_j.
            for (std::int64_t i = 0; i < len; ++i) {
                const T* qi = q + rowOf(i) * dk;
                for (std::int64_t x = 0; x < dk; ++x) {
                    decayed[std::size_t(i * dk + x)]
                        = qi[x] * std::exp(cum[std::size_t(i * dk + x)]);
                }
            }
            matmul(decayed.data(), st, start.data(), len, dv, dk);
            for (std::int64_t i = 0; i < len; ++i) {
                const T* qi = q + rowOf(i) * dk;
                T* o = out + rowOf(i) * dv;
                std::copy_n(start.begin() + i * dv, dv, o);
                for (std::int64_t m = 0; m <= i; ++m) {
                    const T coeff = pair(qi, i, k + rowOf(m) * dk, m);
                    const T* dm = delta.data() + m * dv;
                    for (std::int64_t j = 0; j < dv; ++j) {
                        o[j] += coeff * dm[j];
                    }
                }
            }
            // S ← diag(e^{G_L}) S + Σ_j (e^{G_L − G_j} ⊙ k_j) δ_jᵀ.
            const T* last = cum.data() + (len - 1) * dk;
            for (std::int64_t j = 0; j < len; ++j) {
                const T* kj = k + rowOf(j) * dk;
                for (std::int64_t x = 0; x < dk; ++x) {
                    kdT[std::size_t(x * len + j)]
                        = kj[x] * std::exp(last[x] - cum[std::size_t(j * dk + x)]);
                }
            }
            for (std::int64_t x = 0; x < dk; ++x) {
                const T decay = std::exp(last[x]);
                for (std::int64_t j = 0; j < dv; ++j) {
                    st[x * dv + j] *= decay;
                }
            }
            matmul(kdT.data(), delta.data(), st, dk, dv, len, true);
        }
    }
}

#define DAY0_KIMI_DELTA(T)                                                                         \
    template void kimiDeltaRecurrent<T>(                                                           \
        const T*, const T*, const T*, const T*, const T*, T*, T*, const DeltaRuleShape&);          \
    template void kimiDeltaChunked<T>(const T*, const T*, const T*, const T*, const T*, T*, T*,    \
        const DeltaRuleShape&, std::int64_t);
DAY0_KIMI_DELTA(float)
DAY0_KIMI_DELTA(double)
#undef DAY0_KIMI_DELTA

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

void addKimiDeltaWeights(const model::ModelSpec& spec, int layer, std::vector<WeightRequirement>& w)
{
    const auto& la = *spec.linearAttention;
    const std::string p = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t d = la.valueHeadDim;
    const std::int64_t width = la.valueHeads * d;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    for (const char* x : { "q", "k", "v" }) {
        add(fmt::format("{}.{}_proj.weight", p, x), { width, h });
        add(fmt::format("{}.{}_conv1d.weight", p, x), { width, 1, la.convKernel });
    }
    add(p + ".f_a_proj.weight", { d, h });
    add(p + ".f_b_proj.weight", { width, d });
    if (la.paddedALog) {
        // Kimi-K3 stores A_log as [head_dim]: the heads' values, then zeros (the real shard: 96
        // of 128). The official layer hands it to FLA's chunk_kda / fused_recurrent_kda, whose
        // gate kernels load A_log at the head index, so head h reads A_log[h], the first
        // num_heads values. (A numpy oracle of K3's ops reads a [head_dim] A_log per key channel
        // instead; the official kernels' indexing, which MLX, vLLM-Ascend and llama.cpp ports of
        // K3 follow, is what is computed here.)
        add(p + ".A_log", { d });
    } else {
        add(p + ".A_log", { 1, 1, la.valueHeads, 1 });
    }
    add(p + ".dt_bias", { width });
    add(p + ".b_proj.weight", { la.valueHeads, h });
    if (la.fullRankGate) { // Kimi-K3 use_full_rank_gate: one g_proj for the output gate
        add(p + ".g_proj.weight", { width, h });
    } else {
        add(p + ".g_a_proj.weight", { d, h });
        add(p + ".g_b_proj.weight", { width, d });
    }
    add(p + ".o_norm.weight", { d });
    add(p + ".o_proj.weight", { h, width });
}

template <typename T> void Forward<T>::kimiDeltaInit()
{
    if (!m_spec.linearAttention) {
        return;
    }
    const auto& la = *m_spec.linearAttention;
    const std::int64_t width = la.valueHeads * la.valueHeadDim;
    m_deltaStates.resize(std::size_t(m_spec.numLayers));
    for (std::size_t l = 0; l < m_deltaStates.size(); ++l) {
        if (m_spec.layers[l].mixer != model::MixerKind::KimiDelta) {
            continue;
        }
        // The q, k and v windows one after the other: [3][kernel − 1, width].
        m_deltaStates[l].window.assign(std::size_t(3 * (la.convKernel - 1) * width), T(0));
        m_deltaStates[l].state.assign(
            std::size_t(la.valueHeads * la.keyHeadDim * la.valueHeadDim), T(0));
    }
}

template <typename T>
void Forward<T>::kimiDeltaBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps)
{
    const auto& la = *m_spec.linearAttention;
    const std::string p = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = la.valueHeads;
    const std::int64_t d = la.valueHeadDim;
    const std::int64_t width = heads * d;
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    const std::int64_t windowSize = (la.convKernel - 1) * width;
    if constexpr (std::is_same_v<T, float>) {
        // The projections go through the backend (linear); the rest has no Backend operator.
        m_ops.hostOnly("KDA short convolutions, gate, delta rule and gated o_norm");
    }

    // The recurrent parts (the q, k and v conv windows, the delta rule's state) run per
    // sequence: in a batched step (batch_decode.h) each sequence's rows over its own Forward's
    // state, in order, as that sequence alone would; the projections and row-wise maths take
    // every row at once.
    const std::vector<SequenceRows<T>> rows = stepSequenceRows(this, n);
    const auto own = [&](const SequenceRows<T>& seq) -> DeltaState& {
        return seq.seq->m_deltaStates[std::size_t(layer)];
    };

    // q, k, v: projection, then each its own causal conv and SiLU.
    std::vector<T> qkv[3];
    const char* names[3] = { "q", "k", "v" };
    std::vector<T> projected(static_cast<std::size_t>(n * width));
    for (int i = 0; i < 3; ++i) {
        linear(fmt::format("{}.{}_proj", p, names[i]), x, projected.data(), n, h, width,
            OpKind::Linear, layer, taps, true);
        qkv[i].resize(std::size_t(n * width));
        const T* convWeight = weight(fmt::format("{}.{}_conv1d.weight", p, names[i]));
        for (const SequenceRows<T>& seq : rows) {
            causalConv1dSilu(projected.data() + seq.offset * width,
                qkv[i].data() + seq.offset * width, seq.count, width, convWeight, la.convKernel,
                own(seq).window.data() + i * windowSize);
        }
        roundAct(qkv[i].data(), n * width, mode);
    }
    std::vector<T>& q = qkv[0];
    std::vector<T>& k = qkv[1];
    l2NormalizeRows(q.data(), n * heads, d, 1e-6);
    l2NormalizeRows(k.data(), n * heads, d, 1e-6);
    const T scale = T(1.0 / std::sqrt(double(d)));
    for (auto& value : q) {
        value *= scale;
    }
    roundAct(q.data(), n * width, mode);
    roundAct(k.data(), n * width, mode);

    // The per-channel log decay and β.
    std::vector<T> low(static_cast<std::size_t>(n * d));
    std::vector<T> g(static_cast<std::size_t>(n * width));
    linear(p + ".f_a_proj", x, low.data(), n, h, d, OpKind::Linear, layer, taps, true);
    linear(p + ".f_b_proj", low.data(), g.data(), n, d, width, OpKind::Linear, layer, taps, true);
    const T* aLog = weight(p + ".A_log");
    const T* dtBias = weight(p + ".dt_bias");
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < width; ++c) {
            T& gc = g[std::size_t(t * width + c)];
            const T rate = std::exp(aLog[c / d]); // A_log of head c / d
            gc = la.gateLowerBound != 0.0 ? T(la.gateLowerBound) * sigmoid(rate * (gc + dtBias[c]))
                                          : -rate * softplus(gc + dtBias[c]);
        }
    }
    std::vector<T> beta(static_cast<std::size_t>(n * heads));
    linear(p + ".b_proj", x, beta.data(), n, h, heads, OpKind::Linear, layer, taps, true);
    for (auto& b : beta) {
        b = sigmoid(b);
    }
    roundAct(beta.data(), n * heads, mode);

    std::vector<T> core(static_cast<std::size_t>(n * width));
    for (const SequenceRows<T>& seq : rows) {
        const DeltaRuleShape shape { seq.count, heads, d, d };
        const std::int64_t o = seq.offset * width;
        T* state = own(seq).state.data();
        if (seq.count == 1) {
            kimiDeltaRecurrent(q.data() + o, k.data() + o, qkv[2].data() + o, g.data() + o,
                beta.data() + seq.offset * heads, state, core.data() + o, shape);
        } else {
            kimiDeltaChunked(q.data() + o, k.data() + o, qkv[2].data() + o, g.data() + o,
                beta.data() + seq.offset * heads, state, core.data() + o, shape, m_deltaChunk);
        }
    }
    if (rows.size() == 1) {
        // The state as data (recurrent_state.h): [heads, key dim, value dim], and the q, k and
        // v conv windows one after the other.
        const DeltaState& st = own(rows.front());
        recordRecurrentState(taps, p, st.state.data(), { heads, d, d }, st.window.data(),
            { 3, la.convKernel - 1, width });
    }
    roundAct(core.data(), n * width, mode);

    // o_norm: RMS norm over each head · w, rounded, times σ(gate) in the compute type.
    std::vector<T> gate(static_cast<std::size_t>(n * width));
    if (la.fullRankGate) {
        linear(p + ".g_proj", x, gate.data(), n, h, width, OpKind::Linear, layer, taps, true);
    } else {
        linear(p + ".g_a_proj", x, low.data(), n, h, d, OpKind::Linear, layer, taps, true);
        linear(p + ".g_b_proj", low.data(), gate.data(), n, d, width, OpKind::Linear, layer, taps,
            true);
    }
    const PrecisionMode normMode = m_plan.modeFor(OpKind::Norm, layer);
    gatedHeadNorm(core.data(), gate.data(), weight(p + ".o_norm.weight"), n * heads, d,
        m_spec.normEps, HeadGate::Sigmoid,
        [&](T* values, std::int64_t count) { roundAct(values, count, normMode); });
    linear(p + ".o_proj", core.data(), out, n, width, h, OpKind::Linear, layer, taps, true);
}

template void Forward<float>::kimiDeltaInit();
template void Forward<double>::kimiDeltaInit();
template void Forward<float>::kimiDeltaBlock(int, const float*, float*, std::int64_t, Taps<float>&);
template void Forward<double>::kimiDeltaBlock(
    int, const double*, double*, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
