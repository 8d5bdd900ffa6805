#pragma once

#include "profile/args.h"
#include "profile/string_table.h"

#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace day0::profile {

/// What a slice or instant is. NCCL/RCCL/HCCL kernels are Communication, not Kernel, so that
/// colours and the temporal breakdown separate them; CPU tracer collectives are Communication too.
enum class Category : std::uint8_t {
    Kernel,
    Memcpy,
    Memset,
    Sync,
    Communication,
    CpuOp,
    Runtime,
    Annotation,
    Other,
};
inline constexpr int kCategoryCount = 9;

/// Lower-case name used in JSON and tables: "kernel", "memcpy", ..., "cpu_op", "other".
std::string_view categoryName(Category category);
/// The Category named by categoryName(), if any.
std::optional<Category> categoryFromName(std::string_view name);
/// True for work executed by a GPU engine: kernels, copies, sets and collective kernels.
bool isGpuWork(Category category);

/// What a track shows.
enum class TrackKind : std::uint8_t {
    Thread, ///< a host thread (CPU ops, runtime calls, annotations)
    Stream, ///< a GPU stream, or device-wide GPU events when tid is -1
    Counter, ///< a counter series (values over time)
};

/// Separates data of one thread or stream that must not nest with its other slices.
enum class Lane : std::uint8_t {
    Main,
    Nvtx, ///< NVTX ranges of a thread (nsys)
    Async, ///< async (b/e) slices of a process
};

using TrackId = std::uint32_t;
using SliceIndex = std::uint32_t;
inline constexpr SliceIndex kNoSlice = 0xFFFFFFFFu;
inline constexpr TrackId kNoTrack = 0xFFFFFFFFu;

/// Every time in a trace lies in [-kMaxTimeNs, kMaxTimeNs] (±146 years around the Unix epoch),
/// so that the difference of any two never overflows; importers drop events outside.
inline constexpr std::int64_t kMaxTimeNs = (std::int64_t(1) << 62) - 1;
/// True when `t` (ns) lies in the time domain.
inline bool validTime(std::int64_t t) { return t >= -kMaxTimeNs && t <= kMaxTimeNs; }
/// `t + delta`, saturated to the time domain.
inline std::int64_t shiftTime(std::int64_t t, std::int64_t delta)
{
    std::int64_t r = 0;
    if (__builtin_add_overflow(t, delta, &r)) {
        return delta > 0 ? kMaxTimeNs : -kMaxTimeNs;
    }
    return r > kMaxTimeNs ? kMaxTimeNs : (r < -kMaxTimeNs ? -kMaxTimeNs : r);
}
/// `total + value` without overflowing (saturates), for sums of many durations.
inline std::int64_t addSaturating(std::int64_t total, std::int64_t value)
{
    std::int64_t r = 0;
    if (__builtin_add_overflow(total, value, &r)) {
        return value > 0 ? INT64_MAX : INT64_MIN;
    }
    return r;
}

/// One row of the timeline: rank → device (or host process) → stream or thread.
struct Track {
    TrackKind kind = TrackKind::Thread;
    Lane lane = Lane::Main;
    std::int32_t rank = 0;
    std::int32_t device = -1; ///< GPU index; -1 for host threads
    std::int64_t pid = 0; ///< host process id, or the device's process key for streams
    std::int64_t tid = 0; ///< OS thread id, or CUDA stream id (-1: device-wide)
    std::uint16_t source = 0; ///< index of the imported file in Trace::sources()
    std::string name; ///< "stream 7", "thread 4711 (python)", "NVTX", a counter's name
    std::string processName; ///< "GPU 0", "python3.10"
    std::int64_t sortIndex = 0;
    std::uint16_t maxDepth = 0; ///< deepest nesting level of its slices (0 = flat)
};

