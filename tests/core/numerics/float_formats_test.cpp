#include "numerics/dtype_convert.h"
#include "numerics/float_formats.h"
#include "numerics/widen_fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace day0;
using namespace day0::numerics;

namespace {

/// Every finite non-negative value of a format, by decoding every bit pattern.
std::vector<std::pair<float, std::uint32_t>> finiteValues(int bits, float (*decode)(std::uint32_t))
{
    std::vector<std::pair<float, std::uint32_t>> values;
    const std::uint32_t signBit = 1u << (bits - 1);
    for (std::uint32_t b = 0; b < signBit; ++b) {
        const float v = decode(b);
        if (std::isfinite(v)) {
            values.emplace_back(v, b);
        }
    }
    std::sort(values.begin(), values.end());
    return values;
}

/// Round-to-nearest-even by brute force over the sorted grid: ties go to the even bit pattern.
float bruteForceRound(float x, const std::vector<std::pair<float, std::uint32_t>>& grid)
{
    const float a = std::fabs(x);
    auto hi = std::lower_bound(grid.begin(), grid.end(), std::make_pair(a, 0u),
        [](const auto& p, const auto& q) { return p.first < q.first; });
    if (hi == grid.end()) {
        return std::copysign(std::numeric_limits<float>::infinity(), x);
    }
    if (hi->first == a || hi == grid.begin()) {
        return std::copysign(hi->first, x);
    }
    const auto lo = hi - 1;
    const double dl = double(a) - double(lo->first);
    const double dh = double(hi->first) - double(a);
    if (dl < dh) {
        return std::copysign(lo->first, x);
    }
    if (dh < dl) {
        return std::copysign(hi->first, x);
    }
    return std::copysign((lo->second & 1u) == 0 ? lo->first : hi->first, x);
}

float decodeF16(std::uint32_t b) { return f16ToFloat(std::uint16_t(b)); }
float decodeE4M3(std::uint32_t b) { return e4m3ToFloat(std::uint8_t(b)); }
float decodeE5M2(std::uint32_t b) { return e5m2ToFloat(std::uint8_t(b)); }

std::vector<float> samples(float maxMagnitude, int count)
{
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> exponent(-30.0f, std::log2(maxMagnitude) + 0.5f);
    std::uniform_real_distribution<float> unit(1.0f, 2.0f);
    std::vector<float> out;
    for (int i = 0; i < count; ++i) {
        const float v = std::ldexp(unit(rng), int(std::floor(exponent(rng))));
        out.push_back(i % 2 ? v : -v);
    }
    return out;
}

} // namespace

TEST(FloatFormats, Bf16RoundsToNearestEven)
{
    EXPECT_EQ(floatToBf16(1.0f), 0x3F80u);
    EXPECT_EQ(bf16ToFloat(0x3F80u), 1.0f);
    // Halfway between 1 and 1 + 2^-7: ties to the even mantissa (1.0).
    EXPECT_EQ(roundToFormat(1.0f + std::ldexp(1.0f, -8), DType::BF16), 1.0f);
    // Halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
    EXPECT_EQ(
        roundToFormat(1.0f + 3 * std::ldexp(1.0f, -8), DType::BF16), 1.0f + std::ldexp(1.0f, -6));
    EXPECT_EQ(roundToFormat(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), DType::BF16),
        1.0f + std::ldexp(1.0f, -7));
    EXPECT_TRUE(std::isinf(roundToFormat(std::numeric_limits<float>::max(), DType::BF16)));
    EXPECT_TRUE(std::isnan(roundToFormat(std::numeric_limits<float>::quiet_NaN(), DType::BF16)));
    EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(FloatFormats, F16KnownValues)
{
    EXPECT_EQ(floatToF16(65504.0f), 0x7BFFu);
    EXPECT_EQ(floatToF16(65519.0f), 0x7BFFu);
    EXPECT_EQ(floatToF16(65520.0f), 0x7C00u);
    EXPECT_EQ(floatToF16(1.0f / 3.0f), 0x3555u);
    EXPECT_EQ(floatToF16(-2.0f), 0xC000u);
    EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001u);
    EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0x0000u); // tie to even: 0
    EXPECT_EQ(floatToF16(3 * std::ldexp(1.0f, -25)), 0x0002u); // tie to even: 2
    EXPECT_EQ(f16ToFloat(0x3C00u), 1.0f);
    EXPECT_TRUE(std::isinf(f16ToFloat(0xFC00u)));
}

TEST(FloatFormats, F16EveryPatternRoundTrips)
{
    for (std::uint32_t b = 0; b < 0x10000u; ++b) {
        const float v = f16ToFloat(std::uint16_t(b));
        if (std::isnan(v)) {
            continue;
        }
        ASSERT_EQ(floatToF16(v), b) << std::hex << b;
    }
}

