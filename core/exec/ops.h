#pragma once

#include "base/result.h"

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

namespace day0::exec {

// CPU reference kernels on row-major buffers, instantiated for float (fp32 and emulated
// low-precision runs) and double (the fp64 reference). Matrix products go through OpenBLAS;
// everything else is plain loops, parallel over rows where that pays. All functions are
// thread-safe for distinct output buffers.

/// The logistic sigmoid 1 / (1 + e⁻ˣ).
template <typename T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
/// torch.nn.functional.softplus (beta 1, threshold 20): log(1 + eˣ), x itself above 20.
template <typename T> T softplus(T x) { return x > T(20) ? x : T(std::log1p(std::exp(x))); }

/// C[M,N] = A[M,K] · B[N,K]ᵀ (+ C if accumulate): the HF linear layout (weights [out, in]).
template <typename T>
void matmulTransB(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k,
    bool accumulate = false);

/// C[M,N] = A[M,K] · B[K,N] (+ C if accumulate).
template <typename T>
void matmul(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k,
    bool accumulate = false);

/// y[rows, out] = x[rows, in] · w[out, in]ᵀ + bias[out] (bias may be null).
template <typename T>
void linear(const T* x, const T* w, const T* bias, T* y, std::int64_t rows, std::int64_t in,
    std::int64_t out);

/// out[i, :] = table[ids[i], :]. Error (BadInput) naming the id if one is outside [0, vocab).
template <typename T>
Result<void> embedding(std::span<const std::int64_t> ids, const T* table, std::int64_t vocab,
    std::int64_t dim, T* out);

/// RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) · w (statistics in the compute type;
/// `w` may be null for a plain normalisation). Works in place (y == x).
template <typename T>
void rmsNorm(const T* x, const T* w, T* y, std::int64_t rows, std::int64_t dim, double eps);

/// LayerNorm over the last dim: y = (x - mean) / sqrt(var + eps) · w + b (w, b may be null).
template <typename T>
void layerNorm(
    const T* x, const T* w, const T* b, T* y, std::int64_t rows, std::int64_t dim, double eps);

/// Activation functions of MLPs, as HF `hidden_act` names them.
enum class Activation {
    Silu, ///< "silu", "swish": x·σ(x)
    Gelu, ///< "gelu": exact erf form
    GeluTanh, ///< "gelu_pytorch_tanh", "gelu_new": tanh approximation
    QuickGelu, ///< "quick_gelu": x·σ(1.702x)
    Relu,
};

/// Parses an HF `hidden_act`; nullopt-like failure as an Unsupported error naming it.
Result<Activation> parseActivation(std::string_view name);

/// x <- act(x), elementwise.
template <typename T> void activate(T* x, std::int64_t n, Activation act);

/// gate <- act(gate) · up, elementwise (SwiGLU with Silu, GeGLU with Gelu).
template <typename T> void gatedActivate(T* gate, const T* up, std::int64_t n, Activation act);

/// Softmax over the last dim of [rows, n], in place, max-subtracted.
template <typename T> void softmaxRows(T* x, std::int64_t rows, std::int64_t n);

/// y += x, elementwise.
template <typename T> void addInPlace(T* y, const T* x, std::int64_t n);

} // namespace day0::exec
