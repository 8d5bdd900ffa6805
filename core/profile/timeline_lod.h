#pragma once

#include "profile/trace.h"

#include <cstdint>
#include <span>
#include <vector>

namespace day0::profile {

/// One pixel column of one depth row of a track.
struct LodCell {
    std::uint32_t count = 0; ///< slices touching the column
    SliceIndex representative = kNoSlice; ///< the longest of them (exact when dense == false)
    float coverage = 0.0f; ///< fraction of the column's time covered, 0..1
    bool dense = false; ///< many slices: representative and coverage are estimated
};

/// What a timeline row needs to paint [t0, t1) at `pixels` columns, per depth: built off the GUI
/// thread from the per-depth index, in O(pixels · depth · log n) whatever the number of slices,
/// so ten million events cost the same as ten thousand.
struct TrackLod {
    std::int64_t t0 = 0;
    std::int64_t t1 = 0;
    int pixels = 0;
    int depths = 0;
    std::vector<LodCell> cells; ///< row-major: cells[depth * pixels + x]

    [[nodiscard]] const LodCell& at(int depth, int x) const
    {
        return cells[std::size_t(depth) * std::size_t(pixels) + std::size_t(x)];
    }
};

/// Aggregates `track` over [t0, t1) into `pixels` equal columns. Columns with at most
/// `exactLimit` slices are exact; denser ones take the longest of a few evenly spaced slices as
/// the representative and bound the coverage by the first and last slice.
TrackLod buildTrackLod(const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1,
    int pixels, std::uint32_t exactLimit = 32);

/// Every kStride-th slice of every depth row (its start and end), contiguous in memory: with it
/// buildTrackLod finds column boundaries and samples dense columns without touching most of the
/// trace, so a full view of ten million slices costs little more than a sparse one. Built once
/// per trace in O(rows + n / kStride); 0.5 byte per slice. Immutable, so thread-safe to read.
class LodIndex {
public:
    static constexpr std::uint32_t kStride = 32;

    LodIndex() = default;
    explicit LodIndex(const Trace& trace);

    /// Starts (ns) of slices 0, kStride, 2·kStride, ... of depth row (track, depth).
    [[nodiscard]] std::span<const std::int64_t> starts(TrackId track, int depth) const;
    /// Their ends (ns).
    [[nodiscard]] std::span<const std::int64_t> ends(TrackId track, int depth) const;
    /// Earliest start and latest end of the trace's slices ({0, 0} without slices): what
    /// Trace::timeRange gives for slices, in O(rows).
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> sliceRange() const { return m_range; }
    [[nodiscard]] std::size_t memoryBytes() const;

private:
    [[nodiscard]] std::size_t row(TrackId track, int depth) const;

    std::vector<std::int64_t> m_starts;
    std::vector<std::int64_t> m_ends;
    std::vector<std::uint32_t> m_rowBegin; // per row: first entry, plus the end
    std::vector<std::uint32_t> m_trackRow; // per track: its first row, plus the end
    std::pair<std::int64_t, std::int64_t> m_range { 0, 0 };
};

/// buildTrackLod through `index` (built from the same trace), for the first `depths` levels of
/// the track only (-1: all; a collapsed row paints its top levels). Same cells as without the
/// index, except that dense columns choose their representative among the indexed slices.
TrackLod buildTrackLod(const Trace& trace, const LodIndex& index, TrackId track, std::int64_t t0,
    std::int64_t t1, int pixels, int depths = -1, std::uint32_t exactLimit = 32);

} // namespace day0::profile
