#include "panels/serving/serving_panel.h"

#include "actions/run.h"
#include "base/progress.h"
#include "exec/checkpoint_weights.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/serving/bench_level_model.h"
#include "panels/serving/local_server_box.h"
#include "panels/serving/request_timeline.h"
#include "panels/serving/stage_table.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/elided_label.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

namespace day0::ui {

namespace {

enum Target { kSessionCheckpoint, kUrl };

QDoubleSpinBox* sloBox(QWidget* parent, const QString& tip)
{
    auto* box = new QDoubleSpinBox(parent);
    box->setRange(0, 1e7);
    box->setDecimals(0);
    box->setSuffix(QStringLiteral(" ms"));
    box->setSpecialValueText(QObject::tr("none"));
    box->setToolTip(tip);
    return box;
}

QString timelineEmptyText()
{
    return QObject::tr("Each request of a level appears here as a bar from send to end (the wait "
                       "for the first token, then the decode with a tick per token; failed "
                       "requests crossed) once the level has run; select a level row to see its "
                       "requests; press Run");
}

} // namespace

/// What a bench job hands back to the GUI thread.
struct ServingPanel::Outcome {
    Result<actions::StagedBenchOutcome> bench = Error::internal("not run");
    bool record = false;
    std::optional<RunId> runId;
    std::string recordError;
};

ServingPanel::ServingPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_progressState(std::make_shared<Progress>())
{
    buildUi();
    followSession();
    connect(&m_session, &Session::modelChanged, this, [this] {
        followSession();
        startDemoIfWanted();
    });
    if (auto* dock = qobject_cast<QDockWidget*>(parent)) {
        m_dock = dock;
        connect(dock, &QDockWidget::visibilityChanged, this, [this](bool visible) {
            m_dockShown = visible;
            startDemoIfWanted();
        });
    }
}

ServingPanel::~ServingPanel() { m_ticket->cancel(); }

void ServingPanel::buildUi()
{
    m_target = new QComboBox(this);
    m_target->addItem(tr("Session checkpoint, served here"));
    m_serverBox = new LocalServerBox(m_session, m_jobs, this);
    m_target->addItem(tr("Endpoint URL"));
    m_target->setToolTip(tr("The session's checkpoint served in-process by the OpenAI server on a "
                            "loopback port for the run (by the standing local server while it "
                            "runs), or any OpenAI-compatible endpoint"));
    m_checkpoint = new ElidedLabel(this);
    m_url = new QLineEdit(this);
    m_url->setPlaceholderText(QStringLiteral("http://127.0.0.1:8000"));
    m_url->setEnabled(false);
    connect(m_target, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_url->setEnabled(index == kUrl);
        m_checkpoint->setEnabled(index == kSessionCheckpoint || m_check->isChecked());
    });
    auto* targetRow = new QHBoxLayout;
    targetRow->addWidget(m_target);
    targetRow->addWidget(m_url, 1);

    m_stages = new StageTable(this);
    auto* add = new QPushButton(tr("Add stage"), this);
    auto* remove = new QPushButton(tr("Remove"), this);
    auto* defaults = new QPushButton(tr("Defaults"), this);
    connect(add, &QPushButton::clicked, m_stages, &StageTable::addStage);
    connect(remove, &QPushButton::clicked, m_stages, &StageTable::removeSelected);
    connect(defaults, &QPushButton::clicked, this,
        [this] { m_stages->setStages(actions::defaultBenchStages()); });

