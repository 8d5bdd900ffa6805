#pragma once

#include "profile/nccl.h"
#include "profile/trace.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::profile {

/// Collective kernels of one rank grouped by collective and naming scheme. ns.
struct CollectiveStat {
    std::int32_t rank = 0;
    Collective collective = Collective::Unknown;
    NcclNaming naming = NcclNaming::Other;
    std::string algorithm; ///< e.g. "RING_LL" (algorithm_protocol of the first kernel seen)
    std::size_t count = 0;
    std::int64_t total = 0;
    std::int64_t max = 0;
};

/// The collective one communication slice performs: from its kernel name (all three NCCL
/// schemes), refined by Kineto's "Collective name" argument for generic kernels or other names.
Collective collectiveOf(const Trace& trace, SliceIndex slice);

/// Statistics of every Communication slice on GPU streams, by rank, collective and scheme.
std::vector<CollectiveStat> collectiveStatistics(const Trace& trace);

/// A suggested clock offset for one rank, found by matching the ends of its collectives with the
/// reference rank's (blocking collectives end almost together on every member). Suggested only:
/// Trace::applyClockOffset applies it when the user asks.
struct ClockOffset {
    std::int32_t rank = 0;
    std::int32_t reference = 0;
    std::int64_t offsetNs = 0; ///< add to this rank's times to line it up with the reference
    std::int64_t madNs = 0; ///< median absolute deviation of the matched ends (uncertainty)
    std::size_t matched = 0; ///< collective pairs used
    std::int32_t lag = 0; ///< typical index shift between the two ranks' collective sequences
    bool usable = false; ///< enough matches (3 or more) to trust the estimate
};

/// One entry per rank other than the reference (the lowest rank unless given), ascending.
/// Within each (collective, "Process Group Name" argument) group, every pair of end times votes
/// for an offset; the densest 100 µs window wins, then ends are paired one to one within 50 µs of
/// it and the median of the pairs is the suggestion (MAD its uncertainty). Capture windows that
/// start at different iterations still match. Blocking collectives are preferred over
/// send/receive, which only pair up when their peers' kernels are in both traces.
std::vector<ClockOffset> suggestClockAlignment(const Trace& trace, std::int32_t reference = -1);

} // namespace day0::profile
