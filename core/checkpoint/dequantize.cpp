#include "checkpoint/dequantize.h"

#include "numerics/dtype_convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace day0::checkpoint {

namespace {

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

Result<void> checkTarget(const char* what, DType to)
{
    if (to != DType::F32 && to != DType::BF16 && to != DType::F16) {
        return Error::unsupported(fmt::format("{}: cannot dequantize to {}", what, dtypeName(to)));
    }
    return success();
}

Result<void> checkBytes(const char* what, const char* part, std::size_t have, std::int64_t rows,
    std::int64_t perRow, std::int64_t elemSize)
{
    const auto need = std::size_t(rows * perRow * elemSize);
    if (have != need) {
        return Error::badInput(fmt::format("{}: {} has {} bytes, {} rows of {} × {} bytes need {}",
            what, part, have, rows, perRow, elemSize, need));
    }
    return success();
}

/// Writes one float row into row `r` of `out` as `to`.
Result<void> storeRow(
    std::span<const float> row, std::int64_t r, std::span<std::byte> out, DType to)
{
    const auto size = std::size_t(dtypeSize(to));
    return numerics::convertElements(std::as_bytes(row), DType::F32,
        out.subspan(std::size_t(r) * row.size() * size, row.size() * size), to, row.size());
}

} // namespace

float e8m0ToFloat(std::uint8_t e)
{
    if (e == 0xFF) {
        return std::numeric_limits<float>::quiet_NaN();
    }
    return std::ldexp(1.0f, int(e) - 127);
}

Result<void> dequantizeFp4(std::span<const std::byte> codes, std::span<const std::byte> scales,
    Fp4Scale scaleKind, float global, std::int64_t rows, std::int64_t cols, std::int64_t group,
    std::span<std::byte> out, DType to)
{
    constexpr const char* kWhat = "FP4";
    DAY0_TRY(checkTarget(kWhat, to));
    if (rows < 0 || cols < 0 || group <= 0) {
        return Error::badInput(
            fmt::format("FP4: bad shape [{}, {}] or group {}", rows, cols, group));
    }
    const std::int64_t rowBytes = ceilDiv(cols, 2);
    const std::int64_t groups = ceilDiv(cols, group);
    DAY0_TRY(checkBytes(kWhat, "the codes", codes.size(), rows, rowBytes, 1));
    DAY0_TRY(checkBytes(kWhat, "the scales", scales.size(), rows, groups, 1));
    DAY0_TRY(checkBytes(kWhat, "the output", out.size(), rows, cols, dtypeSize(to)));
    const auto* c = reinterpret_cast<const std::uint8_t*>(codes.data());
    const auto* s = reinterpret_cast<const std::uint8_t*>(scales.data());
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::vector<float> scale(static_cast<std::size_t>(groups));
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::uint8_t* sr = s + r * groups;
        for (std::int64_t g = 0; g < groups; ++g) {
            scale[std::size_t(g)]
                = scaleKind == Fp4Scale::E8M0 ? e8m0ToFloat(sr[g]) : numerics::e4m3ToFloat(sr[g]);
        }
        const std::uint8_t* cr = c + r * rowBytes;
        for (std::int64_t k = 0; k < cols; ++k) {
            const std::uint8_t byte = cr[k / 2];
            const float v = numerics::e2m1ToFloat(k % 2 == 0 ? byte : std::uint8_t(byte >> 4));
            const float x = v * scale[std::size_t(k / group)];
            // NVFP4: e2m1 × e4m3 is exact in float; only the global factor rounds.
            row[std::size_t(k)] = scaleKind == Fp4Scale::E8M0 ? x : x * global;
        }
        DAY0_TRY(storeRow(row, r, out, to));
    }
    return success();
}

