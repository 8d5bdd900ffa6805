#pragma once

// Internal to core/exec: one head of a delta rule in reverse, shared by the gradient pass's
// Gated DeltaNet (backward_qwen3next.cpp: one log decay per head and token) and Kimi Delta
// Attention (backward_kimi.cpp: one per key channel, head and token).

#include <cstdint>

namespace day0::exec::detail {

/// One head's delta rule over a sequence as its forward ran it, token after token:
///   Ŝ = diag(e^g) S_{t−1}; u = Ŝᵀk; δ = β(v − u); S_t = Ŝ + k δᵀ; o = S_tᵀq
/// (a scalar g decays every channel alike). Rows are contiguous per token. Read-only views.
template <typename T> struct DeltaHeadTrace {
    std::int64_t tokens = 0;
    std::int64_t keyDim = 0;
    std::int64_t valueDim = 0;
    const T* q = nullptr; ///< the queries the rule read (scaled) [tokens, keyDim]
    const T* k = nullptr; ///< [tokens, keyDim]
    const T* v = nullptr; ///< [tokens, valueDim]
    /// The log decay: [tokens] (one per head) or, with perChannel, [tokens, keyDim].
    const T* decay = nullptr;
    bool perChannel = false;
    const T* beta = nullptr; ///< [tokens]
    /// The state before token t, [keyDim, valueDim], at states + t · stateStride.
    const T* states = nullptr;
    std::int64_t stateStride = 0;
};

/// The gradients of a DeltaHeadTrace's inputs, accumulated (+=) in the trace's layouts.
template <typename T> struct DeltaHeadGrads {
    T* q = nullptr;
    T* k = nullptr;
    T* v = nullptr;
    T* decay = nullptr;
    T* beta = nullptr;
};

/// The rule in reverse from the outputs' gradient `dout` [tokens, valueDim], the final state's
/// gradient zero; with dS the gradient of S_t (from o and from every later token):
///   dS += q doᵀ, dq = S_t do; dk = dS δ, dδ = dSᵀk; dv = β dδ, dβ = dδ·(v − u), du = −β dδ;
///   dŜ = dS + k duᵀ, dk += Ŝ du; dg_i = Σ_c dŜ_ic Ŝ_ic (summed over i for a scalar g);
///   dS_{t−1} = diag(e^g) dŜ.
template <typename T>
void deltaRuleBackward(
    const DeltaHeadTrace<T>& trace, const T* dout, const DeltaHeadGrads<T>& grads);

} // namespace day0::exec::detail
