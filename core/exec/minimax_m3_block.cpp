// MiniMax-M3's text decoder on the reference engine: MiniMax Sparse Attention (MSA) on the
// layers sparse_attention_freq marks, and the Gemma-style (1 + w) RMSNorms.
//
// Facts from NVIDIA-NeMo/Automodel nemo_automodel/components/models/minimax_m3_vl/layers.py
// (MiniMaxM3RMSNorm, MiniMaxM3Indexer, MiniMaxM3Attention, Block) and model.py
// (build_moe_config), which name sglang's models/minimax_m3.py as their reference:
// - every RMSNorm (input/post-attention, final, the per-head q/k norms and the index q/k norms)
//   computes x̂·(1 + w) when use_gemma_norm;
// - attention: q/k/v projections, per-head q_norm/k_norm over head_dim (qk_norm_type
//   "per_head"), then the partial rotary embedding (the first rotary_dim lanes, rotate-half),
//   GQA softmax(q·k·head_dim^-½);
// - on an MSA layer the index branch reads the same normed input x: index_q_proj(x) as
//   sparse_num_index_heads heads of sparse_index_dim, index_k_proj(x) one shared key, each
//   normed per head (index_q_norm / index_k_norm) and rotated like q and k (same frequencies,
//   the first rotary_dim lanes); selection in msa.h; each query head then attends causally to
//   the keys of its KV group's kept blocks. sparse_disable_index_value 1 (the only value the
//   spec accepts) means the branch has no value/output projection: it only selects.
// The dense/MoE split (moe_layer_freq), the shared expert, the sigmoid router with its
// correction bias and routed_scaling_factor, and swigluoai run in the shared ffn_block.cpp.
#include "exec/attention.h"
#include "exec/forward.h"
#include "exec/msa.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

namespace day0::exec {

template <typename T>
std::vector<double> keyBlockScores(const T* q, const T* k, const BlockSelectionShape& s)
{
    const std::int64_t blocks = (s.keys + s.blockSize - 1) / s.blockSize;
    std::vector<double> out(std::size_t(s.queries * s.heads * blocks), -INFINITY);
    const double scale = 1.0 / std::sqrt(double(s.dim));
    for (std::int64_t i = 0; i < s.queries; ++i) {
        const std::int64_t position = s.keys - s.queries + i;
        for (std::int64_t h = 0; h < s.heads; ++h) {
            const T* query = q + (i * s.heads + h) * s.dim;
            double* row = out.data() + (i * s.heads + h) * blocks;
            for (std::int64_t j = 0; j <= position; ++j) {
                const T* key = k + j * s.dim;
                double dot = 0.0;
                for (std::int64_t c = 0; c < s.dim; ++c) {
                    dot += double(query[c]) * double(key[c]);
                }
                row[j / s.blockSize] = std::max(row[j / s.blockSize], dot * scale);
            }
        }
    }
    return out;
}

template <typename T>
std::vector<std::int64_t> selectKeyBlocks(const T* q, const T* k, const BlockSelectionShape& s)
{
    const std::int64_t topK = s.topK;
    const std::int64_t blocks = (s.keys + s.blockSize - 1) / s.blockSize;
    std::vector<double> scores = keyBlockScores(q, k, s);
    std::vector<std::int64_t> out(std::size_t(s.queries * s.heads * topK), -1);
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < s.queries; ++i) {
        const std::int64_t current = (s.keys - s.queries + i) / s.blockSize;
        const std::int64_t visible = current + 1; // blocks [0, current]
        for (std::int64_t h = 0; h < s.heads; ++h) {
            double* blockScore = scores.data() + (i * s.heads + h) * blocks;
            // Kept whatever they score: the first initBlocks and the query's own block.
            for (std::int64_t b = 0; b < visible; ++b) {
                if (b < s.initBlocks || (s.localBlock && b == current)) {
                    blockScore[b] = INFINITY;
                }
            }
            order.resize(std::size_t(visible));
            std::iota(order.begin(), order.end(), std::int64_t(0));
            const std::int64_t kept = std::min(topK, visible);
            std::partial_sort(order.begin(), order.begin() + kept, order.end(),
                [&](std::int64_t a, std::int64_t b) {
                    return blockScore[a] > blockScore[b]
                        || (blockScore[a] == blockScore[b] && a < b);
                });
            std::sort(order.begin(), order.begin() + kept);
            std::copy_n(order.begin(), kept, out.begin() + (i * s.heads + h) * topK);
        }
    }
    return out;
}

