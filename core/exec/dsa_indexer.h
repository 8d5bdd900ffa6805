#pragma once

// DeepSeek Sparse Attention (DSA, DeepSeek-V3.2 and GLM-5): the lightning indexer's scores and
// the top-k key selection that restricts each query's MLA attention to the keys it picks.

#include <cstdint>
#include <vector>

namespace day0::exec {

/// Shape of one indexer call: `queries` new tokens scored against `keys` cached + new index keys
/// (the queries are the last `queries` of them, as in AttentionShape).
struct IndexerShape {
    std::int64_t queries = 0;
    std::int64_t keys = 0;
    std::int64_t heads = 0; ///< index_n_heads
    std::int64_t headDim = 0; ///< index_head_dim
};

/// scores[i, j] = Σ_h w[i, h] · ReLU(q[i, h, :] · k[j, :]) for every key j (no mask), with q
/// [queries, heads, headDim], k [keys, headDim] and w [queries, heads] the per-head weights
/// with every scale already folded in (weights_proj(x) · heads^-½ · headDim^-½; the ReLU
/// commutes with the positive headDim^-½). Accumulated in double: the scores only rank keys,
/// and a wider sum keeps the fp32 engine's ranking that of the fp64 reference.
template <typename T>
void indexerScores(const T* q, const T* k, const T* w, T* scores, const IndexerShape& shape);

/// The keys each query attends to: query i (absolute position keys − queries + i) takes the
/// min(topK, position + 1) causally visible keys with the highest scores (ties: the lower key
/// index), listed in increasing key order and padded with −1 to `topK` entries. Returns
/// [queries, topK]. A query with no more visible keys than topK keeps them all, which is what the
/// reference's top-k over the causally masked scores amounts to.
template <typename T>
std::vector<std::int64_t> selectTopKeys(
    const T* scores, std::int64_t queries, std::int64_t keys, std::int64_t topK);

} // namespace day0::exec