Result<void> quantizeMxfp4(std::span<const float> values, std::int64_t rows, std::int64_t cols,
    std::span<std::byte> codes, std::span<std::byte> scales)
{
    constexpr std::int64_t kGroup = 32;
    constexpr const char* kWhat = "MXFP4";
    if (rows < 0 || cols < 0 || cols % kGroup != 0) {
        return Error::badInput(
            fmt::format("MXFP4: [{}, {}] has rows not in blocks of {}", rows, cols, kGroup));
    }
    DAY0_TRY(checkBytes(kWhat, "the values", values.size() * sizeof(float), rows, cols, 4));
    DAY0_TRY(checkBytes(kWhat, "the codes", codes.size(), rows, cols / 2, 1));
    DAY0_TRY(checkBytes(kWhat, "the scales", scales.size(), rows, cols / kGroup, 1));
    for (std::int64_t b = 0; b < rows * cols / kGroup; ++b) {
        const auto block = values.subspan(std::size_t(b * kGroup), std::size_t(kGroup));
        float amax = 0.0f;
        for (std::size_t k = 0; k < block.size(); ++k) {
            if (!std::isfinite(block[k])) {
                return Error::badInput(fmt::format("MXFP4: value {} of row {} is not finite",
                    (b % (cols / kGroup)) * kGroup + std::int64_t(k), b / (cols / kGroup)));
            }
            amax = std::max(amax, std::fabs(block[k]));
        }
        int exponent = 0; // the unbiased exponent of the scale
        if (amax > 0.0f) {
            // frexp is exact where log2 may round up just below a power of two.
            int e = 0;
            std::frexp(amax, &e); // amax = m × 2^e, m in [0.5, 1): ⌊log2 amax⌋ = e − 1
            exponent = std::clamp(e - 1 - 2, -127, 127);
        }
        scales[std::size_t(b)] = std::byte(std::uint8_t(exponent + 127));
        for (std::int64_t k = 0; k < kGroup; k += 2) {
            // A power of two: the division is exact unless it lands below float's normals.
            const auto lo = numerics::floatToE2m1(std::ldexp(block[std::size_t(k)], -exponent));
            const auto hi = numerics::floatToE2m1(std::ldexp(block[std::size_t(k + 1)], -exponent));
            codes[std::size_t((b * kGroup + k) / 2)] = std::byte(std::uint8_t(lo | (hi << 4)));
        }
    }
    return success();
}

Result<void> dequantizePackedInt4(std::span<const std::byte> packed,
    std::span<const std::byte> scales, DType scaleType, std::int64_t rows, std::int64_t cols,
    std::int64_t group, std::span<std::byte> out, DType to)
{
    constexpr const char* kWhat = "packed INT4";
    DAY0_TRY(checkTarget(kWhat, to));
    if (scaleType != DType::F32 && scaleType != DType::BF16 && scaleType != DType::F16) {
        return Error::unsupported(fmt::format(
            "packed INT4: scale dtype {} (expected F32, BF16 or F16)", dtypeName(scaleType)));
    }
    if (rows < 0 || cols < 0 || group <= 0) {
        return Error::badInput(
            fmt::format("packed INT4: bad shape [{}, {}] or group {}", rows, cols, group));
    }
    const std::int64_t words = ceilDiv(cols, 8);
    const std::int64_t groups = ceilDiv(cols, group);
    DAY0_TRY(checkBytes(kWhat, "the packed weight", packed.size(), rows, words, 4));
    DAY0_TRY(checkBytes(kWhat, "the scales", scales.size(), rows, groups, dtypeSize(scaleType)));
    DAY0_TRY(checkBytes(kWhat, "the output", out.size(), rows, cols, dtypeSize(to)));
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::vector<float> scale(static_cast<std::size_t>(groups));
    const auto scaleRow = std::size_t(groups * dtypeSize(scaleType));
    for (std::int64_t r = 0; r < rows; ++r) {
        DAY0_TRY(numerics::convertElements(scales.subspan(std::size_t(r) * scaleRow, scaleRow),
            scaleType, std::as_writable_bytes(std::span(scale)), DType::F32, scale.size()));
        const std::byte* wr = packed.data() + r * words * 4;
        for (std::int64_t w = 0; w < words; ++w) {
            static_assert(std::endian::native == std::endian::little);
            std::uint32_t word = 0;
            std::memcpy(&word, wr + w * 4, 4); // safetensors stores little-endian words
            for (std::int64_t j = 0; j < 8 && w * 8 + j < cols; ++j) {
                const std::int64_t k = w * 8 + j;
                const int q = int((word >> (4 * j)) & 0xF) - 8;
                row[std::size_t(k)] = float(q) * scale[std::size_t(k / group)];
            }
        }
        DAY0_TRY(storeRow(row, r, out, to));
    }
    return success();
}

} // namespace day0::checkpoint
