#include "profile/collectives.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <optional>

namespace day0::profile {

namespace {

bool isBlocking(Collective c)
{
    return c == Collective::AllReduce || c == Collective::AllGather
        || c == Collective::ReduceScatter || c == Collective::Broadcast || c == Collective::AllToAll
        || c == Collective::Reduce;
}

std::int64_t median(std::vector<std::int64_t> v)
{
    if (v.empty()) {
        return 0;
    }
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(mid), v.end());
    const std::int64_t hi = v[mid];
    if (v.size() % 2 == 1) {
        return hi;
    }
    const std::int64_t lo = *std::max_element(v.begin(), v.begin() + std::ptrdiff_t(mid));
    return lo + (hi - lo) / 2;
}

/// Calls `visit(rank, slice)` for every communication slice on a GPU stream (NCCL kernels), in
/// track order and, within a track, in start order.
template <typename Visit> void forEachStreamCollective(const Trace& trace, const Visit& visit)
{
    const auto& tracks = trace.tracks();
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        if (tracks[t].kind != TrackKind::Stream) {
            continue;
        }
        const auto [a, b] = trace.trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            if (trace.sliceCategory(i) == Category::Communication) {
                visit(tracks[t].rank, i);
            }
        }
    }
}

/// How far apart (ns) two ends may be and still count as the same collective once the clock
/// offset is removed: blocking collectives finish within microseconds of each other.
constexpr std::int64_t kMatchTolerance = 50000;
/// Cap on the ends per rank and group used for candidate offsets (keeps the pair count bounded).
constexpr std::size_t kMaxEndsForCandidates = 2000;

using Ends = std::vector<std::int64_t>;

Ends sample(const Ends& v)
{
    if (v.size() <= kMaxEndsForCandidates) {
        return v;
    }
    Ends out;
    out.reserve(kMaxEndsForCandidates);
    for (std::size_t k = 0; k < kMaxEndsForCandidates; ++k) {
        out.push_back(v[k * (v.size() - 1) / (kMaxEndsForCandidates - 1)]);
    }
    return out;
}

/// The offset most pairs of ends agree on: the densest window of width 2 × tolerance among all
/// pairwise differences (a histogram vote; capture windows need not start at the same
/// collective, and point-to-point kernels need not pair up one to one).
std::optional<std::int64_t> votedOffset(const std::vector<std::pair<Ends, Ends>>& groups)
{
    std::vector<std::int64_t> diffs;
    for (const auto& [ref, other] : groups) {
        const Ends a = sample(ref);
        const Ends b = sample(other);
        for (const auto x : a) {
            for (const auto y : b) {
                diffs.push_back(x - y);
            }
        }
    }
    if (diffs.empty()) {
        return std::nullopt;
    }
    std::sort(diffs.begin(), diffs.end());
    std::size_t bestCount = 0;
    std::int64_t bestWidth = 0;
    std::size_t bestFirst = 0;
    std::size_t first = 0;
    for (std::size_t last = 0; last < diffs.size(); ++last) {
        // Differences of two differences can exceed 64 bits: compare in 128.
        while (__int128_t(diffs[last]) - diffs[first] > 2 * kMatchTolerance) {
            ++first;
        }
        const std::size_t count = last - first + 1;
        const std::int64_t width = std::int64_t(__int128_t(diffs[last]) - diffs[first]);
        if (count > bestCount || (count == bestCount && width < bestWidth)) {
            bestCount = count;
            bestWidth = width;
            bestFirst = first;
        }
    }
    return diffs[bestFirst + bestCount / 2];
}

struct Pairing {
    std::vector<std::int64_t> offsets; ///< ref end − other end of each matched pair
    std::int32_t lag = 0; ///< typical index shift other − ref in the largest group
};

/// Pairs each reference end with the nearest unused other end within the tolerance of `guess`.
Pairing pairEnds(const std::vector<std::pair<Ends, Ends>>& groups, std::int64_t guess)
{
    Pairing out;
    std::size_t largest = 0;
    for (const auto& [ref, other] : groups) {
        std::vector<std::int64_t> shifts;
        std::size_t j = 0;
        auto distance = [](std::int64_t a, __int128_t b) {
            const __int128_t d = __int128_t(a) - b;
            return d < 0 ? -d : d;
        };
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const __int128_t target = __int128_t(ref[i]) - guess;
            while (j < other.size() && other[j] < target - kMatchTolerance) {
                ++j;
            }
            if (j == other.size()) {
                break;
            }
            std::size_t best = j;
            if (j + 1 < other.size()
                && distance(other[j + 1], target) < distance(other[j], target)) {
                best = j + 1;
            }
            if (distance(other[best], target) <= kMatchTolerance) {
                out.offsets.push_back(ref[i] - other[best]);
                shifts.push_back(std::int64_t(best) - std::int64_t(i));
                j = best + 1;
            }
        }
        if (shifts.size() > largest) {
            largest = shifts.size();
            out.lag = std::int32_t(median(shifts));
        }
    }
    return out;
}

} // namespace