    m_ttft = sloBox(this, tr("Goodput SLO: a request is good when its TTFT is at most this"));
    m_tpot = sloBox(this, tr("Goodput SLO: a request is good when its TPOT is at most this"));
    m_e2el = sloBox(this, tr("Goodput SLO: a request is good when its E2EL is at most this"));
    m_check = new QCheckBox(tr("Check tokens"), this);
    m_check->setChecked(true);
    m_check->setToolTip(tr("Compare every answer's greedy tokens (and log-probabilities) with the "
                           "reference engine on the session's checkpoint (bench serve --check); "
                           "the first divergence per request and level"));
    m_runButton = new QPushButton(tr("Run"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_cancelButton->setEnabled(false);
    connect(m_runButton, &QPushButton::clicked, this, &ServingPanel::run);
    connect(m_cancelButton, &QPushButton::clicked, this, &ServingPanel::cancel);

    auto* controls = new QWidget(this);
    auto* flow = new FlowLayout(controls);
    for (auto* w : { static_cast<QWidget*>(add), static_cast<QWidget*>(remove),
             static_cast<QWidget*>(defaults) }) {
        flow->addWidget(w, false);
    }
    const auto labelled = [this](const QString& text, QWidget* field) {
        auto* box = new QWidget(this);
        auto* row = new QHBoxLayout(box);
        row->setContentsMargins(0, 0, 0, 0);
        row->addWidget(new QLabel(text, box));
        row->addWidget(field);
        return box;
    };
    flow->addWidget(labelled(tr("TTFT ≤"), m_ttft), false);
    flow->addWidget(labelled(tr("TPOT ≤"), m_tpot), false);
    flow->addWidget(labelled(tr("E2EL ≤"), m_e2el), false);
    flow->addWidget(m_check, false);
    flow->addWidget(m_runButton, false);
    flow->addWidget(m_cancelButton, false);

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setFormat(tr("idle"));
    m_summary = new QLabel(this);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_model = new BenchLevelModel(this);
    m_resultView = new QTableView(this);
    m_resultView->setModel(m_model);
    m_resultView->verticalHeader()->setVisible(false);
    m_resultView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_resultView->setWordWrap(false);
    m_resultView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    setKeyColumns(*m_resultView,
        { BenchLevelModel::Level, BenchLevelModel::OutputRate, BenchLevelModel::TtftP99,
            BenchLevelModel::TpotP99, BenchLevelModel::Failed },
        BenchLevelModel::Level);

    m_pareto = new PlotWidget(this);
    m_pareto->setTitle(tr("Tokens/s per user against tokens/s"));
    m_pareto->setAxisLabel(PlotWidget::Axis::X, tr("output tokens/s"));
    m_pareto->setAxisLabel(PlotWidget::Axis::Y, tr("tokens/s per user"));
    m_latency = new PlotWidget(this);
    m_latency->setTitle(tr("Latency against load"));
    m_latency->setAxisLabel(PlotWidget::Axis::X, tr("level"));
    m_latency->setAxisLabel(PlotWidget::Axis::Y, tr("ms"));
    auto* charts = new QSplitter(Qt::Horizontal, this);
    charts->addWidget(m_pareto);
    charts->addWidget(m_latency);
    m_timeline = new RequestTimeline(this);
    m_timeline->setEmptyText(timelineEmptyText());
    connect(m_resultView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
        [this](
            const QModelIndex& current) { showTimeline(current.isValid() ? current.row() : -1); });

    auto* form = new QFormLayout;
    form->addRow(tr("Target"), targetRow);
    form->addRow(tr("Checkpoint"), m_checkpoint);
    form->addRow(tr("Local server"), m_serverBox);

    auto* top = new QWidget(this);
    auto* topLayout = new QVBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    topLayout->addLayout(form);
    topLayout->addWidget(m_stages, 1);
    topLayout->addWidget(controls);
    topLayout->addWidget(m_progress);
    topLayout->addWidget(m_summary);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(top);
    split->addWidget(m_resultView);
    split->addWidget(charts);
    split->addWidget(m_timeline);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 3);
    split->setStretchFactor(3, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(split, 1);

    m_timer = new QTimer(this);
    m_timer->setInterval(50);
    connect(m_timer, &QTimer::timeout, this, &ServingPanel::pollProgress);
    refreshCharts();
}

void ServingPanel::followSession()
{
    const QString source = m_session.modelSource();
    if (source.isEmpty()) {
        m_checkpoint->setFullText(tr("no model open"));
    } else if (exec::holdsWeights(fromQString(source))) {
        m_checkpoint->setFullText(source);
    } else {
        m_checkpoint->setFullText(tr("%1 (its shrunk demo checkpoint: no weights)").arg(source));
    }
    if (m_model->rowCount() == 0) {
        m_summary->setText(tr("Press Run to load-test the target level by level: each level adds "
                              "a row of latency percentiles, throughput, goodput, errors and the "
                              "token check, and a point to the curves below."));
    }
}

bool ServingPanel::running() const { return m_ticket->busy(); }

void ServingPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    startDemoIfWanted();
}

void ServingPanel::startDemoIfWanted()
{
    // As the precision panel's demo: seconds of CPU, once, only for a panel someone looks at and
    // a model that runs shrunk (a real checkpoint or an endpoint waits for Run). Not recorded:
    // timings differ every time, so each launch would add a run. A docked panel is looked at
    // while its tab is the current one (a tab behind another keeps isVisible()).
    const bool shown = m_dock != nullptr ? m_dockShown : isVisible();
    const QString source = m_session.modelSource();
    if (m_demoDone || !shown || source.isEmpty() || exec::holdsWeights(fromQString(source))
        || running() || m_model->rowCount() > 0) {
        return;
    }
    m_demoDone = true;
    actions::StagedBenchRequest request;
    request.checkpoint = fromQString(source);
    request.stages = actions::defaultBenchStages();
    request.check = true;
    startJob(std::move(request), false);
}

void ServingPanel::run()
{
    QString error;
    auto stages = m_stages->stages(&error);
    const bool external = m_target->currentIndex() == kUrl;
    const QString url = m_url->text().trimmed();
    if (!stages) {
        m_summary->setText(error);
        return;
    }
    if (external && !url.startsWith(QStringLiteral("http://"))) {
        m_summary->setText(tr("Type the endpoint's URL, e.g. http://127.0.0.1:8000 (https is not "
                              "supported)."));
        return;
    }
    if (m_session.modelSource().isEmpty() && (!external || m_check->isChecked())) {
        m_summary->setText(tr("Open a model or checkpoint first (File ▸ Open), or choose an "
                              "endpoint URL without the token check."));
        return;
    }
    actions::StagedBenchRequest request;
    request.url = external ? fromQString(url) : std::string();
    request.checkpoint = fromQString(m_session.modelSource());
    request.stages = std::move(*stages);
    request.workload.slos.ttftMs = m_ttft->value();
    request.workload.slos.tpotMs = m_tpot->value();
    request.workload.slos.e2elMs = m_e2el->value();
    request.check = m_check->isChecked();
    startJob(std::move(request), true);
}

void ServingPanel::startJob(actions::StagedBenchRequest request, bool record)
{
    const quint64 generation = ++m_generation;
    m_model->clear();
    m_timeline->setEmptyText(timelineEmptyText());
    m_levelCount = int(request.stages.size());
    m_recorded = 0;
    refreshCharts();
    m_runButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    // A standing local server serves the session's checkpoint: the bench holds it until it ends.
    std::shared_ptr<actions::LocalServer> server;
    if (request.url.empty() && m_serverBox->server()) {
        server = m_serverBox->server();
        request.url = server->url();
        m_serverBox->setBenchRunning(true);
    }
    m_summary->setText(record ? tr("Running %1 levels…").arg(m_levelCount)
                              : tr("Running the default levels on the demo checkpoint (not "
                                   "recorded; press Run to record a bench)…"));
    m_progressState->setTotal(0);
    m_progressState->setDone(0);
    m_progressState->setStage("starting");
    m_timer->start();
    using Work = std::function<Outcome(
        Progress&, std::stop_token, const std::function<void(actions::BenchLevelOutcome &&)>&)>;
    Work work = [request, record, server, state = m_progressState](Progress&, std::stop_token stop,
                    const std::function<void(actions::BenchLevelOutcome &&)>& stage) {
        Outcome out;
        out.record = record;
        auto req = request;
        if (!req.checkpoint.empty() && (req.url.empty() || req.check)) {
            auto checkpoint = actions::checkpointForSource(req.checkpoint, *state, stop);
            if (!checkpoint) {
                out.bench = checkpoint.error();
                return out;
            }
            req.checkpoint = checkpoint->string();
        }
        out.bench = actions::runStagedBench(
            req, *state, stop, [&stage](const actions::BenchLevelOutcome& level) {
                stage(actions::BenchLevelOutcome(level));
            });
        if (out.bench && server) {
            out.bench->record.setProperty("served", "local server");
        }
        if (out.bench && record) {
            auto recorded = history::recordRun(out.bench->record);
            if (!recorded) {
                out.recordError = recorded.error().message;
            } else if (*recorded) {
                out.runId = **recorded;
            }
        }
        return out;
    };
    m_jobs.startStaged<actions::BenchLevelOutcome, Outcome>(
        *m_ticket, tr("Serving bench"), this, std::move(work),
        [this, generation](
            actions::BenchLevelOutcome&& level) { levelDone(generation, std::move(level)); },
        [this, generation](Outcome&& outcome) { deliver(generation, std::move(outcome)); });
}

void ServingPanel::cancel()
{
    if (!m_ticket->busy()) {
        return;
    }
    m_ticket->cancel();
    setIdle();
    m_progress->setFormat(tr("cancelled"));
    m_summary->setText(tr("Cancelled after %1 of %2 levels; nothing was recorded.")
                           .arg(m_model->rowCount())
                           .arg(m_levelCount));
    emit finished(3);
}

void ServingPanel::setIdle()
{
    m_timer->stop();
    m_runButton->setEnabled(true);
    m_cancelButton->setEnabled(false);
    m_serverBox->setBenchRunning(false);
}

void ServingPanel::levelDone(quint64 generation, actions::BenchLevelOutcome&& level)
{
    if (generation != m_generation) {
        return;
    }
    m_model->append(level);
    refreshCharts();
    if (!m_resultView->selectionModel()->currentIndex().isValid()) {
        showTimeline(m_model->rowCount() - 1); // the newest level until one is selected
    }
}

void ServingPanel::showTimeline(int row)
{
    const auto& levels = m_model->levels();
    if (row < 0 || std::size_t(row) >= levels.size()) {
        m_timeline->setEmptyText(timelineEmptyText());
        return;
    }
    const auto& level = levels[std::size_t(row)];
    m_timeline->setLevel(
        tr("level %1 (%2)").arg(row + 1).arg(toQString(level.label)), level.result);
}

void ServingPanel::pollProgress()
{
    const auto total = m_progressState->total();
    const QString stage = toQString(m_progressState->stage());
    const int level = std::min(m_model->rowCount() + 1, m_levelCount);
    const QString prefix = tr("level %1 of %2").arg(level).arg(m_levelCount);
    if (total > 0) {
        m_progress->setValue(int(1000.0 * m_progressState->fraction()));
        m_progress->setFormat(QStringLiteral("%1: %2 — %p%").arg(prefix, stage));
    } else {
        m_progress->setValue(0);
        m_progress->setFormat(stage.isEmpty() ? prefix : stage);
    }
}

void ServingPanel::deliver(quint64 generation, Outcome&& outcome)
{
    if (generation != m_generation) {
        return;
    }
    setIdle();
    if (!outcome.bench) {
        m_progress->setFormat(tr("could not run"));
        m_summary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(errorColor().name(),
                                   toQString(outcome.bench.error().message).toHtmlEscaped()));
        emit finished(outcome.bench.error().code == ErrorCode::Cancelled ? 3 : 2);
        return;
    }
    const auto& bench = *outcome.bench;
    int failed = 0;
    int sent = 0;
    QString divergence;
    for (const auto& level : bench.levels) {
        failed += level.result.failed;
        sent += int(level.result.requests.size());
        if (divergence.isEmpty() && level.check && !level.check->divergences.empty()) {
            divergence = tr("Level %1 diverges from the reference: %2")
                             .arg(toQString(level.label), checkText(level));
        }
    }
    const bool ok = failed == 0 && divergence.isEmpty();
    m_progress->setValue(1000);
    m_progress->setFormat(ok ? tr("done") : tr("failed"));
    QString text = tr("%1 levels against %2: %3 of %4 requests failed.")
                       .arg(bench.levels.size())
                       .arg(toQString(bench.url))
                       .arg(failed)
                       .arg(sent);
    if (!divergence.isEmpty()) {
        text += QLatin1Char(' ') + divergence;
    } else if (!bench.levels.empty() && bench.levels.front().check) {
        text += QLatin1Char(' ') + tr("Every answer's tokens equal the reference's.");
    }
    if (outcome.runId) {
        m_recorded = outcome.runId->value();
        text += QLatin1Char(' ') + tr("Recorded as run %1.").arg(m_recorded);
        m_session.announceRecordedRun(m_recorded);
    } else if (!outcome.recordError.empty()) {
        text += QLatin1Char(' ')
            + tr("The bench was not recorded: %1").arg(toQString(outcome.recordError));
    } else if (!outcome.record) {
        text += QLatin1Char(' ') + tr("(Demo run, not recorded.)");
    }
    m_summary->setText(ok ? text
                          : QStringLiteral("<span style='color:%1'>%2</span>")
                                .arg(errorColor().name(), text.toHtmlEscaped()));
    emit finished(ok ? 0 : 1);
}