TEST(FloatFormats, E4M3fnSaturatesAndHasNoInfinity)
{
    EXPECT_EQ(floatToE4m3(448.0f), 0x7Eu);
    EXPECT_EQ(floatToE4m3(464.0f), 0x7Eu); // tie between 448 and (NaN slot) 480
    EXPECT_EQ(floatToE4m3(1000.0f), 0x7Eu);
    EXPECT_EQ(floatToE4m3(-1e30f), 0xFEu);
    EXPECT_EQ(floatToE4m3(std::numeric_limits<float>::infinity()), 0x7Eu);
    EXPECT_EQ(floatToE4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7Fu, 0x7Fu);
    EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -9)), 0x01u);
    EXPECT_EQ(e4m3ToFloat(0x08u), std::ldexp(1.0f, -6));
    EXPECT_EQ(e4m3ToFloat(0x7Eu), 448.0f);
    EXPECT_TRUE(std::isnan(e4m3ToFloat(0x7Fu)));
    EXPECT_TRUE(std::isnan(e4m3ToFloat(0xFFu)));
    EXPECT_EQ(e4m3ToFloat(0x78u), 256.0f);
    for (std::uint32_t b = 0; b < 256; ++b) {
        const float v = e4m3ToFloat(std::uint8_t(b));
        if (!std::isnan(v)) {
            ASSERT_EQ(floatToE4m3(v), b) << b;
        }
    }
}

TEST(FloatFormats, E5M2OverflowsToInfinityAndE4M3Saturates)
{
    EXPECT_EQ(floatToE5m2(57344.0f), 0x7Bu);
    EXPECT_EQ(floatToE5m2(61440.0f), 0x7Cu);
    EXPECT_EQ(floatToE4m3(1.0e6f), 0x7Eu) << "E4M3fn has no infinity: ±448";
    EXPECT_TRUE(std::isinf(e5m2ToFloat(0x7Cu)));
    EXPECT_TRUE(std::isnan(e5m2ToFloat(0x7Du)));
    for (std::uint32_t b = 0; b < 256; ++b) {
        const float v = e5m2ToFloat(std::uint8_t(b));
        if (!std::isnan(v)) {
            ASSERT_EQ(floatToE5m2(v), b) << b;
        }
    }
}

TEST(FloatFormats, RoundingMatchesBruteForceNearestEven)
{
    struct Case {
        DType dtype;
        int bits;
        float (*decode)(std::uint32_t);
        float maxFinite;
        bool saturates;
    };
    for (const Case c : { Case { DType::F16, 16, decodeF16, 65504.0f, false },
             Case { DType::F8E4M3, 8, decodeE4M3, 448.0f, true },
             Case { DType::F8E5M2, 8, decodeE5M2, 57344.0f, false } }) {
        const auto grid = finiteValues(c.bits, c.decode);
        for (const float x : samples(c.maxFinite, 20000)) {
            float expected = bruteForceRound(x, grid);
            if (std::fabs(x) > c.maxFinite) {
                // Past the largest value: IEEE rounds to inf from max + half an ulp.
                const float nextUp = c.dtype == DType::F8E4M3
                    ? 480.0f
                    : (c.dtype == DType::F16 ? 65536.0f : 65536.0f);
                const bool toInf = std::fabs(x) >= (c.maxFinite + nextUp) / 2;
                expected = std::copysign(c.saturates || !toInf ? c.maxFinite : INFINITY, x);
            }
            ASSERT_EQ(roundToFormat(x, c.dtype), expected)
                << "dtype " << int(c.dtype) << " x " << x;
        }
    }
}

TEST(FloatFormats, EncodeDecodeBuffers)
{
    const std::vector<float> src { 1.0f, -2.5f, 0.1f, 300.0f };
    for (const DType t :
        { DType::F64, DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2 }) {
        std::vector<std::byte> buf(src.size() * std::size_t(dtypeSize(t)));
        encodeFloats(src.data(), std::int64_t(src.size()), t, buf.data());
        std::vector<float> back(src.size());
        decodeFloats(buf.data(), std::int64_t(src.size()), t, back.data());
        for (std::size_t i = 0; i < src.size(); ++i) {
            EXPECT_EQ(back[i], roundToFormat(src[i], t)) << int(t) << " " << src[i];
        }
    }
}

TEST(FloatFormats, Int8FakeQuantIsSymmetricPerRow)
{
    std::vector<float> row { 1.0f, -0.5f, 0.25f, 0.0f };
    const float scale = fakeQuantInt8(row);
    EXPECT_FLOAT_EQ(scale, 1.0f / 127.0f);
    EXPECT_FLOAT_EQ(row[0], 1.0f);
    EXPECT_FLOAT_EQ(row[1], -64.0f / 127.0f); // -63.5 ties to even: -64
    EXPECT_FLOAT_EQ(row[2], 32.0f / 127.0f); // 31.75 -> 32
    EXPECT_EQ(row[3], 0.0f);
    std::vector<float> zero { 0.0f, 0.0f };
    EXPECT_EQ(fakeQuantInt8(zero), 0.0f);
}

