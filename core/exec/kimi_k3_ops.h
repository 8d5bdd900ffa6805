#pragma once

// Kimi-K3's operators on the CPU reference (kimi_attn_res.cpp), shared by Forward and opcheck:
// the SiTU-GLU activation and the Block Attention Residuals mix. Forward's layer around the mix
// is Forward::kimiAttnResLayer.

#include <cstdint>
#include <span>

namespace day0::exec {

/// Kimi-K3's SituAndMul into g (n values): β·tanh(g/β)·σ(g) · u', with u' = β_lin·tanh(u/β_lin)
/// when `linearBeta` > 0, else u.
template <typename T>
void situGlu(T* g, const T* u, std::int64_t n, double beta, double linearBeta);

/// The attention-residual mix of `values` (each [n, h]: the sealed block sums, then the partial
/// sum) into out [n, h] (out may alias a value): per token, score_j = Σ_c v̂_jc·score[c] with
/// v̂_j = v_j / sqrt(mean(v_j²) + eps), and out = Σ_j softmax(score)_j · v_j. `score` is the
/// res_norm weight times the res_proj row.
template <typename T>
void attnResMix(std::span<const T* const> values, std::int64_t n, std::int64_t h, const T* score,
    double eps, T* out);

} // namespace day0::exec
