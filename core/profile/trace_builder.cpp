#include "profile/trace_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <tuple>

namespace day0::profile {

namespace {

template <typename T> void permute(std::vector<T>& column, const std::vector<SliceIndex>& order)
{
    std::vector<T> out(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
        out[k] = column[order[k]];
    }
    column.swap(out);
}

} // namespace

void TraceBuilder::addArg(const Arg& a)
{
    ArgStore& store = m_trace.m_args;
    const StringId key = intern(a.key);
    switch (a.type) {
    case ArgType::Int:
        store.addInt(key, a.intValue);
        break;
    case ArgType::Double:
        store.addDouble(key, a.doubleValue);
        break;
    case ArgType::String:
        store.addString(key, intern(a.text));
        break;
    case ArgType::Json:
        store.addJson(key, intern(a.text));
        break;
    case ArgType::True:
    case ArgType::False:
        store.addBool(key, a.type == ArgType::True);
        break;
    case ArgType::Null:
        store.addNull(key);
        break;
    }
}

std::uint16_t TraceBuilder::addSource(SourceInfo info)
{
    m_trace.m_sources.push_back(std::move(info));
    return std::uint16_t(m_trace.m_sources.size() - 1);
}

void TraceBuilder::addDevice(DeviceInfo device)
{
    for (const auto& d : m_trace.m_devices) {
        if (d.rank == device.rank && d.device == device.device) {
            return;
        }
    }
    m_trace.m_devices.push_back(std::move(device));
}

TrackId TraceBuilder::addTrack(Track track)
{
    m_trace.m_tracks.push_back(std::move(track));
    return TrackId(m_trace.m_tracks.size() - 1);
}

SliceIndex TraceBuilder::addSlice(TrackId track, std::int64_t start, std::int64_t end,
    StringId name, Category category, std::uint32_t correlation, std::uint32_t externalId,
    ArgsRef args)
{
    auto& t = m_trace;
    if (t.m_start.size() >= kNoSlice - 1) {
        // SliceIndex is 32-bit: four billion slices is far beyond any trace that fits in memory.
        ++m_droppedSlices;
        return kNoSlice;
    }
    t.m_start.push_back(start);
    t.m_end.push_back(std::max(start, end));
    t.m_name.push_back(name);
    t.m_category.push_back(category);
    t.m_correlation.push_back(correlation);
    t.m_externalId.push_back(externalId);
    t.m_sliceArgs.push_back(args);
    m_sliceTrack.push_back(track);
    return SliceIndex(t.m_start.size() - 1);
}

void TraceBuilder::addInstant(
    TrackId track, std::int64_t ts, StringId name, Category category, ArgsRef args)
{
    auto& t = m_trace;
    t.m_instantTs.push_back(ts);
    t.m_instantTrack.push_back(track);
    t.m_instantName.push_back(name);
    t.m_instantCategory.push_back(category);
    t.m_instantArgs.push_back(args);
}

void TraceBuilder::addCounter(TrackId track, std::int64_t ts, double value)
{
    m_trace.m_counterTs.push_back(ts);
    m_trace.m_counterTrack.push_back(track);
    m_trace.m_counterValue.push_back(value);
}

void TraceBuilder::addFlow(SliceIndex from, SliceIndex to, FlowKind kind)
{
    if (from == kNoSlice || to == kNoSlice) {
        return;
    }
    m_rawFlowFrom.push_back(from);
    m_rawFlowTo.push_back(to);
    m_rawFlowKind.push_back(kind);
}

TraceBuilder::Mark TraceBuilder::mark() const
{
    return { m_trace.m_start.size(), m_trace.m_instantTs.size(), m_trace.m_counterTs.size(),
        m_endpoints.size() };
}

void TraceBuilder::shiftSince(const Mark& mark, std::int64_t deltaNs)
{
    auto& t = m_trace;
    for (std::size_t i = mark.slices; i < t.m_start.size(); ++i) {
        t.m_start[i] = shiftTime(t.m_start[i], deltaNs);
        t.m_end[i] = shiftTime(t.m_end[i], deltaNs);
    }
    for (std::size_t i = mark.instants; i < t.m_instantTs.size(); ++i) {
        t.m_instantTs[i] = shiftTime(t.m_instantTs[i], deltaNs);
    }
    for (std::size_t i = mark.counters; i < t.m_counterTs.size(); ++i) {
        t.m_counterTs[i] = shiftTime(t.m_counterTs[i], deltaNs);
    }
    for (std::size_t i = mark.endpoints; i < m_endpoints.size(); ++i) {
        m_endpoints[i].ts = shiftTime(m_endpoints[i].ts, deltaNs);
    }
}

void TraceBuilder::dropEmptyTracks()
{
    // Tracks are created on first sight of a pid/tid, also by flow events and metadata that may
    // have no slice, instant or counter of their own; those rows would be empty.
    auto& t = m_trace;
    std::vector<char> used(t.m_tracks.size(), 0);
    for (const TrackId track : m_sliceTrack) {
        used[track] = 1;
    }
    for (const TrackId track : t.m_instantTrack) {
        used[track] = 1;
    }
    for (const TrackId track : t.m_counterTrack) {
        used[track] = 1;
    }
    if (std::find(used.begin(), used.end(), 0) == used.end()) {
        return;
    }
    std::vector<TrackId> remap(t.m_tracks.size(), kNoTrack);
    std::vector<Track> kept;
    for (std::size_t i = 0; i < t.m_tracks.size(); ++i) {
        if (used[i] != 0) {
            remap[i] = TrackId(kept.size());
            kept.push_back(std::move(t.m_tracks[i]));
        }
    }
    t.m_tracks.swap(kept);
    for (auto& track : m_sliceTrack) {
        track = remap[track];
    }
    for (auto& track : t.m_instantTrack) {
        track = remap[track];
    }
    for (auto& track : t.m_counterTrack) {
        track = remap[track];
    }
    for (auto& e : m_endpoints) {
        e.track = remap[e.track];
    }
}

void TraceBuilder::sortSlices(std::vector<SliceIndex>& order)
{
    auto& t = m_trace;
    const std::size_t trackCount = t.m_tracks.size();
    const std::size_t n = t.m_start.size();
    // Counting sort by track keeps each track's slices in arrival order...
    t.m_trackSliceBegin.assign(trackCount + 1, 0);
    for (const TrackId track : m_sliceTrack) {
        ++t.m_trackSliceBegin[track + 1];
    }
    std::partial_sum(
        t.m_trackSliceBegin.begin(), t.m_trackSliceBegin.end(), t.m_trackSliceBegin.begin());
    order.assign(n, 0);
    {
        std::vector<SliceIndex> next(t.m_trackSliceBegin.begin(), t.m_trackSliceBegin.end() - 1);
        for (SliceIndex i = 0; i < n; ++i) {
            order[next[m_sliceTrack[i]]++] = i;
        }
    }
    m_sliceTrack.clear();
    m_sliceTrack.shrink_to_fit();
    // ...which is usually time order already; sort only the tracks that are not.
    auto before = [&](SliceIndex a, SliceIndex b) {
        return std::tie(t.m_start[a], t.m_end[b], a) < std::tie(t.m_start[b], t.m_end[a], b);
    };
    std::vector<std::tuple<std::int64_t, std::int64_t, SliceIndex>> keys;
    for (std::size_t track = 0; track < trackCount; ++track) {
        const auto first = order.begin() + t.m_trackSliceBegin[track];
        const auto last = order.begin() + t.m_trackSliceBegin[track + 1];
        if (std::is_sorted(first, last, before)) {
            continue;
        }
        // Sorting compact keys is far kinder to the cache than comparing through indices.
        keys.clear();
        for (auto it = first; it != last; ++it) {
            keys.emplace_back(t.m_start[*it], -t.m_end[*it], *it);
        }
        std::sort(keys.begin(), keys.end());
        auto out = first;
        for (const auto& k : keys) {
            *out++ = std::get<2>(k);
        }
    }
    keys = {};
    permute(t.m_start, order);
    permute(t.m_end, order);
    permute(t.m_name, order);
    permute(t.m_category, order);
    permute(t.m_correlation, order);
    permute(t.m_externalId, order);
    permute(t.m_sliceArgs, order);
}

void TraceBuilder::computeDepths()
{
    auto& t = m_trace;
    const std::size_t trackCount = t.m_tracks.size();
    t.m_depth.assign(t.m_start.size(), 0);
    t.m_trackDepthBegin.assign(trackCount + 1, 0);
    t.m_depthBegin.clear();
    t.m_byDepth.assign(t.m_start.size(), 0);
    std::vector<std::int64_t> open; // ends of the enclosing slices
    std::vector<std::uint32_t> perDepth;
    std::uint32_t filled = 0;
    for (std::size_t track = 0; track < trackCount; ++track) {
        const SliceIndex a = t.m_trackSliceBegin[track];
        const SliceIndex b = t.m_trackSliceBegin[track + 1];
        open.clear();
        perDepth.clear();
        for (SliceIndex i = a; i < b; ++i) {
            // Close what ended before this slice starts. Only the top is tested, so a slice that
            // outlives its parent keeps the parent open: slices of one depth never overlap.
            while (!open.empty() && open.back() <= t.m_start[i]) {
                open.pop_back();
            }
            const auto depth = std::uint16_t(std::min<std::size_t>(open.size(), 0xFFFF));
            t.m_depth[i] = depth;
            if (open.size() < 0xFFFF) {
                open.push_back(t.m_end[i]);
            }
            if (perDepth.size() <= depth) {
                perDepth.resize(depth + 1, 0);
            }
            ++perDepth[depth];
        }
        t.m_tracks[track].maxDepth = perDepth.empty() ? 0 : std::uint16_t(perDepth.size() - 1);
        t.m_trackDepthBegin[track] = std::uint32_t(t.m_depthBegin.size());
        std::vector<std::uint32_t> cursor(perDepth.size());
        for (std::size_t d = 0; d < perDepth.size(); ++d) {
            t.m_depthBegin.push_back(filled);
            cursor[d] = filled;
            filled += perDepth[d];
        }
        for (SliceIndex i = a; i < b; ++i) {
            t.m_byDepth[cursor[t.m_depth[i]]++] = i;
        }
    }
    t.m_trackDepthBegin[trackCount] = std::uint32_t(t.m_depthBegin.size());
    t.m_depthBegin.push_back(filled);
}

void TraceBuilder::bindFlows(const std::vector<SliceIndex>& rawToSorted)
{
    auto& t = m_trace;
    std::vector<std::tuple<SliceIndex, SliceIndex, FlowKind>> flows;
    flows.reserve(m_rawFlowFrom.size() + m_endpoints.size() / 2);
    for (std::size_t f = 0; f < m_rawFlowFrom.size(); ++f) {
        flows.emplace_back(
            rawToSorted[m_rawFlowFrom[f]], rawToSorted[m_rawFlowTo[f]], m_rawFlowKind[f]);
    }
    m_rawFlowFrom = {};
    m_rawFlowTo = {};
    m_rawFlowKind = {};

    // Chains in time order per (source, category, id): s, then t..., then f.
    auto phaseRank = [](char p) { return p == 's' ? 0 : (p == 't' ? 1 : 2); };
    std::sort(
        m_endpoints.begin(), m_endpoints.end(), [&](const FlowEndpoint& a, const FlowEndpoint& b) {
            return std::make_tuple(a.source, a.category, a.id, a.ts, phaseRank(a.phase))
                < std::make_tuple(b.source, b.category, b.id, b.ts, phaseRank(b.phase));
        });
    std::size_t unbound = 0;
    std::vector<SliceIndex> bound(m_endpoints.size(), kNoSlice);
    for (std::size_t i = 0; i < m_endpoints.size(); ++i) {
        const auto& e = m_endpoints[i];
        if (e.track == kNoTrack) {
            // The track held nothing but flow events.
        } else if (e.bindNext && e.phase == 'f') {
            const auto [a, b] = t.slicesStartingIn(e.track, e.ts, INT64_MAX);
            bound[i] = a < b ? a : kNoSlice;
        } else {
            bound[i] = t.sliceAt(e.track, e.ts);
        }
        unbound += bound[i] == kNoSlice ? 1 : 0;
    }
    auto sameGroup = [&](std::size_t i, std::size_t j) {
        const auto& x = m_endpoints[i];
        const auto& y = m_endpoints[j];
        return x.source == y.source && x.category == y.category && x.id == y.id;
    };
    for (std::size_t g0 = 0; g0 < m_endpoints.size();) {
        std::size_t g1 = g0 + 1;
        while (g1 < m_endpoints.size() && sameGroup(g0, g1)) {
            ++g1;
        }
        // An end that comes before its start in time (CPU and GPU clocks disagree by a few µs)
        // still belongs to the group's first start.
        SliceIndex firstStart = kNoSlice;
        for (std::size_t i = g0; i < g1 && firstStart == kNoSlice; ++i) {
            if (m_endpoints[i].phase == 's') {
                firstStart = bound[i];
            }
        }
        SliceIndex current = kNoSlice;
        for (std::size_t i = g0; i < g1; ++i) {
            const auto& e = m_endpoints[i];
            if (bound[i] == kNoSlice) {
                continue;
            }
            if (e.phase == 's') {
                current = bound[i];
                continue;
            }
            const SliceIndex from = current != kNoSlice ? current : firstStart;
            // An 'f' in a group without any 's' is normal in Kineto traces (runtime calls that
            // launched no GPU work still get an end point); it yields no flow.
            if (from != kNoSlice) {
                flows.emplace_back(from, bound[i], e.kind);
                if (e.phase == 't') {
                    current = bound[i];
                }
            }
        }
        g0 = g1;
    }
    if (unbound > 0) {
        warn(fmt::format(
            "{} flow events point at no slice on their thread and were skipped", unbound));
    }
    m_endpoints = {};

    std::sort(flows.begin(), flows.end());
    t.m_flowFrom.resize(flows.size());
    t.m_flowTo.resize(flows.size());
    t.m_flowKind.resize(flows.size());
    for (std::size_t f = 0; f < flows.size(); ++f) {
        std::tie(t.m_flowFrom[f], t.m_flowTo[f], t.m_flowKind[f]) = flows[f];
    }
    t.m_flowsByTo.resize(flows.size());
    std::iota(t.m_flowsByTo.begin(), t.m_flowsByTo.end(), 0u);
    std::stable_sort(t.m_flowsByTo.begin(), t.m_flowsByTo.end(),
        [&](std::uint32_t a, std::uint32_t b) { return t.m_flowTo[a] < t.m_flowTo[b]; });
}

void TraceBuilder::sortInstantsAndCounters()
{
    auto& t = m_trace;
    {
        std::vector<SliceIndex> order(t.m_instantTs.size());
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](SliceIndex a, SliceIndex b) {
            return std::tie(t.m_instantTrack[a], t.m_instantTs[a])
                < std::tie(t.m_instantTrack[b], t.m_instantTs[b]);
        });
        permute(t.m_instantTs, order);
        permute(t.m_instantTrack, order);
        permute(t.m_instantName, order);
        permute(t.m_instantCategory, order);
        permute(t.m_instantArgs, order);
    }
    std::vector<SliceIndex> order(t.m_counterTs.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](SliceIndex a, SliceIndex b) {
        return std::tie(t.m_counterTrack[a], t.m_counterTs[a])
            < std::tie(t.m_counterTrack[b], t.m_counterTs[b]);
    });
    permute(t.m_counterTs, order);
    permute(t.m_counterTrack, order);
    permute(t.m_counterValue, order);
}

Result<Trace> TraceBuilder::finish(Progress& progress, std::stop_token stop)
{
    auto& t = m_trace;
    if (m_droppedSlices > 0) {
        warn(fmt::format(
            "{} slices beyond the 4 294 967 294 a trace can hold were dropped", m_droppedSlices));
    }
    if (t.m_args.full()) {
        warn("argument storage reached 4 GiB; later events were kept without their arguments");
    }
    dropEmptyTracks();
    progress.setStage("sorting slices");
    std::vector<SliceIndex> order;
    sortSlices(order);
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    progress.setStage("indexing");
    computeDepths();
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    progress.setStage("binding flows");
    std::vector<SliceIndex> rawToSorted;
    if (!m_rawFlowFrom.empty()) {
        rawToSorted.resize(order.size());
        for (SliceIndex k = 0; k < order.size(); ++k) {
            rawToSorted[order[k]] = k;
        }
    }
    order = {};
    bindFlows(rawToSorted);
    rawToSorted = {};
    sortInstantsAndCounters();
    t.m_args.freezeIndex();
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    Trace out = std::move(m_trace);
    m_trace = Trace();
    return out;
}

} // namespace day0::profile
