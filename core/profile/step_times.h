#pragma once

#include "profile/trace.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::profile {

/// The training steps a trace marks: the PyTorch profiler's "ProfilerStep#N" ranges on host
/// threads (its GPU-side copies and other annotations are not steps).
struct StepTimes {
    struct Step {
        std::int32_t rank = 0;
        std::int64_t number = 0; ///< N of "ProfilerStep#N"
        std::int64_t durationNs = 0;
    };
    std::vector<Step> steps; ///< one per rank and step number, in the trace's order
    /// Median duration in seconds; 0 when there are no steps.
    [[nodiscard]] double medianSeconds() const;
    /// (estimate − median) / median of an estimated step time, in seconds.
    [[nodiscard]] double errorOf(double estimateSeconds) const;
    /// "median 1.23 s over 12 ProfilerStep ranges (2 ranks)", or why there is none.
    [[nodiscard]] std::string describe() const;
};
StepTimes profilerSteps(const Trace& trace);

} // namespace day0::profile
