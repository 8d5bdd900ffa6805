#pragma once

#include "base/dtype.h"
#include "numerics/dtype_convert.h"

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

/// Format constants of a floating dtype (F64, F32, F16, BF16, F8E4M3, F8E5M2, F4E2M1). For I8
/// the unit roundoff is that of a symmetric 8-bit quantiser relative to its range (1/254), for
/// I4 that of the symmetric group-wise int4 one (1/15).
FormatInfo formatInfo(DType dtype);

// The bit conversions themselves are numerics/dtype_convert.h (the one implementation, used by
// checkpoint conversion too); these are the emulation helpers built on them.

/// Rounds `value` to the nearest value representable in `dtype` (F16, BF16, F8E4M3, F8E5M2,
/// F4E2M1;
/// F32/F64 return it unchanged): the emulation of storing in that format and reading it back.
float roundToFormat(float value, DType dtype);
/// Rounds to the nearest E2M1 value (0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6), ties to the even code,
/// saturating past ±6 (the OCP MX and NVFP4 quantisers' conversion).
float roundToE2m1(float value);
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