/// One imported file (or tracer session): which rank it is and where its clock stands.
struct SourceInfo {
    std::string file; ///< file name without folders
    std::string format; ///< "kineto", "chrome", "nsys", "day0-tracer"
    std::int32_t rank = 0;
    std::int32_t worldSize = 0; ///< 0 when unknown
    std::string backend; ///< "nccl" when the trace says so
    std::int64_t clockOffsetNs = 0; ///< offset applied by applyClockOffset (0 = as recorded)
};

/// A GPU named in the trace's metadata.
struct DeviceInfo {
    std::int32_t rank = 0;
    std::int32_t device = 0;
    std::string name;
};

/// Kind of a flow arrow.
enum class FlowKind : std::uint8_t {
    Launch, ///< CPU runtime call → GPU work (CUPTI correlation id)
    FwdBwd, ///< forward op → its autograd backward op
    Other,
};

/// Per-kind totals as the CLI prints them.
struct TraceCounts {
    std::size_t slices = 0;
    std::size_t flows = 0;
    std::size_t instants = 0;
    std::size_t counters = 0; ///< counter samples
    std::size_t tracks = 0;
    std::size_t byCategory[kCategoryCount] = {};
};

/// Heap bytes of a trace, by part.
struct TraceMemory {
    std::size_t slices = 0;
    std::size_t args = 0;
    std::size_t strings = 0;
    std::size_t flows = 0;
    std::size_t instants = 0;
    std::size_t counters = 0;
    std::size_t index = 0;
    std::size_t other = 0;
    [[nodiscard]] std::size_t total() const
    {
        return slices + args + strings + flows + instants + counters + index + other;
    }
};

/// An immutable, columnar trace: slices (with start/end in ns since the Unix epoch), flows,
/// instants and counters, grouped by track. Slices of a track are contiguous and sorted by start
/// (a parent before its children), so range queries are binary searches. Built by TraceBuilder.
/// Reading is thread-safe; applyClockOffset is the only mutation and needs exclusive access.
class Trace {
public:
    Trace() = default;
    Trace(Trace&&) noexcept = default;
    Trace& operator=(Trace&&) noexcept = default;

    // --- tracks and metadata
    [[nodiscard]] const std::vector<Track>& tracks() const { return m_tracks; }
    [[nodiscard]] const std::vector<SourceInfo>& sources() const { return m_sources; }
    [[nodiscard]] const std::vector<DeviceInfo>& devices() const { return m_devices; }
    /// Ranks present, ascending.
    [[nodiscard]] std::vector<std::int32_t> ranks() const;
    /// Problems met while importing (skipped events, truncated input); never fatal.
    [[nodiscard]] const std::vector<std::string>& warnings() const { return m_warnings; }
    [[nodiscard]] const StringTable& strings() const { return m_strings; }
    [[nodiscard]] std::string_view text(StringId id) const { return m_strings.view(id); }

    // --- slices
    [[nodiscard]] std::size_t sliceCount() const { return m_start.size(); }
    [[nodiscard]] std::int64_t sliceStart(SliceIndex i) const { return m_start[i]; }
    [[nodiscard]] std::int64_t sliceEnd(SliceIndex i) const { return m_end[i]; }
    [[nodiscard]] std::int64_t sliceDuration(SliceIndex i) const { return m_end[i] - m_start[i]; }
    [[nodiscard]] StringId sliceName(SliceIndex i) const { return m_name[i]; }
    [[nodiscard]] std::string_view sliceNameText(SliceIndex i) const { return text(m_name[i]); }
    [[nodiscard]] Category sliceCategory(SliceIndex i) const { return m_category[i]; }
    [[nodiscard]] std::uint16_t sliceDepth(SliceIndex i) const { return m_depth[i]; }
    /// CUPTI correlation id (0 = none).
    [[nodiscard]] std::uint32_t sliceCorrelation(SliceIndex i) const { return m_correlation[i]; }
    /// Kineto "External id" (0 = none).
    [[nodiscard]] std::uint32_t sliceExternalId(SliceIndex i) const { return m_externalId[i]; }
    /// The track holding a slice (binary search over track ranges).
    [[nodiscard]] TrackId sliceTrack(SliceIndex i) const;
    /// All arguments of a slice, correlation and External id included.
    [[nodiscard]] std::vector<Arg> sliceArgs(SliceIndex i) const;
    /// One argument by key.
    [[nodiscard]] std::optional<Arg> sliceArg(SliceIndex i, std::string_view key) const;

