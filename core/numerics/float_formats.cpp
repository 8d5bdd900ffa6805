#include "numerics/float_formats.h"

#include "numerics/dtype_convert.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::numerics {

namespace {

/// Values of the largest finite E5M2 number, for the saturating conversion.

} // namespace

FormatInfo formatInfo(DType dtype)
{
    switch (dtype) {
    case DType::F64:
        return { 11, 52, std::ldexp(1.0, -53), std::numeric_limits<double>::max(),
            std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min(), true };
    case DType::F32:
        return { 8, 23, std::ldexp(1.0, -24), double(std::numeric_limits<float>::max()),
            double(std::numeric_limits<float>::min()),
            double(std::numeric_limits<float>::denorm_min()), true };
    case DType::F16:
        return { 5, 10, std::ldexp(1.0, -11), 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24),
            true };
    case DType::BF16:
        return { 8, 7, std::ldexp(1.0, -8), 3.3895313892515355e38, std::ldexp(1.0, -126),
            std::ldexp(1.0, -133), true };
    case DType::F8E4M3:
        return { 4, 3, std::ldexp(1.0, -4), 448.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9),
            false };
    case DType::F8E5M2:
        return { 5, 2, std::ldexp(1.0, -3), 57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16),
            true };
    case DType::I8:
        return { 0, 7, 1.0 / 254.0, 127.0, 1.0, 1.0, false };
    case DType::F4E2M1:
        // OCP MX v1.0 §5.3.3: bias 1, no infinities or NaN, max 6, one subnormal (0.5).
        return { 2, 1, 0.25, 6.0, 1.0, 0.5, false };
    case DType::I4:
        // Symmetric group-wise int4: a step of amax / 7.5, half of it relative to amax.
        return { 0, 3, 1.0 / 15.0, 7.0, 1.0, 1.0, false };
    default:
        return {};
    }
}

float roundToE2m1(float value)
{
    // E2M1 has no NaN code: a NaN stays NaN, as it does through the other emulated formats.
    return std::isnan(value) ? value : e2m1ToFloat(floatToE2m1(value));
}

float roundToFormat(float value, DType dtype)
{
    switch (dtype) {
    case DType::BF16:
        return bf16ToFloat(floatToBf16(value));
    case DType::F16:
        return f16ToFloat(floatToF16(value));
    case DType::F8E4M3:
        return e4m3ToFloat(floatToE4m3(value));
    case DType::F8E5M2:
        return e5m2ToFloat(floatToE5m2(value));
    case DType::F4E2M1:
        return roundToE2m1(value);
    default:
        return value;
    }
}

void roundToFormat(std::span<float> values, DType dtype)
{
    if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F8E4M3
        && dtype != DType::F8E5M2 && dtype != DType::F4E2M1) {
        return;
    }
    for (float& v : values) {
        v = roundToFormat(v, dtype);
    }
}

float fakeQuantInt8(std::span<float> row)
{
    float amax = 0.0f;
    for (const float v : row) {
        amax = std::max(amax, std::fabs(v));
    }
    if (amax == 0.0f || !std::isfinite(amax)) {
        return 0.0f;
    }
    const float scale = amax / 127.0f;
    for (float& v : row) {
        const float q = std::clamp(std::nearbyint(v / scale), -127.0f, 127.0f);
        v = q * scale;
    }
    return scale;
}

void encodeFloats(const float* src, std::int64_t count, DType dtype, void* dst)
{
    const auto n = std::size_t(count);
    // Only fails for pairs it does not handle; every floating dtype is handled.
    (void)convertElements({ reinterpret_cast<const std::byte*>(src), n * sizeof(float) },
        DType::F32, { static_cast<std::byte*>(dst), n * std::size_t(dtypeSize(dtype)) }, dtype, n);
}

void decodeFloats(const void* src, std::int64_t count, DType dtype, float* dst)
{
    const auto n = std::size_t(count);
    (void)convertElements({ static_cast<const std::byte*>(src), n * std::size_t(dtypeSize(dtype)) },
        dtype, { reinterpret_cast<std::byte*>(dst), n * sizeof(float) }, DType::F32, n);
}

} // namespace day0::numerics
