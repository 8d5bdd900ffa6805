#include "panels/training/training_panel.h"

#include "history/recording.h"
#include "history/timestamp.h"
#include "jobs/job_runner.h"
#include "panels/runs/store_follower.h"
#include "panels/training/gradient_view.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTabWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <filesystem>

namespace day0::ui {

namespace {

constexpr std::int64_t kScanLimit = 2000; ///< the newest training runs listed
constexpr int kDefaultOverlay = 6; ///< runs of one model selected on the first listing
constexpr int kIdRole = Qt::UserRole;

enum Column {
    RunColumn,
    ModelColumn,
    PrecisionColumn,
    PlanColumn,
    StepsColumn,
    LossColumn,
    FinishedColumn,
    ColumnCount
};

/// Okabe & Ito, "Color Universal Design" (2008): orange, sky blue, bluish green, blue,
/// vermillion, reddish purple, yellow, grey; told apart with the common colour blindnesses.
/// Past eight, the same colours lighter.
QColor runColor(int index)
{
    static const QColor kColors[] = { QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9),
        QColor(0x00, 0x9E, 0x73), QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00),
        QColor(0xCC, 0x79, 0xA7), QColor(0xF0, 0xE4, 0x42), QColor(0x99, 0x99, 0x99) };
    constexpr int kCount = int(std::size(kColors));
    const QColor base = kColors[index % kCount];
    return index < kCount ? base : base.lighter(100 + 25 * (index / kCount));
}

/// A checkpoint folder by its name; the built-in task as it is.
QString modelLabel(const std::string& model)
{
    const std::filesystem::path path(model);
    const auto name = path.filename().string();
    return toQString(name.empty() ? path.parent_path().filename().string() : name);
}

QString legendName(const actions::StoredTrainingRun& run)
{
    const auto& i = run.info;
    return QStringLiteral("#%1 %2 · %3 · %4 · finished %5")
        .arg(i.id.value())
        .arg(modelLabel(i.modelName), toQString(i.precision), toQString(i.plan),
            toQString(history::formatLocal(i.created)));
}

QVector<double> toVector(const std::vector<double>& v) { return { v.begin(), v.end() }; }

QString runName(const actions::StoredTrainingRun& run)
{
    return QStringLiteral("#%1 (%2, %3)")
        .arg(run.info.id.value())
        .arg(toQString(run.info.precision), toQString(run.info.plan));
}

/// The steps both runs dumped, replica 0's dump of each.
std::vector<TrainingGradientPair::Step> commonSteps(
    const actions::StoredTrainingRun& reference, const actions::StoredTrainingRun& target)
{
    std::vector<TrainingGradientPair::Step> steps;
    for (const auto& r : reference.gradDumps) {
        for (const auto& t : target.gradDumps) {
            if (r.dpRank == 0 && t.dpRank == 0 && r.step == t.step) {
                steps.push_back({ r.step, toQString(r.path), toQString(t.path) });
            }
        }
    }
    return steps;
}

} // namespace

