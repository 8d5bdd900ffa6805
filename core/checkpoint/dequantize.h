#pragma once

// Dequantisation of the 4-bit and integer weight formats the published checkpoints ship
// (block FP8 is in block_fp8.h). Every function writes F32, BF16 or F16 elements: the value is
// formed in float and rounded once to the target. Buffers need no alignment. Pure, thread-safe.

#include "base/dtype.h"
#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace day0::checkpoint {

/// An E8M0 scale byte → 2^(e − 127); 0xFF is NaN.
float e8m0ToFloat(std::uint8_t e);

/// How the per-group scales of a 4-bit float matrix are stored.
enum class Fp4Scale {
    E8M0, ///< MX: one power of two per group (gpt-oss, compressed-tensors mxfp4, DeepSeek-V4)
    E4M3, ///< NVFP4: an F8_E4M3 scale per group, times a global F32 scale
};

/// Dequantises a rows × cols matrix of E2M1 codes stored two per byte along a row (element 2k
/// in the low nibble, 2k + 1 in the high one; a row holds ceil(cols / 2) bytes) with one scale
/// per `group` consecutive elements of a row (a scale row holds ceil(cols / group) bytes):
/// out = e2m1 × 2^(s − 127) for E8M0, out = (e2m1 × e4m3(s)) × global for E4M3 (the first
/// product is exact, so the float result is rounded once). `out` holds rows × cols of `to`.
/// To F32 the rows go straight to the output, eight values a step where the CPU has AVX2, split
/// over the cores when large.
Result<void> dequantizeFp4(std::span<const std::byte> codes, std::span<const std::byte> scales,
    Fp4Scale scaleKind, float global, std::int64_t rows, std::int64_t cols, std::int64_t group,
    std::span<std::byte> out, DType to);

/// Quantises a rows × cols F32 matrix to MXFP4 as OCP MX v1.0 (§6.3) does, in the layout
/// dequantizeFp4 reads with Fp4Scale::E8M0 and group 32: per 32 consecutive values of a row one
/// E8M0 scale X = 2^(⌊log2 amax⌋ − 2) (E2M1's largest exponent is 2; clamped to the E8M0 range,
/// and 2^0 for an all-zero block), then each value/X rounded to the nearest E2M1 code, ties to
/// the even code, saturating at ±6. `cols` must be a multiple of 32; `codes` holds rows × cols / 2
/// bytes (element 2k in the low nibble), `scales` rows × cols / 32. Values must be finite.
Result<void> quantizeMxfp4(std::span<const float> values, std::int64_t rows, std::int64_t cols,
    std::span<std::byte> codes, std::span<std::byte> scales);

/// Dequantises a rows × cols matrix of symmetric INT4 values packed eight per little-endian
/// 32-bit word along a row (compressed-tensors pack-quantized: column 8w + j in bits 4j..4j+3
/// of word w, stored as q + 8; a row holds ceil(cols / 8) words) with one scale (`scaleType`
/// F32, BF16 or F16) per `group` columns: out = (q − 8) × scale.
Result<void> dequantizePackedInt4(std::span<const std::byte> packed,
    std::span<const std::byte> scales, DType scaleType, std::int64_t rows, std::int64_t cols,
    std::int64_t group, std::span<std::byte> out, DType to);

} // namespace day0::checkpoint
