#pragma once

#include "base/dtype.h"
#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace day0::checkpoint {

/// Block size of block-scaled FP8 weights (DeepSeek-V3/Kimi-K2: 128 × 128).
struct BlockShape {
    std::int64_t rows = 128;
    std::int64_t cols = 128;
};

/// Shape of the `weight_scale_inv` tensor for a rows × cols weight: [ceil(rows/br), ceil(cols/bc)].
std::vector<std::int64_t> blockScaleShape(
    std::int64_t rows, std::int64_t cols, BlockShape block = {});

/// Dequantizes a block-scaled F8_E4M3 weight: out[r, c] = fp8(w[r, c]) × scale[r / br, c / bc],
/// edge blocks partial. `weight` holds rows × cols bytes, `scale` the scale tensor in
/// `scaleType` (F32 as DeepSeek-V3 publishes it, DeepSeek-V4's F8_E8M0 powers of two, BF16 or
/// F16 accepted), `out` rows × cols elements of `to`
/// (F32, BF16, F16; the product is formed in float and rounded once). Buffers may be unaligned.
Result<void> dequantizeBlockFp8(std::span<const std::byte> weight, std::span<const std::byte> scale,
    DType scaleType, std::int64_t rows, std::int64_t cols, BlockShape block,
    std::span<std::byte> out, DType to);

/// Quantizes a rows × cols matrix (`src` of type `from`) to block-scaled F8_E4M3: per block,
/// scale_inv = amax / 448 (1 for an all-zero block) and q = e4m3(x / scale_inv), so the largest
/// magnitude of each block lands on ±448. Writes rows × cols codes and the F32 scales. With
/// `powerOfTwo` (DeepSeek-V4's ue8m0 scales) scale_inv is the power of two at or above
/// amax / 448, so that every F32 scale converts to F8_E8M0 exactly and no code saturates.
Result<void> quantizeBlockFp8(std::span<const std::byte> src, DType from, std::int64_t rows,
    std::int64_t cols, BlockShape block, std::span<std::byte> weight, std::span<std::byte> scale,
    bool powerOfTwo = false);

} // namespace day0::checkpoint
