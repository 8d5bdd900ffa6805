#pragma once

#include "profile/trace.h"

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace day0::profile {

/// Duration statistics of one kernel name (HTA's kernel breakdown). Times in ns; percentiles use
/// linear interpolation between the nearest ranks (numpy's default).
struct KernelStat {
    std::string name;
    Category category = Category::Kernel;
    std::int32_t rank = -1; ///< -1 when aggregated over all ranks
    std::size_t count = 0;
    std::int64_t total = 0;
    /// Self time: `total` less the time of the slices nested directly inside these (on their
    /// track, any category), so nested names' self times add up without counting twice.
    std::int64_t self = 0;
    std::int64_t min = 0;
    std::int64_t max = 0;
    double mean = 0.0;
    double p50 = 0.0;
    double p95 = 0.0;
};

/// Which slices kernelStatistics groups.
struct KernelStatsOptions {
    /// Categories to include; empty means GPU work (kernel, communication, memcpy, memset).
    std::vector<Category> categories;
    bool perRank = false; ///< one row per (rank, name) instead of per name
    std::int32_t rank = -1; ///< only this rank (-1: all)
    /// Only slices starting in [rangeStart, rangeEnd) (ns), e.g. a selection on the timeline;
    /// the default covers everything.
    std::int64_t rangeStart = INT64_MIN;
    std::int64_t rangeEnd = INT64_MAX;
};

/// Per-name statistics, sorted by total time descending (then by name).
std::vector<KernelStat> kernelStatistics(
    const Trace& trace, const KernelStatsOptions& options = {});

/// The p-quantile (0..1) of sorted values, linearly interpolated.
double quantileSorted(const std::vector<std::int64_t>& sorted, double p);

} // namespace day0::profile
