#include "numerics/widen_fp8.h"

#include "numerics/dtype_convert.h"
#include "numerics/parallel_chunks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#define DAY0_FP8_SSE2 1
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The AVX2 kernels are compiled for AVX2 by function attribute and run only where the CPU has it.
#define DAY0_FP8_AVX2 1
#include <immintrin.h>
#endif

namespace day0::numerics::detail {

namespace {

// As widen_bf16.cpp: below this many elements one thread converts with ordinary stores (the
// output fits the caches and its reader benefits); above, streaming stores, and each extra
// thread gets at least kElementsPerThread (16 MiB of F32 output from 4 MiB of FP8); memory
// bandwidth saturates well before kMaxThreads.
constexpr std::size_t kStreamElements = std::size_t(1) << 18;
constexpr std::size_t kElementsPerThread = std::size_t(1) << 22;
constexpr unsigned kMaxThreads = 8;

using Table = std::array<float, 256>;

const Table& tableFor(DType from)
{
    static const Table e4m3 = [] {
        Table t {};
        for (unsigned b = 0; b < 256; ++b) {
            t[b] = e4m3ToFloat(std::uint8_t(b));
        }
        return t;
    }();
    static const Table e5m2 = [] {
        Table t {};
        for (unsigned b = 0; b < 256; ++b) {
            t[b] = e5m2ToFloat(std::uint8_t(b));
        }
        return t;
    }();
    return from == DType::F8E5M2 ? e5m2 : e4m3;
}

void lookupScalar(const std::uint8_t* src, const float* table, std::byte* dst, std::size_t count)
{
    for (std::size_t i = 0; i < count; ++i) {
        std::memcpy(dst + 4 * i, &table[src[i]], 4);
    }
}

#if defined(DAY0_FP8_SSE2)

/// Elements before `dst` + 4·i reaches `align` bytes (all of them when dst is not 4-aligned).
std::size_t headBefore(const std::byte* dst, std::size_t count, std::size_t align)
{
    const auto at = reinterpret_cast<std::uintptr_t>(dst);
    if ((at & 3) != 0) {
        return count;
    }
    return std::min(count, ((align - (at & (align - 1))) & (align - 1)) / 4);
}

/// Four table lookups per 16-byte store, streaming past the caches when asked (the caller
/// fences). AVX2 gathers of eight were measured slower on this machine's EPYC (0.19-0.21x
/// memcpy against 0.29-0.32x single-threaded): the lookups are cheap, the stores are the cost.
void lookupSse2(
    const std::uint8_t* src, const float* table, std::byte* dst, std::size_t count, bool stream)
{
    std::size_t i = stream ? headBefore(dst, count, 16) : 0;
    lookupScalar(src, table, dst, i);
    for (; i + 4 <= count; i += 4) {
        const __m128 v
            = _mm_setr_ps(table[src[i]], table[src[i + 1]], table[src[i + 2]], table[src[i + 3]]);
        if (stream) {
            _mm_stream_ps(reinterpret_cast<float*>(dst + 4 * i), v);
        } else {
            _mm_storeu_ps(reinterpret_cast<float*>(dst + 4 * i), v);
        }
    }
    lookupScalar(src + i, table, dst + 4 * i, count - i);
}

#endif

/// `count` codes at `src` looked up in `table` into F32 at `dst`; with `stream`, streaming
/// stores where the CPU has them (the caller fences with storeFence()).
void lookup(
    const std::uint8_t* src, const float* table, std::byte* dst, std::size_t count, bool stream)
{
#if defined(DAY0_FP8_SSE2)
    lookupSse2(src, table, dst, count, stream);
#else
    (void)stream;
    lookupScalar(src, table, dst, count);
#endif
}

/// Streaming stores are weakly ordered: published before the conversion returns.
void storeFence()
{
#if defined(DAY0_FP8_SSE2)
    _mm_sfence();
#endif
}

#if defined(DAY0_FP8_AVX2)

/// Eight E4M3 codes times `k` (2^120 · a block's scale), rounded once, without a table: the
/// code's eeee.mmm shifted under F32's exponent and mantissa reads as x = 2^(e-127)·(1 + m/8),
/// or for e = 0 as the F32 subnormal m·2^-129, so x · 2^120 is the code's magnitude exactly and
/// x · k its product with the scale; the code's sign is then flipped in (rounding is symmetric)
/// and S.1111.111 becomes the quiet NaN of its sign, as in the table.
__attribute__((target("avx2"))) inline __m256 decodeE4m3x8(const std::uint8_t* src, __m256 k)
{
    const __m256i code
        = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
    const __m256i magnitude = _mm256_and_si256(code, _mm256_set1_epi32(0x7F));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(magnitude, 20)), k);
    const __m256i nan = _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7F));
    v = _mm256_blendv_ps(
        v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_castsi256_ps(nan));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(0x80)), 24);
    return _mm256_xor_ps(v, _mm256_castsi256_ps(sign));
}

