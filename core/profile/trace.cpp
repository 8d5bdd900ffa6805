#include "profile/trace.h"

#include <algorithm>
#include <array>

namespace day0::profile {

namespace {

constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = {
    "kernel",
    "memcpy",
    "memset",
    "sync",
    "communication",
    "cpu_op",
    "runtime",
    "annotation",
    "other",
};

template <typename T> std::size_t bytesOf(const std::vector<T>& v)
{
    return v.capacity() * sizeof(T);
}

} // namespace

std::string_view categoryName(Category category)
{
    const auto i = std::size_t(category);
    return i < kCategoryNames.size() ? kCategoryNames[i] : "other";
}

std::optional<Category> categoryFromName(std::string_view name)
{
    for (std::size_t i = 0; i < kCategoryNames.size(); ++i) {
        if (kCategoryNames[i] == name) {
            return Category(i);
        }
    }
    return std::nullopt;
}

bool isGpuWork(Category category)
{
    return category == Category::Kernel || category == Category::Memcpy
        || category == Category::Memset || category == Category::Communication;
}

std::vector<std::int32_t> Trace::ranks() const
{
    std::vector<std::int32_t> out;
    for (const auto& s : m_sources) {
        out.push_back(s.rank);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

TrackId Trace::sliceTrack(SliceIndex i) const
{
    // m_trackSliceBegin is non-decreasing; the track is the last one starting at or before i.
    const auto it = std::upper_bound(m_trackSliceBegin.begin(), m_trackSliceBegin.end() - 1, i);
    return TrackId(it - m_trackSliceBegin.begin() - 1);
}

std::vector<Arg> Trace::sliceArgs(SliceIndex i) const
{
    std::vector<Arg> out;
    if (m_externalId[i] != 0) {
        Arg a;
        a.key = "External id";
        a.type = ArgType::Int;
        a.intValue = m_externalId[i];
        out.push_back(a);
    }
    if (m_correlation[i] != 0) {
        Arg a;
        a.key = "correlation";
        a.type = ArgType::Int;
        a.intValue = m_correlation[i];
        out.push_back(a);
    }
    m_args.decode(m_sliceArgs[i], m_strings, out);
    return out;
}

std::optional<Arg> Trace::sliceArg(SliceIndex i, std::string_view key) const
{
    for (const auto& a : sliceArgs(i)) {
        if (a.key == key) {
            return a;
        }
    }
    return std::nullopt;
}

std::vector<Arg> Trace::instantArgs(std::size_t i) const
{
    std::vector<Arg> out;
    m_args.decode(m_instantArgs[i], m_strings, out);
    return out;
}

std::pair<SliceIndex, SliceIndex> Trace::slicesStartingIn(
    TrackId track, std::int64_t t0, std::int64_t t1) const
{
    const auto begin = m_start.begin() + m_trackSliceBegin[track];
    const auto end = m_start.begin() + m_trackSliceBegin[track + 1];
    const auto a = std::lower_bound(begin, end, t0);
    const auto b = t1 <= t0 ? a : std::lower_bound(a, end, t1);
    return { SliceIndex(a - m_start.begin()), SliceIndex(b - m_start.begin()) };
}

std::vector<SliceIndex> Trace::slicesSpanning(TrackId track, std::int64_t t) const
{
    std::vector<SliceIndex> out;
    const std::uint32_t d0 = m_trackDepthBegin[track];
    const std::uint32_t d1 = m_trackDepthBegin[track + 1];
    for (std::uint32_t d = d0; d < d1; ++d) {
        const auto begin = m_byDepth.begin() + m_depthBegin[d];
        const auto end = m_byDepth.begin() + m_depthBegin[d + 1];
        // Last slice of this depth starting before t.
        auto it = std::partition_point(begin, end, [&](SliceIndex s) { return m_start[s] < t; });
        if (it == begin) {
            continue;
        }
        const SliceIndex s = *(it - 1);
        if (m_end[s] > t) {
            out.push_back(s);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<SliceIndex> Trace::slicesInRange(TrackId track, std::int64_t t0, std::int64_t t1) const
{
    std::vector<SliceIndex> out;
    forEachSliceInRange(track, t0, t1, [&](SliceIndex i) { out.push_back(i); });
    return out;
}

SliceIndex Trace::sliceAt(TrackId track, std::int64_t ts) const
{
    const std::uint32_t d0 = m_trackDepthBegin[track];
    const std::uint32_t d1 = m_trackDepthBegin[track + 1];
    for (std::uint32_t d = d1; d > d0; --d) {
        const auto begin = m_byDepth.begin() + m_depthBegin[d - 1];
        const auto end = m_byDepth.begin() + m_depthBegin[d];
        auto it = std::partition_point(begin, end, [&](SliceIndex s) { return m_start[s] <= ts; });
        if (it == begin) {
            continue;
        }
        const SliceIndex s = *(it - 1);
        if (m_end[s] >= ts) {
            return s;
        }
    }
    return kNoSlice;
}

std::pair<std::int64_t, std::int64_t> Trace::timeRange() const
{
    bool any = false;
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    auto add = [&](std::int64_t a, std::int64_t b) {
        if (!any) {
            lo = a;
            hi = b;
            any = true;
            return;
        }
        lo = std::min(lo, a);
        hi = std::max(hi, b);
    };
    for (std::size_t t = 0; t < m_tracks.size(); ++t) {
        const auto [a, b] = trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            // The first slice of a track starts earliest; ends must all be checked.
            add(m_start[a], m_end[i]);
        }
    }
    for (const auto ts : m_instantTs) {
        add(ts, ts);
    }
    for (const auto ts : m_counterTs) {
        add(ts, ts);
    }
    return { lo, hi };
}

std::vector<std::size_t> Trace::flowsFrom(SliceIndex slice) const
{
    std::vector<std::size_t> out;
    const auto range = std::equal_range(m_flowFrom.begin(), m_flowFrom.end(), slice);
    for (auto it = range.first; it != range.second; ++it) {
        out.push_back(std::size_t(it - m_flowFrom.begin()));
    }
    return out;
}

std::vector<std::size_t> Trace::flowsTo(SliceIndex slice) const
{
    std::vector<std::size_t> out;
    auto it = std::partition_point(m_flowsByTo.begin(), m_flowsByTo.end(),
        [&](std::uint32_t f) { return m_flowTo[f] < slice; });
    for (; it != m_flowsByTo.end() && m_flowTo[*it] == slice; ++it) {
        out.push_back(*it);
    }
    return out;
}

TraceCounts Trace::counts() const
{
    TraceCounts c;
    c.slices = m_start.size();
    c.flows = m_flowFrom.size();
    c.instants = m_instantTs.size();
    c.counters = m_counterTs.size();
    c.tracks = m_tracks.size();
    for (const auto cat : m_category) {
        ++c.byCategory[std::size_t(cat)];
    }
    return c;
}

TraceMemory Trace::memory() const
{
    TraceMemory m;
    m.slices = bytesOf(m_start) + bytesOf(m_end) + bytesOf(m_name) + bytesOf(m_category)
        + bytesOf(m_depth) + bytesOf(m_correlation) + bytesOf(m_externalId) + bytesOf(m_sliceArgs);
    m.args = m_args.memoryBytes();
    m.strings = m_strings.memoryBytes();
    m.flows = bytesOf(m_flowFrom) + bytesOf(m_flowTo) + bytesOf(m_flowKind) + bytesOf(m_flowsByTo);
    m.instants = bytesOf(m_instantTs) + bytesOf(m_instantTrack) + bytesOf(m_instantName)
        + bytesOf(m_instantCategory) + bytesOf(m_instantArgs);
    m.counters = bytesOf(m_counterTs) + bytesOf(m_counterTrack) + bytesOf(m_counterValue);
    m.index = bytesOf(m_trackSliceBegin) + bytesOf(m_byDepth) + bytesOf(m_depthBegin)
        + bytesOf(m_trackDepthBegin);
    m.other = bytesOf(m_tracks) + bytesOf(m_sources) + bytesOf(m_devices);
    for (const auto& t : m_tracks) {
        m.other += t.name.capacity() + t.processName.capacity();
    }
    return m;
}

void Trace::applyClockOffset(std::int32_t rank, std::int64_t deltaNs)
{
    if (deltaNs == 0) {
        return;
    }
    for (auto& s : m_sources) {
        if (s.rank == rank) {
            s.clockOffsetNs += deltaNs;
        }
    }
    for (std::size_t t = 0; t < m_tracks.size(); ++t) {
        if (m_tracks[t].rank != rank) {
            continue;
        }
        const auto [a, b] = trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            m_start[i] = shiftTime(m_start[i], deltaNs);
            m_end[i] = shiftTime(m_end[i], deltaNs);
        }
    }
    for (std::size_t i = 0; i < m_instantTs.size(); ++i) {
        if (m_tracks[m_instantTrack[i]].rank == rank) {
            m_instantTs[i] = shiftTime(m_instantTs[i], deltaNs);
        }
    }
    for (std::size_t i = 0; i < m_counterTs.size(); ++i) {
        if (m_tracks[m_counterTrack[i]].rank == rank) {
            m_counterTs[i] = shiftTime(m_counterTs[i], deltaNs);
        }
    }
}

} // namespace day0::profile
