#pragma once

#include "base/result.h"
#include "model/model_spec.h"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace day0::exec {

/// How the rotated lanes of a head are paired.
enum class RopeLayout {
    RotateHalf, ///< NeoX/HF: lane i pairs with lane i + d/2
    Interleaved, ///< GPT-J/DeepSeek MLA: lane 2i pairs with lane 2i + 1
};

/// Rotary embedding tables for one attention: the inverse frequencies of the d/2 rotated pairs,
/// the cos/sin scale, and, for M-RoPE, which position component drives each pair.
struct Rope {
    std::int64_t rotaryDim = 0; ///< lanes rotated (head_dim × partial factor); the rest pass
    std::vector<double> invFreq; ///< rotaryDim / 2 entries
    double attentionScaling = 1.0; ///< cos and sin are multiplied by this (YaRN)
    RopeLayout layout = RopeLayout::RotateHalf;
    /// M-RoPE: component (0 = t, 1 = h, 2 = w) of each pair; empty for 1-D positions.
    std::vector<int> pairComponent;
};

/// Qwen3-VL's interleaved M-RoPE (HF apply_interleaved_mrope) on `rope`'s pairs: pair j takes
/// the h position when j % 3 == 1 and j < 3·section[1], w when j % 3 == 2 and j < 3·section[2],
/// else t. An empty `section` means transformers' default [24, 20, 20].
void setInterleavedMrope(Rope& rope, std::vector<std::int64_t> section);

/// The YaRN "mscale": 0.1·m·ln(s) + 1 for s > 1, else 1.
double yarnMscale(double scale, double m);

/// Builds the tables for `rotaryDim` lanes with base `theta` and the spec's rope_scaling
/// (default, linear, dynamic (no change below the trained length), llama3, yarn, mrope).
/// Error (Unsupported) for other scaling types, naming it.
Result<Rope> makeRope(
    std::int64_t rotaryDim, double theta, const model::RopeScaling& scaling, RopeLayout layout);

/// Rotates x[tokens, heads, headDim] in place at the given positions (one per token). For M-RoPE
/// `positions3` holds 3 × tokens positions (t, h, w rows); otherwise it is empty. Lanes from
/// rotaryDim on are left unchanged. The angle is computed in double for both instantiations.
template <typename T>
void applyRope(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope,
    std::span<const std::int64_t> positions3 = {});

} // namespace day0::exec
