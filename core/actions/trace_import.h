#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "profile/import_options.h"
#include "profile/trace.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// An imported trace and the record of its import.
struct TraceImportOutcome {
    std::shared_ptr<const profile::Trace> trace;
    double seconds = 0.0; ///< the import, without the record
    /// traceRunRecord(action "import"): counts, span, the files as artifacts (hashed).
    history::RunRecord record;
};

/// Called with the trace as soon as it is imported, before the record is made (the files are
/// hashed for it): a viewer can draw the timeline while the rest is done.
using TraceImported = std::function<void(const std::shared_ptr<const profile::Trace>&)>;

/// `day0 trace import FILE…` and the timeline panel's Open: imports `files` (Kineto/Chrome
/// JSON or Nsight Systems SQLite, plain or gzip; several files are several ranks) into one
/// trace, hands it to `imported` (may be empty), then builds the record. Errors name the file;
/// problems that only cost some events are the trace's warnings. Cancellable; a cancelled
/// import gives Error::cancelled() after `imported` has not been called.
Result<TraceImportOutcome> importTraceFiles(const std::vector<std::filesystem::path>& files,
    const profile::ImportOptions& options, Progress& progress, std::stop_token stop,
    const TraceImported& imported = {});

} // namespace day0::actions