TrainingPanel::TrainingPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_listTicket(std::make_unique<JobTicket>())
    , m_list(new QTreeWidget(this))
    , m_otherModels(new QCheckBox(tr("Other models too"), this))
    , m_summary(new QLabel(this))
    , m_warning(new QLabel(this))
    , m_loss(new PlotWidget(this))
    , m_gradNorm(new PlotWidget(this))
{
    m_list->setObjectName(QStringLiteral("trainingRuns"));
    m_list->setColumnCount(ColumnCount);
    m_list->setHeaderLabels({ tr("Run"), tr("Model"), tr("Precision"), tr("Plan"), tr("Steps"),
        tr("Final loss"), tr("Finished") });
    m_list->setRootIsDecorated(false);
    m_list->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_list->setAlternatingRowColors(true);
    m_list->header()->setStretchLastSection(true);
    // What a row is and what it is read for stay in view; the model's name gives way first.
    setKeyColumns(*m_list, { RunColumn, ModelColumn, PrecisionColumn, LossColumn }, ModelColumn);
    connect(m_list, &QTreeWidget::itemSelectionChanged, this, [this] {
        if (!m_restoring) {
            selectionChanged();
        }
    });

    m_otherModels->setObjectName(QStringLiteral("trainingOtherModels"));
    m_otherModels->setToolTip(tr("Overlay selected runs of other models than the newest "
                                 "selected run's (their losses are not comparable)"));
    connect(m_otherModels, &QCheckBox::toggled, this, &TrainingPanel::selectionChanged);
    m_summary->setObjectName(QStringLiteral("trainingSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_warning->setObjectName(QStringLiteral("trainingModelWarning"));
    m_warning->setWordWrap(true);
    m_warning->setStyleSheet(
        QStringLiteral("color: %1; font-weight: bold").arg(errorColor().name()));
    m_warning->hide();
    m_loss->setObjectName(QStringLiteral("trainingLoss"));
    m_gradNorm->setObjectName(QStringLiteral("trainingGradNorm"));

    auto* bar = new QHBoxLayout;
    bar->addWidget(m_summary, 1);
    bar->addWidget(m_otherModels);
    auto* right = new QWidget(this);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addWidget(m_warning);
    auto* plots = new QSplitter(Qt::Vertical, right);
    plots->addWidget(m_loss);
    plots->addWidget(m_gradNorm);
    plots->setSizes({ 3, 2 });
    rightLayout->addWidget(plots, 1);
    m_rankCaption = new QLabel(right);
    m_rankCaption->setObjectName(QStringLiteral("trainingRankMemoryCaption"));
    m_rankCaption->setWordWrap(true);
    m_rankMemory = new QTreeWidget(right);
    m_rankMemory->setObjectName(QStringLiteral("trainingRankMemory"));
    m_rankMemory->setRootIsDecorated(false);
    m_rankMemory->setHeaderLabels(
        { tr("Rank"), tr("Held at the step's peak"), tr("Planner's estimate"), tr("Ratio") });
    m_rankMemory->headerItem()->setToolTip(1,
        tr("The trainer's weights, gradients and optimizer state and the activations the "
           "backward kept, measured from their sizes"));
    m_rankMemory->header()->setStretchLastSection(false);
    rightLayout->addWidget(m_rankCaption);
    rightLayout->addWidget(m_rankMemory);
    m_rankCaption->hide();
    m_rankMemory->hide();
    m_tabs = new QTabWidget(this);
    m_tabs->setObjectName(QStringLiteral("trainingTabs"));
    m_tabs->addTab(right, tr("Loss curves"));
    m_gradients = new GradientView(m_jobs, m_tabs);
    m_tabs->addTab(m_gradients, tr("Gradient heatmap"));
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->setObjectName(QStringLiteral("trainingSplitter"));
    split->addWidget(m_list);
    split->addWidget(m_tabs);
    split->setStretchFactor(1, 1);
    split->setSizes({ 420, 880 });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    m_follower = new StoreFollower(m_session, m_jobs, *m_listTicket, this);
    connect(m_follower, &StoreFollower::changed, this, &TrainingPanel::refresh);
    plot({});
    refresh();
}

TrainingPanel::~TrainingPanel() = default;

QString TrainingPanel::modelWarning() const
{
    return m_warning->isHidden() ? QString() : m_warning->text();
}

QString TrainingPanel::summaryText() const { return m_summary->text(); }

QString TrainingPanel::rankMemoryCaption() const
{
    return m_rankCaption->isHidden() ? QString() : m_rankCaption->text();
}

void TrainingPanel::showGradientTab() { m_tabs->setCurrentWidget(m_gradients); }

void TrainingPanel::refresh()
{
    m_jobs.start<Listing>(
        *m_listTicket, tr("Reading the training runs"), this,
        [file = history::storePath()](Progress&, std::stop_token stop) {
            Listing listing;
            listing.store = file.string();
            listing.stamp = readStamp(file);
            auto runs = actions::readTrainingRuns(file, kScanLimit, stop);
            if (runs) {
                listing.runs = std::move(*runs);
            } else {
                listing.error = runs.error().message;
            }
            return listing;
        },
        [this](Listing&& listing) { showListing(std::move(listing)); });
}

void TrainingPanel::showListing(Listing&& listing)
{
    std::vector<RunId> previous;
    for (const QTreeWidgetItem* item : m_list->selectedItems()) {
        previous.push_back(RunId(item->data(RunColumn, kIdRole).toLongLong()));
    }
    if (listing.stamp) {
        m_follower->setShown(*listing.stamp);
    }
    m_listed = std::move(listing.runs);
    m_restoring = true;
    m_list->clear();
    for (const auto& run : m_listed) {
        const auto& i = run.info;
        auto* item = new QTreeWidgetItem(m_list);
        item->setData(RunColumn, kIdRole, qint64(i.id.value()));
        item->setText(RunColumn,
            i.label.empty() ? QStringLiteral("#%1").arg(i.id.value())
                            : QStringLiteral("#%1 %2").arg(i.id.value()).arg(toQString(i.label)));
        item->setText(ModelColumn, modelLabel(i.modelName));
        item->setToolTip(ModelColumn, toQString(i.modelName));
        item->setText(PrecisionColumn, toQString(i.precision));
        item->setText(PlanColumn, toQString(i.plan));
        item->setText(StepsColumn, QString::number(run.curve.steps.size()));
        item->setText(LossColumn,
            run.curve.loss.empty() ? QStringLiteral("—")
                                   : QString::number(run.curve.loss.back(), 'f', 4));
        item->setText(FinishedColumn, toQString(history::formatLocal(i.created)));
        if (i.status != history::RunStatus::Ok) {
            item->setToolTip(RunColumn, toQString(i.message));
        }
    }
    for (const int c : { PlanColumn, StepsColumn, FinishedColumn }) {
        m_list->resizeColumnToContents(c);
    }
    const QString store = toQString(listing.store).toHtmlEscaped();
    if (!listing.error.empty()) {
        m_summary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(errorColor().name(), toQString(listing.error).toHtmlEscaped()));
    } else if (m_listed.empty()) {
        m_summary->setText(tr("No training runs in %1 yet.").arg(store));
    } else {
        m_summary->setText((m_listed.size() == 1 ? tr("1 training run")
                                                 : tr("%1 training runs").arg(m_listed.size()))
            + QStringLiteral(" · <span style='color:gray'>%1</span>").arg(store));
    }
    std::vector<RunId> select = previous;
    if (m_autoSelect && !m_listed.empty()) {
        // The newest run and the newest others of its model: what the last change did.
        m_autoSelect = false;
        select.clear();
        for (const auto& run : m_listed) {
            if (run.info.modelName == m_listed.front().info.modelName
                && int(select.size()) < kDefaultOverlay) {
                select.push_back(run.info.id);
            }
        }
    }
    selectRuns(select);
    m_restoring = false;
    emit listed();
}

void TrainingPanel::selectRuns(const std::vector<RunId>& ids)
{
    const bool was = m_restoring;
    m_restoring = true;
    m_list->clearSelection();
    for (int row = 0; row < m_list->topLevelItemCount(); ++row) {
        auto* item = m_list->topLevelItem(row);
        const RunId id(item->data(RunColumn, kIdRole).toLongLong());
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
            item->setSelected(true);
        }
    }
    m_restoring = was;
    selectionChanged();
}

