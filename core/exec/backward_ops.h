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

/// The rotation's transpose: applyRope at the negated angles (cos kept, sin negated), in place
/// on the gradient of the rotated x[tokens, heads, headDim].
template <typename T>
void ropeBackward(T* dx, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope);

/// Causal softmax attention of `n` tokens over themselves (query i sees keys ≤ i), per head;
/// query head h reads kv head h / (heads / kvHeads). q [n, heads, d], k [n, kvHeads, d],
/// v [n, kvHeads, dv] → out [n, heads, dv]; `probs` [heads, n, n] keeps the probabilities
/// (zeros above the diagonal) for the backward. `round`, when set, rounds each row's scaled
/// scores and then its probabilities in place (an emulated low-precision kernel's storage, as
/// exec::attention's roundScores/roundProbs); the probabilities kept are the rounded ones.
template <typename T>
void causalAttentionForward(const T* q, const T* k, const T* v, T* out, std::vector<T>& probs,
    std::int64_t n, std::int64_t heads, std::int64_t kvHeads, std::int64_t d, std::int64_t dv,
    double scale, const std::function<void(T*, std::int64_t)>& round = {});

/// Backward of causalAttentionForward: dq = ∂L/∂q (overwritten), dk and dv accumulated.
template <typename T>
void causalAttentionBackward(const T* q, const T* k, const T* v, const std::vector<T>& probs,
    const T* dout, T* dq, T* dk, T* dv, std::int64_t n, std::int64_t heads, std::int64_t kvHeads,
    std::int64_t d, std::int64_t vd, double scale);

/// Mean cross-entropy of logits [n, vocab] against `targets` (a negative target is ignored, as
/// HF's ignore_index −100), in double; dlogits gets (softmax − onehot) / counted per counted row
/// and zeros elsewhere. Returns the loss; `counted` the rows that count.
template <typename T>
double crossEntropy(const T* logits, std::span<const std::int64_t> targets, std::int64_t vocab,
    T* dlogits, std::int64_t& counted);

} // namespace day0::exec::detail
