#include "profile/temporal_breakdown.h"

#include <algorithm>
#include <map>

namespace day0::profile {

Intervals unionOf(Intervals intervals)
{
    std::sort(intervals.begin(), intervals.end());
    Intervals out;
    for (const auto& iv : intervals) {
        if (iv.second <= iv.first) {
            continue;
        }
        if (!out.empty() && iv.first <= out.back().second) {
            out.back().second = std::max(out.back().second, iv.second);
        } else {
            out.push_back(iv);
        }
    }
    return out;
}

std::int64_t lengthOf(const Intervals& disjoint)
{
    std::int64_t total = 0;
    for (const auto& [a, b] : disjoint) {
        total += b - a;
    }
    return total;
}

Intervals intersect(const Intervals& a, const Intervals& b)
{
    Intervals out;
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        const std::int64_t lo = std::max(a[i].first, b[j].first);
        const std::int64_t hi = std::min(a[i].second, b[j].second);
        if (lo < hi) {
            out.emplace_back(lo, hi);
        }
        if (a[i].second < b[j].second) {
            ++i;
        } else {
            ++j;
        }
    }
    return out;
}

std::vector<RankBreakdown> temporalBreakdown(
    const Trace& trace, std::int64_t rangeStart, std::int64_t rangeEnd)
{
    const bool ranged = rangeStart != INT64_MIN || rangeEnd != INT64_MAX;
    struct Work {
        Intervals compute;
        Intervals communication;
        Intervals memory;
    };
    std::map<std::int32_t, Work> ranks;
    const auto& tracks = trace.tracks();
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        if (tracks[t].kind != TrackKind::Stream) {
            continue;
        }
        auto& w = ranks[tracks[t].rank];
        trace.forEachSliceInRange(TrackId(t), rangeStart, rangeEnd, [&](SliceIndex i) {
            const auto iv = std::make_pair(
                std::max(trace.sliceStart(i), rangeStart), std::min(trace.sliceEnd(i), rangeEnd));
            switch (trace.sliceCategory(i)) {
            case Category::Kernel:
                w.compute.push_back(iv);
                break;
            case Category::Communication:
                w.communication.push_back(iv);
                break;
            case Category::Memcpy:
            case Category::Memset:
                w.memory.push_back(iv);
                break;
            default:
                break;
            }
        });
    }
    std::vector<RankBreakdown> out;
    for (auto& [rank, w] : ranks) {
        Intervals all = w.compute;
        all.insert(all.end(), w.communication.begin(), w.communication.end());
        all.insert(all.end(), w.memory.begin(), w.memory.end());
        if (all.empty()) {
            continue;
        }
        RankBreakdown r;
        r.rank = rank;
        r.spanStart = std::min_element(all.begin(), all.end())->first;
        r.spanEnd = r.spanStart;
        for (const auto& iv : all) {
            r.spanEnd = std::max(r.spanEnd, iv.second);
        }
        // A range open at one end (INT64_MIN / INT64_MAX) is bounded by the rank's own span
        // there; subtracting the sentinel would overflow.
        if (ranged) {
            r.spanStart = rangeStart != INT64_MIN ? rangeStart : r.spanStart;
            r.spanEnd = rangeEnd != INT64_MAX ? rangeEnd : r.spanEnd;
        }
        r.span = r.spanEnd - r.spanStart;
        const Intervals compute = unionOf(std::move(w.compute));
        const Intervals comm = unionOf(std::move(w.communication));
        const Intervals busy = unionOf(std::move(all));
        r.compute = lengthOf(compute);
        r.communicationTotal = lengthOf(comm);
        r.overlap = lengthOf(intersect(comm, compute));
        r.communication = r.communicationTotal - r.overlap;
        const std::int64_t busyTotal = lengthOf(busy);
        r.memory = busyTotal - r.compute - r.communication;
        r.idle = r.span - busyTotal;
        out.push_back(r);
    }
    return out;
}

} // namespace day0::profile
