#pragma once

#include "base/dtype.h"

#include <cstdint>
#include <span>

namespace day0::numerics {

/// Constants of a floating-point format (precision-anchors §6.1). `unitRoundoff` is u = 2^-(p),
/// half the spacing at 1 (not numpy's eps, which is 2u).
struct FormatInfo {
    int exponentBits = 0;
    int mantissaBits = 0; ///< stored fraction bits
    double unitRoundoff = 0.0; ///< u: the largest relative error of one round-to-nearest
    double maxFinite = 0.0;
    double minNormal = 0.0;
    double minSubnormal = 0.0;
    bool hasInfinity = false;
};

/// Format constants of a floating dtype (F64, F32, F16, BF16, F8E4M3, F8E5M2). For I8 the
/// unit roundoff is that of a symmetric 8-bit quantiser relative to its range (1/254).
FormatInfo formatInfo(DType dtype);

/// How an overflowing value is stored in a format that has infinities.
enum class Overflow {
    Infinity, ///< IEEE behaviour: round to ±inf (F16, BF16, F8E5M2)
    Saturate, ///< clamp to ±max finite
};

// Bit conversions. All narrowing conversions round to nearest, ties to even, and handle
// subnormals; NaN stays NaN. Thread-safe and allocation-free.

/// float -> bfloat16 bits.
std::uint16_t floatToBf16Bits(float value);
/// bfloat16 bits -> float (exact).
float bf16BitsToFloat(std::uint16_t bits);
/// float -> IEEE binary16 bits (overflow to ±inf).
std::uint16_t floatToF16Bits(float value);
/// IEEE binary16 bits -> float (exact).
float f16BitsToFloat(std::uint16_t bits);
/// float -> OCP FP8 E4M3 "fn" bits. There is no infinity: overflow saturates to ±448; NaN is
/// 0x7F / 0xFF.
std::uint8_t floatToF8E4M3Bits(float value);
/// FP8 E4M3fn bits -> float (exact).
float f8E4M3BitsToFloat(std::uint8_t bits);
/// float -> OCP FP8 E5M2 bits (overflow to ±inf unless `overflow` is Saturate).
std::uint8_t floatToF8E5M2Bits(float value, Overflow overflow = Overflow::Infinity);
/// FP8 E5M2 bits -> float (exact).
float f8E5M2BitsToFloat(std::uint8_t bits);

/// Rounds `value` to the nearest value representable in `dtype` (F16, BF16, F8E4M3, F8E5M2;
/// F32/F64 return it unchanged): the emulation of storing in that format and reading it back.
float roundToFormat(float value, DType dtype);
/// Rounds every element of `values` in place, as roundToFormat.
void roundToFormat(std::span<float> values, DType dtype);

/// Symmetric int8 fake quantisation of one row: scale = max|x| / 127, x <- clamp(rne(x / scale),
/// -127, 127) * scale. Returns the scale (0 for an all-zero row, which is left unchanged).
float fakeQuantInt8(std::span<float> row);

/// Converts `count` floats to the storage bytes of `dtype` (F64, F32, F16, BF16, F8E4M3, F8E5M2).
void encodeFloats(const float* src, std::int64_t count, DType dtype, void* dst);
/// Converts `count` stored elements of a floating `dtype` to floats.
void decodeFloats(const void* src, std::int64_t count, DType dtype, float* dst);

} // namespace day0::numerics
