#pragma once

// The CPU reference kernels of Gated DeltaNet (Qwen3-Next, Qwen3.5 linear_attention layers;
// transformers Qwen3NextGatedDeltaNet, FLA's gated delta rule), on row-major buffers, for float
// and double. The layer around them is Forward::gatedDeltaNetBlock (gated_delta_net.cpp).

#include <cstdint>

namespace day0::exec {

/// The token chunk of the chunked gated delta rule unless a run sets another (FLA's and
/// transformers' chunk_size).
inline constexpr std::int64_t kDeltaRuleChunk = 64;

/// One gated delta rule call: `tokens` new tokens of `heads` value heads, keys and queries
/// `keyDim` wide (already repeated onto the value heads), values `valueDim` wide.
struct DeltaRuleShape {
    std::int64_t tokens = 0;
    std::int64_t heads = 0;
    std::int64_t keyDim = 0;
    std::int64_t valueDim = 0;
};

/// y[t, c] = silu(Σ_j w[c, j] · in[t + j, c]) over in = window ++ x: the causal depthwise
/// convolution of `kernel` taps after the `kernel − 1` inputs before x, held in
/// window[kernel − 1, channels] (zeros at the start of a sequence) and replaced by the last
/// kernel − 1 inputs. x[tokens, channels], w[channels, kernel]; y may not alias x.
template <typename T>
void causalConv1dSilu(const T* x, T* y, std::int64_t tokens, std::int64_t channels, const T* w,
    std::int64_t kernel, T* window);

/// x ← x / sqrt(Σ x² + eps), per row of `dim` (FLA's l2norm, eps 1e-6 in Qwen3-Next).
template <typename T> void l2NormalizeRows(T* x, std::int64_t rows, std::int64_t dim, double eps);

/// The recurrent form, token after token: S ← e^g S; δ = β (v − Sᵀk); S ← S + k δᵀ; o = Sᵀq.
/// q, k [tokens, heads, keyDim] (k unit, q scaled), v [tokens, heads, valueDim], g (the log
/// decay, ≤ 0) and beta [tokens, heads]; state [heads, keyDim, valueDim] carried in and out;
/// out [tokens, heads, valueDim].
template <typename T>
void gatedDeltaRecurrent(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& shape);

/// The chunked form of the same rule (the same result up to rounding): within a chunk of at
/// most `chunk` tokens with cumulative decays G, the updates δ solve the unit lower-triangular
/// system δ_i + Σ_{j<i} β_i e^{G_i − G_j} (k_i·k_j) δ_j = β_i (v_i − e^{G_i} Sᵀk_i) by forward
/// substitution; o_i = e^{G_i} Sᵀq_i + Σ_{j≤i} e^{G_i − G_j} (q_i·k_j) δ_j; the state then
/// moves to the chunk's end. Chunks are cut from the first token; the last may be partial.
template <typename T>
void gatedDeltaChunked(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& shape, std::int64_t chunk);

} // namespace day0::exec
