#include "actions/trace_import.h"

#include "actions/records.h"
#include "profile/importer.h"

#include <chrono>

namespace day0::actions {

namespace fs = std::filesystem;

Result<TraceImportOutcome> importTraceFiles(const std::vector<fs::path>& files,
    const profile::ImportOptions& options, Progress& progress, std::stop_token stop,
    const TraceImported& imported)
{
    const auto started = std::chrono::steady_clock::now();
    auto trace = profile::importTraces(files, options, progress, stop);
    if (!trace) {
        return trace.error();
    }
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    TraceImportOutcome out;
    out.trace = std::make_shared<const profile::Trace>(std::move(*trace));
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (imported) {
        imported(out.trace);
    }
    const std::vector<std::string> given(files.begin(), files.end());
    out.record = traceRunRecord(*out.trace, given, "import", out.seconds);
    return out;
}

} // namespace day0::actions
