#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/import_options.h"
#include "profile/trace.h"
#include "profile/trace_builder.h"

#include <filesystem>
#include <stop_token>
#include <vector>

namespace day0::profile {

/// Formats importTrace recognises (by content, not by file name).
enum class TraceFormat { ChromeJson, NsysSqlite, Unknown };

/// Looks at the first bytes (after gzip inflation when compressed).
Result<TraceFormat> detectTraceFormat(const std::filesystem::path& path);

/// Adds one file (Kineto/Chrome JSON or Nsight Systems SQLite, each plain or gzip) to `builder`.
Result<void> importInto(TraceBuilder& builder, const std::filesystem::path& path,
    const ImportOptions& options, Progress& progress, std::stop_token stop);

/// Imports one trace file. Errors (exit code 2 in the CLI) name the file; problems that only
/// cost some events are returned as Trace::warnings().
Result<Trace> importTrace(const std::filesystem::path& path, const ImportOptions& options,
    Progress& progress, std::stop_token stop);

/// Imports several files (typically one per rank) into one trace. With options.rank set, the
/// files are numbered from that rank upwards.
Result<Trace> importTraces(const std::vector<std::filesystem::path>& paths,
    const ImportOptions& options, Progress& progress, std::stop_token stop);

} // namespace day0::profile
