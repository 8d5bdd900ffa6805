#pragma once

#include "profile/trace.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace day0::profile {

/// The slice of `track` at nesting `depth` under time `t` (ns): the one containing t, else the
/// nearest one whose extent lies within `tolerance` ns of t (a click on a slice thinner than a
/// pixel), else kNoSlice. O(log n).
SliceIndex sliceNear(
    const Trace& trace, TrackId track, int depth, std::int64_t t, std::int64_t tolerance);

/// For [t0, t1) split into `pixels` equal columns: per depth and column, 1 where a slice named
/// `name` touches the column, else 0 (row-major like TrackLod::cells). What a timeline needs to
/// highlight every instance of one kernel whatever the zoom. O(depth · log n + k) for k slices
/// in the range.
std::vector<std::uint8_t> markNamedSlices(
    const Trace& trace, TrackId track, StringId name, std::int64_t t0, std::int64_t t1, int pixels);

/// The slices named `name`, on every track, that overlap [t0, t1), in index order.
std::vector<SliceIndex> findSlicesNamed(
    const Trace& trace, StringId name, std::int64_t t0, std::int64_t t1);

/// One pixel column of a counter track.
struct CounterCell {
    bool any = false; ///< a sample falls in the column
    double min = 0.0;
    double max = 0.0;
    double last = 0.0; ///< the value in force at the column's end (also without a sample)
    bool defined = false; ///< a sample at or before the column's end exists
};

/// Min, max and last value of counter track `track` per column of [t0, t1); O(pixels · log n +
/// k) for k samples in the range.
std::vector<CounterCell> buildCounterLod(
    const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1, int pixels);

/// Smallest and largest value of counter track `track` over the whole trace ({0, 0} if empty).
std::pair<double, double> counterRange(const Trace& trace, TrackId track);

/// The instants of one track that fall in one pixel column.
struct InstantMark {
    std::int32_t column = 0;
    std::uint32_t count = 0; ///< instants in the column
    std::size_t first = 0; ///< index of the column's first instant (Trace::instantTime(first))
};

/// The instant indices of `track`, [first, last) (instants are stored sorted by track, then
/// time). O(log n).
std::pair<std::size_t, std::size_t> trackInstants(const Trace& trace, TrackId track);

/// For [t0, t1) split into `pixels` equal columns: the columns holding instants of `track`,
/// left to right, with how many each holds. O(m · log n) for m marked columns, so millions of
/// instants in view cost no more than the pixels they cover.
std::vector<InstantMark> markInstants(
    const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1, int pixels);

/// A slice name shortened for display, as a view into `name`: C++ signatures lose their return
/// type, parameter list, template arguments and namespaces
/// ("void at::native::foo<4, F>(int, F)" → "foo"); generic CUTLASS-style wrappers keep their
/// first template argument ("void cutlass::Kernel<cutlass_80_gemm_tn>(Params)" →
/// "cutlass_80_gemm_tn"). Other names ("aten::mm", "Memcpy HtoD (Pageable -> Device)") are
/// returned unchanged.
std::string_view shortSliceName(std::string_view name);

} // namespace day0::profile
