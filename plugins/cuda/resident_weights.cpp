#include "resident_weights.h"

#include <utility>

namespace day0::cuda {

std::size_t ResidentWeights::KeyHash::operator()(const Key& k) const
{
    std::size_t h = std::hash<const void*>()(k.host);
    h ^= std::hash<std::int64_t>()(k.count) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= std::hash<int>()(k.format) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

ResidentWeights::ResidentWeights(std::size_t budgetBytes, Free free)
    : m_budget(budgetBytes)
    , m_free(std::move(free))
{
}

ResidentWeights::~ResidentWeights() { clear(); }

Result<void*> ResidentWeights::find(const Key& key, std::size_t bytes, const Upload& upload)
{
    if (const auto it = m_index.find(key); it != m_index.end()) {
        ++m_hits;
        m_entries.splice(m_entries.begin(), m_entries, it->second);
        return it->second->device;
    }
    if (bytes > m_budget) {
        return static_cast<void*>(nullptr);
    }
    ++m_misses;
    while (!m_entries.empty() && m_bytes + bytes > m_budget) {
        evictOldest();
    }
    auto made = upload();
    if (!made) {
        return made.error();
    }
    m_entries.push_front({ key, *made, bytes });
    m_index.emplace(key, m_entries.begin());
    m_bytes += bytes;
    return *made;
}

void ResidentWeights::evictOldest()
{
    const Entry& oldest = m_entries.back();
    m_free(oldest.device);
    m_bytes -= oldest.bytes;
    m_index.erase(oldest.key);
    m_entries.pop_back();
    ++m_evictions;
}

void ResidentWeights::clear()
{
    for (const Entry& e : m_entries) {
        m_free(e.device);
    }
    m_entries.clear();
    m_index.clear();
    m_bytes = 0;
}

} // namespace day0::cuda
