#pragma once

#include "profile/trace.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::profile {

/// How one kernel name changed from trace A to trace B.
enum class DiffStatus : std::uint8_t { Added, Removed, Slower, Faster, Unchanged };

/// "added", "removed", "slower", "faster", "unchanged".
std::string_view diffStatusName(DiffStatus status);

/// One kernel (or op) name in both traces. ns.
struct DiffRow {
    std::string name;
    Category category = Category::Kernel;
    DiffStatus status = DiffStatus::Unchanged;
    std::size_t countA = 0;
    std::size_t countB = 0;
    std::int64_t totalA = 0;
    std::int64_t totalB = 0;
    double meanA = 0.0;
    double meanB = 0.0;
    /// (meanB − meanA) ÷ meanA × 100; 0 when added or removed.
    double meanChangePercent = 0.0;
};

/// What counts as a change.
struct DiffOptions {
    double thresholdPercent = 5.0; ///< mean duration change below this is "unchanged"
    std::int64_t minDeltaNs = 500; ///< ... and so is one smaller than this (timer noise)
    bool includeCpu = false; ///< also compare CPU ops and runtime calls
};

/// Compares per-name duration statistics of GPU work (kernels, collectives, copies, sets):
/// names only in B are added, only in A removed; others slower/faster when the mean duration
/// moved by more than the threshold. Sorted by status, then by |totalB − totalA| descending.
std::vector<DiffRow> diffTraces(const Trace& a, const Trace& b, const DiffOptions& options = {});

} // namespace day0::profile
