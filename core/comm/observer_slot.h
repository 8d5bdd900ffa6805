#pragma once

#include "comm/communicator.h"

#include <cstdint>
#include <mutex>
#include <string>

namespace day0::comm {

/// Steady-clock time in nanoseconds: the clock of CollectiveRecord's startNs and endNs.
std::int64_t steadyNowNs();

/// The observer a world communicator and the groups split from it share, one per world on a
/// process: setObserver() installs it, every finished call reports itself through notify().
/// Thread-safe; the observer runs outside the lock, so a slow one does not hold up the others.
class ObserverSlot {
public:
    /// Replaces the observer; an empty one stops the records.
    void set(CollectiveObserver observer);

    /// Calls the observer, when one is set, with the record of a call of `kind` by `rank` of
    /// group `group` (world rank `worldRank`) that moved `bytes`, began at `startNs` (steady
    /// clock) and ends now.
    void notify(int rank, int worldRank, CollectiveKind kind, std::int64_t bytes,
        std::int64_t startNs, const std::string& group) const;

private:
    mutable std::mutex m_mutex;
    CollectiveObserver m_observer;
};

} // namespace day0::comm
