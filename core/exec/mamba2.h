#pragma once

// The Mamba-2 mixer's operators (Nemotron-H), on the CPU in the compute type with double
// accumulation: the causal depthwise convolution with its carried state, the SSD scan in its
// chunked form (prefill) and its recurrent form (decode) with the carried SSM state, and the
// gated RMSNorm over groups. Written from transformers' modeling_nemotron_h.py
// (NemotronHMamba2Mixer.torch_forward, Zamba2RMSNormGated) and the mamba_ssm kernels' dt
// semantics (dt_softplus, dt_limit (0, inf), as vLLM's MambaMixer2 passes them).

#include <cstdint>

namespace day0::exec {

/// The dimensions of one Mamba-2 mixer.
struct Mamba2Shape {
    std::int64_t heads = 0; ///< mamba_num_heads
    std::int64_t headDim = 0; ///< mamba_head_dim (P)
    std::int64_t state = 0; ///< ssm_state_size (N)
    std::int64_t groups = 1; ///< n_groups of B and C
    std::int64_t kernel = 4; ///< conv_kernel
    std::int64_t chunk = 0; ///< chunk_size of the chunked scan; 0: one chunk
    [[nodiscard]] std::int64_t inner() const { return heads * headDim; }
    /// x ‖ B ‖ C, the convolved channels.
    [[nodiscard]] std::int64_t convChannels() const { return inner() + 2 * groups * state; }
};

/// The causal depthwise convolution of xbc [n, channels] in place, then SiLU: row t becomes
/// SiLU(bias + Σ_k w[c, k] · in[t − (kernel − 1) + k]) where the inputs before row 0 are the
/// `state` rows [kernel − 1, channels] (oldest first; zeros at the sequence start). `state` is
/// then updated to the last kernel − 1 inputs. `bias` may be null.
template <typename T>
void mamba2Conv(T* xbc, std::int64_t n, std::int64_t channels, std::int64_t kernel, const T* w,
    const T* bias, T* state);

/// mamba2Conv without its SiLU: row t becomes bias + Σ_k w[c, k] · in[t − (kernel − 1) + k],
/// the pre-activation the gradient pass keeps for SiLU's backward; `state` as mamba2Conv's.
template <typename T>
void mamba2ConvPreActivation(T* xbc, std::int64_t n, std::int64_t channels, std::int64_t kernel,
    const T* w, const T* bias, T* state);

/// dt[n, heads] ← softplus(dt + dt_bias) (torch's softplus: the identity above 20).
template <typename T> void mamba2Dt(T* dt, std::int64_t n, std::int64_t heads, const T* dtBias);

/// The SSD scan over n tokens of xbc [n, channels] (x ‖ B ‖ C after the convolution) with
/// dt [n, heads] (after mamba2Dt), A = −exp(A_log) [heads] and the D skip [heads]; head h reads
/// the B and C of group h / (heads / groups). `ssm` [heads, headDim, state] holds the state
/// before the first token and is left at the state after the last. y [n, heads·headDim]:
/// y_t = C_t · S_t + D · x_t with S_t = exp(dt_t·A) · S_{t−1} + dt_t · x_t ⊗ B_t.
/// `chunked`: the chunk_size blocks of the SSD form (within a chunk the decays
/// exp(cumsum(dt·A)) between positions, across chunks the state); otherwise the recurrence
/// token by token. The two are the same function of their inputs.
template <typename T>
void mamba2Scan(const T* xbc, const T* dt, const T* aLog, const T* d, T* ssm, T* y, std::int64_t n,
    const Mamba2Shape& s, bool chunked);

/// Zamba2RMSNormGated as NemotronH uses it (norm_before_gate false): y ← w · rms_g(y · SiLU(z))
/// with the RMS taken over each of the `groups` groups of y's `inner` channels.
template <typename T>
void gatedGroupRmsNorm(T* y, const T* z, std::int64_t zStride, const T* w, std::int64_t n,
    std::int64_t inner, std::int64_t groups, double eps);

} // namespace day0::exec