Collective collectiveOf(const Trace& trace, SliceIndex slice)
{
    Collective c = Collective::Unknown;
    if (const auto parsed = parseNcclKernelName(trace.sliceNameText(slice))) {
        c = parsed->collective;
    }
    if (c == Collective::Unknown || c == Collective::Generic) {
        if (const auto arg = trace.sliceArg(slice, "Collective name");
            arg && arg->type == ArgType::String) {
            const Collective named = collectiveFromText(arg->text);
            if (named != Collective::Unknown) {
                c = named;
            }
        }
    }
    if (c == Collective::Unknown) {
        c = collectiveFromText(trace.sliceNameText(slice));
    }
    return c;
}

std::vector<CollectiveStat> collectiveStatistics(const Trace& trace)
{
    std::map<std::tuple<std::int32_t, Collective, NcclNaming>, CollectiveStat> groups;
    forEachStreamCollective(trace, [&](std::int32_t rank, SliceIndex i) {
        const auto parsed = parseNcclKernelName(trace.sliceNameText(i));
        const NcclNaming naming = parsed ? parsed->naming : NcclNaming::Other;
        const Collective c = collectiveOf(trace, i);
        auto& s = groups[{ rank, c, naming }];
        if (s.count == 0) {
            s.rank = rank;
            s.collective = c;
            s.naming = naming;
            if (parsed) {
                s.algorithm = parsed->protocol.empty() ? parsed->algorithm
                                                       : parsed->algorithm + "_" + parsed->protocol;
            }
        }
        ++s.count;
        s.total = addSaturating(s.total, trace.sliceDuration(i));
        s.max = std::max(s.max, trace.sliceDuration(i));
    });
    std::vector<CollectiveStat> out;
    out.reserve(groups.size());
    for (auto& [key, s] : groups) {
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<ClockOffset> suggestClockAlignment(const Trace& trace, std::int32_t reference)
{
    // rank → (collective, process group) → end times in start order
    using Key = std::pair<Collective, std::string>;
    std::map<std::int32_t, std::map<Key, std::vector<std::pair<std::int64_t, std::int64_t>>>>
        byRank;
    forEachStreamCollective(trace, [&](std::int32_t rank, SliceIndex i) {
        std::string group;
        if (const auto pg = trace.sliceArg(i, "Process Group Name");
            pg && pg->type == ArgType::String) {
            group = std::string(pg->text);
        }
        byRank[rank][{ collectiveOf(trace, i), group }].emplace_back(
            trace.sliceStart(i), trace.sliceEnd(i));
    });
    std::vector<ClockOffset> out;
    const auto ranks = trace.ranks();
    if (ranks.size() < 2) {
        return out;
    }
    if (reference < 0) {
        reference = ranks.front();
    }
    auto endsOf = [](std::vector<std::pair<std::int64_t, std::int64_t>> v) {
        std::sort(v.begin(), v.end());
        Ends ends;
        ends.reserve(v.size());
        for (const auto& [start, end] : v) {
            ends.push_back(end);
        }
        std::sort(ends.begin(), ends.end());
        return ends;
    };
    const auto& refGroups = byRank[reference];
    for (const std::int32_t rank : ranks) {
        if (rank == reference) {
            continue;
        }
        ClockOffset o;
        o.rank = rank;
        o.reference = reference;
        // Blocking collectives first; send/receive only when there is nothing else.
        for (const bool blockingOnly : { true, false }) {
            std::vector<std::pair<Ends, Ends>> groups;
            for (const auto& [key, spans] : byRank[rank]) {
                const auto ref = refGroups.find(key);
                if (blockingOnly == isBlocking(key.first) && ref != refGroups.end()) {
                    groups.emplace_back(endsOf(ref->second), endsOf(spans));
                }
            }
            const auto guess = votedOffset(groups);
            if (!guess) {
                continue;
            }
            const Pairing pairs = pairEnds(groups, *guess);
            if (pairs.offsets.empty()) {
                continue;
            }
            o.offsetNs = median(pairs.offsets);
            std::vector<std::int64_t> dev;
            dev.reserve(pairs.offsets.size());
            for (const auto d : pairs.offsets) {
                // Offsets span up to 2^63 each way, so their spread needs 128 bits.
                const __int128_t dd = __int128_t(d) - o.offsetNs;
                const __int128_t ad = dd < 0 ? -dd : dd;
                dev.push_back(ad > INT64_MAX ? INT64_MAX : std::int64_t(ad));
            }
            o.madNs = median(dev);
            o.matched = pairs.offsets.size();
            o.lag = pairs.lag;
            o.usable = o.matched >= 3;
            break;
        }
        out.push_back(o);
    }
    return out;
}

} // namespace day0::profile
