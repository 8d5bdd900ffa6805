#include "panels/topology/topology_panel.h"

#include "jobs/job_runner.h"
#include "panels/topology/topology_scene.h"
#include "parallel/run.h"
#include "plan/memory_estimator.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/elided_label.h"
#include "widgets/formatting.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWheelEvent>

namespace day0::ui {

TopologyView::TopologyView(QWidget* parent)
    : QGraphicsView(parent)
{
    setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    setDragMode(QGraphicsView::ScrollHandDrag);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
    setFrameShape(QFrame::NoFrame);
}

void TopologyView::fitAll()
{
    m_userZoomed = false;
    if (scene()) {
        fitInView(scene()->sceneRect(), Qt::KeepAspectRatio);
    }
}

void TopologyView::wheelEvent(QWheelEvent* event)
{
    const double factor = std::pow(1.0015, event->angleDelta().y());
    const double current = transform().m11();
    if ((factor > 1 && current < 8) || (factor < 1 && current > 0.02)) {
        scale(factor, factor);
        m_userZoomed = true;
    }
    event->accept();
}

void TopologyView::resizeEvent(QResizeEvent* event)
{
    QGraphicsView::resizeEvent(event);
    if (!m_userZoomed) {
        fitAll();
    }
}

TopologyPanel::TopologyPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_scene(new TopologyScene(this))
    , m_view(new TopologyView(this))
    , m_coloring(new QComboBox(this))
    , m_cluster(new ElidedLabel(this, Qt::ElideRight))
    , m_legend(new QLabel(this))
    , m_key(new QLabel(this))
    , m_runTicket(std::make_unique<JobTicket>())
    , m_run(new QToolButton(this))
    , m_cancel(new QToolButton(this))
    , m_runStatus(new QLabel(this))
    , m_progressTimer(new QTimer(this))
{
    m_view->setScene(m_scene);
    m_coloring->setObjectName(QStringLiteral("coloringCombo"));
    m_coloring->addItem(tr("PP stage"), int(TopologyColoring::PipelineStage));
    m_coloring->addItem(tr("TP group"), int(TopologyColoring::TensorGroup));
    m_coloring->addItem(tr("EP group"), int(TopologyColoring::ExpertGroup));
    m_coloring->addItem(tr("DP replica"), int(TopologyColoring::DataReplica));
    m_coloring->addItem(tr("CP group"), int(TopologyColoring::ContextGroup));
    connect(m_coloring, &QComboBox::currentIndexChanged, this, [this] {
        m_scene->setColoring(TopologyColoring(m_coloring->currentData().toInt()));
        updateLegend();
    });
    auto* fit = new QToolButton(this);
    fit->setText(tr("Fit"));
    fit->setToolTip(tr("Show the whole cluster (wheel zooms, drag pans)"));
    connect(fit, &QToolButton::clicked, m_view, &TopologyView::fitAll);
    m_legend->setWordWrap(true);
    m_legend->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_run->setObjectName(QStringLiteral("runPlanButton"));
    m_run->setText(tr("Run with this plan"));
    m_run->setToolTip(tr("Run the plan on in-process ranks (fp32 prefill + greedy decode): the "
                         "open checkpoint, or a small shrunk one of this architecture"));
    connect(m_run, &QToolButton::clicked, this, &TopologyPanel::runPlan);
    m_cancel->setObjectName(QStringLiteral("cancelRunButton"));
    m_cancel->setText(tr("Cancel"));
    m_cancel->setEnabled(false);
    connect(m_cancel, &QToolButton::clicked, this, &TopologyPanel::cancelRun);
    m_runStatus->setObjectName(QStringLiteral("runStatus"));
    m_runStatus->setWordWrap(true);
    m_runStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_progressTimer->setInterval(50);
    connect(m_progressTimer, &QTimer::timeout, this, &TopologyPanel::pollRunProgress);

    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Colour by"), this));
    bar->addWidget(m_coloring);
    bar->addWidget(m_legend, 1);
    bar->addWidget(fit);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addLayout(bar);
    // The cluster's headline sits above the drawing, not in it, so it reads at the panel's font
    // size at any zoom.
    m_cluster->setObjectName(QStringLiteral("clusterSummary"));
    QFont headline = m_cluster->font();
    headline.setBold(true);
    m_cluster->setFont(headline);
    layout->addWidget(m_cluster);
    m_key->setObjectName(QStringLiteral("colourKey"));
    m_key->setWordWrap(true);
    m_key->setToolTip(tr("Colours: the Okabe–Ito palette, told apart with colour-blindness"));
    layout->addWidget(m_key);
    auto* runBar = new QHBoxLayout;
    m_backend = createBackendCombo(this);
    m_backend->setToolTip(tr("Where the ranks of 'Run with this plan' compute; operators a "
                             "backend lacks fall back to the CPU reference"));
    runBar->addWidget(m_run);
    runBar->addWidget(new QLabel(tr("on"), this));
    runBar->addWidget(m_backend);
    runBar->addWidget(m_cancel);
    runBar->addWidget(m_runStatus, 1);
    layout->addLayout(runBar);
    layout->addWidget(m_view, 1);

    connect(m_scene, &TopologyScene::rankClicked, &m_session, &Session::selectRank);
    connect(&m_session, &Session::rankSelected, this, [this](int rank) {
        m_scene->setSelectedRank(rank);
        updateLegend();
    });
    for (auto signal : { &Session::modelChanged, &Session::clusterChanged,
             &Session::workloadChanged, &Session::planChanged }) {
        connect(&m_session, signal, this, &TopologyPanel::schedule);
    }
    schedule();
}

TopologyPanel::~TopologyPanel() = default;

void TopologyPanel::schedule()
{
    if (!m_session.ready()) {
        return;
    }
    struct Result {
        TopologyData data;
        QString error;
    };
    m_jobs.start<Result>(
        *m_ticket, tr("Mapping ranks"), this,
        [summary = m_session.summary(), plan = m_session.plan(), workload = m_session.workload(),
            cluster = m_session.cluster()](Progress&, std::stop_token) {
            Result result;
            result.data.cluster = cluster;
            result.data.deviceMemory = cluster.deviceMemory();
            auto report = plan::estimateMemory(*summary, plan, workload, cluster);
            if (!report) {
                result.error = toQString(report.error().message);
                return result;
            }
            result.data.ranks.emplace(report->layout);
            result.data.world = report->layout.world;
            result.data.stageMemory.assign(std::size_t(report->layout.pp), 0.0);
            for (const auto& r : report->perRank) {
                result.data.stageMemory[std::size_t(r.ppStage)] = double(r.total.value);
            }
            return result;
        },
        [this](Result&& result) { display(std::move(result.data), result.error); });
}

void TopologyPanel::display(TopologyData&& data, const QString& error)
{
    m_error = error;
    m_scene->setTopology(std::move(data));
    m_cluster->setFullText(m_scene->clusterSummary());
    m_view->fitAll();
    updateLegend();
}

QString TopologyPanel::legendText() const { return m_legend->text(); }

QString TopologyPanel::keyText() const { return m_key->text(); }

QString TopologyPanel::clusterText() const { return m_cluster->fullText(); }

void TopologyPanel::updateLegend()
{
    const auto& data = m_scene->topology();
    if (!m_error.isEmpty()) {
        m_legend->setText(
            QStringLiteral("<span style='color:%1'>%2</span>").arg(errorColor().name(), m_error));
        m_key->clear();
        return;
    }
    if (!data.ranks) {
        m_legend->clear();
        m_key->clear();
        return;
    }
    // The legend describes what a colour (and the outline of a clicked GPU) covers: a stage or
    // a replica under those colourings, a group of the kind otherwise.
    QString one;
    QString many;
    switch (m_scene->coloring()) {
    case TopologyColoring::PipelineStage:
        one = tr("stage");
        many = tr("pipeline stages");
        break;
    case TopologyColoring::TensorGroup:
        one = tr("TP group");
        many = tr("TP groups");
        break;
    case TopologyColoring::ExpertGroup:
        one = tr("EP group");
        many = tr("EP groups");
        break;
    case TopologyColoring::DataReplica:
        one = tr("replica");
        many = tr("DP replicas");
        break;
    case TopologyColoring::ContextGroup:
        one = tr("CP group");
        many = tr("CP groups");
        break;
    }
    const int count = m_scene->colorGroupCount();
    const int probe = std::max(0, m_scene->selectedRank());
    const auto extent = m_scene->colorClassExtent(probe);
    QString text = tr("%1 of %2 GPUs used · %3 %4 of %5 ranks, each on %6 fast domain(s)")
                       .arg(data.world)
                       .arg(data.cluster.worldSize())
                       .arg(count)
                       .arg(many)
                       .arg(extent.ranks)
                       .arg(extent.domains);
    if (m_scene->selectedRank() >= 0) {
        text += tr(" · outlined: the %1 of rank %2").arg(one).arg(m_scene->selectedRank());
    }
    m_legend->setText(text);
    // The key: one swatch per colour, as the cells are filled.
    constexpr int kShown = 16;
    QStringList swatches;
    for (int i = 0; i < std::min(count, kShown); ++i) {
        swatches << QStringLiteral("<span style='color:%1'>■</span>&nbsp;%2&nbsp;%3")
                        .arg(groupColor(i).name(), one)
                        .arg(i);
    }
    if (count > kShown) {
        swatches << tr("… %1 more (past eight, the colours come back lighter or darker)")
                        .arg(count - kShown);
    }
    m_key->setText(swatches.join(QStringLiteral(" &nbsp; ")));
    m_keyColors.clear();
    for (int i = 0; i < count; ++i) {
        m_keyColors << groupColor(i);
    }
}

} // namespace day0::ui
