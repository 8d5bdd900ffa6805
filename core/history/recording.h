#pragma once

#include "base/result.h"
#include "base/strong_id.h"
#include "history/run_record.h"

#include <filesystem>
#include <optional>
#include <string>

namespace day0::history {

/// Process-wide settings for recording runs, set once by the front end after parsing its
/// options (the CLI's `--store PATH` and `--no-record`), read by recordRun().
struct RecordingOptions {
    std::filesystem::path store; ///< empty: $DAY0_STORE, else the default location
    bool enabled = true; ///< false: recordRun() writes nothing (`--no-record`)
    std::string softwareVersion; ///< put into records that leave it empty
    std::string command; ///< the command line, put into records that leave it empty
};

/// Replaces the process-wide recording options (thread-safe).
void setRecordingOptions(RecordingOptions options);
/// The current recording options (thread-safe).
RecordingOptions recordingOptions();

/// The default store file: $XDG_DATA_HOME/day0/runs.sqlite, or ~/.local/share/day0/runs.sqlite
/// when XDG_DATA_HOME is unset or not absolute (DESIGN.md §5).
std::filesystem::path defaultStorePath();

/// The store file in effect: the `--store` option, else $DAY0_STORE, else defaultStorePath().
std::filesystem::path storePath();

/// Records a finished run in the store in effect, in one transaction; the one call a command
/// needs to keep its result:
///
///     history::RunRecord record(history::RunKind::Plan);
///     record.info.modelName = spec.name;
///     record.addMetric("peak_bytes", double(peak.value), "B");
///     auto id = history::recordRun(record);   // nullopt under --no-record
///     if (!id) { printWarning(id.error().message); }
///
/// In app/cli, `cli::recordResult(record)` (command.h) does exactly this in one line. Fill the
/// record as the work goes (addMetric, addMemory, layers.add, addArtifact, addEvent, info.duration,
/// info.status/message) and record it once at the end, also when the work failed.
///
/// Fills the software version and command line from RecordingOptions when the record leaves them
/// empty. Returns nullopt without touching any file when recording is disabled. Opens the store
/// for this one call, so it is safe from any thread and from several processes at once. Errors
/// (an unwritable, corrupt or newer store; an invalid record) name the store file.
Result<std::optional<RunId>> recordRun(const RunRecord& record);

/// What recordRunOnce did.
struct Recorded {
    RunId id; ///< the run recorded, or the earlier run that holds the same result
    bool added = false; ///< false: the earlier run was kept and nothing was written
};

/// Like recordRun, for results a front end recomputes without being asked (the planner panel
/// re-plans after every model, cluster or workload change): when the newest run of the same
/// kind and model holds the same result (sameResult), writes nothing and returns that run.
/// Returns nullopt without touching any file when recording is disabled.
Result<std::optional<Recorded>> recordRunOnce(const RunRecord& record);

} // namespace day0::history
