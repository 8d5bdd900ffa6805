#pragma once

// Internal to core/exec: DeepSeek-V4's forward pieces (deepseek_v4_block.cpp,
// deepseek_v4_forward.cpp), shared by Forward's DeepSeek-V4 path.

#include "exec/forward.h"
#include "exec/rope.h"
#include "model/model_spec.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace day0::exec::detail {

/// What the engine does not compute of a DeepSeek-V4 spec, each named (empty: it runs).
std::vector<std::string> deepseekV4Unsupported(const model::ModelSpec& spec);

/// What a DeepSeek-V4 forward keeps between steps, per layer: the K=V of every position and,
/// for compressed layers, every position's compressor (and indexer) projections and the
/// entries pooled so far.
template <typename T> struct DeepseekV4Cache {
    struct Compressor {
        std::int64_t ratio = 0;
        std::int64_t width = 0; ///< entry width (head_dim, or index_head_dim for the indexer)
        std::vector<T> kv; ///< [capacity, coff · width]
        std::vector<T> gate; ///< [capacity, coff · width]
        std::vector<T> entries; ///< [capacity / ratio, width]
        std::int64_t count = 0; ///< entries pooled so far
    };
    struct Layer {
        std::vector<T> kv; ///< [capacity, head_dim]
        Compressor compressor;
        Compressor indexer;
        const Rope* rope = nullptr;
    };
    std::vector<Layer> layers;
    Rope mainRope; ///< sliding layers: rope_theta, no scaling
    Rope compressRope; ///< compressed layers and their entries: compress_rope_theta with YaRN
};

/// A compressor's step (deepseek_v4_block.cpp): projects x [n, hidden] at positions
/// [start, start + n) and pools the windows that close.
template <typename T>
void deepseekV4Compress(typename DeepseekV4Cache<T>::Compressor& c, const std::string& module,
    const WeightTable& weights, const T* x, std::int64_t n, std::int64_t start, std::int64_t h,
    double eps, const Rope& rope);

/// The Lightning indexer's choice (deepseek_v4_block.cpp): index_topk entry ids per row of
/// the step, -1 where fewer are visible.
template <typename T>
void deepseekV4Select(const typename DeepseekV4Cache<T>::Compressor& ix, const std::string& module,
    const WeightTable& weights, const model::ModelSpec& spec, const T* x, const T* qLatent,
    std::int64_t n, std::int64_t start, const Rope& rope, std::vector<std::int64_t>& selected);

// Interleaved RoPE on the last rope.rotaryDim lanes of each of `heads` vectors of `width`
// (HF apply_rotary_pos_emb: pairs (2i, 2i+1) of the trailing slice); sign -1 rotates back.
template <typename T>
void rotateTail(T* x, std::int64_t heads, std::int64_t width, std::int64_t position,
    const Rope& rope, double sign = 1.0)
{
    const std::int64_t pairs = rope.rotaryDim / 2;
    const std::int64_t base = width - rope.rotaryDim;
    for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = double(position) * rope.invFreq[std::size_t(i)];
        const T c = T(std::cos(angle));
        const T s = T(sign * std::sin(angle));
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            T* v = x + hd * width + base + 2 * i;
            const T a = v[0];
            const T b = v[1];
            v[0] = a * c - b * s;
            v[1] = b * c + a * s;
        }
    }
}

} // namespace day0::exec::detail
