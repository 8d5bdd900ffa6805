#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <stop_token>

namespace day0::profile {

/// A Chrome-trace flow event ('s', 't' or 'f'), bound to a slice when the trace is finished:
/// 's' and 't' to the slice enclosing `ts`, 'f' to the enclosing slice (bp:"e") or to the next
/// slice starting at or after `ts`.
struct FlowEndpoint {
    TrackId track = 0;
    std::int64_t ts = 0;
    std::uint64_t id = 0;
    StringId category = 0; ///< ids are matched within one flow category of one source
    std::uint16_t source = 0;
    char phase = 's';
    bool bindNext = false;
    FlowKind kind = FlowKind::Other;
};

/// Collects the events of one or more sources (files, tracer sessions) and turns them into an
/// immutable Trace: slices are grouped by track and sorted, nesting depths and the range index
/// are computed and flows are bound. Single-threaded.
class TraceBuilder {
public:
    TraceBuilder() = default;

    StringId intern(std::string_view text) { return m_trace.m_strings.intern(text); }
    [[nodiscard]] const StringTable& strings() const { return m_trace.m_strings; }
    /// Where argument sets are encoded: begin(), add...(), commit() → ArgsRef for addSlice.
    ArgStore& args() { return m_trace.m_args; }
    /// Adds a decoded argument (of this or another trace) to the set being written in args(),
    /// interning its key and text here.
    void addArg(const Arg& arg);

    /// Registers an imported file or session; returns its index for Track::source.
    std::uint16_t addSource(SourceInfo info);
    SourceInfo& source(std::uint16_t index) { return m_trace.m_sources[index]; }
    void addDevice(DeviceInfo device);
    TrackId addTrack(Track track);
    Track& track(TrackId id) { return m_trace.m_tracks[id]; }
    [[nodiscard]] std::size_t trackCount() const { return m_trace.m_tracks.size(); }

    /// Adds a slice [start, end] in ns; returns its provisional index for addFlow (kNoSlice when
    /// the trace is full, which finish() reports).
    SliceIndex addSlice(TrackId track, std::int64_t start, std::int64_t end, StringId name,
        Category category, std::uint32_t correlation = 0, std::uint32_t externalId = 0,
        ArgsRef args = 0);
    void addInstant(
        TrackId track, std::int64_t ts, StringId name, Category category, ArgsRef args = 0);
    void addCounter(TrackId track, std::int64_t ts, double value);
    /// A flow between two slices, by the indices addSlice returned.
    void addFlow(SliceIndex from, SliceIndex to, FlowKind kind);
    void addFlowEndpoint(const FlowEndpoint& endpoint) { m_endpoints.push_back(endpoint); }
    /// Records a non-fatal problem (shown by the CLI, kept in Trace::warnings()).
    void warn(std::string message) { m_trace.m_warnings.push_back(std::move(message)); }

    [[nodiscard]] std::size_t sliceCount() const { return m_trace.m_start.size(); }
    [[nodiscard]] std::size_t instantCount() const { return m_trace.m_instantTs.size(); }
    [[nodiscard]] std::size_t counterCount() const { return m_trace.m_counterTs.size(); }

    /// How far the columns are filled; shiftSince moves later timestamps, for formats whose time
    /// base comes after the events (Kineto's baseTimeNanoseconds).
    struct Mark {
        std::size_t slices = 0;
        std::size_t instants = 0;
        std::size_t counters = 0;
        std::size_t endpoints = 0;
    };
    [[nodiscard]] Mark mark() const;
    void shiftSince(const Mark& mark, std::int64_t deltaNs);

    /// Builds the Trace; the builder is left empty. Fails only when cancelled.
    Result<Trace> finish(Progress& progress, std::stop_token stop);

private:
    void dropEmptyTracks();
    void sortSlices(std::vector<SliceIndex>& order);
    void computeDepths();
    void bindFlows(const std::vector<SliceIndex>& rawToSorted);
    void sortInstantsAndCounters();

    Trace m_trace;
    std::vector<TrackId> m_sliceTrack; // per provisional slice
    std::vector<SliceIndex> m_rawFlowFrom;
    std::vector<SliceIndex> m_rawFlowTo;
    std::vector<FlowKind> m_rawFlowKind;
    std::vector<FlowEndpoint> m_endpoints;
    std::uint64_t m_droppedSlices = 0;
};

} // namespace day0::profile
