#include "numerics/dtype_convert.h"

#include "numerics/widen_bf16.h"
#include "numerics/widen_fp8.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace day0::numerics {

namespace {

constexpr std::uint32_t bitsOf(float f) { return std::bit_cast<std::uint32_t>(f); }
constexpr float floatOf(std::uint32_t u) { return std::bit_cast<float>(u); }

/// Field layout of a narrow float format.
struct Format {
    int expBits;
    int mantBits;
    bool hasInf; ///< IEEE-style: all-ones exponent is inf/NaN
    double maxFinite;
};

Format formatOf(DType t)
{
    switch (t) {
    case DType::F16:
        return { 5, 10, true, 65504.0 };
    case DType::BF16:
        return { 8, 7, true, std::ldexp(2.0 - 0x1p-7, 127) };
    case DType::F8E4M3:
        return { 4, 3, false, 448.0 };
    case DType::F8E5M2:
        return { 5, 2, true, 57344.0 };
    default:
        return { 8, 23, true, double(std::numeric_limits<float>::max()) };
    }
}

/// Decodes all 256 codes of an 8-bit format once.
std::array<float, 256> fp8Table(bool e4m3)
{
    std::array<float, 256> t {};
    for (int b = 0; b < 256; ++b) {
        const int sign = b >> 7;
        const int exp = e4m3 ? (b >> 3) & 0xF : (b >> 2) & 0x1F;
        const int mant = e4m3 ? b & 0x7 : b & 0x3;
        const int bias = e4m3 ? 7 : 15;
        const int mbits = e4m3 ? 3 : 2;
        float v = 0;
        if (e4m3 && exp == 15 && mant == 7) {
            v = std::numeric_limits<float>::quiet_NaN();
        } else if (!e4m3 && exp == 31) {
            v = mant == 0 ? std::numeric_limits<float>::infinity()
                          : std::numeric_limits<float>::quiet_NaN();
        } else if (exp == 0) {
            v = std::ldexp(float(mant), 1 - bias - mbits);
        } else {
            v = std::ldexp(float(mant + (1 << mbits)), exp - bias - mbits);
        }
        t[std::size_t(b)] = sign ? -v : v;
    }
    return t;
}

const std::array<float, 256> kE4m3 = fp8Table(true);
const std::array<float, 256> kE5m2 = fp8Table(false);

template <typename T> T load(const std::byte* p, std::size_t i)
{
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
}

template <typename T> void store(std::byte* p, std::size_t i, T v)
{
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

/// Decodes element i of a float type to float (F64 narrows: only used on paths that accept it).
inline float decode(const std::byte* p, DType t, std::size_t i)
{
    switch (t) {
    case DType::F32:
        return load<float>(p, i);
    case DType::F16:
        return f16ToFloat(load<std::uint16_t>(p, i));
    case DType::BF16:
        return bf16ToFloat(load<std::uint16_t>(p, i));
    case DType::F8E4M3:
        return kE4m3[std::to_integer<std::size_t>(p[i])];
    case DType::F8E5M2:
        return kE5m2[std::to_integer<std::size_t>(p[i])];
    default:
        return 0.0f;
    }
}

inline void encode(std::byte* p, DType t, std::size_t i, float v)
{
    switch (t) {
    case DType::F32:
        store(p, i, v);
        break;
    case DType::F64:
        store(p, i, double(v));
        break;
    case DType::F16:
        store(p, i, floatToF16(v));
        break;
    case DType::BF16:
        store(p, i, floatToBf16(v));
        break;
    case DType::F8E4M3:
        p[i] = std::byte(floatToE4m3(v));
        break;
    case DType::F8E5M2:
        p[i] = std::byte(floatToE5m2(v));
        break;
    case DType::I8:
        p[i] = std::byte(std::uint8_t(floatToI8(v)));
        break;
    default:
        break;
    }
}

bool isConvertibleFloat(DType t)
{
    return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16
        || t == DType::F8E4M3 || t == DType::F8E5M2;
}

} // namespace

std::uint16_t floatToBf16(float f)
{
    std::uint32_t u = bitsOf(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        return std::uint16_t((u >> 16) | 0x0040u); // keep sign and payload top, force quiet
    }
    u += 0x7FFFu + ((u >> 16) & 1u); // round to nearest even on the 16 dropped bits
    return std::uint16_t(u >> 16);
}

float f16ToFloat(std::uint16_t h)
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1Fu;
    const std::uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F) {
        return floatOf(sign | 0x7F800000u | (mant << 13));
    }
    if (exp == 0) {
        // Subnormal (or zero): mant × 2^-24, exact in float.
        const float v = float(mant) * 0x1p-24f;
        return sign ? -v : v;
    }
    return floatOf(sign | ((exp + 112u) << 23) | (mant << 13));
}

