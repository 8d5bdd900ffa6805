// The FP8 → F32 kernels (numerics/widen_fp8.h): the AVX2 arithmetic decode and the table lookups
// give the same bits as the format's values scaled in double, on every E4M3 code, under every
// kind of block scale, short and threaded, aligned or not.

#include "numerics/dtype_convert.h"
#include "numerics/widen_fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using day0::DType;
using day0::numerics::detail::Fp8Kernel;

constexpr Fp8Kernel kKernels[] = { Fp8Kernel::Table, Fp8Kernel::Avx2 };

const char* nameOf(Fp8Kernel k) { return k == Fp8Kernel::Avx2 ? "avx2" : "table"; }

/// Block scales that are floats (as every checkpoint's F32, BF16, F16 and E8M0 scales are), of
/// every kind: ones that keep values normal, make them subnormal or underflow to zero, overflow
/// to infinity, negative, ±0, infinite and NaN.
std::vector<double> floatScales()
{
    return { 1.0, double(1.0f / 448.0f), 0.5, 0x1p-15, double(1e-40f), double(1e-45f),
        double(7.5e35f), -2.25, std::numeric_limits<double>::quiet_NaN(), 0.0, -0.0,
        std::numeric_limits<double>::infinity(), double(3.1415927f), 0x1p-133 };
}

/// float(double(value) · scale): the definition every kernel must meet bit for bit.
std::uint32_t want(std::uint8_t code, double scale)
{
    return std::bit_cast<std::uint32_t>(float(double(day0::numerics::e4m3ToFloat(code)) * scale));
}

} // namespace

TEST(Fp8Kernels, FastestIsAvx2WhereTheCpuHasIt)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const bool avx2 = __builtin_cpu_supports("avx2") != 0;
    EXPECT_EQ(
        day0::numerics::detail::fastestFp8Kernel(), avx2 ? Fp8Kernel::Avx2 : Fp8Kernel::Table);
#else
    EXPECT_EQ(day0::numerics::detail::fastestFp8Kernel(), Fp8Kernel::Table);
#endif
}

// Every E4M3 code (±0, subnormals, normals, ±448, both NaNs) widened unscaled, short (ordinary
// stores) and long (threaded, streamed), at outputs 0 to 7 floats past a 32-byte boundary.
TEST(Fp8Kernels, EveryE4m3CodeWidensToItsValue)
{
    for (const auto kernel : kKernels) {
        for (const std::size_t count : { std::size_t(256) + 13, (std::size_t(1) << 21) + 77 }) {
            std::vector<std::uint8_t> codes(count);
            for (std::size_t i = 0; i < count; ++i) {
                codes[i] = std::uint8_t((i * 37 + i / 256) & 0xFF);
            }
            for (const std::size_t offset : { 0, 1, 3, 7 }) {
                // A 32-byte boundary lies within the first 8 floats of any allocation.
                std::vector<float> out(count + 16);
                float* const got
                    = reinterpret_cast<float*>(
                          (reinterpret_cast<std::uintptr_t>(out.data()) + 31) & ~std::uintptr_t(31))
                    + offset;
                day0::numerics::detail::widenFp8ToF32(
                    reinterpret_cast<const std::byte*>(codes.data()), DType::F8E4M3,
                    reinterpret_cast<std::byte*>(got), count, kernel);
                for (std::size_t i = 0; i < count; ++i) {
                    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), want(codes[i], 1.0))
                        << nameOf(kernel) << ": code " << int(codes[i]) << " at " << i
                        << ", offset " << offset;
                }
            }
        }
    }
}

