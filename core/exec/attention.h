#pragma once

#include "model/model_spec.h"

#include <cstdint>
#include <functional>
#include <span>

namespace day0::exec {

/// Shape of one causal attention call over a KV cache.
struct AttentionShape {
    std::int64_t queries = 0; ///< new tokens this step
    std::int64_t keys = 0; ///< cached + new tokens (queries are the last `queries` of them)
    std::int64_t heads = 0; ///< query heads
    std::int64_t kvHeads = 0; ///< key/value heads; query head h uses kv head h / (heads / kvHeads)
    std::int64_t headDim = 0; ///< q/k width
    std::int64_t valueDim = 0; ///< v width
    std::int64_t qStride = 0; ///< elements between tokens of q (default heads × headDim)
    std::int64_t kStride = 0; ///< elements between tokens of k (default kvHeads × headDim)
    std::int64_t vStride = 0; ///< elements between tokens of v (default kvHeads × valueDim)
    double scale = 1.0; ///< multiplies q·k
    bool causal = true; ///< query i (absolute position keys - queries + i) sees keys ≤ it
    std::int64_t window = 0; ///< sliding window: a query sees only its last `window` keys (0: all)
    /// Chunked attention (Llama-4): a query at position p sees only keys at positions ≥
    /// ⌊p / chunk⌋ · chunk (its own chunk); 0: no chunking.
    std::int64_t chunk = 0;
    /// Learned attention sinks (gpt-oss): one logit per query head that joins each query's
    /// softmax denominator (and its max) but has no value, so the real keys' probabilities sum
    /// to less than one; empty: none.
    std::span<const float> sinks;
    /// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): [queries, selectedPerQuery] key ids per
    /// query (−1 pads a row), the keys its indexer selected; a query attends only to the keys
    /// listed for it, within the causal, window and chunk limits. Empty: every visible key.
    std::span<const std::int64_t> selectedKeys;
    std::int64_t selectedPerQuery = 0;
};

/// The causal self-attention of a decoder layer: `queries` new tokens after `start` cached ones,
/// with the layer's sliding window and chunking.
inline AttentionShape decoderAttentionShape(const model::LayerSpec& layer, std::int64_t queries,
    std::int64_t start, std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
    std::int64_t valueDim, double scale)
{
    AttentionShape shape;
    shape.queries = queries;
    shape.keys = start + queries;
    shape.heads = heads;
    shape.kvHeads = kvHeads;
    shape.headDim = headDim;
    shape.valueDim = valueDim;
    shape.scale = scale;
    shape.window = layer.slidingWindow;
    shape.chunk = layer.attentionChunk;
    return shape;
}

/// The first key a query at absolute `position` attends to when keys [0, visible) are causally
/// visible: the sliding window and the attention chunk both move it up.
std::int64_t firstVisibleKey(
    const AttentionShape& shape, std::int64_t position, std::int64_t visible);

/// Llama-4 attention temperature tuning (NoPE layers): the factor that scales the queries of the
/// token at `position`, log(⌊(position + 1) / floorScale⌋ + 1) · attnScale + 1.
double attentionTemperature(std::int64_t position, double floorScale, double attnScale);

/// x[rows, dim] ← x / sqrt(mean(x²) + eps) per row, without a weight (Llama-4's QK "L2" norm).
template <typename T> void unitRmsNorm(T* x, std::int64_t rows, std::int64_t dim, double eps);

/// Hook that may alter an intermediate of attention in place (emulated precision rounds the
/// scores and probabilities); called with (buffer, count). Null: no hook.
template <typename T> using AttentionRounding = std::function<void(T*, std::int64_t)>;

/// out[queries, heads, valueDim] = softmax(q·kᵀ·scale + causal mask) · v, per head, for MHA,
/// GQA and MQA. q is [queries, heads, headDim], k [keys, kvHeads, headDim], v [keys, kvHeads,
/// valueDim] (strides as given). Softmax in the compute type; heads run in parallel.
/// `roundScores` / `roundProbs` emulate storing scores and probabilities in a low precision.
template <typename T>
void attention(const T* q, const T* k, const T* v, T* out, const AttentionShape& shape,
    const AttentionRounding<T>& roundScores = {}, const AttentionRounding<T>& roundProbs = {});

} // namespace day0::exec
