#include "base/file_util.h"
#include "base/sha256.h"
#include "checkpoint/block_fp8.h"
#include "checkpoint/dequantize.h"
#include "numerics/dtype_convert.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace day0::checkpoint {
namespace {

nlohmann::json torchExpectations()
{
    auto text = readFile(test::testData("torch_rounding.json"));
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(*text);
}

template <typename T> std::string digestOf(const std::vector<T>& v)
{
    Sha256 sha;
    sha.update(v.data(), v.size() * sizeof(T));
    return Sha256::hex(sha.finish());
}

bool isNan16(std::uint16_t h, bool bf16)
{
    return bf16 ? std::isnan(numerics::bf16ToFloat(h)) : std::isnan(numerics::f16ToFloat(h));
}

std::vector<std::uint32_t> f32Inputs(const nlohmann::json& expected)
{
    std::vector<std::uint32_t> lows;
    for (const auto& l : expected["f32_low_halves"]) {
        lows.push_back(std::uint32_t(std::stoul(l.get<std::string>(), nullptr, 16)));
    }
    std::vector<std::uint32_t> in;
    for (std::uint32_t hi = 0; hi < 65536; ++hi) {
        for (const auto lo : lows) {
            in.push_back((hi << 16) | lo);
        }
    }
    return in;
}

TEST(Conversion, MatchesPyTorchOnAllF16AndBf16Values)
{
    const auto expected = torchExpectations();
    const auto& sha = expected["sha256"];

    std::vector<std::uint32_t> h2f(65536);
    std::vector<std::uint16_t> b2h(65536);
    std::vector<std::uint16_t> h2b(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
        const float fromHalf = numerics::f16ToFloat(std::uint16_t(i));
        h2f[i] = std::isnan(fromHalf) ? 0x7FC00000u : std::bit_cast<std::uint32_t>(fromHalf);
        const auto h = numerics::floatToF16(numerics::bf16ToFloat(std::uint16_t(i)));
        b2h[i] = isNan16(h, false) ? 0x7E00 : h;
        const auto b = numerics::floatToBf16(numerics::f16ToFloat(std::uint16_t(i)));
        h2b[i] = isNan16(b, true) ? 0x7FC0 : b;
    }
    EXPECT_EQ(digestOf(h2f), sha["f16_to_f32"]);
    EXPECT_EQ(digestOf(b2h), sha["bf16_to_f16"]);
    EXPECT_EQ(digestOf(h2b), sha["f16_to_bf16"]);

    const auto inputs = f32Inputs(expected);
    std::vector<std::uint16_t> f2b(inputs.size());
    std::vector<std::uint16_t> f2h(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const float x = std::bit_cast<float>(inputs[i]);
        const auto b = numerics::floatToBf16(x);
        const auto h = numerics::floatToF16(x);
        f2b[i] = isNan16(b, true) ? 0x7FC0 : b;
        f2h[i] = isNan16(h, false) ? 0x7E00 : h;
    }
    EXPECT_EQ(digestOf(f2b), sha["f32_to_bf16"]);
    EXPECT_EQ(digestOf(f2h), sha["f32_to_f16"]);

    for (const auto& s : expected["samples"]) {
        const float x = std::bit_cast<float>(
            std::uint32_t(std::stoul(s["f32"].get<std::string>(), nullptr, 16)));
        EXPECT_EQ(numerics::floatToBf16(x), std::stoul(s["bf16"].get<std::string>(), nullptr, 16))
            << s.dump();
        EXPECT_EQ(numerics::floatToF16(x), std::stoul(s["f16"].get<std::string>(), nullptr, 16))
            << s.dump();
    }
}

/// FP8 value of a code, from the format definition (independent of the library's table).
double fp8Value(int code, bool e4m3)
{
    const int e = e4m3 ? (code >> 3) & 15 : (code >> 2) & 31;
    const int m = e4m3 ? code & 7 : code & 3;
    const int mb = e4m3 ? 3 : 2;
    const int bias = e4m3 ? 7 : 15;
    const double mag = e == 0 ? m * std::pow(2.0, 1 - bias - mb)
                              : (1.0 + m / std::pow(2.0, mb)) * std::pow(2.0, e - bias);
    return (code & 0x80) ? -mag : mag;
}

TEST(Conversion, DecodesAll256Fp8Codes)
{
    for (int c = 0; c < 256; ++c) {
        const bool e4Nan = (c & 0x7F) == 0x7F;
        if (e4Nan) {
            EXPECT_TRUE(std::isnan(numerics::e4m3ToFloat(std::uint8_t(c))));
        } else {
            EXPECT_EQ(double(numerics::e4m3ToFloat(std::uint8_t(c))), fp8Value(c, true)) << c;
        }
        const int e5 = (c >> 2) & 31;
        if (e5 == 31) {
            EXPECT_EQ(std::isinf(numerics::e5m2ToFloat(std::uint8_t(c))), (c & 3) == 0) << c;
            EXPECT_EQ(std::isnan(numerics::e5m2ToFloat(std::uint8_t(c))), (c & 3) != 0) << c;
        } else {
            EXPECT_EQ(double(numerics::e5m2ToFloat(std::uint8_t(c))), fp8Value(c, false)) << c;
        }
    }
    EXPECT_EQ(numerics::e4m3ToFloat(0x7E), 448.0f);
    EXPECT_EQ(numerics::e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
    EXPECT_EQ(numerics::e5m2ToFloat(0x7B), 57344.0f);
    EXPECT_EQ(numerics::e5m2ToFloat(0x01), std::ldexp(1.0f, -16));
}

/// The expected FP8 code of x by exhaustive search: the nearest finite code, ties to the even
/// code; E4M3 saturates at 448, E5M2 overflows to infinity from the 57344/65536 midpoint.
std::uint8_t bruteForceFp8(float x, bool e4m3)
{
    if (std::isnan(x)) {
        return std::signbit(x) ? 0xFF : 0x7F;
    }
    const double a = std::fabs(double(x));
    const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    const int top = e4m3 ? 0x7E : 0x7C; // for E5M2, 0x7C stands for 65536 while rounding
    int best = 0;
    double bestDist = std::numeric_limits<double>::infinity();
    for (int c = 0; c <= top; ++c) {
        const double v = (!e4m3 && c == 0x7C) ? 65536.0 : fp8Value(c, e4m3);
        const double d = std::fabs(a - v);
        if (d < bestDist || (d == bestDist && (c & 1) == 0)) {
            best = c;
            bestDist = d;
        }
    }
    if (e4m3 && a > 448.0) {
        best = 0x7E;
    }
    if (!e4m3 && a >= 65536.0) {
        best = 0x7C;
    }
    return std::uint8_t(sign | best);
}

std::vector<float> probeFloats()
{
    std::vector<float> v;
    for (std::uint32_t i = 0; i < 65536; ++i) {
        v.push_back(numerics::bf16ToFloat(
            std::uint16_t(i))); // every BF16 value: every exponent, both signs
    }
    for (const bool e4m3 : { true, false }) { // exact midpoints and their neighbours
        for (int c = 0; c < 0x7F; ++c) {
            const double lo = fp8Value(c, e4m3);
            const double hi = (!e4m3 && c + 1 == 0x7C)
                ? 65536.0
                : ((e4m3 && c + 1 == 0x7F) ? 480.0 : fp8Value(c + 1, e4m3));
            const auto mid = float((lo + hi) / 2);
            v.insert(v.end(), { mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid });
        }
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-600.0f, 600.0f);
    for (int i = 0; i < 20000; ++i) {
        v.push_back(u(rng) * std::ldexp(1.0f, int(rng() % 40) - 30));
    }
    v.push_back(std::numeric_limits<float>::infinity());
    v.push_back(-std::numeric_limits<float>::infinity());
    return v;
}

TEST(Conversion, Fp8EncodingMatchesExhaustiveNearestEven)
{
    for (const float x : probeFloats()) {
        if (std::isnan(x)) {
            EXPECT_EQ(numerics::floatToE4m3(x) & 0x7F, 0x7F);
            continue;
        }
        ASSERT_EQ(numerics::floatToE4m3(x), bruteForceFp8(x, true)) << "E4M3 of " << x;
        ASSERT_EQ(numerics::floatToE5m2(x), bruteForceFp8(x, false)) << "E5M2 of " << x;
    }
    // Saturation and infinities.
    EXPECT_EQ(numerics::floatToE4m3(std::numeric_limits<float>::infinity()), 0x7E);
    EXPECT_EQ(numerics::floatToE4m3(-1e6f), 0xFE);
    EXPECT_EQ(numerics::floatToE5m2(std::numeric_limits<float>::infinity()), 0x7C);
    EXPECT_EQ(numerics::floatToE5m2(61439.0f), 0x7B);
    EXPECT_EQ(numerics::floatToE5m2(61440.0f), 0x7C);
    // Every code survives decode → encode.
    for (int c = 0; c < 256; ++c) {
        if ((c & 0x7F) != 0x7F) {
            EXPECT_EQ(numerics::floatToE4m3(numerics::e4m3ToFloat(std::uint8_t(c))), c);
        }
        if (((c >> 2) & 31) != 31) {
            EXPECT_EQ(numerics::floatToE5m2(numerics::e5m2ToFloat(std::uint8_t(c))), c);
        }
    }
}

TEST(Conversion, DoublePathAgreesWithFloatPathAndRoundsOnce)
{
    for (const float x : probeFloats()) {
        const double d = x;
        if (std::isnan(x)) { // payloads are not part of the contract; NaN-ness is
            EXPECT_TRUE(std::isnan(
                numerics::bf16ToFloat(std::uint16_t(numerics::roundDoubleTo(d, DType::BF16)))));
            EXPECT_TRUE(std::isnan(
                numerics::f16ToFloat(std::uint16_t(numerics::roundDoubleTo(d, DType::F16)))));
            continue;
        }
        ASSERT_EQ(numerics::roundDoubleTo(d, DType::BF16), numerics::floatToBf16(x)) << x;
        ASSERT_EQ(numerics::roundDoubleTo(d, DType::F16), numerics::floatToF16(x)) << x;
        ASSERT_EQ(numerics::roundDoubleTo(d, DType::F8E4M3), numerics::floatToE4m3(x)) << x;
        ASSERT_EQ(numerics::roundDoubleTo(d, DType::F8E5M2), numerics::floatToE5m2(x)) << x;
    }
    // 1 + 2^-8 + 2^-30 is just above the BF16 midpoint, but rounds to the midpoint in F32 first;
    // going through F32 would then tie to even (down). Rounding once goes up.
    const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
    EXPECT_EQ(numerics::floatToBf16(float(x)), 0x3F80);
    EXPECT_EQ(numerics::roundDoubleTo(x, DType::BF16), 0x3F81u);
}

TEST(Conversion, Int8RoundsHalfEvenAndSaturates)
{
    EXPECT_EQ(numerics::floatToI8(2.5f), 2);
    EXPECT_EQ(numerics::floatToI8(3.5f), 4);
    EXPECT_EQ(numerics::floatToI8(-2.5f), -2);
    EXPECT_EQ(numerics::floatToI8(126.6f), 127);
    EXPECT_EQ(numerics::floatToI8(1e9f), 127);
    EXPECT_EQ(numerics::floatToI8(-1e9f), -128);
    EXPECT_EQ(numerics::floatToI8(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(Conversion, BulkMatchesScalar)
{
    std::vector<std::uint16_t> bf(1000);
    for (std::size_t i = 0; i < bf.size(); ++i) {
        bf[i] = std::uint16_t(i * 65 + 3);
    }
    std::vector<float> f(bf.size());
    ASSERT_TRUE(numerics::convertElements(std::as_bytes(std::span(bf)), DType::BF16,
        std::as_writable_bytes(std::span(f)), DType::F32, bf.size())
                    .ok());
    std::vector<std::uint8_t> e4(bf.size());
    ASSERT_TRUE(numerics::convertElements(std::as_bytes(std::span(bf)), DType::BF16,
        std::as_writable_bytes(std::span(e4)), DType::F8E4M3, bf.size())
                    .ok());
    for (std::size_t i = 0; i < bf.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(f[i]),
            std::bit_cast<std::uint32_t>(numerics::bf16ToFloat(bf[i])));
        ASSERT_EQ(e4[i], numerics::floatToE4m3(numerics::bf16ToFloat(bf[i])));
    }
    EXPECT_FALSE(numerics::convertElements({}, DType::I64, {}, DType::F32, 0).ok());
}

TEST(Conversion, Bf16ToF32IsExactOnEveryPathAndAlignment)
{
    // Sizes that take the small path, the streamed single-thread path and the threaded path
    // (which needs more than two 2^21-element chunks), with every BF16 code repeated, written at
    // byte offsets 0..3 so unaligned heads, streamed bodies and scalar tails are all exercised.
    for (const std::size_t count : { std::size_t(7), std::size_t(65536 + 13),
             (std::size_t(1) << 18) + 5, (std::size_t(1) << 22) + 4099 }) {
        std::vector<std::byte> src(2 * count + 1);
        for (std::size_t i = 0; i < count; ++i) {
            const auto code = std::uint16_t((i * 40503u) & 0xFFFF);
            std::memcpy(src.data() + 1 + 2 * i, &code, 2); // odd source offset too
        }
        for (std::size_t offset = 0; offset < 4; ++offset) {
            std::vector<std::byte> dst(4 * count + 4, std::byte { 0xAB });
            ASSERT_TRUE(numerics::convertElements(std::span(src).subspan(1), DType::BF16,
                std::span(dst).subspan(offset), DType::F32, count)
                            .ok());
            for (std::size_t i = 0; i < count; ++i) {
                std::uint16_t code = 0;
                std::uint32_t got = 0;
                std::memcpy(&code, src.data() + 1 + 2 * i, 2);
                std::memcpy(&got, dst.data() + offset + 4 * i, 4);
                ASSERT_EQ(got, std::uint32_t(code) << 16)
                    << "count " << count << " offset " << offset << " element " << i;
            }
            for (std::size_t b = 0; b < offset; ++b) {
                ASSERT_EQ(dst[b], std::byte { 0xAB }) << "wrote before the output";
            }
            for (std::size_t b = offset + 4 * count; b < dst.size(); ++b) {
                ASSERT_EQ(dst[b], std::byte { 0xAB }) << "wrote past the output";
            }
        }
    }
}

TEST(BlockFp8, DequantizesWithPartialEdgeBlocks)
{
    const std::int64_t rows = 300;
    const std::int64_t cols = 200; // 3 × 2 blocks, the last row and column of blocks partial
    std::mt19937 rng(1);
    std::vector<std::uint8_t> w(std::size_t(rows * cols));
    for (auto& b : w) {
        do {
            b = std::uint8_t(rng());
        } while ((b & 0x7F) == 0x7F);
    }
    const auto scaleShape = blockScaleShape(rows, cols);
    ASSERT_EQ(scaleShape, (std::vector<std::int64_t> { 3, 2 }));
    std::vector<float> s { 0.5f, 2.0f, 0.001f, 3.0f, 1.0f / 448.0f, 7.0f };
    std::vector<float> out(w.size());
    ASSERT_TRUE(dequantizeBlockFp8(std::as_bytes(std::span(w)), std::as_bytes(std::span(s)),
        DType::F32, rows, cols, {}, std::as_writable_bytes(std::span(out)), DType::F32)
                    .ok());
    std::vector<std::uint16_t> outBf(w.size());
    ASSERT_TRUE(dequantizeBlockFp8(std::as_bytes(std::span(w)), std::as_bytes(std::span(s)),
        DType::F32, rows, cols, {}, std::as_writable_bytes(std::span(outBf)), DType::BF16)
                    .ok());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
            const auto i = std::size_t(r * cols + c);
            const float expected
                = float(fp8Value(w[i], true)) * s[std::size_t((r / 128) * 2 + c / 128)];
            ASSERT_EQ(out[i], expected) << r << "," << c;
            ASSERT_EQ(outBf[i], numerics::floatToBf16(expected));
        }
    }
    // Wrong scale shape is refused.
    EXPECT_FALSE(
        dequantizeBlockFp8(std::as_bytes(std::span(w)), std::as_bytes(std::span(s).first(4)),
            DType::F32, rows, cols, {}, std::as_writable_bytes(std::span(out)), DType::F32)
            .ok());
}

TEST(BlockFp8, QuantizesAndRoundTrips)
{
    const std::int64_t rows = 130;
    const std::int64_t cols = 260;
    std::mt19937 rng(2);
    std::normal_distribution<float> n(0.0f, 0.02f);
    std::vector<float> x(std::size_t(rows * cols));
    for (auto& v : x) {
        v = n(rng);
    }
    for (std::int64_t c = 0; c < cols; ++c) { // the bottom-right partial block is all zero
        for (std::int64_t r = 128; r < rows; ++r) {
            if (c >= 256) {
                x[std::size_t(r * cols + c)] = 0.0f;
            }
        }
    }
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> s(6);
    ASSERT_TRUE(quantizeBlockFp8(std::as_bytes(std::span(x)), DType::F32, rows, cols, {},
        std::as_writable_bytes(std::span(q)), std::as_writable_bytes(std::span(s)))
                    .ok());
    EXPECT_EQ(s[5], 1.0f) << "all-zero block";
    std::vector<float> back(x.size());
    ASSERT_TRUE(dequantizeBlockFp8(std::as_bytes(std::span(q)), std::as_bytes(std::span(s)),
        DType::F32, rows, cols, {}, std::as_writable_bytes(std::span(back)), DType::F32)
                    .ok());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float scale
            = s[std::size_t((std::int64_t(i) / cols / 128) * 3 + (std::int64_t(i) % cols) / 128)];
        // Within half an E4M3 step: 2^-4 relative for normals, 2^-10 × scale for subnormals.
        ASSERT_LE(std::fabs(back[i] - x[i]),
            std::max(std::fabs(x[i]) / 16.0f, scale * std::ldexp(1.0f, -10)) * 1.0001f)
            << i;
    }
    // Quantizing the dequantized weight again gives the same codes and scales.
    std::vector<std::uint8_t> q2(x.size());
    std::vector<float> s2(6);
    ASSERT_TRUE(quantizeBlockFp8(std::as_bytes(std::span(back)), DType::F32, rows, cols, {},
        std::as_writable_bytes(std::span(q2)), std::as_writable_bytes(std::span(s2)))
                    .ok());
    EXPECT_EQ(q2, q);
    EXPECT_EQ(s2, s);
}

// To F32, the block-FP8 dequantisation runs the streamed loader's kernel; it still gives the
// float product e4m3(w) × scale bit for bit, on every code (NaN codes included) under every
// E8M0 scale (2^-127 to 2^127 and the NaN code 0xFF), in an output off a vector boundary.
TEST(BlockFp8, F32OutputIsTheFloatProductOnEveryCodeAndE8m0Scale)
{
    const std::int64_t rows = 256;
    const std::int64_t cols = 256 * 16;
    const BlockShape block { 16, 256 };
    std::vector<std::uint8_t> w(std::size_t(rows * cols));
    for (std::size_t i = 0; i < w.size(); ++i) {
        w[i] = std::uint8_t(i % 256);
    }
    std::vector<std::uint8_t> s(std::size_t((rows / 16) * (cols / 256)));
    for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = std::uint8_t(i);
    }
    std::vector<float> out(w.size() + 1);
    ASSERT_TRUE(dequantizeBlockFp8(std::as_bytes(std::span(w)), std::as_bytes(std::span(s)),
        DType::F8E8M0, rows, cols, block,
        std::as_writable_bytes(std::span(out).subspan(1, w.size())), DType::F32)
                    .ok());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
            const auto i = std::size_t(r * cols + c);
            const std::uint8_t scale = s[std::size_t((r / 16) * (cols / 256) + c / 256)];
            const float want = numerics::e4m3ToFloat(w[i]) * e8m0ToFloat(scale);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i + 1]), std::bit_cast<std::uint32_t>(want))
                << "code " << int(w[i]) << " scale code " << int(scale);
        }
    }
}

} // namespace
} // namespace day0::checkpoint