std::uint16_t floatToF16(float f)
{
    std::uint32_t x = bitsOf(f);
    const auto sign = std::uint16_t((x >> 16) & 0x8000u);
    x &= 0x7FFFFFFFu;
    if (x > 0x7F800000u) {
        return std::uint16_t(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    }
    if (x >= 0x477FF000u) { // 65520 and up (inf included) round to infinity
        return std::uint16_t(sign | 0x7C00u);
    }
    if (x < 0x38800000u) {
        // Below 2^-14: adding 0.5 makes the float adder round at 2^-24, the F16 subnormal step.
        return std::uint16_t(sign | (bitsOf(floatOf(x) + 0.5f) - 0x3F000000u));
    }
    const std::uint32_t odd = (x >> 13) & 1u;
    x += (std::uint32_t(15 - 127) << 23) + 0xFFFu + odd;
    return std::uint16_t(sign | (x >> 13));
}

float e4m3ToFloat(std::uint8_t b) { return kE4m3[b]; }
float e5m2ToFloat(std::uint8_t b) { return kE5m2[b]; }

std::uint8_t floatToE4m3(float f)
{
    std::uint32_t x = bitsOf(f);
    const auto sign = std::uint8_t((x >> 24) & 0x80u);
    x &= 0x7FFFFFFFu;
    if (x > 0x7F800000u) {
        return std::uint8_t(sign | 0x7Fu);
    }
    if (x >= 0x43E00000u) { // 448 and beyond, infinity included: saturate
        return std::uint8_t(sign | 0x7Eu);
    }
    if (x < 0x3C800000u) {
        // Below 2^-6: adding 2^14 makes the adder round at 2^-9, the E4M3 subnormal step.
        return std::uint8_t(sign | (bitsOf(floatOf(x) + 16384.0f) - 0x46800000u));
    }
    const std::uint32_t odd = (x >> 20) & 1u;
    x += (std::uint32_t(7 - 127) << 23) + 0x7FFFFu + odd;
    return std::uint8_t(sign | (x >> 20));
}

std::uint8_t floatToE5m2(float f)
{
    std::uint32_t x = bitsOf(f);
    const auto sign = std::uint8_t((x >> 24) & 0x80u);
    x &= 0x7FFFFFFFu;
    if (x > 0x7F800000u) {
        return std::uint8_t(sign | 0x7Fu);
    }
    if (x >= 0x47800000u) { // 65536 and up; [61440, 65536) reaches inf through the rounding carry
        return std::uint8_t(sign | 0x7Cu);
    }
    if (x < 0x38800000u) {
        // Below 2^-14: adding 2^7 makes the adder round at 2^-16, the E5M2 subnormal step.
        return std::uint8_t(sign | (bitsOf(floatOf(x) + 128.0f) - 0x43000000u));
    }
    const std::uint32_t odd = (x >> 21) & 1u;
    x += (std::uint32_t(15 - 127) << 23) + 0xFFFFFu + odd;
    return std::uint8_t(sign | (x >> 21));
}

namespace {

// OCP MX v1.0 E2M1: the 16 codes in order (the same table as transformers' FP4_VALUES).
constexpr std::array<float, 16> kE2m1 = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f,
    -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

} // namespace

float e2m1ToFloat(std::uint8_t nibble) { return kE2m1[nibble & 0x0F]; }

std::uint8_t floatToE2m1(float f)
{
    if (std::isnan(f)) {
        return 0;
    }
    const float a = std::min(std::fabs(f), 6.0f);
    std::uint8_t best = 0;
    for (std::uint8_t code = 1; code < 8; ++code) {
        const float d = std::fabs(a - kE2m1[code]);
        const float bestD = std::fabs(a - kE2m1[best]);
        // Codes ascend, so a tie is between `best` and `code`: the even one wins.
        if (d < bestD || (d == bestD && (code & 1u) == 0)) {
            best = code;
        }
    }
    return std::uint8_t(best | (std::signbit(f) ? 0x8u : 0u));
}

std::int8_t floatToI8(float f)
{
    if (std::isnan(f)) {
        return 0;
    }
    const float r = std::nearbyint(f); // the default rounding mode: nearest, ties to even
    return std::int8_t(r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r));
}