/// `count` E4M3 codes to F32 at `dst`, each times `scale` (a float: the products rounded once,
/// as float(double(v) · scale)); the aligned body streamed past the caches when asked (the
/// caller fences). `scale` is finite and below 2^8 in magnitude, so that 2^120 · scale is exact.
__attribute__((target("avx2"))) void decodeE4m3Avx2(const std::uint8_t* src, const float* table,
    float scale, float* dst, std::size_t count, bool stream)
{
    const auto scalar = [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            dst[i] = table[src[i]] * scale;
        }
    };
    const __m256 k = _mm256_set1_ps(scale * 0x1p120f);
    // Streaming stores need aligned destinations: a heap buffer is often 16-aligned only, and a
    // scalar head in every block's row segment would mix ordinary stores into the streamed
    // lines, so a 16-aligned body streams in 16-byte halves.
    std::size_t i = stream ? headBefore(reinterpret_cast<std::byte*>(dst), count, 16) : 0;
    scalar(0, i);
    if (!stream) {
        for (; i + 8 <= count; i += 8) {
            _mm256_storeu_ps(dst + i, decodeE4m3x8(src + i, k));
        }
    } else if (reinterpret_cast<std::uintptr_t>(dst + i) % 32 == 0) {
        for (; i + 8 <= count; i += 8) {
            _mm256_stream_ps(dst + i, decodeE4m3x8(src + i, k));
        }
    } else {
        for (; i + 8 <= count; i += 8) {
            const __m256 v = decodeE4m3x8(src + i, k);
            _mm_stream_ps(dst + i, _mm256_castps256_ps128(v));
            _mm_stream_ps(dst + i + 4, _mm256_extractf128_ps(v, 1));
        }
    }
    scalar(i, count);
}

#endif

/// Whether `kernel` can decode `from` on this CPU.
bool useAvx2(Fp8Kernel kernel, DType from)
{
#if defined(DAY0_FP8_AVX2)
    return kernel == Fp8Kernel::Avx2 && from == DType::F8E4M3 && fastestFp8Kernel() == kernel;
#else
    (void)kernel;
    (void)from;
    return false;
#endif
}

/// Whether the AVX2 decode multiplies by `s` exactly as float(double(v) · s) rounds: `s` is a
/// float (v · s of a 4-bit and a 24-bit significand is exact in double, so rounding it to float
/// once is float's own v · s), finite and below 2^8 (2^120 · s stays an exact float).
bool foldable(double s) { return double(float(s)) == s && std::fabs(s) < 256.0; }

