#pragma once

#include "profile/trace.h"
#include "profile/trace_builder.h"

namespace day0::profile {

/// Adds everything of a finished trace to `builder` as further sources: its sources, devices,
/// tracks, slices (names, categories, correlation and External ids, arguments), flows, instants,
/// counters and warnings. Timestamps are kept, so traces on one clock (CpuTracer's and CUPTI's
/// are both Unix-epoch ns) line up: a run's host scopes and the GPU work they launched in one
/// timeline.
void appendTrace(TraceBuilder& builder, const Trace& trace);

} // namespace day0::profile
