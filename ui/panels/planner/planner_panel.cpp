#include "panels/planner/planner_panel.h"

#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/planner/layout_table_model.h"
#include "plan/memory_estimator.h"
#include "plan/plan_record.h"
#include "plan/serving.h"
#include "session/session.h"
#include "settings/preferences.h"
#include "widgets/colors.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace day0::ui {

namespace {

/// A sweep and what recording it gave.
struct Sweep {
    Result<plan::PlanResult> result;
    std::optional<RunId> runId; ///< the run recorded, when one was added
    std::string recordError;
};

// How a planned layout's memory was computed: the memory estimator on the workload the planner
// sized it for (inference: the tokens the runtime reserves per sequence), for its most loaded
// stage, every figure with its formula and inputs.
std::string memoryExplanation(const plan::ModelSummary& model, const hardware::Cluster& cluster,
    const plan::PlannerOptions& options, const plan::PlannedLayout& p)
{
    plan::Workload workload = options.workload;
    if (workload.mode == plan::Mode::Infer) {
        workload.promptLength = workload.prompt();
        workload.context = plan::reservedTokens(options.workload, options.serving.reservation);
    }
    const auto report = plan::estimateMemory(
        model, p.layout, workload, cluster, options.memory, plan::Derive::WithDerivations);
    const auto stage = std::find_if(report.perRank.begin(), report.perRank.end(),
        [&](const plan::RankMemory& r) { return r.ppStage == p.mostLoadedStage; });
    if (stage == report.perRank.end()) {
        return {};
    }
    std::string text
        = fmt::format("Memory of rank {} (stage {}), the most loaded", stage->rank, stage->ppStage);
    if (workload.mode == plan::Mode::Infer) {
        text += fmt::format(", with {} sequences of {} tokens reserved each", p.layout.microBatch,
            workload.context);
    }
    text += ":\n";
    // Never silently wrong: if the planner's own sum differs, say so beside the derivation.
    if (std::abs(double(stage->total.value) - p.maxMemory) > 1e-6 * p.maxMemory + 1.0) {
        text += fmt::format("NOTE: the planner's figure {} differs from the estimator's {} "
                            "derived below\n",
            formatBytes(Bytes(std::int64_t(p.maxMemory))), formatBytes(stage->total));
    }
    for (const auto& d : stage->derivations) {
        if (d.bytes.value != 0) {
            text += d.text();
        }
    }
    return text;
}

// Layouts no other layout beats on both memory (lower) and throughput (higher), by memory.
QTableView* makeTable(QWidget* parent, const QString& name)
{
    auto* view = new QTableView(parent);
    view->setObjectName(name);
    view->horizontalHeader()->setObjectName(name + QStringLiteral("Header"));
    view->setSortingEnabled(true);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->setAlternatingRowColors(true);
    view->setShowGrid(false);
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
    view->setWordWrap(false);
    // Size columns from the first rows only: measuring thousands of cells stalls the GUI.
    view->horizontalHeader()->setResizeContentsPrecision(16);
    return view;
}

} // namespace