// Every code under every kind of float scale, block-scaled (128 × 128 blocks over a ragged
// 300-column and a threaded 2100 × 1000 matrix, the output one float off a vector boundary too).
TEST(Fp8Kernels, EveryCodeUnderEveryFloatScale)
{
    const auto kinds = floatScales();
    for (const auto kernel : kKernels) {
        for (const auto& [rows, cols] :
            { std::pair<std::int64_t, std::int64_t> { 260, 300 }, { 2100, 1000 } }) {
            const std::int64_t block = 128;
            const std::int64_t gridCols = (cols + block - 1) / block;
            std::vector<std::uint8_t> codes(std::size_t(rows * cols));
            for (std::size_t i = 0; i < codes.size(); ++i) {
                codes[i] = std::uint8_t((i * 131 + i / 4099) & 0xFF);
            }
            std::vector<double> scales(std::size_t(((rows + block - 1) / block) * gridCols));
            for (std::size_t i = 0; i < scales.size(); ++i) {
                scales[i] = kinds[i % kinds.size()];
            }
            for (const std::size_t offset : { 0, 1 }) {
                std::vector<float> out(codes.size() + 1);
                day0::numerics::detail::widenFp8BlockScaledToF32(
                    reinterpret_cast<const std::byte*>(codes.data()), DType::F8E4M3, scales.data(),
                    rows, cols, block, block, out.data() + offset, kernel);
                for (std::int64_t r = 0; r < rows; ++r) {
                    for (std::int64_t c = 0; c < cols; ++c) {
                        const auto code = codes[std::size_t(r * cols + c)];
                        const double s = scales[std::size_t((r / block) * gridCols + c / block)];
                        ASSERT_EQ(
                            std::bit_cast<std::uint32_t>(out[std::size_t(r * cols + c) + offset]),
                            want(code, s))
                            << nameOf(kernel) << ": code " << int(code) << " scale " << s << " at ("
                            << r << ", " << c << ")";
                    }
                }
            }
        }
    }
}

// All 256 codes against each float scale alone (one block of 4 rows, each row every code and
// then 8 more), so that every (code, scale) pair is met, NaN codes under a NaN scale included.
TEST(Fp8Kernels, AllPairsOfCodeAndScale)
{
    const std::int64_t rows = 4;
    const std::int64_t cols = 264;
    std::vector<std::uint8_t> codes(std::size_t(rows * cols));
    for (std::size_t i = 0; i < codes.size(); ++i) {
        codes[i] = std::uint8_t(i % std::size_t(cols));
    }
    for (const auto kernel : kKernels) {
        for (const double s : floatScales()) {
            std::vector<float> out(codes.size() + 8);
            float* const at = reinterpret_cast<float*>(
                (reinterpret_cast<std::uintptr_t>(out.data()) + 31) & ~std::uintptr_t(31));
            day0::numerics::detail::widenFp8BlockScaledToF32(
                reinterpret_cast<const std::byte*>(codes.data()), DType::F8E4M3, &s, rows, cols,
                rows, cols, at, kernel);
            for (std::size_t i = 0; i < codes.size(); ++i) {
                ASSERT_EQ(std::bit_cast<std::uint32_t>(at[i]), want(codes[i], s))
                    << nameOf(kernel) << ": code " << int(codes[i]) << " scale " << s;
            }
        }
    }
}

// A block row with a scale that is not a float (a double from elsewhere) still rounds once from
// the exact double product: such rows take the scaled tables, the others the fast kernel.
TEST(Fp8Kernels, ScalesThatAreNotFloatsStayExact)
{
    const std::int64_t rows = 512;
    const std::int64_t cols = 256;
    std::vector<std::uint8_t> codes(std::size_t(rows * cols));
    for (std::size_t i = 0; i < codes.size(); ++i) {
        codes[i] = std::uint8_t(i * 7 + i / 256);
    }
    // Block rows 0 and 2 all floats, 1 and 3 with one double of 53 significant bits each.
    const std::vector<double> scales { 0.25, double(1.0f / 3.0f), 1.0 / 3.0, 0.5, 2.0,
        double(1e-40f), 1.0 / 448.0, 4.0 };
    for (const auto kernel : kKernels) {
        std::vector<float> out(codes.size());
        day0::numerics::detail::widenFp8BlockScaledToF32(
            reinterpret_cast<const std::byte*>(codes.data()), DType::F8E4M3, scales.data(), rows,
            cols, 128, 128, out.data(), kernel);
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const auto code = codes[std::size_t(r * cols + c)];
                const double s = scales[std::size_t((r / 128) * 2 + c / 128)];
                ASSERT_EQ(
                    std::bit_cast<std::uint32_t>(out[std::size_t(r * cols + c)]), want(code, s))
                    << nameOf(kernel) << ": code " << int(code) << " at (" << r << ", " << c << ")";
            }
        }
    }
}
