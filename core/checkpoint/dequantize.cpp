#include "checkpoint/dequantize.h"

#include "numerics/dtype_convert.h"
#include "numerics/parallel_chunks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The AVX2 row kernel is compiled for AVX2 by function attribute and runs only where the CPU
// has it.
#define DAY0_FP4_AVX2 1
#include <immintrin.h>
#endif

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

/// One FP4 row's group scales as floats.
void groupScales(const std::uint8_t* sr, Fp4Scale kind, std::int64_t groups, float* scale)
{
    for (std::int64_t g = 0; g < groups; ++g) {
        scale[g] = kind == Fp4Scale::E8M0 ? e8m0ToFloat(sr[g]) : numerics::e4m3ToFloat(sr[g]);
    }
}

/// Element k of an FP4 row: e2m1 × scale, then × global for NVFP4 (the expression every path
/// forms, in this order).
inline float fp4Element(const std::uint8_t* cr, const float* scale, Fp4Scale kind, float global,
    std::int64_t k, std::int64_t group)
{
    const std::uint8_t byte = cr[k / 2];
    const float v = numerics::e2m1ToFloat(k % 2 == 0 ? byte : std::uint8_t(byte >> 4));
    const float x = v * scale[k / group];
    // NVFP4: e2m1 × e4m3 is exact in float; only the global factor rounds.
    return kind == Fp4Scale::E8M0 ? x : x * global;
}

#if defined(DAY0_FP4_AVX2)

/// Columns [0, vectorCols) of an FP4 row into F32, eight a step (four code bytes spread over
/// eight lanes by variable shifts, E2M1's eight magnitudes looked up in one register, the sign
/// flipped in), with the scalar path's two products; `group` is a multiple of 8. Streaming
/// stores (16-byte aligned `out`) when asked: the caller fences.
__attribute__((target("avx2"))) void fp4RowAvx2(const std::uint8_t* cr, const float* scale,
    Fp4Scale kind, float global, std::int64_t vectorCols, std::int64_t group, float* out,
    bool stream)
{
    const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256 g = _mm256_set1_ps(global);
    const bool nv = kind == Fp4Scale::E4M3;
    for (std::int64_t k = 0; k < vectorCols; k += 8) {
        std::uint32_t word = 0;
        std::memcpy(&word, cr + k / 2, 4);
        const __m256i nibble = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(int(word)), shifts), _mm256_set1_epi32(0xF));
        __m256 v = _mm256_permutevar8x32_ps(magnitudes, nibble);
        const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(nibble, _mm256_set1_epi32(8)), 28);
        v = _mm256_xor_ps(v, _mm256_castsi256_ps(sign));
        v = _mm256_mul_ps(v, _mm256_set1_ps(scale[k / group]));
        if (nv) {
            v = _mm256_mul_ps(v, g);
        }
        if (stream) {
            _mm_stream_ps(out + k, _mm256_castps256_ps128(v));
            _mm_stream_ps(out + k + 4, _mm256_extractf128_ps(v, 1));
        } else {
            _mm256_storeu_ps(out + k, v);
        }
    }
}

bool hasAvx2()
{
    static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
    return avx2;
}

#endif

/// FP4 rows [r0, r1) into F32 at `out` (4-aligned), vectorised where the CPU and the group
/// allow, streamed when asked (`out` 16-aligned).
void fp4RowsF32(const std::uint8_t* c, const std::uint8_t* s, Fp4Scale kind, float global,
    std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t group, float* out,
    bool stream)
{
    const std::int64_t rowBytes = ceilDiv(cols, 2);
    const std::int64_t groups = ceilDiv(cols, group);
    std::vector<float> scale(static_cast<std::size_t>(groups));
    std::int64_t vectorCols = 0;
#if defined(DAY0_FP4_AVX2)
    if (hasAvx2() && group % 8 == 0) {
        vectorCols = cols / 8 * 8;
    }
#endif
    for (std::int64_t r = r0; r < r1; ++r) {
        const std::uint8_t* cr = c + r * rowBytes;
        float* o = out + r * cols;
        groupScales(s + r * groups, kind, groups, scale.data());
#if defined(DAY0_FP4_AVX2)
        if (vectorCols > 0) {
            fp4RowAvx2(cr, scale.data(), kind, global, vectorCols, group, o, stream);
        }
#endif
        for (std::int64_t k = vectorCols; k < cols; ++k) {
            o[k] = fp4Element(cr, scale.data(), kind, global, k, group);
        }
    }
#if defined(DAY0_FP4_AVX2)
    if (stream) {
        _mm_sfence(); // streaming stores are weakly ordered: publish them before returning
    }
#endif
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
    const auto at = reinterpret_cast<std::uintptr_t>(out.data());
    if (to == DType::F32 && at % 4 == 0 && cols > 0) {
        // Straight into the output, split by rows over the cores when large (the output is
        // eight times the codes' bytes), with streaming stores past 1 MiB where aligned.
        auto* o = reinterpret_cast<float*>(out.data());
        const bool stream
            = out.size() >= (std::size_t(1) << 20) && at % 16 == 0 && std::size_t(cols) % 4 == 0;
        const auto rowsPerThread
            = std::max<std::size_t>(1, (std::size_t(1) << 21) / std::size_t(cols));
        numerics::detail::runInParallelChunks(
            std::size_t(rows), rowsPerThread, 8, [&](std::size_t r0, std::size_t r1) {
                fp4RowsF32(c, s, scaleKind, global, std::int64_t(r0), std::int64_t(r1), cols, group,
                    o, stream);
            });
        return success();
    }
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::vector<float> scale(static_cast<std::size_t>(groups));
    for (std::int64_t r = 0; r < rows; ++r) {
        groupScales(s + r * groups, scaleKind, groups, scale.data());
        const std::uint8_t* cr = c + r * rowBytes;
        for (std::int64_t k = 0; k < cols; ++k) {
            row[std::size_t(k)] = fp4Element(cr, scale.data(), scaleKind, global, k, group);
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
