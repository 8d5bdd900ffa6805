// "Run with this plan" of the topology panel: the session's plan on in-process ranks as a
// background job, per-rank progress on the rank items, traffic per link after the run; each
// finished run is recorded as `day0 run --plan … --ranks in-process` records it.
#include "actions/in_process_layout.h"
#include "actions/run_plan.h"
#include "checkpoint/sharding.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "parallel/run.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QComboBox>
#include <QLabel>
#include <QTimer>
#include <QToolButton>
#include <fmt/format.h>

#include <filesystem>
#include <optional>

namespace day0::ui {

namespace {

constexpr std::int64_t kRunTokens = 4;

struct RunOutcome {
    QString error;
    QString summary;
    std::vector<parallel::NodeTraffic> traffic;
    std::optional<qint64> runId; ///< the run in the store
    QString recordError;
};

RunOutcome runOnRanks(const std::string& modelSource, const checkpoint::ShardLayout& layout,
    const std::string& backend, int gpusPerNode, parallel::RankProgress* ranks, Progress& progress,
    std::stop_token stop)
{
    RunOutcome out;
    if (auto probe = openBackend(backend); !probe) {
        out.error = toQString(probe.error().message);
        return out;
    }
    auto checkpointDir = actions::checkpointForPlan(modelSource, layout, progress, stop);
    if (!checkpointDir) {
        out.error = toQString(checkpointDir.error().message);
        return out;
    }
    // `day0 run <checkpoint> --plan … --ranks in-process`'s action and record.
    actions::PlanRunRequest request;
    request.checkpoint = checkpointDir->string();
    request.layout = layout;
    request.newTokens = kRunTokens;
    for (int d = 0; d < layout.dp; ++d) {
        request.prompts.push_back({ 1 + d % 7, 2, 3, 5, 8 });
    }
    if (backend != "cpu") {
        // Every in-process rank its own backend object on the one device.
        request.backendFor = [backend](int) { return openBackend(backend); };
    }
    auto run = actions::runPlanInProcess(request, progress, stop, ranks);
    if (!run) {
        out.error = toQString(run.error().message);
        return out;
    }
    const parallel::ParallelRunResult* r = &run->result;
    out.traffic = parallel::nodeTraffic(r->events, layout, gpusPerNode);
    const auto& table = run->communication;
    if (!stop.stop_requested()) {
        // Written off the GUI thread; running the plan again is a new run.
        auto recorded = history::recordRun(run->record);
        if (!recorded) {
            out.recordError = toQString(recorded.error().message);
        } else if (*recorded) {
            out.runId = (*recorded)->value();
        }
    }
    const auto& total = table.back();
    out.summary
        = QObject::tr("ran %1 on %2 in-process ranks (%3): %4 collectives, %5 moved, "
                      "%6 communication per rank (model %7), generated %8")
              .arg(toQString(parallel::layoutString(layout, 1)))
              .arg(r->ranks.size())
              .arg(toQString(checkpointDir->filename().string()))
              .arg(total.calls)
              .arg(bytesText(Bytes(total.bytes)))
              .arg(toQString(formatDuration(Seconds(total.measuredSeconds))))
              .arg(r->machine.measured ? toQString(formatDuration(Seconds(total.predictedSeconds)))
                                       : QObject::tr("n/a"))
              .arg(r->sequences.empty()
                      ? QString()
                      : toQString(fmt::format("{}", fmt::join(r->sequences[0].generated, " "))));
    if (!r->dispatch.ops.empty()) {
        out.summary += QObject::tr("; on %1: %2 operator calls native, %3 on the CPU reference")
                           .arg(toQString(r->dispatch.backend))
                           .arg(r->nativeCalls())
                           .arg(r->fallbackCalls());
    }
    return out;
}

} // namespace

QString TopologyPanel::runStatus() const { return m_runStatus->text(); }

void TopologyPanel::runPlan()
{
    // The plan as the planner proposes it (dp 0 is the rest of the cluster), with the defaults
    // of the session's mode; a plan beyond the in-process ranks runs scaled to its shape.
    auto fitted = actions::inProcessLayout(
        m_session.plan(), m_session.workload().mode, m_session.cluster().worldSize());
    if (!fitted) {
        m_runStatus->setText(toQString(fitted.error().message));
        return;
    }
    const checkpoint::ShardLayout* layout = &fitted->layout;
    if (auto runnable = parallel::checkRunnable(*layout); !runnable) {
        m_runStatus->setText(toQString(runnable.error().message));
        return;
    }
    m_scaleNote = fitted->scaled ? toQString(fitted->note) : QString();
    const int world = layout->worldSize();
    m_rankProgress = std::make_shared<parallel::RankProgress>();
    for (int r = 0; r < world; ++r) {
        m_rankProgress->ranks.push_back(std::make_unique<Progress>());
    }
    m_scene->setLinkTraffic({});
    m_scene->setRankProgress(std::vector<double>(std::size_t(world), 0.0));
    m_runStatus->setText(m_scaleNote.isEmpty()
            ? tr("running on %1 in-process ranks…").arg(world)
            : tr("running on %1 in-process ranks (%2)…").arg(world).arg(m_scaleNote));
    m_run->setEnabled(false);
    m_cancel->setEnabled(true);
    m_progressTimer->start();
    m_jobs.start<RunOutcome>(
        *m_runTicket, tr("Running the plan"), this,
        [source = m_session.modelSource().toStdString(), layout = *layout,
            backend = fromQString(m_backend->currentData().toString()),
            gpusPerNode = m_session.cluster().gpusPerNode,
            ranks = m_rankProgress](Progress& progress, std::stop_token stop) {
            return runOnRanks(source, layout, backend, gpusPerNode, ranks.get(), progress, stop);
        },
        [this](RunOutcome&& outcome) {
            m_progressTimer->stop();
            m_run->setEnabled(true);
            m_cancel->setEnabled(false);
            if (!outcome.error.isEmpty()) {
                m_runStatus->setText(outcome.error);
                return;
            }
            std::vector<double> done(m_rankProgress->ranks.size(), 1.0);
            m_scene->setRankProgress(std::move(done));
            m_scene->setLinkTraffic(std::move(outcome.traffic));
            m_runStatus->setText(m_scaleNote.isEmpty()
                    ? outcome.summary
                    : outcome.summary + QStringLiteral("\n") + m_scaleNote);
            if (outcome.runId) {
                m_session.announceRecordedRun(*outcome.runId);
            } else if (!outcome.recordError.isEmpty()) {
                emit m_session.statusMessage(
                    tr("The run was not recorded: %1").arg(outcome.recordError));
            }
        });
}

void TopologyPanel::cancelRun()
{
    m_runTicket->cancel();
    m_progressTimer->stop();
    m_run->setEnabled(true);
    m_cancel->setEnabled(false);
    m_scene->setRankProgress({});
    m_runStatus->setText(tr("run cancelled"));
}

void TopologyPanel::pollRunProgress()
{
    if (!m_rankProgress) {
        return;
    }
    std::vector<double> fractions;
    for (const auto& p : m_rankProgress->ranks) {
        const auto total = p->total();
        fractions.push_back(total > 0 ? double(p->done()) / double(total) : 0.0);
    }
    m_scene->setRankProgress(std::move(fractions));
}

} // namespace day0::ui
