#pragma once

#include "base/result.h"

#include <cstddef>
#include <functional>
#include <map>
#include <unordered_map>

namespace day0::cuda {

/// A caching pool of device allocations: sizes are rounded up to a size class (512 B granules
/// below 1 MiB, then 2 MiB granules), freed blocks are kept per class and handed out again, so a
/// forward pass that repeats its shapes stops calling cudaMalloc after its first step. The raw
/// allocator is injected (cudaMalloc in the plugin, malloc in tests). Not thread-safe: it
/// belongs to the backend's one device thread.
class DevicePool {
public:
    using Allocate = std::function<Result<void*>(std::size_t bytes)>;
    using Release = std::function<void(void* pointer)>;

    DevicePool(Allocate allocate, Release release);
    ~DevicePool();
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    /// A block of at least `bytes` (a cached one of the same class when there is one). When the
    /// raw allocator fails, the cache is emptied and the allocation retried once.
    Result<void*> allocate(std::size_t bytes);
    /// Returns a block to the cache. Error for a pointer the pool did not hand out.
    Result<void> release(void* pointer);
    /// Gives every cached block back to the raw allocator.
    void trim();

    /// The size class of a request, in bytes.
    static std::size_t sizeClass(std::size_t bytes);

    [[nodiscard]] std::size_t bytesInUse() const { return m_inUse; }
    [[nodiscard]] std::size_t bytesCached() const { return m_cached; }
    [[nodiscard]] std::size_t peakBytes() const { return m_peak; }
    [[nodiscard]] std::size_t rawAllocations() const { return m_rawAllocations; }

private:
    Allocate m_allocate;
    Release m_release;
    std::multimap<std::size_t, void*> m_free; ///< class → cached block
    std::unordered_map<void*, std::size_t> m_live; ///< handed-out block → class
    std::size_t m_inUse = 0;
    std::size_t m_cached = 0;
    std::size_t m_peak = 0;
    std::size_t m_rawAllocations = 0;
};

} // namespace day0::cuda
