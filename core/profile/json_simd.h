#pragma once

// Byte classification for JsonEventScanner: finding the bytes that matter in a run of JSON, 16
// or 64 at a time with SSE2 (the x86-64 baseline), byte by byte elsewhere. Internal header.

#include <array>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace day0::profile::detail {

// Bytes that end a fast run inside a string: quote, backslash and control characters.
constexpr std::array<bool, 256> makeStringStops()
{
    std::array<bool, 256> t {};
    for (int c = 0; c < 0x20; ++c) {
        t[std::size_t(c)] = true;
    }
    t['"'] = true;
    t['\\'] = true;
    return t;
}
inline constexpr auto kStringStop = makeStringStops();

// Bytes that matter outside strings while skipping a nested value.
constexpr std::array<bool, 256> makeStructStops()
{
    std::array<bool, 256> t {};
    for (const char c : { '"', '{', '}', '[', ']' }) {
        t[std::size_t(static_cast<unsigned char>(c))] = true;
    }
    return t;
}
inline constexpr auto kStructStop = makeStructStops();

/// First byte in [p, end) that ends a run inside a string (quote, backslash, control).
inline const char* findStringStop(const char* p, const char* end)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i control = _mm_set1_epi8(0x1F);
    while (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // c <= 0x1F (unsigned) exactly when max(c, 0x1F) == 0x1F.
        const __m128i hit
            = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                _mm_cmpeq_epi8(_mm_max_epu8(v, control), control));
        const int mask = _mm_movemask_epi8(hit);
        if (mask != 0) {
            return p + __builtin_ctz(unsigned(mask));
        }
        p += 16;
    }
#endif
    while (p < end && !kStringStop[static_cast<unsigned char>(*p)]) {
        ++p;
    }
    return p;
}

/// First byte in [p, end) that matters outside strings: a quote or a bracket.
inline const char* findStructStop(const char* p, const char* end)
{
#if defined(__SSE2__)
    // '[' | 0x20 == '{' and ']' | 0x20 == '}', so two compares find all four brackets.
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i open = _mm_set1_epi8('{');
    const __m128i close = _mm_set1_epi8('}');
    const __m128i lower = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i folded = _mm_or_si128(v, lower);
        const __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(v, quote),
            _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)));
        const int mask = _mm_movemask_epi8(hit);
        if (mask != 0) {
            return p + __builtin_ctz(unsigned(mask));
        }
        p += 16;
    }
#endif
    while (p < end && !kStructStop[static_cast<unsigned char>(*p)]) {
        ++p;
    }
    return p;
}

/// Positions of the bytes that matter in a 64-byte block, one bit per byte.
struct BlockMasks {
    std::uint64_t quote = 0;
    std::uint64_t backslash = 0;
    std::uint64_t control = 0;
    std::uint64_t open = 0; // '{' or '['
    std::uint64_t close = 0; // '}' or ']'
};

inline BlockMasks classifyBlock(const char* p)
{
    BlockMasks m;
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i control = _mm_set1_epi8(0x1F);
    const __m128i lower = _mm_set1_epi8(0x20);
    const __m128i open = _mm_set1_epi8('{');
    const __m128i close = _mm_set1_epi8('}');
    for (int k = 0; k < 4; ++k) {
        const __m128i v
            = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + std::ptrdiff_t(16) * k));
        const __m128i folded = _mm_or_si128(v, lower);
        const int shift = 16 * k;
        m.quote |= std::uint64_t(std::uint16_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote))))
            << shift;
        m.backslash |= std::uint64_t(std::uint16_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash))))
            << shift;
        m.control |= std::uint64_t(std::uint16_t(
                         _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, control), control))))
            << shift;
        m.open |= std::uint64_t(std::uint16_t(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open))))
            << shift;
        m.close |= std::uint64_t(std::uint16_t(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close))))
            << shift;
    }
#else
    for (int i = 0; i < 64; ++i) {
        const auto c = static_cast<unsigned char>(p[i]);
        const std::uint64_t bit = 1ull << i;
        m.quote |= c == '"' ? bit : 0;
        m.backslash |= c == '\\' ? bit : 0;
        m.control |= c < 0x20 ? bit : 0;
        m.open |= (c | 0x20) == '{' ? bit : 0;
        m.close |= (c | 0x20) == '}' ? bit : 0;
    }
#endif
    return m;
}

/// Bit i set when an odd number of bits at positions <= i are set: with quote bits, the bytes
/// from an opening quote up to (not including) its closing quote.
inline std::uint64_t prefixXor(std::uint64_t x)
{
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

} // namespace day0::profile::detail
