#include "numerics/float_formats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace day0::numerics {

namespace {

/// A binary floating-point format narrower than float, described by its fields.
struct MiniFormat {
    int mantissaBits;
    int bias;
    int minExponent; ///< exponent of the smallest normal, 1 - bias
    float maxFinite;
    bool hasInfinity;
    std::uint32_t nanBits;
    std::uint32_t infBits; ///< unused when !hasInfinity
    int totalBits;
};

constexpr MiniFormat kF16 { 10, 15, -14, 65504.0f, true, 0x7E00u, 0x7C00u, 16 };
constexpr MiniFormat kE4M3 { 3, 7, -6, 448.0f, false, 0x7Fu, 0u, 8 };
constexpr MiniFormat kE5M2 { 2, 15, -14, 57344.0f, true, 0x7Eu, 0x7Cu, 8 };

/// Rounds |value| (finite, non-negative) to the format's grid with ties to even, ignoring range.
float roundMagnitude(float a, const MiniFormat& f)
{
    const float minNormal = std::ldexp(1.0f, f.minExponent);
    if (a < minNormal) {
        // Subnormal range: adding 2^(emin-m+23) makes the float's ulp equal to the format's
        // subnormal spacing, so the hardware rounds to nearest-even for us.
        const float magic = std::ldexp(1.0f, f.minExponent - f.mantissaBits + 23);
        volatile float sum = a + magic;
        return sum - magic;
    }
    const int shift = 23 - f.mantissaBits;
    std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
    const std::uint32_t lsb = (bits >> shift) & 1u;
    bits += (1u << (shift - 1)) - 1u + lsb;
    bits &= ~((1u << shift) - 1u);
    return std::bit_cast<float>(bits);
}

/// Rounds `value` into format `f`; overflow goes to infinity (if the format has one and
/// `saturate` is false) or to the largest finite value.
float roundMini(float value, const MiniFormat& f, bool saturate)
{
    if (std::isnan(value)) {
        return value;
    }
    const float a = std::fabs(value);
    float r = std::isinf(a) ? a : roundMagnitude(a, f);
    if (r > f.maxFinite) {
        r = (f.hasInfinity && !saturate) ? std::numeric_limits<float>::infinity() : f.maxFinite;
    }
    return std::copysign(r, value);
}

/// Encodes a value already on the format's grid (or ±inf / NaN).
std::uint32_t encodeExact(float r, const MiniFormat& f)
{
    const std::uint32_t sign = std::signbit(r) ? (1u << (f.totalBits - 1)) : 0u;
    if (std::isnan(r)) {
        return sign | f.nanBits;
    }
    const float a = std::fabs(r);
    if (std::isinf(a)) {
        return sign | f.infBits;
    }
    if (a == 0.0f) {
        return sign;
    }
    if (a < std::ldexp(1.0f, f.minExponent)) {
        const float step = std::ldexp(1.0f, f.minExponent - f.mantissaBits);
        return sign | std::uint32_t(a / step);
    }
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
    const int exponent = int((bits >> 23) & 0xFFu) - 127;
    const std::uint32_t mantissa = (bits >> (23 - f.mantissaBits)) & ((1u << f.mantissaBits) - 1u);
    return sign | (std::uint32_t(exponent + f.bias) << f.mantissaBits) | mantissa;
}

/// Decodes bits of format `f` to float (exact).
float decodeMini(std::uint32_t bits, const MiniFormat& f)
{
    const int exponentBits = f.totalBits - 1 - f.mantissaBits;
    const std::uint32_t sign = (bits >> (f.totalBits - 1)) & 1u;
    const std::uint32_t exponentField = (bits >> f.mantissaBits) & ((1u << exponentBits) - 1u);
    const std::uint32_t mantissa = bits & ((1u << f.mantissaBits) - 1u);
    const std::uint32_t allOnes = (1u << exponentBits) - 1u;
    float magnitude = 0.0f;
    if (f.hasInfinity && exponentField == allOnes) {
        magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                                  : std::numeric_limits<float>::quiet_NaN();
    } else if (!f.hasInfinity && exponentField == allOnes
        && mantissa == (1u << f.mantissaBits) - 1u) {
        magnitude = std::numeric_limits<float>::quiet_NaN();
    } else if (exponentField == 0) {
        magnitude = std::ldexp(float(mantissa), f.minExponent - f.mantissaBits);
    } else {
        magnitude = std::ldexp(
            1.0f + float(mantissa) / float(1u << f.mantissaBits), int(exponentField) - f.bias);
    }
    return sign ? -magnitude : magnitude;
}

std::array<float, 256> makeTable(const MiniFormat& f)
{
    std::array<float, 256> table {};
    for (std::uint32_t i = 0; i < 256; ++i) {
        table[i] = decodeMini(i, f);
    }
    return table;
}

const std::array<float, 256>& e4m3Table()
{
    static const auto table = makeTable(kE4M3);
    return table;
}

const std::array<float, 256>& e5m2Table()
{
    static const auto table = makeTable(kE5M2);
    return table;
}

float roundBf16(float value)
{
    if (std::isnan(value)) {
        return value;
    }
    std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    return std::bit_cast<float>(bits & 0xFFFF0000u);
}

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
    default:
        return {};
    }
}

