#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <QStringList>

#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace day0::ui {

/// A trace the timeline imported, and what recording it did.
struct ImportedTrace {
    std::shared_ptr<const profile::Trace> trace; ///< null when the import failed
    std::optional<Error> error; ///< why it failed (names the file)
    std::optional<qint64> runId; ///< the run this import added to the store
    std::string recordError; ///< why it could not be recorded, empty when it was
};

/// Imports `paths` (one trace; several files are several ranks) and records the import as
/// `day0 trace import FILE…` does (pipeline::traceRunRecord, action "import", the files as
/// absolute paths). Opening the same unchanged files again records nothing
/// (history::recordRunOnce: the newest trace run of that file holds the same counts), and a
/// disabled store records nothing; a failed or cancelled import is not recorded. Runs on a
/// worker thread.
ImportedTrace importAndRecordTrace(
    const QStringList& paths, Progress& progress, std::stop_token stop);

} // namespace day0::ui
