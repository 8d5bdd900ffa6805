// The attention sub-blocks of Forward: standard (MHA/GQA/MQA, QK-norm, biases) and DeepSeek MLA.
#include "exec/attention.h"
#include "exec/batch_decode.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec {

double attentionTemperature(std::int64_t position, double floorScale, double attnScale)
{
    return std::log(std::floor((double(position) + 1.0) / floorScale) + 1.0) * attnScale + 1.0;
}

template <typename T> void unitRmsNorm(T* x, std::int64_t rows, std::int64_t dim, double eps)
{
    for (std::int64_t r = 0; r < rows; ++r) {
        T* row = x + r * dim;
        double sum = 0.0;
        for (std::int64_t c = 0; c < dim; ++c) {
            sum += double(row[c]) * double(row[c]);
        }
        const double inv = 1.0 / std::sqrt(sum / double(dim) + eps);
        for (std::int64_t c = 0; c < dim; ++c) {
            row[c] = T(double(row[c]) * inv);
        }
    }
}

template void unitRmsNorm<float>(float*, std::int64_t, std::int64_t, double);
template void unitRmsNorm<double>(double*, std::int64_t, std::int64_t, double);

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T>
void Forward<T>::causalAttention(int layer, const T* q, std::int64_t n, std::int64_t start,
    std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim, std::int64_t valueDim,
    double scale, T* out, std::span<const std::int64_t> selected)
{
    const Cache& cache
        = m_caches[std::size_t(m_kvSource.empty() ? layer : m_kvSource[std::size_t(layer)])];
    AttentionShape shape = decoderAttentionShape(
        m_spec.layers[std::size_t(layer)], n, start, heads, kvHeads, headDim, valueDim, scale);
    if (!m_sinks.empty()) {
        shape.sinks = m_sinks[std::size_t(layer)];
    }
    if (!selected.empty()) {
        shape.selectedKeys = selected;
        shape.selectedPerQuery = std::int64_t(selected.size()) / n;
    }
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    if constexpr (std::is_same_v<T, float>) {
        m_ops.attention(q, cache.k.data(), cache.v.data(), out, shape, mode);
    } else {
        attention<T>(q, cache.k.data(), cache.v.data(), out, shape);
    }
}

template <typename T>
void Forward<T>::rotate(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    const Rope& table, PrecisionMode mode)
{
    if constexpr (std::is_same_v<T, float>) {
        m_ops.rope(x, tokens, heads, headDim, m_positions, table, m_positions3, mode);
    } else {
        (void)mode;
        applyRope<T>(x, tokens, heads, headDim, m_positions, table, m_positions3);
    }
}

