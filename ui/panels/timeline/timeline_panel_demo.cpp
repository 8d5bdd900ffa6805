// TimelinePanel: the embedded default's demo trace (the CPU trace of a run of the shrunk Kimi-K2
// demo checkpoint), produced in a background job when the panel is first shown.
#include "actions/demo.h"
#include "jobs/job_runner.h"
#include "panels/timeline/timeline_panel.h"
#include "widgets/formatting.h"

#include <QLabel>
#include <QProgressBar>
#include <QShowEvent>

namespace day0::ui {

void TimelinePanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (m_session.demo() && !m_demoStarted && !m_session.trace(Session::TraceSlot::Primary)) {
        runDemo();
    }
}

void TimelinePanel::runDemo()
{
    m_demoStarted = true;
    using TraceResult = Result<std::shared_ptr<const profile::Trace>>;
    const QString title = tr("Tracing a demo run of %1")
                              .arg(toQString(actions::demoCheckpointPath().filename().string()));
    m_loadingTitle = title;
    setBusy(true, title + QStringLiteral("…"));
    m_jobs.start<TraceResult>(
        *m_loadTicket[0], title, this,
        [](Progress& progress, std::stop_token stop) -> TraceResult {
            auto trace = actions::demoRunTrace(progress, stop);
            if (!trace) {
                return trace.error();
            }
            return std::make_shared<const profile::Trace>(std::move(*trace));
        },
        [this](TraceResult&& result) {
            setBusy(false,
                tr("The demo run could not be traced. Open a PyTorch profiler (Kineto) trace or "
                   "an Nsight Systems SQLite export."));
            if (!result) {
                m_error->setText(toQString(result.error().message));
                m_error->setVisible(showsEmptyState());
                emit m_session.statusMessage(toQString(result.error().message));
                return;
            }
            m_session.setTrace(Session::TraceSlot::Primary, std::move(*result),
                tr("demo run of %1 (CPU)")
                    .arg(toQString(actions::demoCheckpointPath().filename().string())));
        });
}

} // namespace day0::ui