void TrainingPanel::setOtherModelsShown(bool shown) { m_otherModels->setChecked(shown); }

void TrainingPanel::selectionChanged()
{
    // In list order: newest first, and the newest selected run names the model.
    std::vector<const actions::StoredTrainingRun*> selected;
    for (int row = 0; row < m_list->topLevelItemCount(); ++row) {
        if (m_list->topLevelItem(row)->isSelected()) {
            selected.push_back(&m_listed[std::size_t(row)]);
        }
    }
    std::vector<const actions::StoredTrainingRun*> shown;
    QStringList others;
    for (const auto* run : selected) {
        const bool sameModel = run->info.modelName == selected.front()->info.modelName;
        if (!sameModel) {
            others << QStringLiteral("#%1 (%2)")
                          .arg(run->info.id.value())
                          .arg(modelLabel(run->info.modelName));
        }
        if (sameModel || m_otherModels->isChecked()) {
            shown.push_back(run);
        }
    }
    if (others.isEmpty()) {
        m_warning->hide();
        m_warning->clear();
    } else {
        const QString reference = modelLabel(selected.front()->info.modelName);
        m_warning->setText(m_otherModels->isChecked()
                ? tr("Runs of other models than %1 overlaid: %2. Their losses are not "
                     "comparable.")
                      .arg(reference, others.join(QStringLiteral(", ")))
                : tr("Not overlaid, another model than %1: %2. Tick “Other models too” to "
                     "overlay them anyway.")
                      .arg(reference, others.join(QStringLiteral(", "))));
        m_warning->show();
    }
    plot(shown);
    showGradientPair(selected);
    showRankMemory(selected);
}

void TrainingPanel::showGradientPair(const std::vector<const actions::StoredTrainingRun*>& selected)
{
    std::vector<const actions::StoredTrainingRun*> dumped;
    for (const auto* run : selected) {
        if (!run->gradDumps.empty()) {
            dumped.push_back(run);
        }
    }
    if (dumped.empty()) {
        m_gradients->clearTrainingPair(selected.empty()
                ? tr("Select two training runs recorded with gradient dumps to compare them "
                     "here.")
                : tr("None of the selected runs carries gradient dumps: record them with `day0 "
                     "train CHECKPOINT --grad-dump DIR` (the last step by default, --grad-steps "
                     "for others), e.g. an f64 and an f32 run of the same seed."));
        return;
    }
    const actions::StoredTrainingRun* partner = dumped.size() > 1 ? dumped[1] : nullptr;
    if (partner == nullptr) {
        // One run: the newest other run of its model that dumped a step it dumped.
        for (const auto& run : m_listed) {
            if (&run != dumped[0] && run.info.modelName == dumped[0]->info.modelName
                && !commonSteps(run, *dumped[0]).empty()) {
                partner = &run;
                break;
            }
        }
    }
    if (partner == nullptr) {
        m_gradients->clearTrainingPair(
            tr("Run %1 carries gradient dumps; select a second run of the same checkpoint "
               "recorded with --grad-dump (same seed and steps) to compare them.")
                .arg(runName(*dumped[0])));
        return;
    }
    // B against A: an fp64 run is the reference of one that is not, else the older run.
    const auto* newer = dumped[0]->info.id.value() > partner->info.id.value() ? dumped[0] : partner;
    const auto* older = newer == dumped[0] ? partner : dumped[0];
    const bool newerIsReference = newer->info.precision == "f64" && older->info.precision != "f64";
    const auto* reference = newerIsReference ? newer : older;
    const auto* target = newerIsReference ? older : newer;
    m_gradients->showTrainingPair(
        { runName(*reference), runName(*target), commonSteps(*reference, *target) });
}

