#include "checkpoint/block_fp8.h"

#include "checkpoint/dequantize.h"
#include "numerics/dtype_convert.h"
#include "numerics/widen_fp8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace day0::checkpoint {

namespace {

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

Result<void> checkSizes(std::int64_t rows, std::int64_t cols, BlockShape block,
    std::size_t weightBytes, std::size_t scaleBytes, std::size_t scaleElemSize)
{
    if (rows < 0 || cols < 0 || block.rows <= 0 || block.cols <= 0) {
        return Error::badInput(fmt::format(
            "block FP8: bad shape [{}, {}] or block [{}, {}]", rows, cols, block.rows, block.cols));
    }
    const auto need = std::size_t(rows * cols);
    const auto scales = std::size_t(ceilDiv(rows, block.rows) * ceilDiv(cols, block.cols));
    if (weightBytes != need) {
        return Error::badInput(
            fmt::format("block FP8: weight has {} bytes, shape [{}, {}] needs {}", weightBytes,
                rows, cols, need));
    }
    if (scaleBytes != scales * scaleElemSize) {
        return Error::badInput(
            fmt::format("block FP8: scale has {} bytes, [{}, {}] blocks of {} need {}", scaleBytes,
                ceilDiv(rows, block.rows), ceilDiv(cols, block.cols), scaleElemSize,
                scales * scaleElemSize));
    }
    return success();
}

} // namespace

std::vector<std::int64_t> blockScaleShape(std::int64_t rows, std::int64_t cols, BlockShape block)
{
    return { ceilDiv(rows, block.rows), ceilDiv(cols, block.cols) };
}

Result<void> dequantizeBlockFp8(std::span<const std::byte> weight, std::span<const std::byte> scale,
    DType scaleType, std::int64_t rows, std::int64_t cols, BlockShape block,
    std::span<std::byte> out, DType to)
{
    if (scaleType != DType::F32 && scaleType != DType::BF16 && scaleType != DType::F16
        && scaleType != DType::F8E8M0) {
        return Error::unsupported(
            fmt::format("block FP8: scale dtype {} (expected F32, BF16, F16 or F8_E8M0)",
                dtypeName(scaleType)));
    }
    if (to != DType::F32 && to != DType::BF16 && to != DType::F16) {
        return Error::unsupported(fmt::format("block FP8: cannot dequantize to {}", dtypeName(to)));
    }
    DAY0_TRY(checkSizes(
        rows, cols, block, weight.size(), scale.size(), std::size_t(dtypeSize(scaleType))));
    if (out.size() != std::size_t(rows * cols * dtypeSize(to))) {
        return Error::internal("block FP8: output buffer has the wrong size");
    }
    const std::int64_t scaleCols = ceilDiv(cols, block.cols);
    std::vector<float> scales(std::size_t(ceilDiv(rows, block.rows) * scaleCols));
    if (scaleType == DType::F8E8M0) {
        // DeepSeek-V4 (scale_fmt ue8m0): each block scale is a power of two 2^(e − 127).
        for (std::size_t i = 0; i < scales.size(); ++i) {
            scales[i] = e8m0ToFloat(std::uint8_t(scale[i]));
        }
    } else {
        DAY0_TRY(numerics::convertElements(scale, scaleType,
            std::as_writable_bytes(std::span(scales)), DType::F32, scales.size()));
    }
    if (to == DType::F32 && reinterpret_cast<std::uintptr_t>(out.data()) % 4 == 0) {
        // The streamed loader's kernel: v · s rounded once is the same float product (s is a
        // float, and a 4-bit by 24-bit significand product is exact in double).
        const std::vector<double> wide(scales.begin(), scales.end());
        numerics::detail::widenFp8BlockScaledToF32(weight.data(), DType::F8E4M3, wide.data(), rows,
            cols, block.rows, block.cols, reinterpret_cast<float*>(out.data()));
        return success();
    }
    std::vector<float> row(static_cast<std::size_t>(cols));
    const auto* w = reinterpret_cast<const std::uint8_t*>(weight.data());
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* s = scales.data() + (r / block.rows) * scaleCols;
        const std::uint8_t* wr = w + r * cols;
        for (std::int64_t c = 0; c < cols; ++c) {
            row[std::size_t(c)] = numerics::e4m3ToFloat(wr[c]) * s[c / block.cols];
        }
        const auto outRow
            = out.subspan(std::size_t(r * cols * dtypeSize(to)), std::size_t(cols * dtypeSize(to)));
        DAY0_TRY(numerics::convertElements(
            std::as_bytes(std::span(row)), DType::F32, outRow, to, std::size_t(cols)));
    }
    return success();
}

Result<void> quantizeBlockFp8(std::span<const std::byte> src, DType from, std::int64_t rows,
    std::int64_t cols, BlockShape block, std::span<std::byte> weight, std::span<std::byte> scale,
    bool powerOfTwo)
{
    if (from != DType::F32 && from != DType::BF16 && from != DType::F16) {
        return Error::unsupported(fmt::format("block FP8: cannot quantize {}", dtypeName(from)));
    }
    DAY0_TRY(checkSizes(rows, cols, block, weight.size(), scale.size(), 4));
    if (src.size() != std::size_t(rows * cols * dtypeSize(from))) {
        return Error::internal("block FP8: source buffer has the wrong size");
    }
    // Work one band of block.rows rows at a time in float: amax per block, then encode.
    const std::int64_t scaleCols = ceilDiv(cols, block.cols);
    std::vector<float> band;
    std::vector<float> amax(static_cast<std::size_t>(scaleCols));
    auto* q = reinterpret_cast<std::uint8_t*>(weight.data());
    for (std::int64_t r0 = 0; r0 < rows; r0 += block.rows) {
        const std::int64_t bandRows = std::min(block.rows, rows - r0);
        band.resize(std::size_t(bandRows * cols));
        DAY0_TRY(numerics::convertElements(src.subspan(std::size_t(r0 * cols * dtypeSize(from))),
            from, std::as_writable_bytes(std::span(band)), DType::F32, band.size()));
        std::fill(amax.begin(), amax.end(), 0.0f);
        for (std::int64_t r = 0; r < bandRows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const float a = std::fabs(band[std::size_t(r * cols + c)]);
                float& m = amax[std::size_t(c / block.cols)];
                m = std::isnan(a) ? a : std::max(m, a); // a NaN poisons its block, visibly
            }
        }
        std::vector<float> inv(static_cast<std::size_t>(scaleCols));
        for (std::int64_t b = 0; b < scaleCols; ++b) {
            const float m = amax[std::size_t(b)];
            float s = (m > 0.0f && std::isfinite(m)) ? m / 448.0f : 1.0f;
            if (powerOfTwo) {
                int e = 0;
                const float frac = std::frexp(s, &e); // s = frac · 2^e, frac in [0.5, 1)
                s = std::ldexp(1.0f, frac == 0.5f ? e - 1 : e);
            }
            inv[std::size_t(b)] = s;
            std::memcpy(scale.data() + std::size_t(((r0 / block.rows) * scaleCols + b) * 4), &s, 4);
        }
        for (std::int64_t r = 0; r < bandRows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                q[(r0 + r) * cols + c] = numerics::floatToE4m3(
                    band[std::size_t(r * cols + c)] / inv[std::size_t(c / block.cols)]);
            }
        }
    }
    return success();
}

} // namespace day0::checkpoint
