#include "comm/observer_slot.h"

#include <chrono>

namespace day0::comm {

std::int64_t steadyNowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void ObserverSlot::set(CollectiveObserver observer)
{
    std::lock_guard lock(m_mutex);
    m_observer = std::move(observer);
}

void ObserverSlot::notify(int rank, int worldRank, CollectiveKind kind, std::int64_t bytes,
    std::int64_t startNs, const std::string& group) const
{
    CollectiveObserver observer;
    {
        std::lock_guard lock(m_mutex);
        observer = m_observer;
    }
    if (observer) {
        observer(CollectiveRecord { rank, worldRank, kind, bytes, startNs, steadyNowNs(), group });
    }
}

} // namespace day0::comm