    /// Columns for fast scans (indexed by SliceIndex).
    [[nodiscard]] std::span<const std::int64_t> sliceStarts() const { return m_start; }
    [[nodiscard]] std::span<const std::int64_t> sliceEnds() const { return m_end; }
    [[nodiscard]] std::span<const Category> sliceCategories() const { return m_category; }
    [[nodiscard]] std::span<const StringId> sliceNames() const { return m_name; }

    /// Slices of a track: [first, end).
    [[nodiscard]] std::pair<SliceIndex, SliceIndex> trackSlices(TrackId track) const
    {
        return { m_trackSliceBegin[track], m_trackSliceBegin[track + 1] };
    }
    /// Slices of `track` whose start lies in [t0, t1): an index range, found by binary search.
    [[nodiscard]] std::pair<SliceIndex, SliceIndex> slicesStartingIn(
        TrackId track, std::int64_t t0, std::int64_t t1) const;
    /// Slices of `track` that started before `t` and end after it (its open ancestors at t),
    /// in start order; at most one per depth, found per depth by binary search.
    [[nodiscard]] std::vector<SliceIndex> slicesSpanning(TrackId track, std::int64_t t) const;
    /// Calls f(SliceIndex) for each slice of `track` overlapping [t0, t1), in start order
    /// (parents before children). A zero-length slice overlaps when t0 <= start < t1.
    /// O(depth · log n + k) for k results: what a timeline needs to build per-pixel aggregates.
    template <typename F>
    void forEachSliceInRange(TrackId track, std::int64_t t0, std::int64_t t1, F&& f) const
    {
        for (const SliceIndex i : slicesSpanning(track, t0)) {
            f(i);
        }
        const auto [a, b] = slicesStartingIn(track, t0, t1);
        for (SliceIndex i = a; i < b; ++i) {
            f(i);
        }
    }
    /// Nesting levels of a track (maxDepth + 1; 0 without slices).
    [[nodiscard]] int trackDepths(TrackId track) const
    {
        return int(m_trackDepthBegin[track + 1] - m_trackDepthBegin[track]);
    }
    /// The slices of one depth of a track, in start order; they never overlap, so their ends are
    /// sorted too (what a timeline bins into pixels).
    [[nodiscard]] std::span<const SliceIndex> slicesAtDepth(
        TrackId track, std::uint16_t depth) const
    {
        const std::uint32_t d = m_trackDepthBegin[track] + depth;
        if (d >= m_trackDepthBegin[track + 1]) {
            return {};
        }
        return { m_byDepth.data() + m_depthBegin[d], m_depthBegin[d + 1] - m_depthBegin[d] };
    }
    /// The slices of forEachSliceInRange, collected.
    [[nodiscard]] std::vector<SliceIndex> slicesInRange(
        TrackId track, std::int64_t t0, std::int64_t t1) const;
    /// The deepest slice of `track` that contains `ts` (start <= ts <= end), or kNoSlice.
    [[nodiscard]] SliceIndex sliceAt(TrackId track, std::int64_t ts) const;
    /// Earliest start and latest end over all slices, instants and counters; {0, 0} if empty.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> timeRange() const;

