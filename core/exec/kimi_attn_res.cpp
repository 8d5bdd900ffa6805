// Kimi-K3's Block Attention Residuals (attn_res_block_size): the decoder layer of Forward that
// replaces the plain residual stream, and the mix it applies before each sub-block and before
// the final norm.
//
// Semantics, from Moonshot's modeling_kimi_linear.py as public line-by-line transcriptions give
// it (KimiDecoderLayer._forward_attn_residual, _apply_attn_res, KimiLinearModel.forward; a
// torchtitan Kimi-K3 port computes the same bookkeeping):
// - The stream carries the sealed block sums b_0 .. b_{m-1} of every token and the running
//   partial sum p. The embedding enters as p; nothing is sealed yet.
// - Layer l: x = mix_attn(blocks, p) when a block is sealed (layer 0 reads p itself). Then, when
//   l % attn_res_block_size == 0, p is sealed as the next block and the partial sum restarts
//   empty: the embedding is block 0 (sealed by layer 0), the sum of layers 0..B−1 block 1, and
//   so on. The attention reads input_layernorm(x); p ← p + attn (or attn, restarted). The MLP
//   reads post_attention_layernorm(mix_mlp(blocks, p)); p ← p + mlp. The layer outputs p.
// - After the last layer, output_attn_res mixes (blocks, p) once more before the final norm.
// - mix(blocks, p) with a layer's <name>_res_norm (weight w, eps rms_norm_eps) and
//   <name>_res_proj (one row r): over the values v_j = (b_0, .., b_{m-1}, p) of each token,
//   score_j = Σ_c v̂_jc · w_c · r_c with v̂_j = v_j / sqrt(mean(v_j²) + eps) (the RMSNorm without
//   its weight on v: the weight only scores), softmax over j, and the mix Σ_j softmax_j · v_j of
//   the unnormalised values. The official code computes it in fp32 and casts the result back to
//   the stream's dtype.
#include "exec/forward.h"
#include "exec/kimi_k3_ops.h"
#include "exec/ops.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace day0::exec {

template <typename T> void situGlu(T* g, const T* u, std::int64_t n, double beta, double linearBeta)
{
    const T b = T(beta);
    const T lb = T(linearBeta);
    for (std::int64_t j = 0; j < n; ++j) {
        const T gate = g[j];
        const T up = lb > T(0) ? lb * std::tanh(u[j] / lb) : u[j];
        g[j] = b * std::tanh(gate / b) * sigmoid(gate) * up;
    }
}

template <typename T>
void attnResMix(std::span<const T* const> values, std::int64_t n, std::int64_t h, const T* score,
    double eps, T* out)
{
    const std::size_t count = values.size();
    std::vector<T> logits(count);
    std::vector<T> mixed(static_cast<std::size_t>(h));
    for (std::int64_t t = 0; t < n; ++t) {
        T largest = T(0);
        for (std::size_t j = 0; j < count; ++j) {
            const T* v = values[j] + t * h;
            T square = T(0);
            T dot = T(0);
            for (std::int64_t c = 0; c < h; ++c) {
                square += v[c] * v[c];
                dot += v[c] * score[c];
            }
            logits[j] = dot / std::sqrt(square / T(h) + T(eps));
            largest = j == 0 ? logits[j] : std::max(largest, logits[j]);
        }
        T total = T(0);
        for (auto& l : logits) {
            l = std::exp(l - largest);
            total += l;
        }
        std::fill(mixed.begin(), mixed.end(), T(0));
        for (std::size_t j = 0; j < count; ++j) {
            const T p = logits[j] / total;
            const T* v = values[j] + t * h;
            for (std::int64_t c = 0; c < h; ++c) {
                mixed[std::size_t(c)] += p * v[c];
            }
        }
        // Written after every value is read: `out` may alias one.
        std::copy(mixed.begin(), mixed.end(), out + t * h);
    }
}

#define DAY0_KIMI_K3_OPS(T)                                                                        \
    template void situGlu<T>(T*, const T*, std::int64_t, double, double);                          \
    template void attnResMix<T>(                                                                   \
        std::span<const T* const>, std::int64_t, std::int64_t, const T*, double, T*);
