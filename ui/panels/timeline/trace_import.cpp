#include "panels/timeline/trace_import.h"

#include "actions/trace_import.h"
#include "history/recording.h"

#include <filesystem>
#include <vector>

namespace day0::ui {

ImportedTrace importAndRecordTrace(const QStringList& paths, Progress& progress,
    std::stop_token stop,
    const std::function<void(std::shared_ptr<const profile::Trace>&&)>& imported)
{
    std::vector<std::filesystem::path> files;
    for (const auto& p : paths) {
        files.emplace_back(p.toStdString());
    }
    ImportedTrace out;
    auto done = actions::importTraceFiles(
        files, {}, progress, stop, [&imported](const std::shared_ptr<const profile::Trace>& trace) {
            if (imported) {
                auto copy = trace;
                imported(std::move(copy));
            }
        });
    if (!done) {
        out.error = done.error();
        return out;
    }
    out.trace = done->trace;
    auto recorded = history::recordRunOnce(done->record);
    if (!recorded) {
        out.recordError = recorded.error().message;
    } else if (*recorded && (*recorded)->added) {
        out.runId = (*recorded)->id.value();
    }
    return out;
}

} // namespace day0::ui
