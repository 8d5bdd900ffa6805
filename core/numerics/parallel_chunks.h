#pragma once
// Splits an element-wise conversion of `count` elements over the cores: one chunk per thread, on
// 64-element boundaries so every worker's output stays on whole cache lines, the first chunk on
// the calling thread. The widening loops (BF16, FP8 → F32) share it.

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace day0::numerics::detail {

/// Calls `run(begin, end)` over [0, count) in chunks of at least `perThread` elements, on up to
/// `maxThreads` threads (never more than the cores); returns when every chunk is done.
template <class Run>
void runInParallelChunks(std::size_t count, std::size_t perThread, std::size_t maxThreads, Run run)
{
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const auto threads = std::min<std::size_t>(
        { std::size_t(cores), maxThreads, std::max<std::size_t>(1, count / perThread) });
    if (threads == 1) {
        run(std::size_t(0), count);
        return;
    }
    const std::size_t chunk = (count / threads + 63) & ~std::size_t(63);
    std::vector<std::jthread> workers;
    workers.reserve(threads - 1);
    for (std::size_t t = 1; t < threads; ++t) {
        const std::size_t begin = std::min(count, t * chunk);
        const std::size_t end = std::min(count, begin + chunk);
        if (begin < end) {
            workers.emplace_back([=] { run(begin, end); });
        }
    }
    run(std::size_t(0), std::min(count, chunk));
}

} // namespace day0::numerics::detail
