// FP4 (E2M1) dequantisation to F32 (checkpoint/dequantize.h): the vectorised, threaded path gives
// the bits of the per-element definition — e2m1 × scale, then × the global scale for NVFP4 — on
// every code under every scale code (NaN scales included), in short and long, ragged and
// unaligned matrices.

#include "checkpoint/dequantize.h"
#include "numerics/dtype_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

using day0::checkpoint::Fp4Scale;

/// The definition, written per element apart from the library's rows.
std::uint32_t want(std::uint8_t nibble, std::uint8_t scaleCode, Fp4Scale kind, float global)
{
    const float v = day0::numerics::e2m1ToFloat(nibble);
    const float scale = kind == Fp4Scale::E8M0 ? day0::checkpoint::e8m0ToFloat(scaleCode)
                                               : day0::numerics::e4m3ToFloat(scaleCode);
    const float x = v * scale;
    return std::bit_cast<std::uint32_t>(kind == Fp4Scale::E8M0 ? x : x * global);
}

/// Dequantises a rows × cols matrix whose codes and scale codes cycle through every value, into
/// F32 at `offsetBytes` past a 64-byte boundary, and checks every element.
void checkMatrix(Fp4Scale kind, std::int64_t rows, std::int64_t cols, std::int64_t group,
    std::size_t offsetBytes)
{
    const float global = 0.0123f;
    const std::int64_t rowBytes = (cols + 1) / 2;
    const std::int64_t groups = (cols + group - 1) / group;
    std::vector<std::uint8_t> codes(std::size_t(rows * rowBytes));
    for (std::size_t i = 0; i < codes.size(); ++i) {
        codes[i] = std::uint8_t(i * 29 + i / 251);
    }
    std::vector<std::uint8_t> scales(std::size_t(rows * groups));
    for (std::size_t i = 0; i < scales.size(); ++i) {
        scales[i] = std::uint8_t(i * 7 + i / 256);
    }
    std::vector<std::byte> buffer(std::size_t(rows * cols) * 4 + 128);
    const auto base = (reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t(63);
    const auto out = std::span(buffer).subspan(
        std::size_t(base - reinterpret_cast<std::uintptr_t>(buffer.data())) + offsetBytes,
        std::size_t(rows * cols) * 4);
    ASSERT_TRUE(day0::checkpoint::dequantizeFp4(std::as_bytes(std::span(codes)),
        std::as_bytes(std::span(scales)), kind, global, rows, cols, group, out, day0::DType::F32)
                    .ok());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < cols; ++k) {
            const std::uint8_t byte = codes[std::size_t(r * rowBytes + k / 2)];
            const auto nibble = std::uint8_t(k % 2 == 0 ? byte & 0xF : byte >> 4);
            const std::uint8_t scale = scales[std::size_t(r * groups + k / group)];
            std::uint32_t got = 0;
            std::memcpy(&got, out.data() + std::size_t(r * cols + k) * 4, 4);
            ASSERT_EQ(got, want(nibble, scale, kind, global))
                << (kind == Fp4Scale::E8M0 ? "MXFP4" : "NVFP4") << " nibble " << int(nibble)
                << " scale code " << int(scale) << " at (" << r << ", " << k << "), " << rows << "x"
                << cols << " offset " << offsetBytes;
        }
    }
}

} // namespace

TEST(DequantizeFp4, EveryCodeUnderEveryScaleMatchesTheDefinition)
{
    for (const auto& [kind, group] :
        { std::pair { Fp4Scale::E8M0, std::int64_t(32) }, { Fp4Scale::E4M3, std::int64_t(16) } }) {
        // Short, a ragged last group, an odd column count; aligned, 4- and 1-byte offsets.
        checkMatrix(kind, 64, 512, group, 0);
        checkMatrix(kind, 9, 200, group, 4);
        checkMatrix(kind, 7, 37, group, 1);
        // Long enough to be threaded and streamed (8 MiB of output per thread).
        checkMatrix(kind, 1500, 4096, group, 0);
        checkMatrix(kind, 1500, 4096, group, 4);
    }
}
