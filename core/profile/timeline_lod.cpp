#include "profile/timeline_lod.h"

#include <algorithm>

namespace day0::profile {

TrackLod buildTrackLod(const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1,
    int pixels, std::uint32_t exactLimit)
{
    TrackLod lod;
    lod.t0 = t0;
    lod.t1 = t1;
    lod.pixels = std::max(0, pixels);
    lod.depths = trace.trackDepths(track);
    lod.cells.assign(std::size_t(lod.depths) * std::size_t(lod.pixels), LodCell {});
    if (lod.pixels == 0 || t1 <= t0) {
        return lod;
    }
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    const double width = double(t1 - t0) / double(lod.pixels);
    for (int d = 0; d < lod.depths; ++d) {
        // Slices of one depth never overlap, so both their starts and their ends are sorted.
        const auto row = trace.slicesAtDepth(track, std::uint16_t(d));
        auto from = row.begin();
        for (int x = 0; x < lod.pixels; ++x) {
            const std::int64_t a = t0 + std::int64_t(double(x) * width);
            const std::int64_t b
                = x + 1 == lod.pixels ? t1 : t0 + std::int64_t(double(x + 1) * width);
            from = std::partition_point(
                from, row.end(), [&](SliceIndex s) { return ends[s] <= a && starts[s] < a; });
            const auto to = std::partition_point(
                from, row.end(), [&](SliceIndex s) { return starts[s] < b; });
            LodCell& cell = lod.cells[std::size_t(d) * std::size_t(lod.pixels) + std::size_t(x)];
            cell.count = std::uint32_t(to - from);
            if (cell.count == 0) {
                continue;
            }
            const std::int64_t span = std::max<std::int64_t>(1, b - a);
            if (cell.count <= exactLimit) {
                std::int64_t covered = 0;
                std::int64_t best = -1;
                for (auto it = from; it != to; ++it) {
                    const std::int64_t lo = std::max(a, starts[*it]);
                    const std::int64_t hi = std::min(b, ends[*it]);
                    covered += std::max<std::int64_t>(0, hi - lo);
                    if (ends[*it] - starts[*it] > best) {
                        best = ends[*it] - starts[*it];
                        cell.representative = *it;
                    }
                }
                cell.coverage = float(std::min(1.0, double(covered) / double(span)));
                continue;
            }
            // Dense: sample evenly for the representative; the first and last slices give the
            // covered extent, which bounds the coverage from above.
            cell.dense = true;
            std::int64_t best = -1;
            const std::size_t n = cell.count;
            for (std::uint32_t k = 0; k < exactLimit; ++k) {
                const SliceIndex s = *(from + std::ptrdiff_t(k * (n - 1) / (exactLimit - 1)));
                if (ends[s] - starts[s] > best) {
                    best = ends[s] - starts[s];
                    cell.representative = s;
                }
            }
            const std::int64_t lo = std::max(a, starts[*from]);
            const std::int64_t hi = std::min(b, ends[*(to - 1)]);
            cell.coverage = float(std::clamp(double(hi - lo) / double(span), 0.0, 1.0));
        }
    }
    return lod;
}

} // namespace day0::profile
