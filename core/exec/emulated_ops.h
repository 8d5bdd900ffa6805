#pragma once

#include "exec/attention.h"
#include "exec/ops.h"
#include "exec/precision.h"
#include "exec/rope.h"

#include <cstdint>

namespace day0::exec {

// The float kernels as a target computing in `mode` runs them (HF/PyTorch semantics in that
// dtype): inputs, weights and outputs rounded at the op's boundary, fp32 accumulation inside.
// In F32 mode they are the plain fp32 kernels. Shared by the engine and the operator checks so
// that both emulate the same arithmetic.

/// y[n, out] = x[n, in] · Wᵀ + bias with x rounded as a GEMM input (a copy), bias and y rounded
/// to the activation dtype. `w` must already be rounded (roundGemmInput with isWeight).
void emulatedLinear(const float* x, const float* w, const float* bias, float* y, std::int64_t n,
    std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling);

/// RMSNorm as HF computes it in low precision: normalise in fp32, round, multiply by the rounded
/// weight, round. Works in place.
void emulatedRmsNorm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t dim,
    double eps, PrecisionMode mode);

/// gate <- act(gate) · up with act(gate) and the product rounded (HF in low precision).
void emulatedGatedActivation(
    float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode);

/// Causal attention with the scores and probabilities rounded to `mode` (as a kernel in that
/// dtype stores them) and the output rounded.
void emulatedAttention(const float* q, const float* k, const float* v, float* out,
    const AttentionShape& shape, PrecisionMode mode);

/// Rotary embedding as HF's eager apply_rotary_pos_emb computes it in the activation dtype: cos
/// and sin cast to it, x·cos and rotate_half(x)·sin each rounded, their sum rounded. In F32 mode
/// the plain applyRope.
void emulatedRope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope,
    std::span<const std::int64_t> positions3, PrecisionMode mode);

/// True for the modes that round (not the fp32/fp64 references).
bool isEmulated(PrecisionMode mode);

} // namespace day0::exec