template <typename T>
void Forward<T>::attentionBlock(
    int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t qDim = m_spec.numHeads * d;
    // Nemotron-NAS sets the KV heads per layer.
    const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(layer)]);
    const std::int64_t kvDim = kvHeads * d;
    std::vector<T> q(std::size_t(n * qDim));
    std::vector<T> k(std::size_t(n * kvDim));
    std::vector<T> v(std::size_t(n * kvDim));
    // Qwen3-Next (Qwen3NextAttention): q_proj emits each head's query then its output gate.
    std::vector<T> gate;
    if (m_spec.attentionOutputGate) {
        std::vector<T> both(std::size_t(n * 2 * qDim));
        linear(attn + ".q_proj", x, both.data(), n, h, 2 * qDim, OpKind::Linear, layer, taps, true);
        gate.resize(std::size_t(n * qDim));
        for (std::int64_t i = 0; i < n * m_spec.numHeads; ++i) {
            std::copy_n(both.begin() + i * 2 * d, d, q.begin() + i * d);
            std::copy_n(both.begin() + i * 2 * d + d, d, gate.begin() + i * d);
        }
    } else {
        linear(attn + ".q_proj", x, q.data(), n, h, qDim, OpKind::Linear, layer, taps, true);
    }
    linear(attn + ".k_proj", x, k.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    linear(attn + ".v_proj", x, v.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    if (m_spec.qkNormAcrossHeads) {
        // MiniMax-M2: one RMSNorm over the whole q and k projections, before RoPE.
        rmsNormOp(attn + ".q_norm", q.data(), q.data(), n, qDim, layer);
        rmsNormOp(attn + ".k_norm", k.data(), k.data(), n, kvDim, layer);
        taps.record(attn + ".q_norm", q.data(), { n, qDim });
        taps.record(attn + ".k_norm", k.data(), { n, kvDim });
    }
    // Qwen3 normalises each head before RoPE, Hunyuan after it.
    const LayerNames names = layerNames(m_spec, layer);
    const bool normAfterRope = m_spec.family == model::Family::Hunyuan;
    const auto headNorms = [&] {
        rmsNormOp(names.qNorm, q.data(), q.data(), n * m_spec.numHeads, d, layer);
        rmsNormOp(names.kNorm, k.data(), k.data(), n * kvHeads, d, layer);
        taps.record(names.qNorm, q.data(), { n, m_spec.numHeads, d });
        taps.record(names.kNorm, k.data(), { n, kvHeads, d });
    };
    if (m_spec.qkNorm && !normAfterRope) {
        headNorms();
    }
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    if (m_spec.layers[std::size_t(layer)].rope) {
        // Llama-4 (Llama4TextL2Norm) normalises each head after RoPE, without a weight; the
        // rounding then follows the norm.
        const PrecisionMode ropeMode = m_spec.qkL2Norm ? PrecisionMode::F32 : mode;
        rotate(q.data(), n, m_spec.numHeads, d, m_rope, ropeMode);
        rotate(k.data(), n, kvHeads, d, m_rope, ropeMode);
        if (m_spec.qkL2Norm) {
            unitRmsNorm(q.data(), n * m_spec.numHeads, d, m_spec.normEps);
            unitRmsNorm(k.data(), n * kvHeads, d, m_spec.normEps);
            roundAct(q.data(), n * qDim, mode);
            roundAct(k.data(), n * kvDim, mode);
        }
    } else if (m_spec.attnTemperatureScale > 0.0) {
        // Llama-4 NoPE layers: attention temperature tuning of the queries by position.
        for (std::int64_t t = 0; t < n; ++t) {
            const T s = T(attentionTemperature(
                m_positions[std::size_t(t)], m_spec.attnFloorScale, m_spec.attnTemperatureScale));
            T* row = q.data() + t * qDim;
            for (std::int64_t c = 0; c < qDim; ++c) {
                row[c] *= s;
            }
        }
        roundAct(q.data(), n * qDim, mode);
    }
    if (m_spec.qkNorm && normAfterRope) {
        headNorms();
    }
    std::vector<T> context(std::size_t(n * qDim));
    if (const DecodeBatch<T>* batch = currentDecodeBatch<T>(); batch != nullptr) {
        // A batched step (batch_decode.h): sequence i's rows (one in a decode step, its
        // prompt in a batched prefill) attend causally over that sequence's cache.
        std::int64_t row = 0;
        for (std::size_t i = 0; i < batch->seqs.size(); ++i) {
            Forward<T>& seq = *batch->seqs[i];
            const std::int64_t at = batch->starts[i];
            const std::int64_t rows = batch->count(i);
            Cache& cache = seq.m_caches[std::size_t(layer)];
            std::copy_n(k.begin() + row * kvDim, rows * kvDim, cache.k.begin() + at * kvDim);
            std::copy_n(v.begin() + row * kvDim, rows * kvDim, cache.v.begin() + at * kvDim);
            seq.causalAttention(layer, q.data() + row * qDim, rows, at, m_spec.numHeads, kvHeads, d,
                d, m_attentionScale, context.data() + row * qDim);
            row += rows;
        }
    } else {
        Cache& cache = m_caches[std::size_t(layer)];
        std::copy(k.begin(), k.end(), cache.k.begin() + start * kvDim);
        std::copy(v.begin(), v.end(), cache.v.begin() + start * kvDim);
        causalAttention(layer, q.data(), n, start, m_spec.numHeads, kvHeads, d, d, m_attentionScale,
            context.data());
    }
    if (!gate.empty()) {
        for (std::size_t i = 0; i < context.size(); ++i) {
            context[i] *= T(1) / (T(1) + std::exp(-gate[i]));
        }
        roundAct(context.data(), n * qDim, mode);
    }
    linear(attn + ".o_proj", context.data(), out, n, qDim, h, OpKind::Linear, layer, taps, true);
}

template <typename T>
void Forward<T>::mlaBlock(
    int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const auto& m = m_spec.mla;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t nope = m.qkNopeHeadDim;
    const std::int64_t rope = m.qkRopeHeadDim;
    const std::int64_t qk = nope + rope;
    const std::int64_t vd = m.vHeadDim;
    std::vector<T> q(std::size_t(n * heads * qk));
    const bool indexed = m_spec.layers[std::size_t(layer)].mixer == model::MixerKind::SparseMla;
    if (m.qLoraRank > 0) {
        std::vector<T> qa(std::size_t(n * m.qLoraRank));
        linear(
            attn + ".q_a_proj", x, qa.data(), n, h, m.qLoraRank, OpKind::Linear, layer, taps, true);
        rmsNormOp(
            attn + ".q_a_layernorm", qa.data(), qa.data(), n, m.qLoraRank, layer, m.latentNormEps);
        taps.record(attn + ".q_a_layernorm", qa.data(), { n, m.qLoraRank });
        linear(attn + ".q_b_proj", qa.data(), q.data(), n, m.qLoraRank, heads * qk, OpKind::Linear,
            layer, taps, true);
        if (indexed) {
            dsaIndexer(layer, x, qa.data(), n, start, taps); // reads the query latent
        }
    } else {
        linear(attn + ".q_proj", x, q.data(), n, h, heads * qk, OpKind::Linear, layer, taps, true);
    }
    const std::int64_t ckvWidth = m.kvLoraRank + rope;
    std::vector<T> ckv(std::size_t(n * ckvWidth));
    linear(attn + ".kv_a_proj_with_mqa", x, ckv.data(), n, h, ckvWidth, OpKind::Linear, layer, taps,
        true);
    std::vector<T> latent(std::size_t(n * m.kvLoraRank));
    std::vector<T> kPe(std::size_t(n * rope));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(ckv.begin() + t * ckvWidth, m.kvLoraRank, latent.begin() + t * m.kvLoraRank);
        std::copy_n(ckv.begin() + t * ckvWidth + m.kvLoraRank, rope, kPe.begin() + t * rope);
    }
    rmsNormOp(attn + ".kv_a_layernorm", latent.data(), latent.data(), n, m.kvLoraRank, layer,
        m.latentNormEps);
    taps.record(attn + ".kv_a_layernorm", latent.data(), { n, m.kvLoraRank });
    std::vector<T> kv(std::size_t(n * heads * (nope + vd)));
    linear(attn + ".kv_b_proj", latent.data(), kv.data(), n, m.kvLoraRank, heads * (nope + vd),
        OpKind::Linear, layer, taps, true);

    // Interleaved RoPE on the rope part of each query head and on the one shared rope key.
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    std::vector<T> qPe(std::size_t(n * heads * rope));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(q.begin() + i * qk + nope, rope, qPe.begin() + i * rope);
    }
    // Kimi-Linear's mla_use_nope: the rope slices are projected and cached but not rotated
    // (vLLM models/kimi_linear.py builds its MLA without a rotary embedding then).
    if (!m.noRope) {
        rotate(qPe.data(), n, heads, rope, m_rope, mode);
        rotate(kPe.data(), n, 1, rope, m_rope, mode);
    }
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(qPe.begin() + i * rope, rope, q.begin() + i * qk + nope);
    }

    // Expanded keys [heads, nope | shared rope] and values of rows [first, first + rows) go to
    // `cache` from position `at`.
    const std::int64_t kWidth = heads * qk;
    const std::int64_t vWidth = heads * vd;
    const auto toCache = [&](Cache& cache, std::int64_t first, std::int64_t rows, std::int64_t at) {
        for (std::int64_t t = first; t < first + rows; ++t) {
            T* kRow = cache.k.data() + (at + t - first) * kWidth;
            T* vRow = cache.v.data() + (at + t - first) * vWidth;
            for (std::int64_t hd = 0; hd < heads; ++hd) {
                const T* src = kv.data() + (t * heads + hd) * (nope + vd);
                std::copy_n(src, nope, kRow + hd * qk);
                std::copy_n(kPe.begin() + t * rope, rope, kRow + hd * qk + nope);
                std::copy_n(src + nope, vd, vRow + hd * vd);
            }
        }
    };
    std::vector<T> context(std::size_t(n * heads * vd));
    // DSA: a layer without its own indexer (GLM-5 "shared") attends over the previous one's keys.
    const bool sparse = m.indexerHeads > 0;
    if (const DecodeBatch<T>* batch = currentDecodeBatch<T>(); batch != nullptr && !sparse) {
        // A batched step (batch_decode.h; DSA is not batched): each sequence's rows attend
        // causally over that sequence's cache.
        std::int64_t row = 0;
        for (std::size_t i = 0; i < batch->seqs.size(); ++i) {
            Forward<T>& seq = *batch->seqs[i];
            const std::int64_t rows = batch->count(i);
            toCache(seq.m_caches[std::size_t(layer)], row, rows, batch->starts[i]);
            seq.causalAttention(layer, q.data() + row * heads * qk, rows, batch->starts[i], heads,
                heads, qk, vd, m_attentionScale, context.data() + row * heads * vd);
            row += rows;
        }
    } else {
        toCache(m_caches[std::size_t(layer)], 0, n, start);
        causalAttention(layer, q.data(), n, start, heads, heads, qk, vd, m_attentionScale,
            context.data(),
            sparse ? std::span<const std::int64_t>(m_selection) : std::span<const std::int64_t>());
    }
    if (m.outputGate) {
        // Kimi-K3's mla_use_output_gate: the attention output times σ(g_proj(x)), one gate per
        // value channel, before o_proj (vLLM models/kimi_linear.py KimiMLAAttention g_proj).
        std::vector<T> gate(std::size_t(n * heads * vd));
        linear(
            attn + ".g_proj", x, gate.data(), n, h, heads * vd, OpKind::Linear, layer, taps, true);
        for (std::size_t i = 0; i < gate.size(); ++i) {
            context[i] *= sigmoid(gate[i]);
        }
        roundAct(context.data(), n * heads * vd, mode);
    }
    linear(
        attn + ".o_proj", context.data(), out, n, heads * vd, h, OpKind::Linear, layer, taps, true);
}

template void Forward<float>::causalAttention(int, const float*, std::int64_t, std::int64_t,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, double, float*,
    std::span<const std::int64_t>);
template void Forward<double>::causalAttention(int, const double*, std::int64_t, std::int64_t,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, double, double*,
    std::span<const std::int64_t>);
// dsa_indexer.cpp and gemma4_block.cpp rotate with it too.
template void Forward<float>::rotate(
    float*, std::int64_t, std::int64_t, std::int64_t, const Rope&, PrecisionMode);
template void Forward<double>::rotate(
    double*, std::int64_t, std::int64_t, std::int64_t, const Rope&, PrecisionMode);
template void Forward<float>::attentionBlock(
    int, const float*, float*, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::attentionBlock(
    int, const double*, double*, std::int64_t, std::int64_t, Taps<double>&);
template void Forward<float>::mlaBlock(
    int, const float*, float*, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::mlaBlock(
    int, const double*, double*, std::int64_t, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
