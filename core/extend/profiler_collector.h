#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <stop_token>
#include <string>

namespace day0::extend {

/// A profiler plugin's collector (CUPTI on NVIDIA GPUs): records what the process runs between
/// start() and stop() and returns it as a trace. One per process; start/stop on one thread.
class ProfilerCollector {
public:
    virtual ~ProfilerCollector() = default;

    /// "cupti".
    [[nodiscard]] virtual std::string name() const = 0;
    /// Starts recording. Errors say why not (no driver, another profiler already attached).
    virtual Result<void> start() = 0;
    /// Stops recording and converts what was recorded into a trace.
    virtual Result<profile::Trace> stop(Progress& progress, std::stop_token stop) = 0;
};

} // namespace day0::extend