void ServingPanel::refreshCharts()
{
    m_pareto->clear();
    m_latency->clear();
    m_pareto->setTitle(tr("Tokens/s per user against tokens/s"));
    m_pareto->setAxisLabel(PlotWidget::Axis::X, tr("output tokens/s"));
    m_pareto->setAxisLabel(PlotWidget::Axis::Y, tr("tokens/s per user"));
    m_latency->setTitle(tr("Latency against load"));
    m_latency->setAxisLabel(PlotWidget::Axis::X, tr("level"));
    m_latency->setAxisLabel(PlotWidget::Axis::Y, tr("ms"));
    m_latency->setLogScale(PlotWidget::Axis::Y, true); // TTFT and TPOT differ by orders
    const auto& levels = m_model->levels();
    if (levels.empty()) {
        m_pareto->setNote(tr("Each level's output tokens/s against tokens/s per user appears "
                             "here; press Run"));
        m_latency->setNote(tr("TTFT and TPOT percentiles per level appear here; press Run"));
        m_pareto->rescaleAndReplot();
        m_latency->rescaleAndReplot();
        return;
    }
    PlotSeries curve { tr("levels"), categoricalColor(0), {}, {}, false, true, 7.0, false, {} };
    for (const auto& level : levels) {
        if (level.result.perUser.count == 0) {
            continue;
        }
        curve.x << level.result.outputThroughput;
        curve.y << level.result.perUser.mean;
        curve.pointLabels << toQString(level.label);
    }
    m_pareto->setLineSeries({ curve });
    m_pareto->setLegendVisible(false);
    QVector<PlotSeries> latency;
    int colour = 0;
    for (const char* metric : { "ttft", "tpot" }) {
        for (const double p : { 50.0, 99.0 }) {
            PlotSeries s {
                QStringLiteral("%1 p%2").arg(QString::fromLatin1(metric).toUpper()).arg(p),
                categoricalColor(colour++), {}, {}, p == 99.0, true, 6.0, true, {}
            };
            for (std::size_t i = 0; i < levels.size(); ++i) {
                const double v = levelPercentile(levels[i].result, metric, p);
                if (!std::isnan(v)) {
                    s.x << double(i + 1);
                    s.y << v;
                    s.pointLabels << toQString(levels[i].label);
                }
            }
            latency << s;
        }
    }
    m_latency->setLineSeries(latency);
    m_latency->setLegendVisible(true);
    m_pareto->rescaleAndReplot();
    m_latency->rescaleAndReplot();
}

} // namespace day0::ui