PlannerPanel::PlannerPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_stepsTicket(std::make_unique<JobTicket>())
    , m_layouts(new LayoutTableModel(this))
    , m_rejections(new RejectionModel(this))
    , m_layoutProxy(new QSortFilterProxyModel(this))
    , m_layoutView(makeTable(this, QStringLiteral("plannerLayouts")))
    , m_rejectionView(makeTable(this, QStringLiteral("plannerRejections")))
    , m_scatter(new PlotWidget(this))
    , m_top(new QSpinBox(this))
    , m_headroom(new QDoubleSpinBox(this))
    , m_precision(new QComboBox(this))
    , m_overlap(new QCheckBox(tr("Overlap comms"), this))
    , m_nodeDedup(new QCheckBox(tr("Node-dedup EP"), this))
    , m_summary(new QLabel(this))
{
    auto* run = new QPushButton(tr("Plan"), this);
    run->setToolTip(tr("Sweep every layout of the cluster for the workload (F5)"));
    run->setShortcut(QKeySequence(Qt::Key_F5));
    connect(run, &QPushButton::clicked, this, &PlannerPanel::runPlanner);
    m_top->setRange(1, 5000);
    m_top->setValue(200);
    m_top->setPrefix(tr("keep "));
    m_top->setToolTip(tr("Fastest layouts kept in the table and the chart"));
    m_headroom->setRange(0, 50);
    m_headroom->setDecimals(0);
    m_headroom->setSuffix(tr(" % headroom"));
    m_headroom->setValue(Preferences().planHeadroomPercent); // setHeadroomPercent: the user's
    m_headroom->setToolTip(tr("Device memory left free beyond the estimate (the preference "
                              "planHeadroomPercent, 10% by default)"));
    m_precision->setObjectName(QStringLiteral("plannerPrecision"));
    m_precision->addItem(tr("BF16 / checkpoint dtypes"));
    m_precision->addItem(tr("FP8 weights"));
    m_precision->addItem(tr("FP8 weights + KV"));
    m_precision->setToolTip(tr("Weights of every layout: BF16 in training and the checkpoint's "
                               "own dtypes in serving, or FP8 (FP8 GEMMs in training; FP8 "
                               "weights, and optionally an FP8 KV cache, in serving)"));
    m_overlap->setObjectName(QStringLiteral("plannerOverlap"));
    m_overlap->setToolTip(tr("Training: TP collectives pipelined with the GEMMs "
                             "(--tp-comm-overlap) and the expert all-to-all overlapped with "
                             "another micro-batch (--ep-comm-overlap)"));
    connect(m_precision, &QComboBox::currentIndexChanged, this, &PlannerPanel::runPlanner);
    connect(m_overlap, &QCheckBox::toggled, this, &PlannerPanel::runPlanner);
    m_nodeDedup->setObjectName(QStringLiteral("plannerNodeDedup"));
    m_nodeDedup->setToolTip(tr("Expert dispatch sends a token once per node holding its experts "
                               "and forwards it there over NVLink (DeepSeek-V3's node-limited "
                               "dispatch, DeepEP, HybridEP; --ep-node-dedup)"));
    connect(m_nodeDedup, &QCheckBox::toggled, this, &PlannerPanel::runPlanner);
    m_summary->setObjectName(QStringLiteral("plannerSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // The controls wrap onto a second line in a narrow dock rather than widen the window.
    auto* bar = new FlowLayout;
    bar->addWidget(run, false);
    bar->addWidget(m_top, false);
    bar->addWidget(m_headroom, false);
    bar->addWidget(m_precision, false);
    bar->addWidget(m_overlap, false);
    bar->addWidget(m_nodeDedup, false);
    bar->addWidget(m_summary, true);

    m_layoutProxy->setSourceModel(m_layouts);
    m_layoutProxy->setSortRole(LayoutTableModel::SortRole);
    m_layoutView->setModel(m_layoutProxy);
    m_layoutView->sortByColumn(LayoutTableModel::Rank, Qt::AscendingOrder);
    auto* rejectionProxy = new QSortFilterProxyModel(this);
    rejectionProxy->setSourceModel(m_rejections);
    rejectionProxy->setSortRole(RejectionModel::SortRole);
    m_rejectionView->setModel(rejectionProxy);
    m_rejectionView->sortByColumn(RejectionModel::Count, Qt::DescendingOrder);
    m_rejectionView->horizontalHeader()->setStretchLastSection(true);
    m_rejectionView->setSelectionMode(QAbstractItemView::NoSelection);
    // What a layout is and what it is chosen by stay in view; the rest scrolls.
    setKeyColumns(*m_layoutView,
        { LayoutTableModel::Rank, LayoutTableModel::Tp, LayoutTableModel::Pp, LayoutTableModel::Ep,
            LayoutTableModel::Dp, LayoutTableModel::TokensPerSecond, LayoutTableModel::Memory,
            LayoutTableModel::Communication });
    setKeyColumns(*m_rejectionView, { RejectionModel::Reason, RejectionModel::Count });

    connect(m_layoutView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
        [this](const QModelIndex& current) {
            if (current.isValid()) {
                applyLayout(m_layoutProxy->mapToSource(current).row());
            }
        });
    connect(m_scatter, &PlotWidget::pointClicked, this, [this](int series, int index) {
        if (series == 0) {
            m_layoutView->selectRow(m_layoutProxy->mapFromSource(m_layouts->index(index, 0)).row());
        }
    });

    auto* tables = new QSplitter(Qt::Vertical, this);
    tables->setObjectName(QStringLiteral("plannerTableSplitter"));
    tables->addWidget(m_layoutView);
    tables->addWidget(m_rejectionView);
    tables->setSizes({ 650, 250 });
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->setObjectName(QStringLiteral("plannerSplitter"));
    split->addWidget(tables);
    split->addWidget(m_scatter);
    // The table's key columns need the room more than the chart does.
    split->setSizes({ 900, 300 });
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    m_split = split;
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    for (auto signal : { &Session::modelChanged, &Session::clusterChanged }) {
        connect(&m_session, signal, this, [this] {
            m_applyBest = !m_session.takePlanPin();
            runPlanner();
        });
    }
    connect(&m_session, &Session::workloadChanged, this, &PlannerPanel::runPlanner);
    connect(&m_session, &Session::traceChanged, this, [this](Session::TraceSlot slot) {
        if (slot == Session::TraceSlot::Primary) {
            readTraceSteps();
        }
    });
    if (m_session.summary()) {
        m_applyBest = !m_session.takePlanPin();
    }
    readTraceSteps();
    runPlanner();
}

PlannerPanel::~PlannerPanel() = default;

QString PlannerPanel::summaryText() const { return m_summary->text(); }

void PlannerPanel::setHeadroomPercent(int percent)
{
    if (percent == headroomPercent()) {
        return;
    }
    m_headroom->setValue(percent);
    if (m_session.ready()) {
        runPlanner();
    }
}

int PlannerPanel::headroomPercent() const { return int(std::lround(m_headroom->value())); }

void PlannerPanel::runPlanner()
{
    if (!m_session.ready()) {
        return;
    }
    plan::PlannerOptions options;
    options.workload = m_session.workload();
    // One workload in the session: in inference every layout serves the session's batch (the
    // memory and topology panels' case), at most; `day0 plan --max-batch` does the same.
    if (options.workload.mode == plan::Mode::Infer) {
        options.serving.maxBatch = std::max(1, options.workload.batch);
        options.requiredBatch = options.serving.maxBatch;
    }
    options.top = m_top->value();
    options.headroom = m_headroom->value() / 100.0;
    if (m_precision->currentIndex() > 0) {
        options.weights = DType::F8E4M3;
    }
    if (m_precision->currentIndex() > 1) {
        options.kv = DType::F8E4M3;
    }
    options.cost.tpCommOverlap = m_overlap->isChecked();
    options.cost.epCommOverlap = m_overlap->isChecked();
    options.cost.epNodeDedup = m_nodeDedup->isChecked();
    m_sweepSummary
        = tr("Planning %1 on %2…")
              .arg(toQString(m_session.summary()->name), toQString(m_session.cluster().name));
    m_bestStep = 0;
    showSummary();
    m_jobs.start<Sweep>(
        *m_ticket, tr("Planning layouts"), this,
        [summary = m_session.summary(), cluster = m_session.cluster(), options](
            Progress& progress, std::stop_token stop) {
            Sweep sweep { plan::planLayouts(*summary, cluster, options, progress, stop), {}, {} };
            if (sweep.result) {
                // The same record as `day0 plan`, written off the GUI thread; a sweep that
                // repeats the newest plan of this model (the workbench restarted, say) adds
                // nothing.
                auto recorded = history::recordRunOnce(
                    plan::planRunRecord(*summary, cluster, options, *sweep.result));
                if (!recorded) {
                    sweep.recordError = recorded.error().message;
                } else if (*recorded && (*recorded)->added) {
                    sweep.runId = (*recorded)->id;
                }
            }
            return sweep;
        },
        [this, mode = options.workload.mode, summary = m_session.summary(),
            cluster = m_session.cluster(), options](Sweep&& sweep) {
            m_mode = mode;
            // One estimate (well under a millisecond) when a Memory tooltip is shown.
            display(
                std::move(sweep.result), [summary, cluster, options](const plan::PlannedLayout& p) {
                    return memoryExplanation(*summary, cluster, options, p);
                });
            if (sweep.runId) {
                m_session.announceRecordedRun(sweep.runId->value());
            } else if (!sweep.recordError.empty()) {
                emit m_session.statusMessage(
                    tr("The plan was not recorded: %1").arg(toQString(sweep.recordError)));
            }
        });
}

void PlannerPanel::readTraceSteps()
{
    const auto trace = m_session.trace();
    if (!trace) {
        m_stepsTicket->cancel();
        m_steps = {};
        showSummary();
        return;
    }
    m_jobs.start<profile::StepTimes>(
        *m_stepsTicket, tr("Reading the trace's steps"), this,
        [trace](Progress&, std::stop_token) { return profile::profilerSteps(*trace); },
        [this](profile::StepTimes&& steps) {
            m_steps = std::move(steps);
            showSummary();
        });
}

void PlannerPanel::showSummary()
{
    QString text = m_sweepSummary;
    if (m_bestStep > 0 && !m_steps.steps.empty()) {
        const double error = m_steps.errorOf(m_bestStep);
        text += tr("<br>Measured in the open trace (%1): %2; the best layout is estimated at %3 "
                   "(%4%5%)")
                    .arg(m_session.traceSource().toHtmlEscaped(),
                        toQString(m_steps.describe()).toHtmlEscaped(),
                        durationText(Seconds(m_bestStep)),
                        error >= 0 ? QStringLiteral("+") : QString(),
                        QString::number(100.0 * error, 'f', 1));
    }
    m_summary->setText(text);
}

void PlannerPanel::display(Result<plan::PlanResult>&& result,
    std::function<std::string(const plan::PlannedLayout&)> memoryWhy)
{
    if (!result) {
        m_layouts->setLayouts({}, m_mode, 0);
        m_rejections->setGroups({});
        m_sweepSummary = QStringLiteral("<span style='color:%1'>%2</span>")
                             .arg(errorColor().name(), toQString(result.error().message));
        m_bestStep = 0;
        showSummary();
        showScatter();
        emit planned();
        return;
    }
    auto& r = *result;
    const QLocale locale;
    QString text
        = tr("<b>%1</b> feasible of %2 layouts evaluated in %3")
              .arg(locale.toString(qlonglong(r.feasible)), locale.toString(qlonglong(r.evaluated)),
                  durationText(Seconds(r.seconds)));
    if (!r.layouts.empty()) {
        const auto& best = r.layouts.front();
        text += tr(" · best: %1 at %2 tokens/s")
                    .arg(toQString(plan::formatPlan(best.layout.toPlan())),
                        countText(best.tokensPerSecond));
    }
    // How far the time figures can be trusted, from the held-out published measurements.
    text += tr("<br>Time figures: %1").arg(toQString(r.timeError.describe()).toHtmlEscaped());
    if (!r.layouts.empty() && r.layouts.front().timeError.cases != r.timeError.cases) {
        text += tr("; of the best layout: %1")
                    .arg(toQString(r.layouts.front().timeError.describe()).toHtmlEscaped());
    }
    m_sweepSummary = text;
    m_bestStep = m_mode == plan::Mode::Train && !r.layouts.empty() ? r.layouts.front().stepTime : 0;
    showSummary();
    QStringList notes;
    for (const auto& note : r.notes) {
        notes << QStringLiteral("• ") + toQString(note);
    }
    m_summary->setToolTip(notes.join(QLatin1Char('\n')));
    m_layouts->setLayouts(
        std::move(r.layouts), m_mode, m_session.cluster().deviceMemory(), std::move(memoryWhy));
    m_rejections->setGroups(std::move(r.rejected));
    m_layoutView->resizeColumnsToContents();
    m_rejectionView->resizeColumnsToContents();
    m_rejectionView->setColumnWidth(RejectionModel::Reason,
        std::min(420, m_rejectionView->columnWidth(RejectionModel::Reason)));
    showScatter();
    if (m_applyBest && !m_layouts->layouts().empty()) {
        m_applyBest = false;
        m_layoutView->selectRow(m_layoutProxy->mapFromSource(m_layouts->index(0, 0)).row());
    }
    emit planned();
}

void PlannerPanel::applyLayout(int row)
{
    const auto& layouts = m_layouts->layouts();
    if (row < 0 || row >= int(layouts.size())) {
        return;
    }
    m_scatter->setHighlightedPoint(0, row);
    m_session.setPlan(layouts[std::size_t(row)].layout.toPlan());
}

void PlannerPanel::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    const auto wanted = width() < kSideBySideWidth ? Qt::Vertical : Qt::Horizontal;
    if (m_split->orientation() != wanted) {
        m_split->setOrientation(wanted);
        m_split->setSizes(
            wanted == Qt::Vertical ? QList<int> { 620, 380 } : QList<int> { 900, 300 });
    }
}

void PlannerPanel::showScatter()
{
    const auto& layouts = m_layouts->layouts();
    m_scatter->clear();
    m_scatter->setTitle(tr("Memory against throughput (%1 fastest layouts)").arg(layouts.size()));
    if (layouts.empty()) {
        m_scatter->setNote(tr("no feasible layout"));
        m_scatter->rescaleAndReplot();
        return;
    }
    PlotSeries all { tr("feasible layouts"), categoricalColor(0), {}, {}, false, false, 7, true,
        {} };
    for (const auto& l : layouts) {
        all.x << l.maxMemory;
        all.y << l.tokensPerSecond;
        all.pointLabels << tr("%1\n%2 tokens/s · %3 · %4")
                               .arg(toQString(plan::formatPlan(l.layout.toPlan())),
                                   countText(l.tokensPerSecond),
                                   bytesText(Bytes(std::int64_t(l.maxMemory))),
                                   durationText(Seconds(l.stepTime)));
    }
    PlotSeries front { tr("Pareto front"), categoricalColor(1), {}, {}, false, true, 6, true, {} };
    for (const auto i : plan::paretoFront(layouts)) {
        front.x << layouts[i].maxMemory;
        front.y << layouts[i].tokensPerSecond;
        front.pointLabels << all.pointLabels[qsizetype(i)];
    }
    m_scatter->setScatter({ all });
    m_scatter->setLineSeries({ front });
    m_scatter->setByteAxis(PlotWidget::Axis::X);
    m_scatter->setAxisFormat(PlotWidget::Axis::Y, AxisFormat::Count);
    m_scatter->setAxisLabel(PlotWidget::Axis::X, tr("memory of the most loaded rank"));
    m_scatter->setAxisLabel(PlotWidget::Axis::Y,
        m_mode == plan::Mode::Train ? tr("tokens trained per second")
                                    : tr("output tokens per second"));
    m_scatter->addVerticalLine(
        { m_session.cluster().deviceMemory(), tr("device memory"), errorColor() });
    m_scatter->rescaleAndReplot();
}

} // namespace day0::ui
