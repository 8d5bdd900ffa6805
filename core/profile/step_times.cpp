#include "profile/step_times.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>
#include <utility>

namespace day0::profile {

namespace {

constexpr std::string_view kStepPrefix = "ProfilerStep#";

/// N of "ProfilerStep#N", or -1 when the name is not a step.
std::int64_t stepNumber(std::string_view name)
{
    if (!name.starts_with(kStepPrefix)) {
        return -1;
    }
    const auto digits = name.substr(kStepPrefix.size());
    std::int64_t n = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    return ec == std::errc() && end == digits.data() + digits.size() && n >= 0 ? n : -1;
}

} // namespace

StepTimes profilerSteps(const Trace& trace)
{
    StepTimes out;
    std::set<std::pair<std::int32_t, std::int64_t>> seen; // a step counts once per rank
    const auto& tracks = trace.tracks();
    for (TrackId t = 0; t < tracks.size(); ++t) {
        if (tracks[t].kind != TrackKind::Thread) {
            continue;
        }
        const auto [first, last] = trace.trackSlices(t);
        for (SliceIndex i = first; i < last; ++i) {
            const std::int64_t n = stepNumber(trace.sliceNameText(i));
            const std::int64_t d = trace.sliceDuration(i);
            if (n < 0 || d <= 0 || !seen.emplace(tracks[t].rank, n).second) {
                continue;
            }
            out.steps.push_back({ tracks[t].rank, n, d });
        }
    }
    return out;
}

double StepTimes::medianSeconds() const
{
    if (steps.empty()) {
        return 0.0;
    }
    std::vector<std::int64_t> d;
    d.reserve(steps.size());
    for (const auto& s : steps) {
        d.push_back(s.durationNs);
    }
    std::sort(d.begin(), d.end());
    const std::size_t m = d.size() / 2;
    const double median = d.size() % 2 ? double(d[m]) : 0.5 * (double(d[m - 1]) + double(d[m]));
    return median * 1e-9;
}

double StepTimes::errorOf(double estimateSeconds) const
{
    const double m = medianSeconds();
    return (estimateSeconds - m) / m;
}

std::string StepTimes::describe() const
{
    if (steps.empty()) {
        return "no ProfilerStep#N range on a host thread";
    }
    std::set<std::int32_t> ranks;
    for (const auto& s : steps) {
        ranks.insert(s.rank);
    }
    return fmt::format("median {:.4g} s over {} ProfilerStep range{} ({} rank{})", medianSeconds(),
        steps.size(), steps.size() == 1 ? "" : "s", ranks.size(), ranks.size() == 1 ? "" : "s");
}

} // namespace day0::profile
