#include "numerics/widen_fp8.h"

#include "numerics/dtype_convert.h"
#include "numerics/parallel_chunks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <vector>

namespace day0::numerics::detail {

namespace {

// As widen_bf16.cpp: each extra thread gets at least this many elements (16 MiB of F32 output
// from 4 MiB of FP8), and memory bandwidth saturates well before kMaxThreads.
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

void widenRange(const std::byte* src, const Table& table, std::byte* dst, std::size_t count)
{
    // Eight lookups per round: the loads of the table stay in L1 and the stores are batched.
    std::array<float, 8> out {};
    std::size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        for (std::size_t k = 0; k < 8; ++k) {
            out[k] = table[std::to_integer<std::uint8_t>(src[i + k])];
        }
        std::memcpy(dst + 4 * i, out.data(), sizeof(out));
    }
    for (; i < count; ++i) {
        const float v = table[std::to_integer<std::uint8_t>(src[i])];
        std::memcpy(dst + 4 * i, &v, 4);
    }
}

} // namespace

void widenFp8ToF32(const std::byte* src, DType from, std::byte* dst, std::size_t count)
{
    const Table& table = tableFor(from);
    if (count < 2 * kElementsPerThread) {
        widenRange(src, table, dst, count); // one thread (asking for the cores costs a syscall)
        return;
    }
    runInParallelChunks(
        count, kElementsPerThread, kMaxThreads, [&](std::size_t begin, std::size_t end) {
            widenRange(src + begin, table, dst + 4 * begin, end - begin);
        });
}

} // namespace day0::numerics::detail
