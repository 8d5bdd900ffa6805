#pragma once

#include "base/result.h"
#include "model/model_spec.h"

#include <array>
#include <cmath>
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

/// applyRope with every value it stores (the cos and sin tables, each product x·cos and
/// rotate_half(x)·sin, and their sum) passed through `store`: the identity for the references,
/// a rounding to the activation dtype for an emulated target (HF's apply_rotary_pos_emb in
/// that dtype).
template <typename T, typename Store>
void applyRopeStoring(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope,
    std::span<const std::int64_t> positions3, Store store)
{
    const std::int64_t pairs = rope.rotaryDim / 2;
    std::vector<T> cosTable(static_cast<std::size_t>(pairs));
    std::vector<T> sinTable(static_cast<std::size_t>(pairs));
    const bool multi = !rope.pairComponent.empty() && positions3.size() == std::size_t(3 * tokens);
    for (std::int64_t t = 0; t < tokens; ++t) {
        for (std::int64_t i = 0; i < pairs; ++i) {
            std::int64_t pos = positions[std::size_t(t)];
            if (multi) {
                pos = positions3[std::size_t(rope.pairComponent[std::size_t(i)] * tokens + t)];
            }
            const double angle = double(pos) * rope.invFreq[std::size_t(i)];
            cosTable[std::size_t(i)] = store(T(std::cos(angle) * rope.attentionScaling));
            sinTable[std::size_t(i)] = store(T(std::sin(angle) * rope.attentionScaling));
        }
        for (std::int64_t h = 0; h < heads; ++h) {
            T* v = x + (t * heads + h) * headDim;
            for (std::int64_t i = 0; i < pairs; ++i) {
                const std::int64_t a = rope.layout == RopeLayout::RotateHalf ? i : 2 * i;
                const std::int64_t b
                    = rope.layout == RopeLayout::RotateHalf ? i + pairs : 2 * i + 1;
                const T c = cosTable[std::size_t(i)];
                const T s = sinTable[std::size_t(i)];
                const T va = v[a];
                const T vb = v[b];
                // x·cos + rotate_half(x)·sin with rotate_half(x) = (−x_b, x_a).
                v[a] = store(store(va * c) + store(-vb * s));
                v[b] = store(store(vb * c) + store(va * s));
            }
        }
    }
}

} // namespace day0::exec