TEST(FloatFormats, FormatInfoConstants)
{
    EXPECT_DOUBLE_EQ(formatInfo(DType::BF16).unitRoundoff, std::ldexp(1.0, -8));
    EXPECT_DOUBLE_EQ(formatInfo(DType::F16).maxFinite, 65504.0);
    EXPECT_DOUBLE_EQ(formatInfo(DType::F8E4M3).maxFinite, 448.0);
    EXPECT_FALSE(formatInfo(DType::F8E4M3).hasInfinity);
    EXPECT_DOUBLE_EQ(formatInfo(DType::F8E5M2).minSubnormal, std::ldexp(1.0, -16));
}

TEST(FloatFormats, E2m1RoundsToNearestEvenCodeAndSaturates)
{
    // The eight magnitudes of E2M1 (OCP MX v1.0 §5.3.3); codes with an odd mantissa bit are
    // 0.5, 1.5, 3 and 6.
    const std::vector<float> grid { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
    const auto odd = [](float v) { return v == 0.5f || v == 1.5f || v == 3.0f || v == 6.0f; };
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-7.0f, 7.0f);
    std::vector<float> xs;
    for (int i = 0; i < 20000; ++i) {
        xs.push_back(u(rng));
    }
    for (const float g : grid) {
        xs.push_back(g);
        xs.push_back(-g);
    }
    // Every midpoint, where the even code must win.
    for (std::size_t i = 0; i + 1 < grid.size(); ++i) {
        xs.push_back((grid[i] + grid[i + 1]) / 2);
    }
    for (const float x : xs) {
        const float a = std::fabs(x);
        float best = grid.back();
        if (a <= 6.0f) {
            float bestErr = INFINITY;
            for (const float g : grid) {
                const float err = std::fabs(a - g);
                if (err < bestErr || (err == bestErr && !odd(g))) {
                    best = g;
                    bestErr = err;
                }
            }
        }
        ASSERT_EQ(roundToE2m1(x), std::copysign(best, x)) << "x " << x;
        ASSERT_EQ(roundToFormat(x, DType::F4E2M1), roundToE2m1(x));
    }
    EXPECT_EQ(roundToE2m1(1e9f), 6.0f);
    EXPECT_EQ(roundToE2m1(-INFINITY), -6.0f);
    EXPECT_TRUE(std::isnan(roundToE2m1(NAN)));
    const auto info = formatInfo(DType::F4E2M1);
    EXPECT_EQ(info.maxFinite, 6.0);
    EXPECT_EQ(info.unitRoundoff, 0.25);
    EXPECT_EQ(info.minSubnormal, 0.5);
}

// The loader's FP8 → F32 widening (a table lookup, threaded when large) gives every code's exact
// value, NaNs bit for bit, whether the input is short, unaligned or split over threads.
TEST(FloatFormats, Fp8WidenMatchesTheScalarDecoderOnEveryCode)
{
    for (const auto dtype : { day0::DType::F8E4M3, day0::DType::F8E5M2 }) {
        for (const std::size_t count : { std::size_t(13), (std::size_t(3) << 22) + 5 }) {
            std::vector<std::byte> src(count + 1);
            for (std::size_t i = 0; i < src.size(); ++i) {
                src[i] = std::byte(std::uint8_t((i * 37 + 11) & 0xFF));
            }
            std::vector<float> out(count);
            ASSERT_TRUE(day0::numerics::convertElements(std::span(src).subspan(1), dtype,
                std::as_writable_bytes(std::span(out)), day0::DType::F32, count)
                            .ok());
            for (std::size_t i = 0; i < count; ++i) {
                const auto code = std::to_integer<std::uint8_t>(src[i + 1]);
                const float want = dtype == day0::DType::F8E4M3 ? day0::numerics::e4m3ToFloat(code)
                                                                : day0::numerics::e5m2ToFloat(code);
                ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(want))
                    << "code " << int(code) << " at " << i;
            }
        }
    }
}

