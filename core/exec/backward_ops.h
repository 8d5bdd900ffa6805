#pragma once

// Internal to core/exec: the backward of each reference operator the gradient pass uses
// (backward.cpp), hand-written per op, instantiated for float (fp32) and double (fp64). Each
// takes the forward's saved inputs and the gradient of the op's output, and returns or
// accumulates the gradients of its inputs and weights. "Accumulate" means +=, so that a weight
// used twice (tied embeddings) or an activation read by several ops sums its gradients.

#include "exec/rope.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace day0::exec::detail {

/// C[M,N] (+)= op(A) · op(B) through OpenBLAS, row-major; op transposes when asked. A is
/// [M,K] (or [K,M] transposed), B [K,N] (or [N,K] transposed).
template <typename T>
void gemm(bool transA, bool transB, const T* a, const T* b, T* c, std::int64_t m, std::int64_t n,
    std::int64_t k, bool accumulate);

/// Backward of y[rows, out] = x[rows, in] · W[out, in]ᵀ + b: dx (+)= dy · W (when dx is not
/// null; `accumulateDx` adds), dW += dyᵀ · x, db += Σ_rows dy (when db is not null).
template <typename T>
void linearBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::int64_t rows,
    std::int64_t in, std::int64_t out, bool accumulateDx);

/// Backward of y = x / sqrt(mean(x²) + eps) · w over rows of `dim`: dx += ∂L/∂x, dw += Σ_rows
/// dy · x̂ (w and dw may be null for a plain normalisation). dx may not alias dy.
template <typename T>
void rmsNormBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, std::int64_t rows,
    std::int64_t dim, double eps);

/// Backward of a ← silu(g) · u: dg = da · u · σ(g)(1 + g(1 − σ(g))), du = da · silu(g).
template <typename T>
void swigluBackward(const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n);

/// Backward of the gelu-tanh GLU a ← gelu_tanh(g) · u (Gemma's gelu_pytorch_tanh): dg = da · u
/// · gelu_tanh'(g), du = da · gelu_tanh(g), gelu_tanh(x) = ½x(1 + tanh(c(x + 0.044715x³))),
/// c = √(2/π).
template <typename T>
void geluTanhGluBackward(const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n);

/// The rotation's transpose: applyRope at the negated angles (cos kept, sin negated), in place
/// on the gradient of the rotated x[tokens, heads, headDim].
template <typename T>
void ropeBackward(T* dx, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope);

/// What causal attention adds to the plain mask (gpt-oss): a sliding window and learned sinks.
template <typename T> struct AttentionMask {
    /// Query i sees keys (i − window, i] (HF's sliding_window, the exec attention's
    /// firstVisibleKey); 0: every key ≤ i.
    std::int64_t window = 0;
    /// Llama-4's chunked attention: query i sees keys ≥ ⌊i / chunk⌋ · chunk only (its own
    /// chunk, the exec attention's firstVisibleKey); 0: no chunking.
    std::int64_t chunk = 0;
    /// One logit per query head [heads] that joins each row's softmax (its maximum and its
    /// denominator) with no value (gpt-oss `self_attn.sinks`); null: none.
    const T* sinks = nullptr;
    /// DSA (GLM-5): the keys each query keeps [n, selectedPerQuery] (−1 padded); the others get
    /// no probability. Empty: every key the window allows.
    std::span<const std::int64_t> selected;
    std::int64_t selectedPerQuery = 0;
    /// MiniMax-M3's MSA: `selected` holds one selection per KV head, [kvHeads, n,
    /// selectedPerQuery], each serving the query heads of its group (keys past the query are
    /// left to the causal mask).
    bool selectedPerKvHead = false;
};

/// Causal softmax attention of `n` tokens over themselves (query i sees keys ≤ i, within
/// `mask.window` when set), per head; query head h reads kv head h / (heads / kvHeads).
/// q [n, heads, d], k [n, kvHeads, d], v [n, kvHeads, dv] → out [n, heads, dv]; `probs`
/// [heads, n, n] keeps the probabilities (zeros where masked) for the backward and, with
/// `mask.sinks`, `sinkProbs` [heads, n] each row's sink probability. `round`, when set, rounds
/// each row's scaled scores and then its probabilities in place (an emulated low-precision
/// kernel's storage, as exec::attention's roundScores/roundProbs); the probabilities kept are
/// the rounded ones.
template <typename T>
void causalAttentionForward(const T* q, const T* k, const T* v, T* out, std::vector<T>& probs,
    std::int64_t n, std::int64_t heads, std::int64_t kvHeads, std::int64_t d, std::int64_t dv,
    double scale, const std::function<void(T*, std::int64_t)>& round = {},
    const AttentionMask<T>& mask = {}, std::vector<T>* sinkProbs = nullptr);

/// Backward of causalAttentionForward: dq = ∂L/∂q (overwritten), dk and dv accumulated; with
/// `mask.sinks`, dsinks [heads] += ∂L/∂sink = −Σ_i p_sink,i · Σ_j p_ij dP_ij (the sink has no
/// value, so its own dP is zero), from the forward's `sinkProbs`.
template <typename T>
void causalAttentionBackward(const T* q, const T* k, const T* v, const std::vector<T>& probs,
    const T* dout, T* dq, T* dk, T* dv, std::int64_t n, std::int64_t heads, std::int64_t kvHeads,
    std::int64_t d, std::int64_t vd, double scale, const AttentionMask<T>& mask = {},
    const std::vector<T>* sinkProbs = nullptr, T* dsinks = nullptr);

/// gpt-oss's clamped SwiGLU a ← (clamp(u, −L, L) + 1) · ĝ·σ(α·ĝ), ĝ = min(g, L), from the
/// pre-clamp gate and up projections (the engine's forward, ffn_block.cpp, with α given).
template <typename T>
void clampedSwiglu(const T* g, const T* u, T* a, std::int64_t n, double limit, double alpha);

/// Backward of gpt-oss's clamped SwiGLU a ← (clamp(u, −L, L) + 1) · ĝ·σ(α·ĝ), ĝ = min(g, L)
/// (GptOssExperts._apply_gate), from the pre-clamp g and u: dg = da · (clamp(u) + 1) · (σ(αĝ) +
/// αĝ·σ(αĝ)(1 − σ(αĝ))) where g ≤ L, else 0; du = da · ĝ·σ(αĝ) where −L ≤ u ≤ L, else 0 (a
/// clamp passes no gradient where it is active; at its bound it passes, as torch.clamp).
template <typename T>
void clampedSwigluBackward(
    const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n, double limit, double alpha);

/// Mean cross-entropy of logits [n, vocab] against `targets` (a negative target is ignored, as
/// HF's ignore_index −100), in double; dlogits gets (softmax − onehot) / counted per counted row
/// and zeros elsewhere. Returns the loss; `counted` the rows that count.
template <typename T>
double crossEntropy(const T* logits, std::span<const std::int64_t> targets, std::int64_t vocab,
    T* dlogits, std::int64_t& counted);

} // namespace day0::exec::detail
