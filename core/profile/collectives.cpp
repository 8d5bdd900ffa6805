#include "profile/collectives.h"

#include <algorithm>
#include <cstdlib>
#include <map>

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

struct Match {
    std::vector<std::int64_t> offsets;
    std::int64_t mad = 0;
    std::int32_t lag = 0;
};

/// The index shift with the most consistent end-time differences between two sequences.
Match bestLag(const std::vector<std::int64_t>& ref, const std::vector<std::int64_t>& other)
{
    Match best;
    bool found = false;
    const std::size_t minMatches = std::min<std::size_t>(3, std::min(ref.size(), other.size()));
    if (minMatches == 0) {
        return best;
    }
    const auto maxLag
        = std::int32_t(std::min<std::size_t>(64, std::max(ref.size(), other.size()) - 1));
    for (std::int32_t lag = -maxLag; lag <= maxLag; ++lag) {
        std::vector<std::int64_t> offsets;
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const std::int64_t j = std::int64_t(i) + lag;
            if (j >= 0 && j < std::int64_t(other.size())) {
                offsets.push_back(ref[i] - other[std::size_t(j)]);
            }
        }
        if (offsets.size() < minMatches) {
            continue;
        }
        const std::int64_t m = median(offsets);
        std::vector<std::int64_t> dev;
        dev.reserve(offsets.size());
        for (const auto o : offsets) {
            dev.push_back(std::llabs(o - m));
        }
        const std::int64_t mad = median(dev);
        const bool better = !found || mad < best.mad
            || (mad == best.mad && offsets.size() > best.offsets.size())
            || (mad == best.mad && offsets.size() == best.offsets.size()
                && std::abs(lag) < std::abs(best.lag));
        if (better) {
            best = { std::move(offsets), mad, lag };
            found = true;
        }
    }
    return best;
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
    const auto& tracks = trace.tracks();
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        if (tracks[t].kind != TrackKind::Stream) {
            continue;
        }
        const auto [a, b] = trace.trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            if (trace.sliceCategory(i) != Category::Communication) {
                continue;
            }
            const auto parsed = parseNcclKernelName(trace.sliceNameText(i));
            const NcclNaming naming = parsed ? parsed->naming : NcclNaming::Other;
            const Collective c = collectiveOf(trace, i);
            auto& s = groups[{ tracks[t].rank, c, naming }];
            if (s.count == 0) {
                s.rank = tracks[t].rank;
                s.collective = c;
                s.naming = naming;
                if (parsed) {
                    s.algorithm = parsed->protocol.empty()
                        ? parsed->algorithm
                        : parsed->algorithm + "_" + parsed->protocol;
                }
            }
            ++s.count;
            s.total += trace.sliceDuration(i);
            s.max = std::max(s.max, trace.sliceDuration(i));
        }
    }
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
    const auto& tracks = trace.tracks();
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        if (tracks[t].kind != TrackKind::Stream) {
            continue;
        }
        const auto [a, b] = trace.trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            if (trace.sliceCategory(i) != Category::Communication) {
                continue;
            }
            std::string group;
            if (const auto pg = trace.sliceArg(i, "Process Group Name");
                pg && pg->type == ArgType::String) {
                group = std::string(pg->text);
            }
            byRank[tracks[t].rank][{ collectiveOf(trace, i), group }].emplace_back(
                trace.sliceStart(i), trace.sliceEnd(i));
        }
    }
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
        std::vector<std::int64_t> ends;
        ends.reserve(v.size());
        for (const auto& [s, e] : v) {
            ends.push_back(e);
        }
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
        const auto& groups = byRank[rank];
        // Blocking collectives first; send/receive only when there is nothing else.
        for (const bool blockingOnly : { true, false }) {
            std::vector<std::int64_t> offsets;
            std::int32_t lag = 0;
            std::size_t lagWeight = 0;
            for (const auto& [key, spans] : groups) {
                if (blockingOnly != isBlocking(key.first)) {
                    continue;
                }
                const auto ref = refGroups.find(key);
                if (ref == refGroups.end()) {
                    continue;
                }
                Match m = bestLag(endsOf(ref->second), endsOf(spans));
                if (m.offsets.size() > lagWeight) {
                    lag = m.lag;
                    lagWeight = m.offsets.size();
                }
                offsets.insert(offsets.end(), m.offsets.begin(), m.offsets.end());
            }
            if (offsets.empty()) {
                continue;
            }
            o.offsetNs = median(offsets);
            std::vector<std::int64_t> dev;
            dev.reserve(offsets.size());
            for (const auto d : offsets) {
                dev.push_back(std::llabs(d - o.offsetNs));
            }
            o.madNs = median(dev);
            o.matched = offsets.size();
            o.lag = lag;
            o.usable = o.matched >= 3;
            break;
        }
        out.push_back(o);
    }
    return out;
}

} // namespace day0::profile
