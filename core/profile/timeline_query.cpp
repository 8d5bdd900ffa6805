#include "profile/timeline_query.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>

namespace day0::profile {

namespace {

// Column of time `t` in [t0, t0 + width·pixels), clamped to the columns.
int columnOf(std::int64_t t, std::int64_t t0, double width, int pixels)
{
    const double x = std::floor(double(t - t0) / width);
    return int(std::clamp(x, 0.0, double(pixels - 1)));
}

// The slices of one depth row overlapping [t0, t1): [from, to) in the row's order.
std::pair<const SliceIndex*, const SliceIndex*> rowRange(
    const Trace& trace, std::span<const SliceIndex> row, std::int64_t t0, std::int64_t t1)
{
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    // Ends are sorted within a depth; a zero-length slice at t0 still overlaps.
    const auto* from = std::partition_point(row.data(), row.data() + row.size(),
        [&](SliceIndex s) { return ends[s] <= t0 && starts[s] < t0; });
    const auto* to = std::partition_point(
        from, row.data() + row.size(), [&](SliceIndex s) { return starts[s] < t1; });
    return { from, to };
}

// Index of the bracket matching the one at `close` (a ')' or '>'), scanning backwards; npos when
// unbalanced.
std::size_t matchBackwards(std::string_view s, std::size_t close)
{
    const char closing = s[close];
    const char opening = closing == ')' ? '(' : '<';
    int depth = 0;
    for (std::size_t i = close + 1; i-- > 0;) {
        if (s[i] == closing) {
            ++depth;
        } else if (s[i] == opening && --depth == 0) {
            return i;
        }
    }
    return std::string_view::npos;
}

// Start of the qualified name ending at `end`: after the last space or comma outside brackets.
std::size_t qualifiedStart(std::string_view s, std::size_t end)
{
    int depth = 0;
    for (std::size_t i = end; i-- > 0;) {
        const char c = s[i];
        if (c == '>' || c == ')') {
            ++depth;
        } else if (c == '<' || c == '(') {
            if (depth == 0) {
                return i + 1;
            }
            --depth;
        } else if ((c == ' ' || c == ',') && depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

// The unqualified tail of s[begin, end): after the last "::" outside brackets.
std::size_t afterLastScope(std::string_view s, std::size_t begin, std::size_t end)
{
    int depth = 0;
    for (std::size_t i = end; i > begin + 1; --i) {
        const char c = s[i - 1];
        if (c == '>' || c == ')') {
            ++depth;
        } else if (c == '<' || c == '(') {
            --depth;
        } else if (depth == 0 && c == ':' && s[i - 2] == ':') {
            return i;
        }
    }
    return begin;
}

bool isIdentifierChar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Wrappers whose own name says nothing: their first template argument names the kernel.
bool isGenericWrapper(std::string_view name)
{
    constexpr std::array<std::string_view, 4> kGeneric
        = { "Kernel", "Kernel2", "device_kernel", "KernelWrapper" };
    return std::find(kGeneric.begin(), kGeneric.end(), name) != kGeneric.end();
}

} // namespace

SliceIndex sliceNear(
    const Trace& trace, TrackId track, int depth, std::int64_t t, std::int64_t tolerance)
{
    if (depth < 0 || depth >= trace.trackDepths(track)) {
        return kNoSlice;
    }
    const auto row = trace.slicesAtDepth(track, std::uint16_t(depth));
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    const auto it = std::partition_point(
        row.begin(), row.end(), [&](SliceIndex s) { return starts[s] <= t; });
    SliceIndex best = kNoSlice;
    std::int64_t bestDistance = tolerance + 1;
    if (it != row.begin()) {
        const SliceIndex before = *(it - 1);
        if (ends[before] >= t) {
            return before;
        }
        bestDistance = std::min(bestDistance, t - ends[before]);
        if (t - ends[before] <= tolerance) {
            best = before;
        }
    }
    if (it != row.end() && starts[*it] - t < bestDistance) {
        best = *it;
    }
    return best;
}

std::vector<std::uint8_t> markNamedSlices(
    const Trace& trace, TrackId track, StringId name, std::int64_t t0, std::int64_t t1, int pixels)
{
    const int depths = trace.trackDepths(track);
    pixels = std::max(0, pixels);
    std::vector<std::uint8_t> marks(std::size_t(depths) * std::size_t(pixels), 0);
    if (pixels == 0 || t1 <= t0) {
        return marks;
    }
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    const auto names = trace.sliceNames();
    const double width = double(t1 - t0) / double(pixels);
    for (int d = 0; d < depths; ++d) {
        const auto [from, to]
            = rowRange(trace, trace.slicesAtDepth(track, std::uint16_t(d)), t0, t1);
        std::uint8_t* row = marks.data() + std::size_t(d) * std::size_t(pixels);
        for (const SliceIndex* it = from; it != to; ++it) {
            if (names[*it] != name) {
                continue;
            }
            const int x0 = columnOf(std::max(t0, starts[*it]), t0, width, pixels);
            // A slice ending exactly on a column boundary does not touch the next column.
            const int x1
                = columnOf(std::max(starts[*it], std::min(t1, ends[*it]) - 1), t0, width, pixels);
            std::fill(row + x0, row + std::max(x0, x1) + 1, std::uint8_t(1));
        }
    }
    return marks;
}

std::vector<SliceIndex> findSlicesNamed(
    const Trace& trace, StringId name, std::int64_t t0, std::int64_t t1)
{
    std::vector<SliceIndex> out;
    const auto names = trace.sliceNames();
    for (TrackId t = 0; t < trace.tracks().size(); ++t) {
        trace.forEachSliceInRange(t, t0, t1, [&](SliceIndex s) {
            if (names[s] == name) {
                out.push_back(s);
            }
        });
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<CounterCell> buildCounterLod(
    const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1, int pixels)
{
    std::vector<CounterCell> cells(std::size_t(std::max(0, pixels)));
    if (cells.empty() || t1 <= t0) {
        return cells;
    }
    // Samples are sorted by (track, time).
    auto indexWhere = [&](std::size_t lo, std::size_t hi, auto&& before) {
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            if (before(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    };
    const std::size_t n = trace.counterCount();
    const std::size_t first
        = indexWhere(0, n, [&](std::size_t i) { return trace.counterTrack(i) < track; });
    const std::size_t end
        = indexWhere(first, n, [&](std::size_t i) { return trace.counterTrack(i) <= track; });
    std::size_t i
        = indexWhere(first, end, [&](std::size_t k) { return trace.counterTime(k) < t0; });
    bool defined = i > first;
    double last = defined ? trace.counterValue(i - 1) : 0.0;
    const double width = double(t1 - t0) / double(pixels);
    for (int x = 0; x < pixels; ++x) {
        const std::int64_t b = x + 1 == pixels ? t1 : t0 + std::int64_t(double(x + 1) * width);
        CounterCell& cell = cells[std::size_t(x)];
        cell.min = last;
        cell.max = last;
        for (; i < end && trace.counterTime(i) < b; ++i) {
            const double v = trace.counterValue(i);
            if (!cell.any) {
                // The column starts with the value in force, when there is one.
                cell.min = defined ? std::min(last, v) : v;
                cell.max = defined ? std::max(last, v) : v;
                cell.any = true;
            } else {
                cell.min = std::min(cell.min, v);
                cell.max = std::max(cell.max, v);
            }
            last = v;
            defined = true;
        }
        cell.last = last;
        cell.defined = defined;
    }
    return cells;
}

std::pair<double, double> counterRange(const Trace& trace, TrackId track)
{
    bool any = false;
    double lo = 0.0;
    double hi = 0.0;
    for (std::size_t i = 0; i < trace.counterCount(); ++i) {
        if (trace.counterTrack(i) != track) {
            continue;
        }
        const double v = trace.counterValue(i);
        lo = any ? std::min(lo, v) : v;
        hi = any ? std::max(hi, v) : v;
        any = true;
    }
    return { lo, hi };
}

std::string_view shortSliceName(std::string_view name)
{
    if (name.empty() || (name.back() != ')' && name.back() != '>')) {
        return name;
    }
    std::size_t end = name.size();
    if (name.back() == ')') {
        const std::size_t open = matchBackwards(name, name.size() - 1);
        // "Memcpy HtoD (Pageable -> Device)": a remark in brackets, not a parameter list.
        if (open == std::string_view::npos || open == 0
            || !(isIdentifierChar(name[open - 1]) || name[open - 1] == '>')) {
            return name;
        }
        end = open;
    }
    std::size_t templateOpen = std::string_view::npos;
    if (name[end - 1] == '>') {
        templateOpen = matchBackwards(name, end - 1);
        if (templateOpen == std::string_view::npos || templateOpen == 0) {
            return name;
        }
        end = templateOpen;
    }
    const std::size_t begin = afterLastScope(name, qualifiedStart(name, end), end);
    const std::string_view shortName = name.substr(begin, end - begin);
    if (shortName.empty()) {
        return name;
    }
    if (templateOpen != std::string_view::npos && isGenericWrapper(shortName)) {
        // The first template argument, itself without namespaces and template arguments.
        std::size_t argEnd = templateOpen + 1;
        int depth = 0;
        for (; argEnd < name.size(); ++argEnd) {
            const char c = name[argEnd];
            if (c == '<' || c == '(') {
                if (depth == 0 && c == '<') {
                    break;
                }
                ++depth;
            } else if (c == '>' || c == ')') {
                if (depth == 0) {
                    break;
                }
                --depth;
            } else if (c == ',' && depth == 0) {
                break;
            }
        }
        std::size_t argBegin = templateOpen + 1;
        while (argBegin < argEnd && name[argBegin] == ' ') {
            ++argBegin;
        }
        argBegin = afterLastScope(name, argBegin, argEnd);
        if (argEnd > argBegin) {
            return name.substr(argBegin, argEnd - argBegin);
        }
    }
    return shortName;
}

std::pair<std::size_t, std::size_t> trackInstants(const Trace& trace, TrackId track)
{
    // Instants are stored sorted by (track, time): two binary searches on the track column.
    auto firstAfter = [&trace](TrackId t, bool inclusive) {
        std::size_t lo = 0;
        std::size_t hi = trace.instantCount();
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            const TrackId m = trace.instantTrack(mid);
            if (m < t || (inclusive && m == t)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    };
    return { firstAfter(track, false), firstAfter(track, true) };
}

std::vector<InstantMark> markInstants(
    const Trace& trace, TrackId track, std::int64_t t0, std::int64_t t1, int pixels)
{
    std::vector<InstantMark> out;
    if (pixels <= 0 || t1 <= t0) {
        return out;
    }
    const auto [begin, end] = trackInstants(trace, track);
    auto firstAtOrAfter = [&trace](std::size_t lo, std::size_t hi, std::int64_t ts) {
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            if (trace.instantTime(mid) < ts) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    };
    // Column of t: floor((t − t0) · pixels / span), exact in 128 bits; the next column starts at
    // t0 + ceil((c + 1) · span / pixels). One binary search per marked column.
    const auto span = __int128_t(t1) - t0;
    std::size_t i = firstAtOrAfter(begin, end, t0);
    while (i < end && trace.instantTime(i) < t1) {
        const auto offset = __int128_t(trace.instantTime(i)) - t0;
        const auto column = std::int64_t(offset * pixels / span);
        const __int128_t nextOffset = ((column + 1) * span + pixels - 1) / pixels;
        const std::int64_t next = nextOffset >= span ? t1 : std::int64_t(t0 + nextOffset);
        const std::size_t j = firstAtOrAfter(i + 1, end, next);
        out.push_back(
            { std::int32_t(column), std::uint32_t(std::min<std::size_t>(j - i, UINT32_MAX)), i });
        i = j;
    }
    return out;
}

} // namespace day0::profile