BlockSelectionShape blockSelectionShape(
    const model::BlockSparseSpec& bs, std::int64_t queries, std::int64_t keys)
{
    BlockSelectionShape shape;
    shape.queries = queries;
    shape.keys = keys;
    shape.heads = bs.indexHeads;
    shape.dim = bs.indexDim;
    shape.blockSize = bs.blockSize;
    shape.topK = bs.topKBlocks;
    shape.initBlocks = bs.initBlocks;
    shape.localBlock = bs.localBlocks > 0;
    return shape;
}

std::vector<std::int64_t> keysOfBlocks(
    const std::vector<std::int64_t>& blocks, const BlockSelectionShape& s, std::int64_t head)
{
    const std::int64_t width = s.topK * s.blockSize;
    std::vector<std::int64_t> keys(std::size_t(s.queries * width), -1);
    for (std::int64_t i = 0; i < s.queries; ++i) {
        std::int64_t* row = keys.data() + i * width;
        std::int64_t used = 0;
        for (std::int64_t slot = 0; slot < s.topK; ++slot) {
            const std::int64_t b = blocks[std::size_t((i * s.heads + head) * s.topK + slot)];
            for (std::int64_t j = b * s.blockSize;
                 b >= 0 && j < std::min(s.keys, (b + 1) * s.blockSize); ++j) {
                row[used++] = j;
            }
        }
    }
    return keys;
}

template std::vector<double> keyBlockScores<float>(
    const float*, const float*, const BlockSelectionShape&);
template std::vector<double> keyBlockScores<double>(
    const double*, const double*, const BlockSelectionShape&);
template std::vector<std::int64_t> selectKeyBlocks<float>(
    const float*, const float*, const BlockSelectionShape&);
template std::vector<std::int64_t> selectKeyBlocks<double>(
    const double*, const double*, const BlockSelectionShape&);

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T> Result<void> Forward<T>::blockSparseInit()
{
    const model::BlockSparseSpec& bs = *m_spec.blockSparse;
    if (bs.indexDim < m_rope.rotaryDim || bs.indexHeads != m_spec.numKvHeads) {
        return Error::unsupported(fmt::format("MiniMax-M3 sparse attention with sparse_index_dim "
                                              "{} below the rotary width {}, or {} index heads "
                                              "for {} KV heads",
            bs.indexDim, m_rope.rotaryDim, bs.indexHeads, m_spec.numKvHeads));
    }
    m_indexerKeys.assign(std::size_t(m_spec.numLayers), {});
    for (int l = 0; l < int(m_spec.numLayers); ++l) {
        if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::BlockSparse) {
            m_indexerKeys[std::size_t(l)].assign(std::size_t(m_capacity * bs.indexDim), T(0));
        }
    }
    return success();
}

