#pragma once

#include "profile/timeline_lod.h"
#include "profile/timeline_query.h"
#include "profile/trace.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <vector>

namespace day0 {
class ThreadPool;
}

namespace day0::ui {

/// The traces a timeline shows, with the absolute time (ns) each one's relative zero stands for:
/// traces are stacked from their own first event, so two runs compare side by side.
struct TimelineTraces {
    std::array<std::shared_ptr<const profile::Trace>, 2> traces;
    std::array<std::shared_ptr<const profile::LodIndex>, 2> indexes; ///< one per trace
    std::array<std::int64_t, 2> origins { 0, 0 };
    std::array<std::int64_t, 2> spans { 0, 0 }; ///< last event minus origin, ns

    /// Sets `slot` to `trace` (or empties it), indexes it for drawing and spans it from its
    /// first to its last slice or counter sample; O(rows + n / LodIndex::kStride + counters).
    void set(int slot, std::shared_ptr<const profile::Trace> trace);
};

/// What the view asks the worker to prepare: the visible window and tracks.
struct FrameRequest {
    TimelineTraces traces;
    std::int64_t start = 0; ///< relative ns at pixel column 0
    double nsPerPixel = 1.0;
    int width = 0; ///< pixel columns
    struct TrackRef {
        int slot = 0;
        profile::TrackId track = 0;
        int depths = 0; ///< nesting levels to prepare (0 for counters)
    };
    std::vector<TrackRef> tracks;
    /// Per slot: the name whose slices are highlighted (kNotFound: none).
    std::array<profile::StringId, 2> highlight { profile::StringTable::kNotFound,
        profile::StringTable::kNotFound };
    std::uint64_t generation = 0;

    [[nodiscard]] std::int64_t end() const
    {
        return start + std::int64_t(double(width) * nsPerPixel + 0.5);
    }
};

/// A horizontal run of pixel columns of one depth row painted alike.
struct SliceRun {
    enum Flag : std::uint8_t {
        Whole = 1, ///< one slice covering the run (label it); else sub-pixel slices
        Dense = 2, ///< too many slices to count exactly
        Highlight = 4, ///< holds a slice with the highlighted name
    };
    std::int32_t x0 = 0;
    std::int32_t x1 = 0; ///< exclusive
    profile::SliceIndex slice = profile::kNoSlice; ///< the run's slice, or the column's longest
    std::uint32_t count = 0; ///< slices in the run's columns (sum over columns)
    std::uint8_t shade = 3; ///< 0..3: how much of the run's time is covered
    std::uint8_t flags = 0;
};

/// The prepared draw lists of one track.
struct TrackFrame {
    int slot = 0;
    profile::TrackId track = 0;
    std::vector<std::vector<SliceRun>> depths; ///< per nesting level
    std::vector<profile::CounterCell> counter; ///< counter tracks: one cell per column
    std::vector<profile::InstantMark> instants; ///< columns holding instant events (markers)
    std::pair<double, double> counterRange { 0.0, 0.0 };
};

/// Everything paintEvent needs for one window: built off the GUI thread by prepareFrame.
struct TimelineFrame {
    TimelineTraces traces;
    std::int64_t start = 0;
    double nsPerPixel = 1.0;
    int width = 0;
    std::array<profile::StringId, 2> highlight { profile::StringTable::kNotFound,
        profile::StringTable::kNotFound };
    std::vector<TrackFrame> tracks; ///< in request order
    std::uint64_t generation = 0;

    /// The prepared track, or nullptr.
    [[nodiscard]] const TrackFrame* find(int slot, profile::TrackId track) const;
};

/// Builds the per-pixel draw lists of a request from the core's per-pixel aggregates
/// (profile::buildTrackLod, markNamedSlices, buildCounterLod): adjacent columns showing the same
/// slice, or the same kind of sub-pixel activity, become one run. Tracks are prepared on `pool`
/// side by side when one is given. Thread-safe (reads the traces only); returns early with a
/// partial frame when `stop` is requested.
TimelineFrame prepareFrame(
    const FrameRequest& request, std::stop_token stop = {}, ThreadPool* pool = nullptr);

} // namespace day0::ui