std::uint16_t floatToBf16Bits(float value)
{
    if (std::isnan(value)) {
        return std::signbit(value) ? 0xFFC0u : 0x7FC0u;
    }
    return std::uint16_t(std::bit_cast<std::uint32_t>(roundBf16(value)) >> 16);
}

float bf16BitsToFloat(std::uint16_t bits)
{
    return std::bit_cast<float>(std::uint32_t(bits) << 16);
}

std::uint16_t floatToF16Bits(float value)
{
    return std::uint16_t(encodeExact(roundMini(value, kF16, false), kF16));
}

float f16BitsToFloat(std::uint16_t bits)
{
    const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0) {
        const float magnitude = std::ldexp(float(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 0x1F) {
        return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint8_t floatToF8E4M3Bits(float value)
{
    return std::uint8_t(encodeExact(roundMini(value, kE4M3, true), kE4M3));
}

float f8E4M3BitsToFloat(std::uint8_t bits) { return e4m3Table()[bits]; }

std::uint8_t floatToF8E5M2Bits(float value, Overflow overflow)
{
    return std::uint8_t(
        encodeExact(roundMini(value, kE5M2, overflow == Overflow::Saturate), kE5M2));
}

float f8E5M2BitsToFloat(std::uint8_t bits) { return e5m2Table()[bits]; }

float roundToFormat(float value, DType dtype)
{
    switch (dtype) {
    case DType::BF16:
        return roundBf16(value);
    case DType::F16:
        return roundMini(value, kF16, false);
    case DType::F8E4M3:
        return roundMini(value, kE4M3, true);
    case DType::F8E5M2:
        return roundMini(value, kE5M2, false);
    default:
        return value;
    }
}

void roundToFormat(std::span<float> values, DType dtype)
{
    switch (dtype) {
    case DType::BF16:
        for (float& v : values) {
            v = roundBf16(v);
        }
        break;
    case DType::F16:
    case DType::F8E4M3:
    case DType::F8E5M2:
        for (float& v : values) {
            v = roundToFormat(v, dtype);
        }
        break;
    default:
        break;
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
    switch (dtype) {
    case DType::F64: {
        auto* out = static_cast<double*>(dst);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = double(src[i]);
        }
        break;
    }
    case DType::F32:
        std::memcpy(dst, src, std::size_t(count) * sizeof(float));
        break;
    case DType::BF16: {
        auto* out = static_cast<std::uint16_t*>(dst);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = floatToBf16Bits(src[i]);
        }
        break;
    }
    case DType::F16: {
        auto* out = static_cast<std::uint16_t*>(dst);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = floatToF16Bits(src[i]);
        }
        break;
    }
    case DType::F8E4M3: {
        auto* out = static_cast<std::uint8_t*>(dst);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = floatToF8E4M3Bits(src[i]);
        }
        break;
    }
    case DType::F8E5M2: {
        auto* out = static_cast<std::uint8_t*>(dst);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = floatToF8E5M2Bits(src[i]);
        }
        break;
    }
    default:
        break;
    }
}

void decodeFloats(const void* src, std::int64_t count, DType dtype, float* dst)
{
    switch (dtype) {
    case DType::F64: {
        const auto* in = static_cast<const double*>(src);
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = float(in[i]);
        }
        break;
    }
    case DType::F32:
        std::memcpy(dst, src, std::size_t(count) * sizeof(float));
        break;
    case DType::BF16: {
        const auto* in = static_cast<const std::uint16_t*>(src);
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = bf16BitsToFloat(in[i]);
        }
        break;
    }
    case DType::F16: {
        const auto* in = static_cast<const std::uint16_t*>(src);
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = f16BitsToFloat(in[i]);
        }
        break;
    }
    case DType::F8E4M3: {
        const auto* in = static_cast<const std::uint8_t*>(src);
        const auto& table = e4m3Table();
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = table[in[i]];
        }
        break;
    }
    case DType::F8E5M2: {
        const auto* in = static_cast<const std::uint8_t*>(src);
        const auto& table = e5m2Table();
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = table[in[i]];
        }
        break;
    }
    default:
        break;
    }
}

} // namespace day0::numerics
