#include "panels/runs/runs_panel.h"

#include "base/file_util.h"
#include "history/comparison_views.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/runs/run_comparison_view.h"
#include "panels/runs/run_store_access.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/store_follower.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <filesystem>

namespace day0::ui {

namespace {

constexpr int kSearchDelayMs = 250;
constexpr std::int64_t kListLimit = 5000; ///< newest runs listed; the summary says how many match

QComboBox* filterBox(QWidget* parent, const QString& name, const QString& all)
{
    auto* box = new QComboBox(parent);
    box->setObjectName(name);
    box->addItem(all);
    box->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    return box;
}

QString errorText(const std::string& message)
{
    return QStringLiteral("<span style='color:%1'>%2</span>")
        .arg(errorColor().name(), toQString(message).toHtmlEscaped());
}

} // namespace

RunsPanel::RunsPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_listTicket(std::make_unique<JobTicket>())
    , m_loadTicket(std::make_unique<JobTicket>())
    , m_deleteTicket(std::make_unique<JobTicket>())
    , m_runs(new RunTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_view(new QTableView(this))
    , m_comparison(new RunComparisonView(this))
    , m_search(new QLineEdit(this))
    , m_kind(filterBox(this, QStringLiteral("runsKind"), tr("All kinds")))
    , m_status(filterBox(this, QStringLiteral("runsStatus"), tr("Any status")))
    , m_model(filterBox(this, QStringLiteral("runsModel"), tr("All models")))
    , m_period(filterBox(this, QStringLiteral("runsPeriod"), tr("Any time")))
    , m_summary(new QLabel(this))
    , m_applyAction(new QAction(tr("Apply plan"), this))
    , m_exportAction(new QAction(tr("Export…"), this))
    , m_deleteAction(new QAction(tr("Delete…"), this))
    , m_searchTimer(new QTimer(this))
{
    m_search->setObjectName(QStringLiteral("runsSearch"));
    m_search->setPlaceholderText(tr("Search label, model, plan, precision, host, outcome, tool"));
    m_search->setClearButtonEnabled(true);
    m_search->setMinimumWidth(220);
    for (const auto kind :
        { history::RunKind::Plan, history::RunKind::Verify, history::RunKind::Run,
            history::RunKind::Compare, history::RunKind::Trace, history::RunKind::Validate }) {
        const QString name = toQString(std::string(history::toString(kind)));
        m_kind->addItem(name, name);
    }
    for (const auto status : { history::RunStatus::Ok, history::RunStatus::Failed,
             history::RunStatus::Error, history::RunStatus::Cancelled }) {
        const QString name = toQString(std::string(history::toString(status)));
        m_status->addItem(name, name);
    }
    m_period->addItem(tr("Last hour"), 3600);
    m_period->addItem(tr("Last 24 hours"), 86400);
    m_period->addItem(tr("Last 7 days"), 7 * 86400);
    m_period->addItem(tr("Last 30 days"), 30 * 86400);

    m_applyAction->setToolTip(tr("Make the selected plan run's layout the session's plan"));
    m_exportAction->setToolTip(tr("Write the selected runs as JSON (as `day0 runs export`)"));
    m_deleteAction->setToolTip(tr("Delete the selected runs from the store (Del)"));
    m_deleteAction->setShortcut(QKeySequence::Delete);
    m_deleteAction->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    connect(m_applyAction, &QAction::triggered, this, [this] {
        const QString error = applySelectedPlan();
        if (!error.isEmpty()) {
            emit m_session.statusMessage(error);
        }
    });
    connect(m_exportAction, &QAction::triggered, this, &RunsPanel::chooseExport);
    connect(m_deleteAction, &QAction::triggered, this, &RunsPanel::confirmDelete);

    // Wraps in a narrow dock rather than widen the window.
    auto* bar = new FlowLayout;
    bar->addWidget(m_search, true);
    for (QComboBox* box : { m_kind, m_status, m_model, m_period }) {
        bar->addWidget(box);
        connect(box, &QComboBox::currentIndexChanged, this, &RunsPanel::refresh);
    }
    for (QAction* action : { m_applyAction, m_exportAction, m_deleteAction }) {
        auto* button = new QToolButton(this);
        button->setDefaultAction(action);
        button->setToolButtonStyle(Qt::ToolButtonTextOnly);
        bar->addWidget(button);
    }
    m_searchTimer->setSingleShot(true);
    m_searchTimer->setInterval(kSearchDelayMs);
    connect(m_search, &QLineEdit::textChanged, m_searchTimer, qOverload<>(&QTimer::start));
    connect(m_searchTimer, &QTimer::timeout, this, &RunsPanel::refresh);

    m_proxy->setSourceModel(m_runs);
    m_proxy->setSortRole(RunTableModel::SortRole);
    m_view->setObjectName(QStringLiteral("runsTable"));
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(RunTableModel::Created, Qt::DescendingOrder);
    setKeyColumns(*m_view,
        { RunTableModel::Id, RunTableModel::Kind, RunTableModel::Model, RunTableModel::Label,
            RunTableModel::Status },
        RunTableModel::Label);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->setAlternatingRowColors(true);
    m_view->setShowGrid(false);
    m_view->setWordWrap(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 6);
    m_view->horizontalHeader()->setResizeContentsPrecision(32);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setContextMenuPolicy(Qt::ActionsContextMenu);
    m_view->addActions({ m_applyAction, m_exportAction, m_deleteAction });
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
        &RunsPanel::selectionChanged);

    m_summary->setObjectName(QStringLiteral("runsSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_view, 1);
    leftLayout->addWidget(m_summary);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->setObjectName(QStringLiteral("runsSplitter"));
    split->addWidget(left);
    split->addWidget(m_comparison);
    split->setStretchFactor(1, 1);
    split->setSizes({ 520, 880 });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    m_follower = new StoreFollower(m_session, m_jobs, *m_listTicket, this);
    connect(m_follower, &StoreFollower::changed, this, &RunsPanel::refresh);
    updateActions();
    refresh();
}

RunsPanel::~RunsPanel() = default;

QString RunsPanel::statusText() const { return m_summary->text(); }

history::RunFilter RunsPanel::filter() const
{
    history::RunFilter f;
    f.text = fromQString(m_search->text().trimmed());
    if (const auto kind = history::parseRunKind(fromQString(m_kind->currentData().toString()))) {
        f.kind = *kind;
    }
    if (const auto status
        = history::parseRunStatus(fromQString(m_status->currentData().toString()))) {
        f.status = *status;
    }
    f.model = fromQString(m_model->currentData().toString());
    if (const int seconds = m_period->currentData().toInt(); seconds > 0) {
        f.since = history::now() - std::chrono::seconds(seconds);
    }
    f.limit = kListLimit;
    return f;
}

void RunsPanel::refresh()
{
    m_jobs.start<RunListing>(
        *m_listTicket, tr("Reading the run store"), this,
        [file = history::storePath(), filter = filter()](
            Progress&, std::stop_token) { return readListing(file, filter); },
        [this](RunListing&& listing) { showListing(std::move(listing)); });
}

void RunsPanel::showListing(RunListing&& listing)
{
    m_restoring = true;
    const std::vector<RunId> previous = selectedRuns();
    m_follower->setShown(listing.stamp);
    m_runs->setRuns(std::move(listing.runs));
    {
        const QString current = m_model->currentData().toString();
        const QSignalBlocker block(m_model);
        while (m_model->count() > 1) {
            m_model->removeItem(1);
        }
        for (const auto& name : listing.models) {
            m_model->addItem(toQString(name), toQString(name));
        }
        if (!current.isEmpty() && m_model->findData(current) < 0) {
            m_model->addItem(current, current); // keep the user's choice while it matches nothing
        }
        m_model->setCurrentIndex(std::max(0, m_model->findData(current)));
    }
    const QString store = toQString(listing.store).toHtmlEscaped();
    if (!listing.error.empty()) {
        m_summary->setText(errorText(listing.error));
    } else if (listing.missing) {
        m_summary->setText(tr("No runs yet: %1 does not exist. `day0 plan`, `day0 memory` and the "
                              "planner record their results there.")
                               .arg(store));
    } else {
        const int shown = m_runs->rowCount();
        QString text = shown == listing.matching
            ? (shown == 1 ? tr("1 run") : tr("%1 runs").arg(shown))
            : tr("the newest %1 of %2 runs").arg(shown).arg(listing.matching);
        m_summary->setText(
            text + QStringLiteral(" · <span style='color:gray'>%1</span>").arg(store));
    }
    m_view->resizeColumnsToContents();
    m_view->setColumnWidth(
        RunTableModel::Label, std::min(220, m_view->columnWidth(RunTableModel::Label)));
    m_view->setColumnWidth(
        RunTableModel::Plan, std::min(220, m_view->columnWidth(RunTableModel::Plan)));

    std::vector<RunId> select = previous;
    if (m_autoSelect && !m_runs->runs().empty()) {
        // What changed since the last one: the newest run against the run before it.
        // Only a comparable pair (same kind, same model) is proposed: a plan against a
        // precision run, or one model against another, compares nothing.
        m_autoSelect = false;
        select.clear();
        if (const auto baseline = history::baselineFor(m_runs->runs(), 0)) {
            select = { m_runs->runs().front().id, m_runs->runs()[*baseline].id };
        } else {
            m_noComparablePair = true;
        }
    }
    restoreSelection(select);
    m_restoring = false;
    emit listed();
    selectionChanged();
}

void RunsPanel::restoreSelection(const std::vector<RunId>& ids)
{
    const bool wasRestoring = m_restoring;
    m_restoring = true;
    QItemSelection selection;
    for (const RunId id : ids) {
        const int row = m_runs->rowOf(id);
        if (row >= 0) {
            const QModelIndex index = m_proxy->mapFromSource(m_runs->index(row, 0));
            selection.select(index, index);
        }
    }
    m_view->selectionModel()->select(
        selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    if (!ids.empty() && !selection.isEmpty()) {
        m_view->scrollTo(selection.indexes().front());
    }
    m_restoring = wasRestoring;
}

void RunsPanel::selectRuns(const std::vector<RunId>& ids)
{
    m_autoSelect = false;
    restoreSelection(ids);
    selectionChanged();
}

std::vector<RunId> RunsPanel::selectedRuns() const
{
    std::vector<const history::RunInfo*> runs;
    for (const QModelIndex& index : m_view->selectionModel()->selectedRows()) {
        if (const auto* run = m_runs->run(m_proxy->mapToSource(index).row())) {
            runs.push_back(run);
        }
    }
    // The older run is the baseline A.
    std::sort(runs.begin(), runs.end(), [](const auto* x, const auto* y) {
        return x->created < y->created || (x->created == y->created && x->id < y->id);
    });
    std::vector<RunId> ids;
    ids.reserve(runs.size());
    for (const auto* run : runs) {
        ids.push_back(run->id);
    }
    return ids;
}

void RunsPanel::selectionChanged()
{
    if (m_restoring) {
        return;
    }
    updateActions();
    const std::vector<RunId> ids = selectedRuns();
    m_noComparablePair = m_noComparablePair && ids.empty();
    // With nothing comparable proposed, the empty state says why (even though nothing changed).
    if (ids == m_shown && !m_noComparablePair) {
        return;
    }
    m_shown = ids;
    m_shownProperties.clear();
    if (ids.empty() || ids.size() > 2) {
        m_loadTicket->cancel();
        m_comparison->clear(ids.empty()
                ? (m_noComparablePair
                        ? tr("No two runs of the same kind and model yet, so none is compared. "
                             "Select a run to see its results, or two runs to compare them.")
                        : tr("Select a run to see its results, or two runs to compare them."))
                : tr("%1 runs selected: select one run to see it, or two to compare them.")
                      .arg(ids.size()));
        emit compared();
        return;
    }
    m_jobs.start<LoadedRuns>(
        *m_loadTicket, ids.size() == 1 ? tr("Loading a run") : tr("Comparing runs"), this,
        [file = history::storePath(), ids](Progress& progress, std::stop_token stop) {
            return loadRuns(file, ids, progress, std::move(stop));
        },
        [this](LoadedRuns&& loaded) { showLoaded(std::move(loaded)); });
}

void RunsPanel::showLoaded(LoadedRuns&& loaded)
{
    if (loaded.ids != m_shown) {
        return;
    }
    if (!loaded.error.empty()) {
        m_comparison->clear(errorText(loaded.error));
    } else {
        m_shownProperties = std::move(loaded.properties);
        m_comparison->setComparison(
            std::move(loaded.comparison), loaded.ids.size() == 1, std::move(loaded.bench));
    }
    updateActions();
    emit compared();
}

void RunsPanel::updateActions()
{
    const std::vector<RunId> ids = selectedRuns();
    m_exportAction->setEnabled(!ids.empty());
    m_deleteAction->setEnabled(!ids.empty());
    const history::RunInfo* run
        = ids.size() == 1 ? m_runs->run(m_runs->rowOf(ids.front())) : nullptr;
    m_applyAction->setEnabled(run && run->kind == history::RunKind::Plan && !run->plan.empty());
}

QString RunsPanel::applySelectedPlan()
{
    const std::vector<RunId> ids = selectedRuns();
    const history::RunInfo* run
        = ids.size() == 1 ? m_runs->run(m_runs->rowOf(ids.front())) : nullptr;
    if (!run || run->kind != history::RunKind::Plan || run->plan.empty()) {
        return tr("Select one plan run that found a layout.");
    }
    const QString name = QStringLiteral("#%1").arg(run->id.value());
    if (!m_session.ready() || m_session.summary()->name != run->modelName) {
        return tr("Run %1 plans %2; open that model first.").arg(name, toQString(run->modelName));
    }
    if (m_shown != ids || m_shownProperties.empty()) {
        return tr("Run %1 is still loading.").arg(name);
    }
    const auto property = [this](const std::string& key) -> std::string {
        for (const auto& p : m_shownProperties) {
            if (p.key == key) {
                return p.value;
            }
        }
        return {};
    };
    if (const std::string cluster = property("cluster"); cluster != m_session.cluster().name) {
        return tr("Run %1 was planned on %2; the session's cluster is %3.")
            .arg(name, toQString(cluster), toQString(m_session.cluster().name));
    }
    auto plan = plan::parsePlan(run->plan);
    if (!plan) {
        return tr("Run %1: %2").arg(name, toQString(plan.error().message));
    }
    const auto mode = plan::parseMode(property("mode"));
    if (mode && *mode != m_session.workload().mode) {
        plan::Workload workload = m_session.workload();
        workload.mode = *mode;
        const auto number = [&](const char* key, int& field) {
            const std::string text = property(key);
            if (!text.empty()) {
                field = std::stoi(text);
            }
        };
        number("seq_length", workload.seqLength);
        number("global_batch", workload.globalBatch);
        number("context", workload.context);
        number("output", workload.outputLength);
        m_session.setWorkload(workload);
    }
    m_session.setPlan(*plan);
    emit m_session.statusMessage(
        tr("Applied the plan of run %1: %2").arg(name, toQString(run->plan)));
    return {};
}

void RunsPanel::confirmDelete()
{
    const std::vector<RunId> ids = selectedRuns();
    if (ids.empty()) {
        return;
    }
    const auto answer = QMessageBox::question(this, tr("Delete runs"),
        tr("Delete %1 with everything it holds from %2? This cannot be undone.")
            .arg(ids.size() == 1 ? tr("run #%1").arg(ids.front().value())
                                 : tr("%1 runs").arg(ids.size()),
                toQString(displayPath(history::storePath()))),
        QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
    if (answer == QMessageBox::Yes) {
        deleteRuns(ids);
    }
}

void RunsPanel::deleteRuns(const std::vector<RunId>& ids)
{
    m_jobs.start<std::pair<int, std::string>>(
        *m_deleteTicket, tr("Deleting runs"), this,
        [file = history::storePath(), ids](
            Progress&, std::stop_token) { return deleteStoredRuns(file, ids); },
        [this](std::pair<int, std::string>&& result) {
            const QString error = toQString(result.second);
            emit m_session.statusMessage(error.isEmpty()
                    ? tr("Deleted %1 of the selected runs.").arg(result.first)
                    : tr("Deleting runs failed: %1").arg(error));
            emit deleted(result.first, error);
            refresh();
        });
}

void RunsPanel::chooseExport()
{
    const std::vector<RunId> ids = selectedRuns();
    if (ids.size() == 1) {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export run"),
            QDir::home().filePath(QStringLiteral("run-%1.json").arg(ids.front().value())),
            tr("JSON (*.json)"));
        if (!path.isEmpty()) {
            exportRun(ids.front(), path);
        }
        return;
    }
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Export runs to"));
    for (const RunId id : ids) {
        if (!dir.isEmpty()) {
            exportRun(id, QDir(dir).filePath(QStringLiteral("run-%1.json").arg(id.value())));
        }
    }
}

void RunsPanel::exportRun(RunId id, const QString& path)
{
    // Exports do not replace each other: each gets its own ticket (the job keeps its state).
    JobTicket ticket;
    m_jobs.start<std::string>(
        ticket, tr("Exporting run %1").arg(id.value()), this,
        [file = history::storePath(), id, target = fromQString(path)](
            Progress&, std::stop_token) { return exportStoredRun(file, id, target); },
        [this, path](std::string&& error) {
            emit m_session.statusMessage(error.empty()
                    ? tr("Exported to %1").arg(path)
                    : tr("Export failed: %1").arg(toQString(error)));
            emit exported(path, toQString(error));
        });
}

} // namespace day0::ui
