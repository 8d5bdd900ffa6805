#pragma once

#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>

namespace day0::cuda {

/// Device copies of the weights the engine passes as host buffers (exec::Backend's contract:
/// a weight stays unchanged at its address until releaseWeights()), so a forward pass uploads
/// each weight once instead of on every call. Keyed by host address, element count and device
/// format; least recently used copies are evicted to stay within a byte budget; a weight larger
/// than the budget is not kept. Plain C++ (the device side is injected), not thread-safe.
class ResidentWeights {
public:
    struct Key {
        const void* host = nullptr;
        std::int64_t count = 0;
        int format = 0; ///< the device store (kernels::Store)
        bool operator==(const Key&) const = default;
    };
    /// Makes the device copy of the weight being looked up (allocates and uploads).
    using Upload = std::function<Result<void*>()>;
    /// Frees a device copy.
    using Free = std::function<void(void* device)>;

    ResidentWeights(std::size_t budgetBytes, Free free);
    ~ResidentWeights();
    ResidentWeights(const ResidentWeights&) = delete;
    ResidentWeights& operator=(const ResidentWeights&) = delete;

    /// The device copy of `key` (`bytes` long), made by `upload` on a miss after evicting what
    /// the budget needs; null when `bytes` exceeds the whole budget (the caller then uploads a
    /// temporary copy). A pointer returned stays valid until the next find() or clear().
    Result<void*> find(const Key& key, std::size_t bytes, const Upload& upload);
    /// Frees every copy (the weights may change from now on).
    void clear();

    [[nodiscard]] std::size_t bytes() const { return m_bytes; }
    [[nodiscard]] std::size_t budget() const { return m_budget; }
    [[nodiscard]] std::size_t entries() const { return m_entries.size(); }
    [[nodiscard]] std::int64_t hits() const { return m_hits; }
    [[nodiscard]] std::int64_t misses() const { return m_misses; }
    [[nodiscard]] std::int64_t evictions() const { return m_evictions; }

private:
    struct Entry {
        Key key;
        void* device = nullptr;
        std::size_t bytes = 0;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const;
    };
    void evictOldest();

    std::size_t m_budget;
    Free m_free;
    std::list<Entry> m_entries; ///< most recently used first
    std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> m_index;
    std::size_t m_bytes = 0;
    std::int64_t m_hits = 0;
    std::int64_t m_misses = 0;
    std::int64_t m_evictions = 0;
};

} // namespace day0::cuda
