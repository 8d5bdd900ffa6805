#include "panels/timeline/trace_import.h"

#include "history/recording.h"
#include "pipeline/records.h"
#include "profile/importer.h"

#include <QFileInfo>

#include <chrono>
#include <filesystem>
#include <vector>

namespace day0::ui {

ImportedTrace importAndRecordTrace(
    const QStringList& paths, Progress& progress, std::stop_token stop)
{
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::filesystem::path> files;
    std::vector<std::string> absolute;
    for (const auto& p : paths) {
        files.emplace_back(p.toStdString());
        absolute.push_back(QFileInfo(p).absoluteFilePath().toStdString());
    }
    auto trace = files.size() == 1 ? profile::importTrace(files.front(), {}, progress, stop)
                                   : profile::importTraces(files, {}, progress, stop);
    ImportedTrace out;
    if (!trace) {
        out.error = trace.error();
        return out;
    }
    out.trace = std::make_shared<const profile::Trace>(std::move(*trace));
    if (stop.stop_requested()) {
        return out;
    }
    const double seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto recorded
        = history::recordRunOnce(pipeline::traceRunRecord(*out.trace, absolute, "import", seconds));
    if (!recorded) {
        out.recordError = recorded.error().message;
    } else if (*recorded && (*recorded)->added) {
        out.runId = (*recorded)->id.value();
    }
    return out;
}

} // namespace day0::ui