    // --- flows (arrows between slices)
    [[nodiscard]] std::size_t flowCount() const { return m_flowFrom.size(); }
    [[nodiscard]] SliceIndex flowFrom(std::size_t f) const { return m_flowFrom[f]; }
    [[nodiscard]] SliceIndex flowTo(std::size_t f) const { return m_flowTo[f]; }
    [[nodiscard]] FlowKind flowKind(std::size_t f) const { return m_flowKind[f]; }
    /// Flows leaving a slice (indices into the flow columns).
    [[nodiscard]] std::vector<std::size_t> flowsFrom(SliceIndex slice) const;
    /// Flows arriving at a slice.
    [[nodiscard]] std::vector<std::size_t> flowsTo(SliceIndex slice) const;

    // --- instants
    [[nodiscard]] std::size_t instantCount() const { return m_instantTs.size(); }
    [[nodiscard]] std::int64_t instantTime(std::size_t i) const { return m_instantTs[i]; }
    [[nodiscard]] TrackId instantTrack(std::size_t i) const { return m_instantTrack[i]; }
    [[nodiscard]] StringId instantName(std::size_t i) const { return m_instantName[i]; }
    [[nodiscard]] Category instantCategory(std::size_t i) const { return m_instantCategory[i]; }
    [[nodiscard]] std::vector<Arg> instantArgs(std::size_t i) const;

    // --- counters
    [[nodiscard]] std::size_t counterCount() const { return m_counterTs.size(); }
    [[nodiscard]] std::int64_t counterTime(std::size_t i) const { return m_counterTs[i]; }
    [[nodiscard]] TrackId counterTrack(std::size_t i) const { return m_counterTrack[i]; }
    [[nodiscard]] double counterValue(std::size_t i) const { return m_counterValue[i]; }

    // --- summaries
    [[nodiscard]] TraceCounts counts() const;
    [[nodiscard]] TraceMemory memory() const;

    /// Shifts every timestamp of `rank` by `deltaNs` (e.g. a suggested clock alignment) and
    /// records it in the rank's SourceInfo::clockOffsetNs. Order within tracks is unchanged.
    void applyClockOffset(std::int32_t rank, std::int64_t deltaNs);

private:
    friend class TraceBuilder;

    StringTable m_strings;
    ArgStore m_args;
    std::vector<Track> m_tracks;
    std::vector<SourceInfo> m_sources;
    std::vector<DeviceInfo> m_devices;
    std::vector<std::string> m_warnings;

    // Slices, sorted by (track, start, end descending).
    std::vector<std::int64_t> m_start;
    std::vector<std::int64_t> m_end;
    std::vector<StringId> m_name;
    std::vector<Category> m_category;
    std::vector<std::uint16_t> m_depth;
    std::vector<std::uint32_t> m_correlation;
    std::vector<std::uint32_t> m_externalId;
    std::vector<ArgsRef> m_sliceArgs;
    std::vector<SliceIndex> m_trackSliceBegin; // size tracks + 1
    // Range index: the slices of each (track, depth) in start order. Slices of one depth never
    // overlap (see TraceBuilder), so their ends are sorted too and one binary search per depth
    // finds the slices spanning a time.
    std::vector<SliceIndex> m_byDepth;
    std::vector<std::uint32_t> m_depthBegin; // per (track, depth): start in m_byDepth, plus end
    std::vector<std::uint32_t> m_trackDepthBegin; // per track: first entry in m_depthBegin

    std::vector<SliceIndex> m_flowFrom; // sorted by from
    std::vector<SliceIndex> m_flowTo;
    std::vector<FlowKind> m_flowKind;
    std::vector<std::uint32_t> m_flowsByTo; // flow indices sorted by destination slice

    std::vector<std::int64_t> m_instantTs; // sorted by (track, ts)
    std::vector<TrackId> m_instantTrack;
    std::vector<StringId> m_instantName;
    std::vector<Category> m_instantCategory;
    std::vector<ArgsRef> m_instantArgs;

    std::vector<std::int64_t> m_counterTs; // sorted by (track, ts)
    std::vector<TrackId> m_counterTrack;
    std::vector<double> m_counterValue;
};

} // namespace day0::profile
