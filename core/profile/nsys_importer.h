#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/import_options.h"
#include "profile/trace_builder.h"

#include <filesystem>
#include <stop_token>
#include <string>

namespace day0::profile {

/// Adds an Nsight Systems SQLite export (schema 3.16 to 3.24; also gzip-compressed) to
/// `builder` as one source: kernels, memcpy, memset, CUDA runtime/driver calls, synchronization
/// and NVTX ranges (marks as instants), with launch flows by (process, correlation id).
/// Columns are looked up by name, so versions that add columns import unchanged; tables that
/// are absent are simply empty (nsys creates them lazily). Host names, user names and paths in
/// the export's metadata are never read.
Result<void> importNsysSqlite(const std::filesystem::path& path, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop);

/// Same, for an export already in memory (e.g. inflated from .sqlite.gz); `name` is for messages.
Result<void> importNsysSqliteBytes(std::string bytes, const std::string& name,
    TraceBuilder& builder, const ImportOptions& options, Progress& progress, std::stop_token stop);

} // namespace day0::profile
