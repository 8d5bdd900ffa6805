// MiniMax-M3's sparse attention (MSA) in the sharded forward, the single-rank engine's
// exec/minimax_m3_block.cpp over this rank's heads:
// - q/k/v_proj column-parallel by heads (KV heads replicated as head r / (tp / kv) when TP
//   exceeds them), the per-head q/k norms local, the partial rotary embedding, o_proj
//   row-parallel;
// - the index branch's index_q_proj / index_k_proj and their norms are replicated (the layer
//   graph's roles), so every rank scores every index head's key blocks from the same index keys
//   and keeps the selection of the KV groups it holds (index head g serves KV group g);
// - each local KV group attends over its own kept blocks' keys.
// The (1 + w) norms are applied to the weights at load (weights.cpp), the clamped SwiGLU in
// mlpPartial, the sigmoid router with its correction bias in moe.cpp.
#include "exec/attention.h"
#include "exec/msa.h"
#include "parallel/forward.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::parallel::detail {

Result<void> ParallelForward::blockSparseAttention(
    int layer, ShardCache& cache, const float* x, float* out, std::int64_t n, std::int64_t start)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const model::BlockSparseSpec& bs = *m_spec.blockSparse;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_heads;
    const std::int64_t kvHeads = m_kvHeads;
    const std::int64_t qDim = heads * d;
    const std::int64_t kvDim = kvHeads * d;
    std::vector<float> q(std::size_t(n * qDim));
    std::vector<float> k(std::size_t(n * kvDim));
    std::vector<float> v(std::size_t(n * kvDim));
    DAY0_TRY(linearOp(attn + ".q_proj", x, q.data(), n, h, qDim));
    DAY0_TRY(linearOp(attn + ".k_proj", x, k.data(), n, h, kvDim));
    DAY0_TRY(linearOp(attn + ".v_proj", x, v.data(), n, h, kvDim));
    if (m_spec.qkNorm) {
        m_ops.rmsNorm(q.data(), weight(attn + ".q_norm.weight"), q.data(), n * heads, d,
            m_spec.normEps, exec::PrecisionMode::F32);
        m_ops.rmsNorm(k.data(), weight(attn + ".k_norm.weight"), k.data(), n * kvHeads, d,
            m_spec.normEps, exec::PrecisionMode::F32);
    }
    m_ops.rope(q.data(), n, heads, d, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    m_ops.rope(k.data(), n, kvHeads, d, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    auto& ck = cache.k[std::size_t(layer)];
    auto& cv = cache.v[std::size_t(layer)];
    std::copy(k.begin(), k.end(), ck.begin() + start * kvDim);
    std::copy(v.begin(), v.end(), cv.begin() + start * kvDim);

    // The index branch, whole on every rank: its queries and one key per token, normed per head
    // and rotated.
    const std::int64_t ih = bs.indexHeads;
    const std::int64_t id = bs.indexDim;
    std::vector<float> iq(std::size_t(n * ih * id));
    std::vector<float> ik(std::size_t(n * id));
    DAY0_TRY(linearOp(attn + ".index_q_proj", x, iq.data(), n, h, ih * id));
    DAY0_TRY(linearOp(attn + ".index_k_proj", x, ik.data(), n, h, id));
    m_ops.rmsNorm(iq.data(), weight(attn + ".index_q_norm.weight"), iq.data(), n * ih, id,
        m_spec.normEps, exec::PrecisionMode::F32);
    m_ops.rmsNorm(ik.data(), weight(attn + ".index_k_norm.weight"), ik.data(), n, id,
        m_spec.normEps, exec::PrecisionMode::F32);
    m_ops.rope(iq.data(), n, ih, id, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    m_ops.rope(ik.data(), n, 1, id, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    auto& keys = cache.indexKeys[std::size_t(layer)];
    if (std::int64_t(keys.size()) != cache.capacity * id) {
        return Error::internal(
            fmt::format("rank {}: layer {} holds no MSA index keys", m_coord.rank, layer));
    }
    std::copy(ik.begin(), ik.end(), keys.begin() + start * id);
    const exec::BlockSelectionShape shape = exec::blockSelectionShape(bs, n, start + n);
    const auto blocks = exec::selectKeyBlocks<float>(iq.data(), keys.data(), shape);

    // Each local KV group attends over the blocks its index head kept.
    const int tp = m_layout.tp;
    const std::int64_t group = heads / kvHeads;
    std::vector<float> context(std::size_t(n * qDim));
    std::vector<float> part(std::size_t(n * group * d));
    exec::AttentionShape a = exec::decoderAttentionShape(
        m_spec.layers[std::size_t(layer)], n, start, group, 1, d, d, m_scale);
    a.qStride = qDim;
    a.kStride = kvDim;
    a.vStride = kvDim;
    for (std::int64_t g = 0; g < kvHeads; ++g) {
        const std::int64_t global = m_spec.numKvHeads >= tp
            ? m_coord.tpRank * kvHeads + g
            : m_coord.tpRank / (tp / m_spec.numKvHeads);
        const auto kept = exec::keysOfBlocks(blocks, shape, global);
        a.selectedKeys = kept;
        a.selectedPerQuery = bs.topKBlocks * bs.blockSize;
        m_ops.attention(q.data() + g * group * d, ck.data() + g * d, cv.data() + g * d, part.data(),
            a, exec::PrecisionMode::F32);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.begin() + t * group * d, group * d,
                context.begin() + t * qDim + g * group * d);
        }
    }
    return linearOp(attn + ".o_proj", context.data(), out, n, qDim, h, true);
}

} // namespace day0::parallel::detail
