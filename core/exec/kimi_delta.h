#pragma once

// The CPU reference kernels of Kimi Delta Attention (Kimi-Linear's KDA layers): the gated delta
// rule with a decay per key channel instead of one per head. The layer around them is
// Forward::kimiDeltaBlock (kimi_delta.cpp).
//
// The rule (FLA fla/ops/kda/naive.py naive_recurrent_kda; vLLM vllm/model_executor/layers/kda.py
// calls FLA's chunk_kda for prefill and fused_recurrent_kda for decode):
//   S ← diag(e^{g_t}) S;  δ = β_t (v_t − Sᵀk_t);  S ← S + k_t δᵀ;  o_t = Sᵀq_t,
// with g_t [keyDim] the log decay of each key channel (≤ 0), S [keyDim, valueDim] per head.

#include "exec/gated_delta_net.h"

#include <cstdint>

namespace day0::exec {

/// The recurrent form, token after token. q, k [tokens, heads, keyDim] (k unit, q scaled),
/// v [tokens, heads, valueDim], g [tokens, heads, keyDim] (per-channel log decay), beta
/// [tokens, heads]; state [heads, keyDim, valueDim] carried in and out; out [tokens, heads,
/// valueDim].
template <typename T>
void kimiDeltaRecurrent(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& shape);

/// The chunked form of the same rule (the same result up to rounding). Within a chunk of at most
/// `chunk` tokens with per-channel cumulative decays G_i, and S the state at the chunk's start,
/// the updates δ solve the unit lower-triangular system
///   δ_i + β_i Σ_{j<i} ((e^{G_i − G_j} ⊙ k_i)·k_j) δ_j = β_i (v_i − Sᵀ(e^{G_i} ⊙ k_i)),
/// o_i = Sᵀ(e^{G_i} ⊙ q_i) + Σ_{j≤i} ((e^{G_i − G_j} ⊙ q_i)·k_j) δ_j, and the state moves to
/// diag(e^{G_L}) S + Σ_j (e^{G_L − G_j} ⊙ k_j) δ_jᵀ. Chunks are cut from the first token; the last
/// may be partial. Only differences G_i − G_j with j ≤ i are exponentiated (each ≤ 0).
template <typename T>
void kimiDeltaChunked(const T* q, const T* k, const T* v, const T* g, const T* beta, T* state,
    T* out, const DeltaRuleShape& shape, std::int64_t chunk);

} // namespace day0::exec