/// Rows [r0, r1) of a block-scaled matrix, a block row at a time: a block whose scale is
/// foldable (with `avx2`) is decoded with it; for each other block, its 256 codes are scaled
/// once into a table that the block's row segments then look up.
void blockScaledRows(const std::uint8_t* src, const Table& table, const double* scales,
    std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols, std::int64_t r0,
    std::int64_t r1, float* dst, bool stream, bool avx2)
{
    const std::int64_t gridCols = (cols + blockCols - 1) / blockCols;
    std::vector<float> scaled(static_cast<std::size_t>(gridCols) * 256);
    std::vector<char> fold(static_cast<std::size_t>(gridCols));
    for (std::int64_t r = r0; r < r1;) {
        const std::int64_t blockRow = r / blockRows;
        const std::int64_t end = std::min(r1, (blockRow + 1) * blockRows);
        const double* s = scales + blockRow * gridCols;
        for (std::int64_t b = 0; b < gridCols; ++b) {
            fold[std::size_t(b)] = char(avx2 && foldable(s[b]));
            if (fold[std::size_t(b)] == 0) {
                // The expression of the two-pass conversion: widen exactly, scale in double.
                float* t = scaled.data() + b * 256;
                for (std::size_t code = 0; code < 256; ++code) {
                    t[code] = float(double(table[code]) * s[b]);
                }
            }
        }
        for (; r < end; ++r) {
            for (std::int64_t b = 0; b < gridCols; ++b) {
                const std::int64_t c0 = b * blockCols;
                const std::int64_t n = std::min(blockCols, cols - c0);
                const std::uint8_t* in = src + r * cols + c0;
                float* out = dst + r * cols + c0;
#if defined(DAY0_FP8_AVX2)
                if (fold[std::size_t(b)] != 0) {
                    decodeE4m3Avx2(in, table.data(), float(s[b]), out, std::size_t(n), stream);
                    continue;
                }
#endif
                lookup(in, scaled.data() + b * 256, reinterpret_cast<std::byte*>(out),
                    std::size_t(n), stream);
            }
        }
    }
    if (stream) {
        storeFence();
    }
}

/// `count` codes at `src` to F32 at `dst` with the kernel `avx2` picks, streamed when asked.
void widenRange(const std::uint8_t* src, const float* table, std::byte* dst, std::size_t count,
    bool stream, bool avx2)
{
#if defined(DAY0_FP8_AVX2)
    if (avx2 && reinterpret_cast<std::uintptr_t>(dst) % 4 == 0) {
        decodeE4m3Avx2(src, table, 1.0f, reinterpret_cast<float*>(dst), count, stream);
        return;
    }
#else
    (void)avx2;
#endif
    lookup(src, table, dst, count, stream);
}

} // namespace

Fp8Kernel fastestFp8Kernel()
{
#if defined(DAY0_FP8_AVX2)
    static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
    return avx2 ? Fp8Kernel::Avx2 : Fp8Kernel::Table;
#else
    return Fp8Kernel::Table;
#endif
}

void widenFp8ToF32(
    const std::byte* src, DType from, std::byte* dst, std::size_t count, Fp8Kernel kernel)
{
    const float* table = tableFor(from).data();
    const auto* codes = reinterpret_cast<const std::uint8_t*>(src);
    const bool avx2 = useAvx2(kernel, from);
    if (count < kStreamElements) {
        widenRange(codes, table, dst, count, false, avx2);
        return;
    }
    runInParallelChunks(
        count, kElementsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            widenRange(codes + begin, table, dst + 4 * begin, end - begin, true, avx2);
            storeFence();
        });
}

void widenFp8BlockScaledToF32(const std::byte* src, DType from, const double* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols,
    float* dst, Fp8Kernel kernel)
{
    const Table& table = tableFor(from);
    const auto* codes = reinterpret_cast<const std::uint8_t*>(src);
    const auto count = std::size_t(rows * cols);
    const bool avx2 = useAvx2(kernel, from) && reinterpret_cast<std::uintptr_t>(dst) % 4 == 0;
    if (count < kStreamElements || cols <= 0) {
        blockScaledRows(
            codes, table, scales, cols, blockRows, blockCols, 0, rows, dst, false, avx2);
        return;
    }
    // Split by rows (a thread's first block row may be shared with the previous thread: each
    // builds its own scaled tables or column scales).
    const std::size_t rowsPerThread = std::max<std::size_t>(1, kElementsPerThread / cols);
    runInParallelChunks(
        std::size_t(rows), rowsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            blockScaledRows(codes, table, scales, cols, blockRows, blockCols, std::int64_t(begin),
                std::int64_t(end), dst, true, avx2);
        });
}

} // namespace day0::numerics::detail