void TrainingPanel::showRankMemory(const std::vector<const actions::StoredTrainingRun*>& selected)
{
    const actions::StoredTrainingRun* shown = nullptr;
    for (const auto* run : selected) {
        if (run->memory.size() > 1) {
            shown = run;
            break;
        }
    }
    m_rankMemory->clear();
    m_rankCaption->setVisible(shown != nullptr);
    m_rankMemory->setVisible(shown != nullptr);
    if (shown == nullptr) {
        return;
    }
    m_rankCaption->setText(tr("Memory per rank of run %1: what each rank held against the "
                              "planner's estimate for the same plan")
                               .arg(runName(*shown)));
    for (const auto& r : shown->memory) {
        auto* item = new QTreeWidgetItem(m_rankMemory);
        item->setText(0, QString::number(r.rank));
        item->setText(1, bytesText(Bytes(r.trainer)));
        item->setText(2, bytesText(Bytes(r.planner)));
        item->setData(1, kIdRole, qint64(r.trainer)); // bytes, for tests and sorting
        item->setData(2, kIdRole, qint64(r.planner));
        item->setText(3,
            r.planner > 0
                ? QStringLiteral("%1×").arg(double(r.trainer) / double(r.planner), 0, 'f', 2)
                : QStringLiteral("—"));
        for (int c = 1; c < 4; ++c) {
            item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
        }
    }
    for (int c = 0; c < 4; ++c) {
        m_rankMemory->resizeColumnToContents(c);
    }
    // As tall as its rows (up to eight), so the curves keep the room.
    const int rows = std::min(m_rankMemory->topLevelItemCount(), 8);
    m_rankMemory->setFixedHeight(m_rankMemory->header()->sizeHint().height()
        + rows * m_rankMemory->sizeHintForRow(0) + 2 * m_rankMemory->frameWidth() + 2);
}

void TrainingPanel::plot(const std::vector<const actions::StoredTrainingRun*>& runs)
{
    m_overlaid.clear();
    for (PlotWidget* p : { m_loss, m_gradNorm }) {
        p->clear();
        p->setAxisLabel(PlotWidget::Axis::X, tr("step"));
    }
    m_loss->setTitle(tr("Loss"));
    m_loss->setAxisLabel(PlotWidget::Axis::Y, tr("cross-entropy (nats)"));
    m_gradNorm->setTitle(tr("Gradient norm (before clipping)"));
    m_gradNorm->setAxisLabel(PlotWidget::Axis::Y, tr("global L2 norm"));
    if (runs.empty()) {
        const QString how = m_listed.empty()
            ? tr("No training run yet. Train one with `day0 train CHECKPOINT --steps 40` (or "
                 "`day0 train` for the built-in task): its loss curve and gradient norms are "
                 "recorded and appear here.")
            : tr("Select training runs on the left to overlay their loss curves.");
        m_loss->setNote(how);
        m_gradNorm->setNote(m_listed.empty() ? tr("Gradient norms per step appear here.") : how);
    } else {
        QVector<PlotSeries> loss;
        QVector<PlotSeries> norms;
        for (std::size_t i = 0; i < runs.size(); ++i) {
            const auto& run = *runs[i];
            QVector<double> steps;
            for (const auto s : run.curve.steps) {
                steps.push_back(double(s));
            }
            const bool markers = steps.size() <= 40;
            loss.push_back({ legendName(run), runColor(int(i)), steps, toVector(run.curve.loss),
                false, markers, 5, true, {} });
            norms.push_back({ legendName(run), runColor(int(i)), steps,
                toVector(run.curve.gradNorm), false, markers, 5, false, {} });
            m_overlaid.push_back(run.info.id);
        }
        m_loss->setLineSeries(loss);
        m_loss->setLegendVisible(true);
        m_gradNorm->setLineSeries(norms);
    }
    m_loss->rescaleAndReplot();
    m_gradNorm->rescaleAndReplot();
}

} // namespace day0::ui
