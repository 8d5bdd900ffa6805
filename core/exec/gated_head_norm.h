#pragma once

// Internal to core/exec and the sharded executor (core/parallel): the gated RMS norm that closes a
// linear-attention layer, over each head of the delta rule's output: norm(o) · w, then times the
// gate's activation, each product rounded by `round` (the layer's norm precision). The Gated
// DeltaNet gates with SiLU (Qwen3NextRMSNormGated / FusedRMSNormGated, activation "silu"), Kimi
// Delta Attention with a sigmoid (FusedRMSNormGated, activation "sigmoid").

#include "exec/ops.h"

#include <cmath>
#include <cstdint>

namespace day0::exec::detail {

enum class HeadGate { Silu, Sigmoid };

/// o [rows, d] in place; gate [rows, d]; w [d].
template <typename T, typename Round>
void gatedHeadNorm(T* o, const T* gate, const T* w, std::int64_t rows, std::int64_t d, double eps,
    HeadGate act, Round round)
{
    for (std::int64_t row = 0; row < rows; ++row) {
        T* x = o + row * d;
        double sum = 0.0;
        for (std::int64_t i = 0; i < d; ++i) {
            sum += double(x[i]) * double(x[i]);
        }
        const T inv = T(1.0 / std::sqrt(sum / double(d) + eps));
        for (std::int64_t i = 0; i < d; ++i) {
            x[i] *= inv;
        }
        round(x, d);
        for (std::int64_t i = 0; i < d; ++i) {
            x[i] *= w[i];
        }
        round(x, d);
        const T* g = gate + row * d;
        for (std::int64_t i = 0; i < d; ++i) {
            x[i] *= act == HeadGate::Silu ? g[i] * sigmoid(g[i]) : sigmoid(g[i]);
        }
        round(x, d);
    }
}

} // namespace day0::exec::detail
