#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <filesystem>
#include <functional>
#include <stop_token>
#include <string_view>

namespace day0::profile {

/// Writes `trace` as Chrome trace JSON (JSON Object Format) that Perfetto, chrome://tracing and
/// this importer open: process/thread metadata, 'X' slices with their arguments, 's'/'f' flows
/// (bp "e"), 'i' instants and 'C' counters. Times are µs with three decimals relative to a whole
/// second written as "baseTimeNanoseconds" (Kineto's convention), so no precision is lost.
/// A single-rank trace keeps Kineto's ids (GPU pid = device, tid = stream); a multi-rank trace
/// numbers processes and names them "rank R ...". `write` receives the text in pieces.
Result<void> writeChromeJson(const Trace& trace,
    const std::function<Result<void>(std::string_view)>& write, Progress& progress,
    std::stop_token stop);

/// Writes the JSON to a file atomically (temporary file, then rename); a name ending in ".gz"
/// is gzip-compressed.
Result<void> exportChromeJson(const Trace& trace, const std::filesystem::path& path,
    Progress& progress, std::stop_token stop);

/// Appends `text` as a JSON string literal (quotes included), escaping what JSON requires and
/// replacing invalid UTF-8 with U+FFFD.
void appendJsonString(std::string& out, std::string_view text);

} // namespace day0::profile