// The loader's block-scaled FP8 → F32 dequantisation (each block's 256 codes scaled once into a
// table, looked up with streaming stores when large) equals widening then scaling in double,
// bit for bit: every code under scales that keep it normal, make it subnormal, underflow,
// overflow or are NaN, over ragged block edges, an unaligned output and threaded sizes.
TEST(FloatFormats, Fp8BlockScaledEqualsWideningThenScaling)
{
    const std::vector<double> kinds { 1.0, 0.5, 3.0517578125e-05, 1e-40, 1e-45, 7.5e+35, -2.25,
        std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0 / 448.0 };
    for (const auto dtype : { day0::DType::F8E4M3, day0::DType::F8E5M2 }) {
        for (const auto& [rows, cols] :
            { std::pair<std::int64_t, std::int64_t> { 5, 300 }, { 2100, 1000 } }) {
            const std::int64_t br = 128;
            const std::int64_t bc = 128;
            const std::int64_t gridRows = (rows + br - 1) / br;
            const std::int64_t gridCols = (cols + bc - 1) / bc;
            std::vector<std::uint8_t> codes(std::size_t(rows * cols));
            for (std::size_t i = 0; i < codes.size(); ++i) {
                codes[i] = std::uint8_t((i * 37 + i / 997 + 11) & 0xFF);
            }
            std::vector<double> scales(std::size_t(gridRows * gridCols));
            for (std::size_t i = 0; i < scales.size(); ++i) {
                scales[i] = kinds[i % kinds.size()];
            }
            // One float of offset: 4-aligned but not on a vector boundary.
            std::vector<float> out(codes.size() + 1);
            day0::numerics::detail::widenFp8BlockScaledToF32(
                reinterpret_cast<const std::byte*>(codes.data()), dtype, scales.data(), rows, cols,
                br, bc, out.data() + 1);
            for (std::int64_t r = 0; r < rows; ++r) {
                for (std::int64_t c = 0; c < cols; ++c) {
                    const auto code = codes[std::size_t(r * cols + c)];
                    const float v = dtype == day0::DType::F8E4M3
                        ? day0::numerics::e4m3ToFloat(code)
                        : day0::numerics::e5m2ToFloat(code);
                    const float want
                        = float(double(v) * scales[std::size_t((r / br) * gridCols + c / bc)]);
                    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[std::size_t(r * cols + c) + 1]),
                        std::bit_cast<std::uint32_t>(want))
                        << "code " << int(code) << " at (" << r << ", " << c << ")";
                }
            }
        }
    }
}

namespace {

/// E4M3 (OCP 8-bit floating point, "E4M3FN") from its definition, written out apart from the
/// library's table: sign bit, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 holds the
/// subnormals m · 2^-9; S.1111.111 is NaN (the quiet NaN of the code's sign); no infinities.
std::uint32_t e4m3Definition(std::uint8_t code)
{
    const std::uint32_t sign = std::uint32_t(code >> 7) << 31;
    const unsigned exponent = (code >> 3) & 0xFu;
    const unsigned mantissa = code & 0x7u;
    if (exponent == 0xF && mantissa == 0x7) {
        return sign | 0x7FC00000u;
    }
    if (exponent == 0) {
        if (mantissa == 0) {
            return sign; // ±0
        }
        // m · 2^-9 normalised: the leading one of m becomes the implicit bit.
        const int lead = std::bit_width(mantissa) - 1; // 0, 1 or 2
        const std::uint32_t fraction = (mantissa & ~(1u << lead)) << (23 - lead);
        return sign | (std::uint32_t(lead - 9 + 127) << 23) | fraction;
    }
    return sign | (std::uint32_t(int(exponent) - 7 + 127) << 23) | (mantissa << 20);
}

} // namespace

// The 256-entry table the loader widens E4M3 through holds every code's value as the format
// defines it, bit for bit: normals, the subnormals (exponent 0), ±0, the largest ±448 and both NaN
// codes, in the scalar decoder and in the widening (short, and long enough to be threaded).
TEST(FloatFormats, E4m3TableMatchesTheFormatDefinitionOnEveryCode)
{
    EXPECT_EQ(e4m3Definition(0x7E), std::bit_cast<std::uint32_t>(448.0f));
    EXPECT_EQ(e4m3Definition(0x01), std::bit_cast<std::uint32_t>(0x1p-9f));
    EXPECT_EQ(e4m3Definition(0x08), std::bit_cast<std::uint32_t>(0x1p-6f));
    for (const std::size_t count : { std::size_t(256), std::size_t(256) << 12 }) {
        std::vector<std::uint8_t> codes(count);
        for (std::size_t i = 0; i < count; ++i) {
            codes[i] = std::uint8_t(i);
        }
        std::vector<float> out(count);
        day0::numerics::detail::widenFp8ToF32(reinterpret_cast<const std::byte*>(codes.data()),
            day0::DType::F8E4M3, reinterpret_cast<std::byte*>(out.data()), count);
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint32_t want = e4m3Definition(codes[i]);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), want) << "code " << int(codes[i]);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(day0::numerics::e4m3ToFloat(codes[i])), want)
                << "code " << int(codes[i]);
        }
    }
}

// The block-scaled conversion (every code under every kind of scale, ragged and threaded, each
// kernel) is widen_fp8_test.cpp's, against e4m3ToFloat, which the test above holds to the
// definition.