DAY0_KIMI_K3_OPS(float)
DAY0_KIMI_K3_OPS(double)
#undef DAY0_KIMI_K3_OPS

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T>
void Forward<T>::attnResMix(const std::string& module, const std::vector<std::vector<T>>& blocks,
    const T* partial, T* out, std::int64_t n, int layer)
{
    if constexpr (std::is_same_v<T, float>) {
        m_ops.hostOnly("Kimi-K3 Block Attention Residuals");
    }
    const std::int64_t h = m_spec.hiddenSize;
    const T* w = weight(module + "_res_norm.weight");
    const T* r = weight(module + "_res_proj.weight");
    // The norm's weight only scores (_apply_attn_res: norm.weight * proj.weight).
    std::vector<T> score(static_cast<std::size_t>(h));
    for (std::int64_t c = 0; c < h; ++c) {
        score[std::size_t(c)] = w[c] * r[c];
    }
    std::vector<const T*> values;
    for (const auto& block : blocks) {
        values.push_back(block.data());
    }
    values.push_back(partial);
    exec::attnResMix<T>(values, n, h, score.data(), m_spec.normEps, out);
    roundAct(out, n * h, m_plan.modeFor(OpKind::DecoderLayer, layer));
}

template <typename T>
void Forward<T>::kimiAttnResLayer(int layer, T* hidden, std::vector<std::vector<T>>& blocks,
    std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const LayerNames names = layerNames(m_spec, layer);
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::int64_t h = m_spec.hiddenSize;
    const std::size_t size = std::size_t(n * h);
    const PrecisionMode residualMode = m_plan.modeFor(OpKind::DecoderLayer, layer);
    std::vector<T> mixed(hidden, hidden + size);
    if (!blocks.empty()) {
        attnResMix(names.prefix + ".self_attention", blocks, hidden, mixed.data(), n, layer);
    }
    // The partial sum p (in `hidden`) is sealed as a block and restarts empty.
    const bool sealed = layer % m_spec.attnResBlockSize == 0;
    if (sealed) {
        blocks.emplace_back(hidden, hidden + size);
    }
    std::vector<T> x(size);
    std::vector<T> branch(size);
    rmsNormOp(names.prefix + ".input_layernorm", mixed.data(), x.data(), n, h, layer);
    taps.record(names.prefix + ".input_layernorm", x.data(), { n, h });
    const std::string mixer = names.prefix + ".self_attn";
    {
        const profile::TraceScope traced(mixer);
        if (spec.mixer == model::MixerKind::KimiDelta) {
            kimiDeltaBlock(layer, x.data(), branch.data(), n, taps);
        } else {
            mlaBlock(layer, x.data(), branch.data(), n, start, taps);
        }
    }
    taps.record(mixer, branch.data(), { n, h });
    if (sealed) {
        std::copy(branch.begin(), branch.end(), hidden);
    } else {
        addInPlace(hidden, branch.data(), n * h);
        roundAct(hidden, n * h, residualMode);
    }
    attnResMix(names.prefix + ".mlp", blocks, hidden, mixed.data(), n, layer);
    const std::string postNorm = names.prefix + ".post_attention_layernorm";
    rmsNormOp(postNorm, mixed.data(), x.data(), n, h, layer);
    taps.record(postNorm, x.data(), { n, h });
    const bool moe = m_spec.moe && spec.moe();
    {
        const profile::TraceScope traced(names.ffn);
        if (moe) {
            moeBlock(layer, x.data(), branch.data(), n, taps);
        } else {
            mlp(names.ffn, "gate_proj", "up_proj", "down_proj", x.data(), branch.data(), n,
                m_spec.ffnWidthOf(spec), layer, taps);
        }
    }
    taps.record(names.ffn, branch.data(), { n, h }, moe ? "moe" : "mlp");
    addInPlace(hidden, branch.data(), n * h);
    roundAct(hidden, n * h, residualMode);
}

template void Forward<float>::attnResMix(const std::string&, const std::vector<std::vector<float>>&,
    const float*, float*, std::int64_t, int);
template void Forward<double>::attnResMix(const std::string&,
    const std::vector<std::vector<double>>&, const double*, double*, std::int64_t, int);
template void Forward<float>::kimiAttnResLayer(
    int, float*, std::vector<std::vector<float>>&, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::kimiAttnResLayer(
    int, double*, std::vector<std::vector<double>>&, std::int64_t, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
