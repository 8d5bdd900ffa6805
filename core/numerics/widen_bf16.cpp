#include "numerics/widen_bf16.h"

#include "numerics/parallel_chunks.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace day0::numerics::detail {

namespace {

// Below this many elements one thread converts with ordinary stores: the output still fits in
// the caches and the next reader benefits from it being there.
constexpr std::size_t kStreamElements = std::size_t(1) << 18; // 1 MiB of F32 output
// Each extra thread gets at least this many elements, so thread start-up stays negligible.
constexpr std::size_t kElementsPerThread = std::size_t(1) << 21; // 8 MiB of F32 output
constexpr unsigned kMaxThreads = 8; // memory bandwidth saturates well before this

void widenScalar(const std::byte* src, std::byte* dst, std::size_t count)
{
    for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h = 0;
        std::memcpy(&h, src + 2 * i, 2);
        const std::uint32_t w = std::uint32_t(h) << 16;
        std::memcpy(dst + 4 * i, &w, 4);
    }
}

void widenRange(const std::byte* src, std::byte* dst, std::size_t count, bool stream)
{
#if defined(__SSE2__)
    // Interleaving zero half-words below each BF16 value is exactly the shift by 16.
    std::size_t i = 0;
    if (stream) {
        // Streaming stores need 16-byte aligned destinations; F32 output is at least 4-aligned
        // in practice, otherwise the whole range goes the unaligned way below.
        while (i < count && (reinterpret_cast<std::uintptr_t>(dst + 4 * i) & 15) != 0) {
            widenScalar(src + 2 * i, dst + 4 * i, 1);
            ++i;
        }
    }
    const __m128i zero = _mm_setzero_si128();
    const bool aligned = (reinterpret_cast<std::uintptr_t>(dst + 4 * i) & 15) == 0;
    if (stream && aligned) {
        for (; i + 8 <= count; i += 8) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
            auto* out = reinterpret_cast<__m128i*>(dst + 4 * i);
            _mm_stream_si128(out, _mm_unpacklo_epi16(zero, v));
            _mm_stream_si128(out + 1, _mm_unpackhi_epi16(zero, v));
        }
        _mm_sfence(); // streaming stores are weakly ordered: publish them before returning
    } else {
        for (; i + 8 <= count; i += 8) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
            auto* out = reinterpret_cast<__m128i*>(dst + 4 * i);
            _mm_storeu_si128(out, _mm_unpacklo_epi16(zero, v));
            _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(zero, v));
        }
    }
    widenScalar(src + 2 * i, dst + 4 * i, count - i);
#else
    (void)stream;
    widenScalar(src, dst, count);
#endif
}

} // namespace

void widenBf16ToF32(const std::byte* src, std::byte* dst, std::size_t count)
{
    if (count < kStreamElements) {
        widenRange(src, dst, count, false);
        return;
    }
    runInParallelChunks(
        count, kElementsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            widenRange(src + 2 * begin, dst + 4 * begin, end - begin, true);
        });
}

} // namespace day0::numerics::detail
