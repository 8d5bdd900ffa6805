// DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5) and its top-k selection.
//
// What it computes, from DeepSeek's reference (inference/model.py, class Indexer) and
// transformers' DeepseekV32Indexer / GlmMoeDsaIndexer:
// - q = wq_b(qr), qr the MLA query latent q_a_layernorm(q_a_proj(x)), as index_n_heads heads of
//   index_head_dim; k = k_norm(wk(x)), one key per token shared by every head, k_norm a
//   LayerNorm with weight and bias (eps 1e-6). Each head is [rope | nope]: the rotary lanes
//   come FIRST (MLA puts them last), qk_rope_head_dim of them, rotated at the token's position
//   with MLA's frequencies. DeepSeek-V3.2 rotates halves ("rope in indexer is not
//   interleaved"); GLM-5's indexer_rope_interleave true rotates adjacent pairs, as vLLM's
//   `is_neox_style = not indexer_rope_interleave` does.
// - score[i, j] = Σ_h w[i, h] · ReLU(q[i, h] · k[j]), w = weights_proj(x) · H^-½ · D^-½.
// - Query i keeps the index_topk keys with the highest scores among those causally visible to
//   it; MLA's softmax then sees −inf at every key it did not keep. A layer GLM-5 marks
//   "shared" (indexer_types) has no indexer and reuses the previous indexer's selection.
// What it does not: DeepSeek's reference quantises q and k to fp8 (per-128 block scales, after
// a Hadamard rotation of both) and scores them with its fp8_index kernel. That is a deployment
// approximation, not the model: the Hadamard rotation is orthogonal (it leaves q·k unchanged)
// and transformers computes the scores unquantised, as this engine and its fp64 reference do.
// Emulated precision plans round the indexer's GEMMs, norm and rotation like any other; they do
// not emulate the fp8 scoring.
#include "exec/dsa_indexer.h"

#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace day0::exec {

template <typename T>
void indexerScores(const T* q, const T* k, const T* w, T* scores, const IndexerShape& shape)
{
    const std::int64_t d = shape.headDim;
    for (std::int64_t i = 0; i < shape.queries; ++i) {
        for (std::int64_t j = 0; j < shape.keys; ++j) {
            const T* key = k + j * d;
            double total = 0.0;
            for (std::int64_t h = 0; h < shape.heads; ++h) {
                const T* query = q + (i * shape.heads + h) * d;
                double dot = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    dot += double(query[c]) * double(key[c]);
                }
                total += double(w[i * shape.heads + h]) * std::max(dot, 0.0);
            }
            scores[i * shape.keys + j] = T(total);
        }
    }
}

template <typename T>
std::vector<std::int64_t> selectTopKeys(
    const T* scores, std::int64_t queries, std::int64_t keys, std::int64_t topK)
{
    std::vector<std::int64_t> out(std::size_t(queries * topK), -1);
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < queries; ++i) {
        const std::int64_t visible = std::min(keys, keys - queries + i + 1);
        const T* row = scores + i * keys;
        order.resize(std::size_t(std::max<std::int64_t>(visible, 0)));
        std::iota(order.begin(), order.end(), std::int64_t(0));
        const std::int64_t kept = std::min(topK, visible);
        std::partial_sort(order.begin(), order.begin() + kept, order.end(),
            [row](std::int64_t a, std::int64_t b) {
                return row[a] > row[b] || (row[a] == row[b] && a < b);
            });
        std::sort(order.begin(), order.begin() + kept);
        std::copy_n(order.begin(), kept, out.begin() + i * topK);
    }
    return out;
}

template void indexerScores<float>(
    const float*, const float*, const float*, float*, const IndexerShape&);
template void indexerScores<double>(
    const double*, const double*, const double*, double*, const IndexerShape&);
template std::vector<std::int64_t> selectTopKeys<float>(
    const float*, std::int64_t, std::int64_t, std::int64_t);
template std::vector<std::int64_t> selectTopKeys<double>(
    const double*, std::int64_t, std::int64_t, std::int64_t);

} // namespace day0::exec

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T>
void Forward<T>::dsaIndexer(
    int layer, const T* x, const T* qr, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const auto& m = m_spec.mla;
    const std::string ix = fmt::format("model.layers.{}.self_attn.indexer", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = m.indexerHeads;
    const std::int64_t d = m.indexerHeadDim;
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);

    std::vector<T> q(std::size_t(n * heads * d));
    linear(
        ix + ".wq_b", qr, q.data(), n, m.qLoraRank, heads * d, OpKind::Linear, layer, taps, true);
    std::vector<T> k(std::size_t(n * d));
    linear(ix + ".wk", x, k.data(), n, h, d, OpKind::Linear, layer, taps, true);
    layerNormOp(ix + ".k_norm", k.data(), k.data(), n, d, layer, 1e-6);
    // m_indexerRope rotates the first qk_rope_head_dim lanes of each head and passes the rest.
    rotate(q.data(), n, heads, d, m_indexerRope, mode);
    rotate(k.data(), n, 1, d, m_indexerRope, mode);
    std::vector<T>& cache = m_indexerKeys[std::size_t(layer)];
    std::copy(k.begin(), k.end(), cache.begin() + start * d);

    std::vector<T> w(std::size_t(n * heads));
    linear(ix + ".weights_proj", x, w.data(), n, h, heads, OpKind::Linear, layer, taps, true);
    const T scale = T(1.0 / std::sqrt(double(heads)) / std::sqrt(double(d)));
    for (auto& v : w) {
        v *= scale;
    }
    IndexerShape shape;
    shape.queries = n;
    shape.keys = start + n;
    shape.heads = heads;
    shape.headDim = d;
    std::vector<T> scores(std::size_t(n * shape.keys));
    indexerScores<T>(q.data(), cache.data(), w.data(), scores.data(), shape);
    m_selection = selectTopKeys<T>(scores.data(), n, shape.keys, m.indexerTopK);
    taps.recordIds(ix + "#topk", m_selection, { n, m.indexerTopK });
}

template void Forward<float>::dsaIndexer(
    int, const float*, const float*, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::dsaIndexer(
    int, const double*, const double*, std::int64_t, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
