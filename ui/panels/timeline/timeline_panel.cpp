#include "panels/timeline/timeline_panel.h"

#include "jobs/job_runner.h"
#include "panels/timeline/kernel_stats_model.h"
#include "panels/timeline/slice_details.h"
#include "panels/timeline/timeline_colors.h"
#include "panels/timeline/timeline_sketch.h"
#include "panels/timeline/trace_diff_pane.h"
#include "panels/timeline/trace_import.h"
#include "panels/timeline/track_tree_model.h"
#include "profile/importer.h"
#include "profile/kernel_stats.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"

#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>

namespace day0::ui {

namespace {

using Slot = Session::TraceSlot;

// The statistics table's category choices, in combo order.
const std::vector<std::pair<const char*, std::vector<profile::Category>>>& categoryChoices()
{
    using C = profile::Category;
    static const std::vector<std::pair<const char*, std::vector<C>>> choices = {
        { QT_TR_NOOP("GPU work"), {} },
        { QT_TR_NOOP("Kernels"), { C::Kernel } },
        { QT_TR_NOOP("Communication"), { C::Communication } },
        { QT_TR_NOOP("Copies and sets"), { C::Memcpy, C::Memset } },
        { QT_TR_NOOP("CPU ops and runtime"), { C::CpuOp, C::Runtime } },
        { QT_TR_NOOP("Everything"),
            { C::Kernel, C::Memcpy, C::Memset, C::Sync, C::Communication, C::CpuOp, C::Runtime,
                C::Annotation, C::Other } },
    };
    return choices;
}

// Indices of categoryChoices().
constexpr int kGpuWorkChoice = 0;
constexpr int kCpuOpsChoice = 4;

QString ns(std::int64_t value) { return durationText(Seconds(double(value) * 1e-9)); }

bool isTraceFile(const QString& path)
{
    const QString lower = path.toLower();
    return lower.endsWith(QStringLiteral(".json")) || lower.endsWith(QStringLiteral(".gz"))
        || lower.endsWith(QStringLiteral(".sqlite"));
}

} // namespace

TimelinePanel::TimelinePanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_statsTicket(std::make_unique<JobTicket>())
    , m_tracks(new TrackTreeModel(this))
    , m_stats(new KernelStatsModel(this))
    , m_statsProxy(new QSortFilterProxyModel(this))
    , m_stack(new QStackedWidget(this))
    , m_view(new TimelineView(this))
    , m_details(new SliceDetails(this))
{
    m_loadTicket[0] = std::make_unique<JobTicket>();
    m_loadTicket[1] = std::make_unique<JobTicket>();
    setAcceptDrops(true);
    m_view->setModel(m_tracks);
    m_statsProxy->setSourceModel(m_stats);
    m_statsProxy->setSortRole(KernelStatsModel::SortRole);
    m_statsProxy->setFilterKeyColumn(KernelStatsModel::NameColumn);
    m_statsProxy->setFilterRole(KernelStatsModel::NameRole);
    m_statsProxy->setFilterCaseSensitivity(Qt::CaseInsensitive);

    auto* content = new QSplitter(Qt::Vertical, this);
    content->setObjectName(QStringLiteral("timelineSplitter"));
    content->setChildrenCollapsible(false);
    content->addWidget(m_view);
    auto* bottom = new QSplitter(Qt::Horizontal, content);
    bottom->setChildrenCollapsible(false);
    // Kernel statistics, and with a comparison open, the kernel-by-kernel diff of A and B.
    auto* tables = new QTabWidget(bottom);
    tables->setObjectName(QStringLiteral("timelineTables"));
    tables->setDocumentMode(true);
    tables->addTab(createStatsPane(), tr("Kernels"));
    m_diff = new TraceDiffPane(m_session, m_jobs, tables);
    const int diffTab = tables->addTab(m_diff, tr("A → B Diff"));
    connect(m_diff, &TraceDiffPane::diffChanged, this, [tables, diffTab](bool available) {
        tables->setTabEnabled(diffTab, available);
        tables->setCurrentIndex(available ? diffTab : 0);
    });
    tables->setTabEnabled(diffTab, false);
    bottom->addWidget(tables);
    bottom->addWidget(m_details);
    bottom->setSizes({ 640, 360 });
    content->addWidget(bottom);
    content->setStretchFactor(0, 3);
    content->setStretchFactor(1, 2);
    content->setSizes({ 560, 300 });

    m_stack->addWidget(createEmptyState());
    m_stack->addWidget(content);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(createToolbar());
    layout->addWidget(m_stack, 1);

    connect(m_view, &TimelineView::sliceSelected, this, &TimelinePanel::sliceSelected);
    connect(m_view, &TimelineView::rangeChanged, this, &TimelinePanel::rangeChanged);
    connect(m_details, &SliceDetails::followRequested, this,
        [this](const SliceRef& target) { m_view->selectSlice(target, true); });
    connect(m_statsView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
        &TimelinePanel::statsRowSelected);
    connect(&m_session, &Session::traceChanged, this, &TimelinePanel::tracesChanged);
    connect(&m_session, &Session::traceOpenRequested, this,
        [this](const QStringList& paths, Slot slot) {
            if (auto* dock = qobject_cast<QDockWidget*>(parentWidget())) {
                dock->show();
                dock->raise();
            }
            if (paths.isEmpty()) {
                askAndOpen(slot);
            } else {
                openTraces(paths, slot);
            }
        });
    connect(&m_session, &Session::timeRangeSelected, this, [this](const Session::TimeRange& r) {
        const auto& trace = m_traces.traces[std::size_t(r.slot)];
        if (r.empty() || !trace) {
            m_view->setRange(std::nullopt);
            return;
        }
        const std::int64_t origin = m_traces.origins[std::size_t(r.slot)];
        m_view->setRange(std::pair(r.start - origin, r.end - origin));
    });
    // A job cancelled from the status bar never delivers: leave the busy state then. (Delivery
    // follows jobFinished at once, so by the next turn of the event loop it has happened.)
    connect(&m_jobs, &JobRunner::jobFinished, this, [this] {
        QTimer::singleShot(0, this, [this] {
            const auto active = m_jobs.activeJobs();
            const bool running = std::any_of(active.begin(), active.end(),
                [this](const JobInfo& job) { return job.title == m_loadingTitle; });
            if (importing() && !running) {
                setBusy(false);
                m_error->setText(tr("The import was cancelled."));
                m_error->show();
            }
        });
    });
    tracesChanged();
}

TimelinePanel::~TimelinePanel() = default;

QWidget* TimelinePanel::createToolbar()
{
    auto* bar = new QToolBar(this);
    bar->setObjectName(QStringLiteral("timelineToolbar"));
    bar->setIconSize(QSize(12, 12));
    bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    auto* open = bar->addAction(tr("Open Trace…"), this, [this] { askAndOpen(Slot::Primary); });
    open->setToolTip(tr("Import a Kineto/Chrome JSON trace or an Nsight Systems SQLite export"));
    m_compareAction
        = bar->addAction(tr("Compare With…"), this, [this] { askAndOpen(Slot::Comparison); });
    m_compareAction->setToolTip(tr("Stack a second trace below this one, both from their start"));
    m_closeCompareAction = bar->addAction(tr("Close Comparison"), this,
        [this] { m_session.setTrace(Slot::Comparison, nullptr, {}); });
    bar->addSeparator();
    m_fitAction = bar->addAction(tr("Fit"), m_view, &TimelineView::zoomToFit);
    m_fitAction->setToolTip(tr("Show everything (0)"));
    m_zoomRangeAction = bar->addAction(tr("Zoom to Range"), this, [this] {
        if (const auto r = m_view->range()) {
            m_view->zoomTo(r->first, r->second);
        }
    });
    m_zoomRangeAction->setToolTip(tr("Zoom to the selected time range (F)"));
    m_legendSeparator = bar->addSeparator();
    // The legend: what each colour means.
    auto* legend = new QWidget(bar);
    auto* legendLayout = new QHBoxLayout(legend);
    legendLayout->setContentsMargins(8, 0, 8, 0);
    legendLayout->setSpacing(10);
    for (int c = 0; c < profile::kCategoryCount - 1; ++c) {
        const auto category = profile::Category(c);
        auto* item = new QLabel(legend);
        item->setText(QStringLiteral("<span style=\"color:%1; font-size:large\">■</span> %2")
                          .arg(categoryColor(category).name(),
                              toQString(std::string(profile::categoryName(category)))));
        legendLayout->addWidget(item);
    }
    m_legendAction = bar->addWidget(legend);
    return bar;
}

QWidget* TimelinePanel::createEmptyState()
{
    auto* page = new QWidget(this);
    page->setObjectName(QStringLiteral("timelineEmptyState"));
    auto* outer = new QVBoxLayout(page);
    auto* column = new QVBoxLayout();
    column->setSpacing(12);
    auto* title = new QLabel(tr("No trace loaded"), page);
    QFont big = title->font();
    big.setPointSizeF(big.pointSizeF() * 1.6);
    big.setBold(true);
    title->setFont(big);
    title->setAlignment(Qt::AlignCenter);
    m_emptyText = new QLabel(emptyStateText(), page);
    m_emptyText->setWordWrap(true);
    m_emptyText->setAlignment(Qt::AlignCenter);
    m_openButton = new QPushButton(tr("Open Trace…"), page);
    m_openButton->setObjectName(QStringLiteral("openTraceButton"));
    m_openButton->setDefault(true);
    m_openButton->setMinimumWidth(180);
    connect(m_openButton, &QPushButton::clicked, this, [this] { askAndOpen(Slot::Primary); });
    auto* hint = new QLabel(tr("or File ▸ Open Trace… (Ctrl+Shift+T), drop files here, or start "
                               "<tt>day0-workbench --trace FILE</tt>"),
        page);
    hint->setAlignment(Qt::AlignCenter);
    hint->setWordWrap(true);
    hint->setForegroundRole(QPalette::PlaceholderText);
    m_busy = new QProgressBar(page);
    m_busy->setRange(0, 0);
    m_progressTimer = new QTimer(this);
    m_progressTimer->setInterval(50);
    connect(m_progressTimer, &QTimer::timeout, this, &TimelinePanel::pollImport);
    m_busy->setTextVisible(false);
    m_busy->setMaximumWidth(320);
    m_cancelButton = new QPushButton(tr("Cancel"), page);
    connect(m_cancelButton, &QPushButton::clicked, this, [this] {
        m_loadTicket[0]->cancel();
        setBusy(false);
    });
    m_error = new QLabel(page);
    m_error->setWordWrap(true);
    m_error->setAlignment(Qt::AlignCenter);
    m_error->setStyleSheet(QStringLiteral("color: #d63b3b;"));
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    auto* sketch = new TimelineSketch(page);
    for (QWidget* w : std::initializer_list<QWidget*> {
             sketch, title, m_emptyText, m_openButton, hint, m_busy, m_cancelButton, m_error }) {
        // Labels take the column's width (so they wrap); the rest keep their size, centred.
        column->addWidget(w, 0, qobject_cast<QLabel*>(w) ? Qt::Alignment() : Qt::AlignHCenter);
    }
    outer->addStretch(2);
    outer->addLayout(column);
    outer->addStretch(3);
    setBusy(false);
    return page;
}

QWidget* TimelinePanel::createStatsPane()
{
    auto* pane = new QWidget(this);
    auto* layout = new QVBoxLayout(pane);
    layout->setContentsMargins(6, 4, 0, 0);
    layout->setSpacing(4);
    auto* header = new QHBoxLayout();
    m_statsTitle = new QLabel(pane);
    m_statsTitle->setObjectName(QStringLiteral("statsTitle"));
    m_statsTitle->setTextFormat(Qt::RichText);
    m_statsCategories = new QComboBox(pane);
    m_statsCategories->setObjectName(QStringLiteral("statsCategories"));
    for (const auto& choice : categoryChoices()) {
        m_statsCategories->addItem(tr(choice.first));
    }
    connect(
        m_statsCategories, &QComboBox::activated, this, [this] { m_statsCategoryChosen = true; });
    m_statsTrace = new QComboBox(pane);
    m_statsTrace->addItem(tr("Trace A"));
    m_statsTrace->addItem(tr("Trace B"));
    m_filter = new QLineEdit(pane);
    m_filter->setPlaceholderText(tr("Filter names…"));
    m_filter->setClearButtonEnabled(true);
    m_filter->setMaximumWidth(220);
    header->addWidget(m_statsTitle, 1);
    header->addWidget(m_statsTrace);
    header->addWidget(m_statsCategories);
    header->addWidget(m_filter);
    layout->addLayout(header);

    m_statsView = new QTreeView(pane);
    m_statsView->setObjectName(QStringLiteral("kernelStats"));
    m_statsView->setModel(m_statsProxy);
    m_statsView->setRootIsDecorated(false);
    m_statsView->setUniformRowHeights(true);
    // Names that differ in their template arguments differ at the end: keep both ends.
    m_statsView->setTextElideMode(Qt::ElideMiddle);
    m_statsView->setAlternatingRowColors(true);
    m_statsView->setSortingEnabled(true);
    m_statsView->sortByColumn(KernelStatsModel::TotalColumn, Qt::DescendingOrder);
    m_statsView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_statsView->setSelectionMode(QAbstractItemView::SingleSelection);
    m_statsView->header()->setStretchLastSection(false);
    m_statsView->header()->setSectionResizeMode(KernelStatsModel::NameColumn, QHeaderView::Stretch);
    for (int c = KernelStatsModel::CategoryColumn; c < KernelStatsModel::ColumnCount; ++c) {
        m_statsView->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    }
    setKeyColumns(*m_statsView,
        { KernelStatsModel::NameColumn, KernelStatsModel::CountColumn,
            KernelStatsModel::TotalColumn, KernelStatsModel::SelfColumn,
            KernelStatsModel::ShareColumn });
    layout->addWidget(m_statsView, 1);

    connect(
        m_statsCategories, &QComboBox::currentIndexChanged, this, &TimelinePanel::recomputeStats);
    connect(m_statsTrace, &QComboBox::currentIndexChanged, this, &TimelinePanel::recomputeStats);
    connect(m_filter, &QLineEdit::textChanged, m_statsProxy,
        &QSortFilterProxyModel::setFilterFixedString);
    return pane;
}

void TimelinePanel::pollImport()
{
    // The import's own progress, as the status bar shows it.
    for (const auto& job : m_jobs.activeJobs()) {
        if (job.title != m_loadingTitle) {
            continue;
        }
        const auto total = job.progress->total();
        m_busy->setRange(0, total > 0 ? 1000 : 0);
        if (total > 0) {
            m_busy->setValue(int(job.progress->fraction() * 1000));
        }
        const std::string stage = job.progress->stage();
        m_emptyText->setText(stage.empty()
                ? QString(m_loadingTitle + QStringLiteral("…"))
                : QString(m_loadingTitle + QStringLiteral(": ") + toQString(stage)));
        return;
    }
}

void TimelinePanel::setBusy(bool busy, const QString& text)
{
    if (busy) {
        m_busy->setRange(0, 0);
        m_progressTimer->start();
    } else {
        m_progressTimer->stop();
    }
    m_busy->setVisible(busy);
    m_cancelButton->setVisible(busy);
    m_openButton->setEnabled(!busy);
    if (busy) {
        m_error->hide();
        m_emptyText->setText(text);
    } else if (!text.isEmpty()) {
        m_emptyText->setText(text);
    }
}

Session::TraceSlot TimelinePanel::statsSlot() const
{
    return m_statsTrace->currentIndex() == 1 && m_traces.traces[1] ? Slot::Comparison
                                                                   : Slot::Primary;
}

bool TimelinePanel::showsEmptyState() const { return m_stack->currentIndex() == 0; }

bool TimelinePanel::importing() const { return !m_busy->isHidden(); }

void TimelinePanel::askAndOpen(Slot slot)
{
    const QStringList paths = QFileDialog::getOpenFileNames(this,
        slot == Slot::Primary ? tr("Open a trace") : tr("Open a trace to compare with"), {},
        tr("Traces (*.json *.json.gz *.gz *.sqlite);;All files (*)"));
    if (!paths.isEmpty()) {
        openTraces(paths, slot);
    }
}

void TimelinePanel::openTraces(const QStringList& paths, Slot slot)
{
    if (paths.isEmpty()) {
        return;
    }
    QStringList names;
    for (const auto& p : paths) {
        names << QFileInfo(p).fileName();
    }
    const QString label = names.join(QStringLiteral(", "));
    const QString title = tr("Importing %1").arg(label);
    if (slot == Slot::Primary && !m_session.trace(Slot::Primary)) {
        m_loadingTitle = title;
        setBusy(true, title + QStringLiteral("…"));
    }
    // In two stages: the timeline as soon as the trace is built, then the record of the import
    // (the files hashed).
    using TracePtr = std::shared_ptr<const profile::Trace>;
    m_jobs.startStaged<TracePtr, ImportedTrace>(
        *m_loadTicket[int(slot)], title, this,
        [paths](Progress& progress, std::stop_token stop,
            const std::function<void(TracePtr &&)>& stage) {
            return importAndRecordTrace(paths, progress, stop, stage);
        },
        [this, slot, label](TracePtr&& trace) {
            setBusy(false, emptyStateText());
            const auto& warnings = trace->warnings();
            m_session.setTrace(slot, trace, label);
            emit m_session.statusMessage(warnings.empty()
                    ? tr("Opened %1").arg(label)
                    : tr("Opened %1 with %n warning(s): %2", nullptr, int(warnings.size()))
                          .arg(label, toQString(warnings.front())));
        },
        [this, label](ImportedTrace&& imported) {
            if (!imported.trace) {
                setBusy(false, emptyStateText());
                const QString message = toQString(imported.error->message);
                m_error->setText(message);
                m_error->setVisible(showsEmptyState());
                emit m_session.statusMessage(message);
                emit m_session.traceOpenFailed(message);
                return;
            }
            if (imported.runId) {
                m_session.announceRecordedRun(*imported.runId);
            } else if (!imported.recordError.empty()) {
                emit m_session.statusMessage(tr("The import of %1 was not recorded: %2")
                                                 .arg(label, toQString(imported.recordError)));
            }
        });
}

QString TimelinePanel::emptyStateText() const
{
    return tr(
        "Open a PyTorch profiler (Kineto) trace — <tt>.json</tt> or <tt>.json.gz</tt> — or an "
        "Nsight Systems SQLite export (<tt>.sqlite</tt>). Several files at once are read as "
        "one trace, one rank each.");
}

void TimelinePanel::tracesChanged()
{
    m_traces.set(0, m_session.trace(Slot::Primary));
    m_traces.set(1, m_session.trace(Slot::Comparison));
    m_tracks->setTraces(m_traces.traces[0], m_traces.traces[1],
        m_session.traceSource(Slot::Primary), m_session.traceSource(Slot::Comparison));
    m_view->setTraces(m_traces);
    m_details->showSlice(m_traces, {});
    const bool any = m_traces.traces[0] || m_traces.traces[1];
    m_stack->setCurrentIndex(any ? 1 : 0);
    m_compareAction->setEnabled(any);
    m_fitAction->setEnabled(any);
    m_zoomRangeAction->setEnabled(any && m_view->range().has_value());
    m_legendAction->setVisible(any);
    m_legendSeparator->setVisible(any);
    m_closeCompareAction->setEnabled(m_traces.traces[1] != nullptr);
    m_statsTrace->setVisible(m_traces.traces[0] && m_traces.traces[1]);
    // The statistics default to what the trace has: its GPU work, else its CPU ops (a CPU
    // trace such as the demo run's would show an empty table), until the user picks.
    if (const auto& primary = m_traces.traces[0];
        primary && primary.get() != m_statsDefaultFor && !m_statsCategoryChosen) {
        m_statsDefaultFor = primary.get();
        const auto counts = primary->counts();
        bool gpu = false;
        for (int c = 0; c < profile::kCategoryCount; ++c) {
            gpu = gpu || (counts.byCategory[c] > 0 && profile::isGpuWork(profile::Category(c)));
        }
        const QSignalBlocker quiet(m_statsCategories);
        m_statsCategories->setCurrentIndex(gpu ? kGpuWorkChoice : kCpuOpsChoice);
    }
    if (!m_traces.traces[1] && m_statsTrace->currentIndex() == 1) {
        m_statsTrace->setCurrentIndex(0); // recomputes
        return;
    }
    recomputeStats();
}

void TimelinePanel::recomputeStats()
{
    const Slot slot = statsSlot();
    const auto trace = m_traces.traces[std::size_t(slot)];
    updateStatsTitle();
    if (!trace) {
        m_statsTicket->cancel();
        m_stats->setStats({});
        return;
    }
    profile::KernelStatsOptions options;
    options.categories
        = categoryChoices()[std::size_t(std::max(0, m_statsCategories->currentIndex()))].second;
    if (const auto range = m_view->range()) {
        const std::int64_t origin = m_traces.origins[std::size_t(slot)];
        options.rangeStart = origin + range->first;
        options.rangeEnd = origin + range->second;
    }
    m_jobs.start<std::vector<profile::KernelStat>>(
        *m_statsTicket, tr("Kernel statistics"), this,
        [trace, options](
            Progress&, std::stop_token) { return profile::kernelStatistics(*trace, options); },
        [this](std::vector<profile::KernelStat>&& stats) {
            m_syncing = true;
            m_stats->setStats(std::move(stats));
            m_syncing = false;
            updateStatsTitle();
            // Keep the selected slice's row selected across recomputations.
            sliceSelected(m_view->selectedSlice());
        });
}

void TimelinePanel::updateStatsTitle()
{
    const auto range = m_view->range();
    const QString scope = range
        ? tr("%1 – %2 (%3)")
              .arg(ns(range->first), ns(range->second), ns(range->second - range->first))
        : tr("whole trace");
    m_statsTitle->setText(
        tr("<b>Statistics</b> · %1 · %n name(s)", nullptr, m_stats->rowCount()).arg(scope));
}

void TimelinePanel::rangeChanged(qint64 start, qint64 end)
{
    m_zoomRangeAction->setEnabled(end > start);
    const Slot slot = statsSlot();
    const std::int64_t origin = m_traces.origins[std::size_t(slot)];
    m_session.selectTimeRange(end > start
            ? Session::TimeRange { slot, origin + start, origin + end }
            : Session::TimeRange {});
    recomputeStats();
}

void TimelinePanel::sliceSelected(const SliceRef& slice)
{
    m_details->showSlice(m_traces, slice);
    const auto& trace = slice.valid() ? m_traces.traces[std::size_t(slice.slot)] : nullptr;
    if (!trace) {
        return;
    }
    m_view->setHighlight(slice.slot, trace->sliceName(slice.slice));
    if (m_syncing || int(slice.slot) != int(statsSlot())) {
        return;
    }
    m_syncing = true;
    const int row = m_stats->rowOfName(std::string(trace->sliceNameText(slice.slice)));
    if (row >= 0) {
        const QModelIndex index = m_statsProxy->mapFromSource(m_stats->index(row, 0));
        m_statsView->selectionModel()->setCurrentIndex(
            index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        m_statsView->scrollTo(index);
    } else {
        m_statsView->selectionModel()->clearSelection();
    }
    m_syncing = false;
}

void TimelinePanel::statsRowSelected()
{
    if (m_syncing) {
        return;
    }
    const QModelIndex current = m_statsView->selectionModel()->currentIndex();
    const Slot slot = statsSlot();
    const auto& trace = m_traces.traces[std::size_t(slot)];
    if (!current.isValid() || !trace) {
        return;
    }
    const std::string name = current.data(KernelStatsModel::NameRole).toString().toStdString();
    const profile::StringId id = trace->strings().find(name);
    if (id == profile::StringTable::kNotFound) {
        return;
    }
    m_view->setHighlight(int(slot), id);
    // Select an instance: the longest in the window, else the longest in the statistics' range.
    const std::int64_t origin = m_traces.origins[std::size_t(slot)];
    auto longest = [&](std::int64_t t0, std::int64_t t1) {
        profile::SliceIndex best = profile::kNoSlice;
        for (const auto s : profile::findSlicesNamed(*trace, id, t0, t1)) {
            if (best == profile::kNoSlice || trace->sliceDuration(s) > trace->sliceDuration(best)) {
                best = s;
            }
        }
        return best;
    };
    profile::SliceIndex pick
        = longest(origin + m_view->windowStart(), origin + m_view->windowEnd());
    if (pick == profile::kNoSlice) {
        const auto range = m_view->range();
        pick = range ? longest(origin + range->first, origin + range->second)
                     : longest(INT64_MIN, INT64_MAX);
    }
    if (pick != profile::kNoSlice) {
        m_syncing = true;
        m_view->selectSlice({ int(slot), pick }, true);
        m_syncing = false;
    }
}

void TimelinePanel::dragEnterEvent(QDragEnterEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && isTraceFile(urls.first().toLocalFile())) {
        event->acceptProposedAction();
    }
}

void TimelinePanel::dropEvent(QDropEvent* event)
{
    QStringList paths;
    for (const auto& url : event->mimeData()->urls()) {
        if (isTraceFile(url.toLocalFile())) {
            paths << url.toLocalFile();
        }
    }
    if (!paths.isEmpty()) {
        event->acceptProposedAction();
        openTraces(paths, Slot::Primary);
    }
}

} // namespace day0::ui
