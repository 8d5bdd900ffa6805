#pragma once

#include "profile/trace.h"

#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

namespace day0::profile {

/// A sorted list of disjoint [start, end) intervals in ns.
using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// Merges overlapping or touching intervals (sorts a copy).
Intervals unionOf(Intervals intervals);
/// Total length of disjoint intervals.
std::int64_t lengthOf(const Intervals& disjoint);
/// Intersection of two disjoint, sorted lists.
Intervals intersect(const Intervals& a, const Intervals& b);

/// Where one rank's GPU time goes (HTA's temporal breakdown, over the union of all its streams),
/// plus compute–communication overlap. ns. compute + communication + memory + idle == span:
/// communication counts only time not already computing, memory only time doing neither.
struct RankBreakdown {
    std::int32_t rank = 0;
    std::int64_t spanStart = 0;
    std::int64_t spanEnd = 0;
    std::int64_t span = 0; ///< first GPU work start to last GPU work end
    std::int64_t compute = 0; ///< union of compute kernels
    std::int64_t communication = 0; ///< union of collective kernels minus compute
    std::int64_t memory = 0; ///< union of memcpy/memset minus compute and communication
    std::int64_t idle = 0; ///< no GPU work at all
    std::int64_t communicationTotal = 0; ///< union of collective kernels
    std::int64_t overlap = 0; ///< collective kernels running while compute kernels run
    /// HTA's comm/comp overlap: overlap ÷ communicationTotal × 100 (0 without communication).
    [[nodiscard]] double overlapPercent() const
    {
        return communicationTotal > 0 ? 100.0 * double(overlap) / double(communicationTotal) : 0.0;
    }
};

/// One row per rank that has GPU work, ascending by rank. With a range (ns), work is clipped to
/// [rangeStart, rangeEnd) and the span is that range (a timeline selection).
std::vector<RankBreakdown> temporalBreakdown(
    const Trace& trace, std::int64_t rangeStart = INT64_MIN, std::int64_t rangeEnd = INT64_MAX);

} // namespace day0::profile
