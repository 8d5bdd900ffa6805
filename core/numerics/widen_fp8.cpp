#include "numerics/widen_fp8.h"

#include "numerics/dtype_convert.h"
#include "numerics/parallel_chunks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#define DAY0_FP8_SSE2 1
#include <emmintrin.h>
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

/// Rows [r0, r1) of a block-scaled matrix: per block row, each block's scaled table is built
/// once, then every row's segments look their codes up in it.
void blockScaledRows(const std::uint8_t* src, const Table& table, const double* scales,
    std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols, std::int64_t r0,
    std::int64_t r1, float* dst, bool stream)
{
    const std::int64_t gridCols = (cols + blockCols - 1) / blockCols;
    std::vector<float> scaled(std::size_t(gridCols) * 256);
    for (std::int64_t r = r0; r < r1;) {
        const std::int64_t blockRow = r / blockRows;
        const std::int64_t end = std::min(r1, (blockRow + 1) * blockRows);
        for (std::int64_t b = 0; b < gridCols; ++b) {
            // The expression of the two-pass conversion: widen exactly, scale in double, round.
            const double s = scales[blockRow * gridCols + b];
            float* t = scaled.data() + b * 256;
            for (std::size_t code = 0; code < 256; ++code) {
                t[code] = float(double(table[code]) * s);
            }
        }
        for (; r < end; ++r) {
            for (std::int64_t b = 0; b < gridCols; ++b) {
                const std::int64_t c0 = b * blockCols;
                const std::int64_t n = std::min(blockCols, cols - c0);
                lookup(src + r * cols + c0, scaled.data() + b * 256,
                    reinterpret_cast<std::byte*>(dst + r * cols + c0), std::size_t(n), stream);
            }
        }
    }
    if (stream) {
        storeFence();
    }
}

} // namespace

void widenFp8ToF32(const std::byte* src, DType from, std::byte* dst, std::size_t count)
{
    const float* table = tableFor(from).data();
    const auto* codes = reinterpret_cast<const std::uint8_t*>(src);
    if (count < kStreamElements) {
        lookup(codes, table, dst, count, false);
        return;
    }
    runInParallelChunks(
        count, kElementsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            lookup(codes + begin, table, dst + 4 * begin, end - begin, true);
            storeFence();
        });
}

void widenFp8BlockScaledToF32(const std::byte* src, DType from, const double* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols,
    float* dst)
{
    const Table& table = tableFor(from);
    const auto* codes = reinterpret_cast<const std::uint8_t*>(src);
    const auto count = std::size_t(rows * cols);
    if (count < kStreamElements || cols <= 0) {
        blockScaledRows(codes, table, scales, cols, blockRows, blockCols, 0, rows, dst, false);
        return;
    }
    // Split by rows (a thread's first block row may be shared with the previous thread: each
    // builds its own scaled tables).
    const std::size_t rowsPerThread = std::max<std::size_t>(1, kElementsPerThread / cols);
    runInParallelChunks(
        std::size_t(rows), rowsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            blockScaledRows(codes, table, scales, cols, blockRows, blockCols, std::int64_t(begin),
                std::int64_t(end), dst, true);
        });
}

} // namespace day0::numerics::detail
