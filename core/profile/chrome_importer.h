#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/byte_source.h"
#include "profile/import_options.h"
#include "profile/trace_builder.h"

#include <stop_token>

namespace day0::profile {

/// Adds the events of a Chrome trace (JSON Array or Object format; any Kineto dialect: string
/// or integer pids/tids, integer or fractional µs timestamps, baseTimeNanoseconds, 2021 and
/// current category and flow names, distributedInfo) to `builder` as one source. Streams through
/// the file with simdjson on batches of events; malformed events are skipped with a warning.
/// Progress counts file bytes. Host and user names in the metadata are never read.
Result<void> importChromeJson(ByteSource& source, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop);

/// Parses a Chrome-trace timestamp or duration in µs as written ("1661203462598738",
/// "4458676522690.655", "1.5e3") into ns without going through a double when it is decimal.
bool parseMicrosToNanos(std::string_view text, std::int64_t& ns);

} // namespace day0::profile
