#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <QStringList>

#include <functional>
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

/// Imports `paths` (one trace; several files are several ranks) with `day0 trace import
/// FILE…`'s action (actions::importTraceFiles) and records it as that verb does. The trace goes
/// to `imported` as soon as it is built, before the files are hashed for the record. Opening
/// the same unchanged files again records nothing (history::recordRunOnce: the newest trace run
/// of those files holds the same counts), and a disabled store records nothing; a failed or
/// cancelled import is not recorded. Runs on a worker thread.
ImportedTrace importAndRecordTrace(const QStringList& paths, Progress& progress,
    std::stop_token stop,
    const std::function<void(std::shared_ptr<const profile::Trace>&&)>& imported = {});

} // namespace day0::ui
