#include "profile/kernel_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace day0::profile {

double quantileSorted(const std::vector<std::int64_t>& sorted, double p)
{
    if (sorted.empty()) {
        return 0.0;
    }
    const double pos = p * double(sorted.size() - 1);
    const auto lo = std::size_t(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    const double frac = pos - double(lo);
    return double(sorted[lo]) + (double(sorted[hi]) - double(sorted[lo])) * frac;
}

std::vector<KernelStat> kernelStatistics(const Trace& trace, const KernelStatsOptions& options)
{
    bool wanted[kCategoryCount] = {};
    if (options.categories.empty()) {
        for (int c = 0; c < kCategoryCount; ++c) {
            wanted[c] = isGpuWork(Category(c));
        }
    } else {
        for (const auto c : options.categories) {
            wanted[std::size_t(c)] = true;
        }
    }
    // (rank, name, category) → durations
    std::map<std::tuple<std::int32_t, StringId, Category>, std::vector<std::int64_t>> groups;
    std::map<std::tuple<std::int32_t, StringId, Category>, std::int64_t> selfTimes;
    std::vector<std::int64_t> self;
    std::vector<SliceIndex> open; // the enclosing slices of the current one, outermost first
    const auto& tracks = trace.tracks();
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        if (options.rank >= 0 && tracks[t].rank != options.rank) {
            continue;
        }
        const std::int32_t rank = options.perRank ? tracks[t].rank : -1;
        const auto [a, b]
            = trace.slicesStartingIn(TrackId(t), options.rangeStart, options.rangeEnd);
        // A track's slices come in start order, parents before children: a slice's parent is
        // the innermost open slice one level up.
        self.assign(std::size_t(b - a), 0);
        open.clear();
        for (SliceIndex i = a; i < b; ++i) {
            self[std::size_t(i - a)] = trace.sliceDuration(i);
            const auto depth = trace.sliceDepth(i);
            while (!open.empty() && trace.sliceDepth(open.back()) >= depth) {
                open.pop_back();
            }
            if (!open.empty() && trace.sliceDepth(open.back()) + 1 == depth) {
                auto& parent = self[std::size_t(open.back() - a)];
                parent = std::max<std::int64_t>(0, parent - trace.sliceDuration(i));
            }
            open.push_back(i);
        }
        for (SliceIndex i = a; i < b; ++i) {
            const Category c = trace.sliceCategory(i);
            if (wanted[std::size_t(c)]) {
                groups[{ rank, trace.sliceName(i), c }].push_back(trace.sliceDuration(i));
                auto& sum = selfTimes[{ rank, trace.sliceName(i), c }];
                sum = addSaturating(sum, self[std::size_t(i - a)]);
            }
        }
    }
    std::vector<KernelStat> out;
    out.reserve(groups.size());
    for (auto& [key, durations] : groups) {
        std::sort(durations.begin(), durations.end());
        KernelStat s;
        s.rank = std::get<0>(key);
        s.name = std::string(trace.text(std::get<1>(key)));
        s.category = std::get<2>(key);
        s.count = durations.size();
        for (const auto d : durations) {
            s.total = addSaturating(s.total, d);
        }
        s.self = selfTimes[key];
        s.min = durations.front();
        s.max = durations.back();
        s.mean = double(s.total) / double(s.count);
        s.p50 = quantileSorted(durations, 0.50);
        s.p95 = quantileSorted(durations, 0.95);
        out.push_back(std::move(s));
    }
    std::sort(out.begin(), out.end(), [](const KernelStat& a, const KernelStat& b) {
        if (a.total != b.total) {
            return a.total > b.total;
        }
        if (a.rank != b.rank) {
            return a.rank < b.rank;
        }
        return a.name < b.name;
    });
    return out;
}

} // namespace day0::profile
