#include "panels/topology/topology_panel.h"

#include "jobs/job_runner.h"
#include "panels/topology/topology_scene.h"
#include "parallel/run.h"
#include "plan/memory_estimator.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
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
    , m_legend(new QLabel(this))
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
    m_view->fitAll();
    updateLegend();
}

void TopologyPanel::updateLegend()
{
    const auto& data = m_scene->topology();
    if (!m_error.isEmpty()) {
        m_legend->setText(
            QStringLiteral("<span style='color:%1'>%2</span>").arg(errorColor().name(), m_error));
        return;
    }
    if (!data.ranks) {
        m_legend->clear();
        return;
    }
    const auto& r = *data.ranks;
    QString text = tr("%1 of %2 GPUs used · %3 colour groups")
                       .arg(data.world)
                       .arg(data.cluster.worldSize())
                       .arg(m_scene->colorGroupCount());
    plan::GroupKind kind = plan::GroupKind::Pipeline;
    switch (m_scene->coloring()) {
    case TopologyColoring::TensorGroup:
        kind = plan::GroupKind::Tensor;
        break;
    case TopologyColoring::PipelineStage:
        break;
    case TopologyColoring::ExpertGroup:
        kind = plan::GroupKind::Expert;
        break;
    case TopologyColoring::DataReplica:
        kind = plan::GroupKind::Data;
        break;
    case TopologyColoring::ContextGroup:
        kind = plan::GroupKind::Context;
        break;
    }
    const auto span = plan::groupSpan(r.stride(kind), r.groupSize(kind), data.cluster.domainSize);
    text += tr(" · %1 groups of %2 ranks, stride %3, spanning %4 fast domain(s)")
                .arg(toQString(plan::groupKindName(kind)))
                .arg(r.groupSize(kind))
                .arg(r.stride(kind))
                .arg(span.domains);
    if (m_scene->selectedRank() >= 0) {
        text += tr(" · outlined: the group of rank %1").arg(m_scene->selectedRank());
    }
    m_legend->setText(text);
}

} // namespace day0::ui
