#include "device_pool.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::cuda {

namespace {

constexpr std::size_t kSmallGranule = 512;
constexpr std::size_t kLargeThreshold = std::size_t(1) << 20;
constexpr std::size_t kLargeGranule = std::size_t(2) << 20;

} // namespace

DevicePool::DevicePool(Allocate allocate, Release release)
    : m_allocate(std::move(allocate))
    , m_release(std::move(release))
{
}

DevicePool::~DevicePool()
{
    trim();
    // Blocks still handed out are freed too: their owners cannot outlive the device context.
    for (const auto& [pointer, size] : m_live) {
        m_release(pointer);
    }
}

std::size_t DevicePool::sizeClass(std::size_t bytes)
{
    const std::size_t b = std::max<std::size_t>(bytes, 1);
    const std::size_t granule = b < kLargeThreshold ? kSmallGranule : kLargeGranule;
    return (b + granule - 1) / granule * granule;
}

Result<void*> DevicePool::allocate(std::size_t bytes)
{
    const std::size_t size = sizeClass(bytes);
    void* pointer = nullptr;
    if (const auto it = m_free.find(size); it != m_free.end()) {
        pointer = it->second;
        m_free.erase(it);
        m_cached -= size;
    } else {
        auto raw = m_allocate(size);
        if (!raw) {
            if (m_cached == 0) {
                return raw.error();
            }
            trim();
            raw = m_allocate(size);
            if (!raw) {
                return raw.error();
            }
        }
        pointer = *raw;
        ++m_rawAllocations;
    }
    m_live.emplace(pointer, size);
    m_inUse += size;
    m_peak = std::max(m_peak, m_inUse);
    return pointer;
}

Result<void> DevicePool::release(void* pointer)
{
    if (pointer == nullptr) {
        return success();
    }
    const auto it = m_live.find(pointer);
    if (it == m_live.end()) {
        return Error::internal(
            fmt::format("device pool: {} was not allocated by this pool", pointer));
    }
    m_free.emplace(it->second, pointer);
    m_inUse -= it->second;
    m_cached += it->second;
    m_live.erase(it);
    return success();
}

void DevicePool::trim()
{
    for (const auto& [size, pointer] : m_free) {
        m_release(pointer);
    }
    m_free.clear();
    m_cached = 0;
}

} // namespace day0::cuda