template <typename T>
void Forward<T>::blockSparseAttention(
    int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const model::BlockSparseSpec& bs = *m_spec.blockSparse;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t kvHeads = m_spec.numKvHeads;
    const std::int64_t qDim = heads * d;
    const std::int64_t kvDim = kvHeads * d;
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    std::vector<T> q(std::size_t(n * qDim));
    std::vector<T> k(std::size_t(n * kvDim));
    std::vector<T> v(std::size_t(n * kvDim));
    linear(attn + ".q_proj", x, q.data(), n, h, qDim, OpKind::Linear, layer, taps, true);
    linear(attn + ".k_proj", x, k.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    linear(attn + ".v_proj", x, v.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    if (m_spec.qkNorm) { // use_qk_norm (per_head: unsupportedFeatures refuses per_layer here)
        rmsNormOp(attn + ".q_norm", q.data(), q.data(), n * heads, d, layer);
        rmsNormOp(attn + ".k_norm", k.data(), k.data(), n * kvHeads, d, layer);
        taps.record(attn + ".q_norm", q.data(), { n, heads, d });
        taps.record(attn + ".k_norm", k.data(), { n, kvHeads, d });
    }
    rotate(q.data(), n, heads, d, m_rope, mode);
    rotate(k.data(), n, kvHeads, d, m_rope, mode);
    Cache& cache = m_caches[std::size_t(layer)];
    std::copy(k.begin(), k.end(), cache.k.begin() + start * kvDim);
    std::copy(v.begin(), v.end(), cache.v.begin() + start * kvDim);

    // The index branch: its queries and its one key per token, normed per head and rotated.
    const std::int64_t ih = bs.indexHeads;
    const std::int64_t id = bs.indexDim;
    std::vector<T> iq(std::size_t(n * ih * id));
    std::vector<T> ik(std::size_t(n * id));
    linear(attn + ".index_q_proj", x, iq.data(), n, h, ih * id, OpKind::Linear, layer, taps, true);
    linear(attn + ".index_k_proj", x, ik.data(), n, h, id, OpKind::Linear, layer, taps, true);
    rmsNormOp(attn + ".index_q_norm", iq.data(), iq.data(), n * ih, id, layer);
    rmsNormOp(attn + ".index_k_norm", ik.data(), ik.data(), n, id, layer);
    taps.record(attn + ".index_q_norm", iq.data(), { n, ih, id });
    taps.record(attn + ".index_k_norm", ik.data(), { n, id });
    rotate(iq.data(), n, ih, id, m_rope, mode);
    rotate(ik.data(), n, 1, id, m_rope, mode);
    std::vector<T>& keys = m_indexerKeys[std::size_t(layer)];
    std::copy(ik.begin(), ik.end(), keys.begin() + start * id);
    const BlockSelectionShape shape = blockSelectionShape(bs, n, start + n);
    const auto blocks = selectKeyBlocks<T>(iq.data(), keys.data(), shape);
    taps.recordIds(attn + ".indexer#topk", blocks, { n * ih, bs.topKBlocks });

    // Each KV group attends over its own blocks' keys: one attention call per group.
    const std::int64_t group = heads / kvHeads;
    std::vector<T> context(std::size_t(n * qDim));
    std::vector<T> part(std::size_t(n * group * d));
    AttentionShape a = decoderAttentionShape(
        m_spec.layers[std::size_t(layer)], n, start, group, 1, d, d, m_attentionScale);
    a.qStride = qDim;
    a.kStride = kvDim;
    a.vStride = kvDim;
    for (std::int64_t g = 0; g < kvHeads; ++g) {
        const auto kept = keysOfBlocks(blocks, shape, g);
        a.selectedKeys = kept;
        a.selectedPerQuery = bs.topKBlocks * bs.blockSize;
        const T* qg = q.data() + g * group * d;
        const T* kg = cache.k.data() + g * d;
        const T* vg = cache.v.data() + g * d;
        if constexpr (std::is_same_v<T, float>) {
            m_ops.attention(qg, kg, vg, part.data(), a, mode);
        } else {
            attention<T>(qg, kg, vg, part.data(), a);
        }
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.begin() + t * group * d, group * d,
                context.begin() + t * qDim + g * group * d);
        }
    }
    linear(attn + ".o_proj", context.data(), out, n, qDim, h, OpKind::Linear, layer, taps, true);
}

template Result<void> Forward<float>::blockSparseInit();
template Result<void> Forward<double>::blockSparseInit();
template void Forward<float>::blockSparseAttention(
    int, const float*, float*, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::blockSparseAttention(
    int, const double*, double*, std::int64_t, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