std::uint32_t roundDoubleTo(double x, DType to)
{
    if (to == DType::F32) {
        return bitsOf(float(x)); // the hardware conversion rounds once, to nearest even
    }
    const Format fmt = formatOf(to);
    const int bias = (1 << (fmt.expBits - 1)) - 1;
    const std::uint32_t signBit = std::signbit(x) ? 1u << (fmt.expBits + fmt.mantBits) : 0u;
    const std::uint32_t expAllOnes = (1u << fmt.expBits) - 1;
    const std::uint32_t mantMask = (1u << fmt.mantBits) - 1;
    if (std::isnan(x)) {
        // The quiet NaN the float paths produce: top mantissa bit for F16/BF16, all ones for FP8.
        const bool fp8 = to == DType::F8E4M3 || to == DType::F8E5M2;
        return signBit | (expAllOnes << fmt.mantBits) | (fp8 ? mantMask : 1u << (fmt.mantBits - 1));
    }
    const double a = std::fabs(x);
    const std::uint32_t maxBits = fmt.hasInf ? ((expAllOnes - 1) << fmt.mantBits) | mantMask
                                             : (expAllOnes << fmt.mantBits) | (mantMask - 1);
    const std::uint32_t infBits = expAllOnes << fmt.mantBits;
    if (std::isinf(a)) {
        return signBit | (fmt.hasInf ? infBits : maxBits);
    }
    if (a == 0.0) {
        return signBit;
    }
    int e = 0;
    std::frexp(a, &e); // a = m × 2^e with m in [0.5, 1): unbiased exponent e - 1
    const int minNormal = 1 - bias;
    const int exponent = std::max(e - 1, minNormal);
    const double quantum = std::ldexp(1.0, exponent - fmt.mantBits);
    const double q = std::nearbyint(a / quantum); // exact scaling, one rounding
    const double value = q * quantum;
    if (value > fmt.maxFinite) {
        return signBit | (fmt.hasInf ? infBits : maxBits);
    }
    if (value < std::ldexp(1.0, minNormal)) {
        return signBit | std::uint32_t(q); // subnormal: the quantum count is the mantissa
    }
    int ve = 0;
    const double vm = std::frexp(value, &ve); // value = vm × 2^ve, vm in [0.5, 1)
    const auto biased = std::uint32_t(ve - 1 + bias);
    const auto mant = std::uint32_t(std::ldexp(vm * 2.0 - 1.0, fmt.mantBits));
    return signBit | (biased << fmt.mantBits) | mant;
}

bool canConvert(DType from, DType to)
{
    if (from == to) {
        return true;
    }
    return isConvertibleFloat(from) && (isConvertibleFloat(to) || to == DType::I8);
}

Result<void> convertElements(std::span<const std::byte> src, DType from, std::span<std::byte> dst,
    DType to, std::size_t count)
{
    if (!canConvert(from, to)) {
        return Error::unsupported(
            fmt::format("cannot convert {} to {}", dtypeName(from), dtypeName(to)));
    }
    if (src.size() < count * std::size_t(dtypeSize(from))
        || dst.size() < count * std::size_t(dtypeSize(to))) {
        return Error::internal("convertElements: buffer smaller than count elements");
    }
    const std::byte* s = src.data();
    std::byte* d = dst.data();
    if (from == to) {
        std::memcpy(d, s, count * std::size_t(dtypeSize(from)));
        return success();
    }
    if (from == DType::BF16 && to == DType::F32) {
        // The hot path of loading: vectorised, streamed and threaded when large.
        detail::widenBf16ToF32(s, d, count);
        return success();
    }
    if ((from == DType::F8E4M3 || from == DType::F8E5M2) && to == DType::F32) {
        // Block-FP8 checkpoints' weights: a table lookup, threaded when large.
        detail::widenFp8ToF32(s, from, d, count);
        return success();
    }
    if (from == DType::F64) {
        for (std::size_t i = 0; i < count; ++i) {
            const double v = load<double>(s, i);
            if (to == DType::I8) {
                d[i] = std::byte(std::uint8_t(
                    std::isnan(v) ? 0 : std::int8_t(std::clamp(std::nearbyint(v), -128.0, 127.0))));
                continue;
            }
            const std::uint32_t bits = roundDoubleTo(v, to);
            switch (dtypeSize(to)) {
            case 4:
                store(d, i, bits);
                break;
            case 2:
                store(d, i, std::uint16_t(bits));
                break;
            default:
                d[i] = std::byte(std::uint8_t(bits));
                break;
            }
        }
        return success();
    }
    for (std::size_t i = 0; i < count; ++i) {
        encode(d, to, i, decode(s, from, i));
    }
    return success();
}

double loadAsDouble(std::span<const std::byte> src, DType type, std::size_t i)
{
    if (type == DType::F64) {
        return load<double>(src.data(), i);
    }
    return double(decode(src.data(), type, i));
}

} // namespace day0::numerics
