#pragma once

// MiniMax Sparse Attention (MSA, MiniMax-M3's `sparse_attention_freq` layers): the score-only
// index branch picks, per query and per index head, the key blocks that query attends to.
//
// From NVIDIA-NeMo/Automodel nemo_automodel/components/models/minimax_m3_vl/layers.py
// (_select_sparse_blocks_chunk, MiniMaxM3Indexer; its docstring: a mirror of sglang's
// minimax_sparse selection with block_size_q 1, i.e. per query position):
// - score[i, h, j] = (q[i, h] · k[j]) · dim^-½ for the keys j ≤ position(i), the index key k
//   shared by the index heads;
// - a block's score (sparse_score_type "max") is the max of its causally visible keys' scores;
// - the first `sparse_init_block` blocks and, when sparse_local_block > 0, the query's own block
//   are always kept; the remaining of min(sparse_topk_blocks, visible blocks) slots go to the
//   best-scoring other visible blocks;
// - index head h serves the query heads of KV group h (sparse_num_index_heads equals
//   num_key_value_heads; the mask is repeat-interleaved over the groups).
// transformers models/minimax_m3_vl/modular_minimax_m3_vl.py (MiniMaxM3VLIndexer) selects the
// same way; it leaves the scores unscaled (the same ranking), forces the local_blocks blocks
// ending at the query's own (Automodel: the own block for any value > 0) and has no
// sparse_init_block (Automodel: forced): unsupportedFeatures refuses local > 1 and init > 0.

#include <cstdint>
#include <vector>

namespace day0::model {
struct BlockSparseSpec;
}

namespace day0::exec {

/// One block selection: `queries` new tokens (the last `queries` of `keys`) scored against every
/// cached + new index key.
struct BlockSelectionShape {
    std::int64_t queries = 0;
    std::int64_t keys = 0;
    std::int64_t heads = 0; ///< sparse_num_index_heads
    std::int64_t dim = 0; ///< sparse_index_dim
    std::int64_t blockSize = 0; ///< sparse_block_size
    std::int64_t topK = 0; ///< sparse_topk_blocks
    std::int64_t initBlocks = 0; ///< sparse_init_block
    bool localBlock = true; ///< sparse_local_block > 0: the query's own block is kept
};

/// The selection a layer of `bs` makes for `queries` new tokens over `keys` cached + new keys
/// (the single-rank block and the sharded one read the spec the same way).
BlockSelectionShape blockSelectionShape(
    const model::BlockSparseSpec& bs, std::int64_t queries, std::int64_t keys);

/// The block scores, [queries, heads, ⌈keys / blockSize⌉]: per query and index head the max over
/// each block's causally visible keys of q·k·dim^-½ (accumulated in double), −inf for a block
/// wholly after the query.
template <typename T>
std::vector<double> keyBlockScores(const T* q, const T* k, const BlockSelectionShape& shape);

/// The kept key blocks of each query and index head, [queries, heads, topK]: block ids in
/// increasing order, padded with −1 (a query sees fewer than topK blocks). q is [queries, heads,
/// dim], k [keys, dim]. Scores accumulate in double (they only rank blocks; the fp32 engine then
/// ranks as the fp64 reference does); ties go to the lower block.
template <typename T>
std::vector<std::int64_t> selectKeyBlocks(const T* q, const T* k, const BlockSelectionShape& shape);

/// The keys of the selected blocks for index head `head`, [queries, topK · blockSize] (−1 pads),
/// in the form AttentionShape::selectedKeys takes; keys beyond a query's position are left to
/// the attention's causal mask.
std::vector<std::int64_t> keysOfBlocks(
    const std::vector<std::int64_t>& blocks, const BlockSelectionShape& shape, std::int64_t head);

} // namespace day0::exec
