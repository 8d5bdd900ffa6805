#include "profile/timeline_lod.h"

#include <algorithm>

namespace day0::profile {

namespace {

// Slices sampled for the representative of a dense column without an index: enough to find the
// long ones, few enough that a ten-million-slice row costs no more than a sparse one.
constexpr std::uint32_t kDenseSamples = 8;
// Indexed slices looked at for a dense column's representative (they are contiguous).
constexpr std::size_t kIndexedSamples = 64;

// First position in [lo, hi) where `isBefore` is false, searching forward from lo in doubling
// steps: O(log d) for an answer d positions away. Columns are visited left to right, so each
// search starts next to the previous answer and touches memory close to it.
template <typename Pred> std::size_t gallop(std::size_t lo, std::size_t hi, Pred isBefore)
{
    std::size_t step = 1;
    while (lo < hi) {
        const std::size_t probe = lo + std::min(step, hi - lo) - 1;
        if (!isBefore(probe)) {
            // The answer is in [lo, probe].
            std::size_t a = lo;
            std::size_t b = probe;
            while (a < b) {
                const std::size_t mid = a + (b - a) / 2;
                if (isBefore(mid)) {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            return a;
        }
        lo = probe + 1;
        step *= 2;
    }
    return hi;
}

// One depth row and, when indexed, its coarse copy.
struct Row {
    std::span<const SliceIndex> slices;
    std::span<const std::int64_t> coarseStarts;
    std::span<const std::int64_t> coarseEnds;
};

// First row position >= lo where isBefore(start, end) is false (isBefore is monotone along the
// row: starts and ends are both sorted). The coarse copy narrows the search to one stride.
template <typename Pred>
std::size_t search(const Row& row, std::span<const std::int64_t> starts,
    std::span<const std::int64_t> ends, std::size_t lo, Pred isBefore)
{
    const std::size_t n = row.slices.size();
    auto fine = [&](std::size_t i) {
        const SliceIndex s = row.slices[i];
        return isBefore(starts[s], ends[s]);
    };
    if (row.coarseStarts.empty()) {
        return gallop(lo, n, fine);
    }
    constexpr std::size_t kStride = LodIndex::kStride;
    const std::size_t k0 = (lo + kStride - 1) / kStride;
    const std::size_t k = gallop(k0, row.coarseStarts.size(),
        [&](std::size_t c) { return isBefore(row.coarseStarts[c], row.coarseEnds[c]); });
    // Entry k is the first indexed one not before (or the end); entry k-1 is before. Within
    // that stride a plain bisection touches the fewest slices.
    std::size_t a = k > k0 ? (k - 1) * kStride + 1 : lo;
    std::size_t b = std::min(k * kStride, n);
    if (k == k0) {
        return gallop(a, b, fine); // the answer is near lo: the previous column's end
    }
    while (a < b) {
        const std::size_t mid = a + (b - a) / 2;
        if (fine(mid)) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    return a;
}

TrackLod build(const Trace& trace, const LodIndex* index, TrackId track, std::int64_t t0,
    std::int64_t t1, int pixels, int depths, std::uint32_t exactLimit)
{
    TrackLod lod;
    lod.t0 = t0;
    lod.t1 = t1;
    lod.pixels = std::max(0, pixels);
    lod.depths = trace.trackDepths(track);
    if (depths >= 0) {
        lod.depths = std::min(lod.depths, depths);
    }
    lod.cells.assign(std::size_t(lod.depths) * std::size_t(lod.pixels), LodCell {});
    if (lod.pixels == 0 || t1 <= t0) {
        return lod;
    }
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    const double width = double(t1 - t0) / double(lod.pixels);
    exactLimit = std::max<std::uint32_t>(exactLimit, 1);
    for (int d = 0; d < lod.depths; ++d) {
        // Slices of one depth never overlap, so both their starts and their ends are sorted.
        Row row { trace.slicesAtDepth(track, std::uint16_t(d)), {}, {} };
        if (index != nullptr) {
            row.coarseStarts = index->starts(track, d);
            row.coarseEnds = index->ends(track, d);
        }
        std::size_t from = 0;
        std::size_t to = 0;
        for (int x = 0; x < lod.pixels; ++x) {
            const std::int64_t a = t0 + std::int64_t(double(x) * width);
            const std::int64_t b
                = x + 1 == lod.pixels ? t1 : t0 + std::int64_t(double(x + 1) * width);
            // Of the previous column's slices only the last can reach into this one (a row's
            // slices never overlap), so the search starts there.
            if (to > 0) {
                from = std::max(from, to - 1);
            }
            from = search(row, starts, ends, from,
                [a](std::int64_t start, std::int64_t end) { return end <= a && start < a; });
            to = search(row, starts, ends, from,
                [b](std::int64_t start, std::int64_t) { return start < b; });
            LodCell& cell = lod.cells[std::size_t(d) * std::size_t(lod.pixels) + std::size_t(x)];
            cell.count = std::uint32_t(to - from);
            if (cell.count == 0) {
                continue;
            }
            const std::int64_t span = std::max<std::int64_t>(1, b - a);
            if (cell.count <= exactLimit) {
                std::int64_t covered = 0;
                std::int64_t best = -1;
                for (std::size_t i = from; i != to; ++i) {
                    const SliceIndex s = row.slices[i];
                    const std::int64_t lo = std::max(a, starts[s]);
                    const std::int64_t hi = std::min(b, ends[s]);
                    covered += std::max<std::int64_t>(0, hi - lo);
                    if (ends[s] - starts[s] > best) {
                        best = ends[s] - starts[s];
                        cell.representative = s;
                    }
                }
                cell.coverage = float(std::min(1.0, double(covered) / double(span)));
                continue;
            }
            // Dense: the longest of a few slices is the representative; the first and last
            // slices give the covered extent, which bounds the coverage from above.
            cell.dense = true;
            std::int64_t best = -1;
            constexpr std::size_t kStride = LodIndex::kStride;
            const std::size_t k0 = (from + kStride - 1) / kStride;
            const std::size_t k1 = (to + kStride - 1) / kStride; // indexed entries in [from, to)
            if (!row.coarseStarts.empty() && k1 >= k0 + 2) {
                const std::size_t step = std::max<std::size_t>(1, (k1 - k0) / kIndexedSamples);
                for (std::size_t k = k0; k < k1; k += step) {
                    if (row.coarseEnds[k] - row.coarseStarts[k] > best) {
                        best = row.coarseEnds[k] - row.coarseStarts[k];
                        cell.representative = row.slices[k * kStride];
                    }
                }
            } else {
                const std::size_t n = cell.count;
                const std::uint32_t samples
                    = std::max<std::uint32_t>(2, std::min(exactLimit, kDenseSamples));
                for (std::uint32_t k = 0; k < samples; ++k) {
                    const SliceIndex s = row.slices[from + k * (n - 1) / (samples - 1)];
                    if (ends[s] - starts[s] > best) {
                        best = ends[s] - starts[s];
                        cell.representative = s;
                    }
                }
            }
            const std::int64_t lo = std::max(a, starts[row.slices[from]]);
            const std::int64_t hi = std::min(b, ends[row.slices[to - 1]]);
            cell.coverage = float(std::clamp(double(hi - lo) / double(span), 0.0, 1.0));
        }
    }
    return lod;
}

} // namespace

LodIndex::LodIndex(const Trace& trace)
{
    bool any = false;
    const auto& tracks = trace.tracks();
    m_trackRow.reserve(tracks.size() + 1);
    for (TrackId t = 0; t < tracks.size(); ++t) {
        m_trackRow.push_back(std::uint32_t(m_rowBegin.size()));
        for (int d = 0; d < trace.trackDepths(t); ++d) {
            m_rowBegin.push_back(std::uint32_t(m_starts.size()));
            const auto row = trace.slicesAtDepth(t, std::uint16_t(d));
            for (std::size_t i = 0; i < row.size(); i += kStride) {
                m_starts.push_back(trace.sliceStart(row[i]));
                m_ends.push_back(trace.sliceEnd(row[i]));
            }
            if (!row.empty()) {
                // A row's first slice starts first and its last one ends last.
                const std::int64_t lo = trace.sliceStart(row.front());
                const std::int64_t hi = trace.sliceEnd(row.back());
                m_range = any ? std::pair(std::min(m_range.first, lo), std::max(m_range.second, hi))
                              : std::pair(lo, hi);
                any = true;
            }
        }
    }
    m_trackRow.push_back(std::uint32_t(m_rowBegin.size()));
    m_rowBegin.push_back(std::uint32_t(m_starts.size()));
}

std::size_t LodIndex::row(TrackId track, int depth) const
{
    if (track + 1 >= m_trackRow.size() || depth < 0) {
        return m_rowBegin.empty() ? 0 : m_rowBegin.size() - 1;
    }
    const std::size_t r = m_trackRow[track] + std::size_t(depth);
    return r < m_trackRow[track + 1] ? r : m_rowBegin.size() - 1;
}

std::span<const std::int64_t> LodIndex::starts(TrackId track, int depth) const
{
    if (m_rowBegin.empty()) {
        return {};
    }
    const std::size_t r = row(track, depth);
    const std::size_t end = r + 1 < m_rowBegin.size() ? m_rowBegin[r + 1] : m_rowBegin[r];
    return { m_starts.data() + m_rowBegin[r], end - m_rowBegin[r] };
}

std::span<const std::int64_t> LodIndex::ends(TrackId track, int depth) const
{
    if (m_rowBegin.empty()) {
        return {};
    }
    const std::size_t r = row(track, depth);
    const std::size_t end = r + 1 < m_rowBegin.size() ? m_rowBegin[r + 1] : m_rowBegin[r];
    return { m_ends.data() + m_rowBegin[r], end - m_rowBegin[r] };
}

std::size_t LodIndex::memoryBytes() const
{
    return (m_starts.capacity() + m_ends.capacity()) * sizeof(std::int64_t)
        + (m_rowBegin.capacity() + m_trackRow.capacity()) * sizeof(std::uint32_t);
}

TrackLod buildTrackLod(const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1,
    int pixels, std::uint32_t exactLimit)
{
    return build(trace, nullptr, track, t0, t1, pixels, -1, exactLimit);
}

TrackLod buildTrackLod(const Trace& trace, const LodIndex& index, TrackId track, std::int64_t t0,
    std::int64_t t1, int pixels, int depths, std::uint32_t exactLimit)
{
    return build(trace, &index, track, t0, t1, pixels, depths, exactLimit);
}

} // namespace day0::profile
