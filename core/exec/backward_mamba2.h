#pragma once

// Internal to core/exec: the backward of the Mamba-2 mixer's operators (mamba2.h) over one whole
// sequence from zero states (the gradient pass's prompt), hand-written in reverse mode, the
// scan as its recurrence token by token (the chunked form the forward runs is the same
// function). Each takes the forward's saved inputs and the gradient of the op's output and
// accumulates (+=) the gradients of its inputs and weights.

#include "exec/mamba2.h"

#include <cstdint>

namespace day0::exec::detail {

/// Backward of the causal depthwise convolution and its SiLU (mamba2Conv from a zero state):
/// `in` [n, channels] the convolution's input, `pre` [n, channels] its pre-activation
/// (mamba2ConvPreActivation), `dout` the gradient of SiLU(pre). Accumulates din, dw [channels,
/// kernel] and, when not null, dbias [channels].
template <typename T>
void mamba2ConvBackward(const T* in, const T* pre, const T* w, const T* dout, T* din, T* dw,
    T* dbias, std::int64_t n, std::int64_t channels, std::int64_t kernel);

/// Backward of dt ← softplus(dtIn + dt_bias) (torch's softplus, the identity above 20) from the
/// projected `dtIn` [n, heads]: accumulates ddtIn (which may be strided by `stride`) and
/// ddtBias.
template <typename T>
void mamba2DtBackward(const T* dtIn, std::int64_t stride, const T* dtBias, const T* ddt, T* ddtIn,
    T* ddtBias, std::int64_t n, std::int64_t heads);

/// Backward of mamba2Scan over n tokens from a zero SSM state: `xbc` [n, channels] and `dt`
/// [n, heads] as the forward read them, `dy` [n, heads·headDim] the gradient of y. With
/// S_t = a_t·S_{t−1} + dt_t·x_t ⊗ B_t, a_t = exp(dt_t·A), y_t = S_t·C_t + D·x_t, in reverse:
/// dS ← dS + dy_t ⊗ C_t; dC_t += S_t·dy_t; dx_t += dt_t·dS·B_t + D·dy_t; dB_t += dt_t·dSᵀ·x_t;
/// ddt_t += ⟨dS, x_t ⊗ B_t⟩ + A·a_t·⟨dS, S_{t−1}⟩; dA += dt_t·a_t·⟨dS, S_{t−1}⟩; dS ← a_t·dS;
/// then dA_log = A·dA (A = −exp(A_log)) and dD = Σ ⟨dy, x⟩. B and C of a group gather the
/// gradients of every head that reads them. Accumulates dxbc, ddt, daLog and dD.
template <typename T>
void mamba2ScanBackward(const T* xbc, const T* dt, const T* aLog, const T* d, const T* dy, T* dxbc,
    T* ddt, T* daLog, T* dD, std::int64_t n, const Mamba2Shape& s);

/// Backward of gatedGroupRmsNorm (out = w · rms_g(y · SiLU(z)) per group): `y` [n, inner] the
/// scan's output, `z` the gate (row stride `zStride`), `dout` [n, inner]. Accumulates dy, dz
/// (stride `zStride`) and dw.
template <typename T>
void gatedGroupRmsNormBackward(const T* y, const T* z, std::int64_t zStride, const T* w,
    const T* dout, T* dy, T* dz, T* dw, std::int64_t n, std::int64_t inner, std::int64_t groups,
    double eps);

} // namespace day0::exec::detail
