#pragma once

#include "profile/trace.h"

#include <cstdint>
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
/// `exactLimit` slices are exact; denser ones sample the representative.
TrackLod buildTrackLod(const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1,
    int pixels, std::uint32_t exactLimit = 32);

} // namespace day0::profile
