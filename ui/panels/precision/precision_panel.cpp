#include "panels/precision/precision_panel.h"

#include "exec/precision_run.h"
#include "history/layer_metrics.h"
#include "jobs/job_runner.h"
#include "panels/precision/target_precision_box.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/elided_label.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

namespace day0::ui {

using numerics::GridMetric;

namespace {

// A checkpoint folder (or file) the engine can read as it is; anything else runs shrunk.
bool runsAsIs(const QString& source)
{
    const QFileInfo info(source);
    if (info.isFile()) {
        return source.endsWith(QStringLiteral(".safetensors"))
            || source.endsWith(QStringLiteral(".gguf"));
    }
    if (!info.isDir()) {
        return false;
    }
    const QDir dir(source);
    return !dir.entryList(
                   { QStringLiteral("*.safetensors"), QStringLiteral("*.gguf") }, QDir::Files)
                .isEmpty();
}

} // namespace

PrecisionPanel::PrecisionPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_runTicket(std::make_unique<JobTicket>())
    , m_gridTicket(std::make_unique<JobTicket>())
    , m_detailTicket(std::make_unique<JobTicket>())
    , m_poll(new QTimer(this))
    , m_heatmapPlot(new PlotWidget(this))
    , m_depthPlot(new PlotWidget(this))
    , m_histogramPlot(new PlotWidget(this))
    , m_scatterPlot(new PlotWidget(this))
    , m_ownPlot(new PlotWidget(this))
{
    m_heatmapPlot->setObjectName(QStringLiteral("precisionHeatmap"));
    m_depthPlot->setObjectName(QStringLiteral("precisionDepth"));
    m_histogramPlot->setObjectName(QStringLiteral("precisionHistogram"));
    m_scatterPlot->setObjectName(QStringLiteral("precisionScatter"));
    m_ownPlot->setObjectName(QStringLiteral("precisionOwnError"));
    m_poll->setInterval(50);
    connect(m_poll, &QTimer::timeout, this, &PrecisionPanel::pollProgress);

    auto* maps = new QSplitter(Qt::Vertical, this);
    maps->addWidget(m_heatmapPlot);
    maps->addWidget(m_depthPlot);
    maps->setSizes({ 560, 400 });
    auto* details = new QSplitter(Qt::Vertical, this);
    details->setObjectName(QStringLiteral("precisionDetails"));
    details->addWidget(m_histogramPlot);
    details->addWidget(m_scatterPlot);
    details->addWidget(m_ownPlot);
    details->setSizes({ 380, 380, 200 });
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(maps);
    split->addWidget(details);
    split->setSizes({ 820, 560 });

    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("precisionSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("precisionError"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->setStyleSheet(QStringLiteral("color: %1").arg(errorColor().name()));
    m_error->hide();

    // Two views: the layer-by-layer comparison of one prompt, and `day0 eval`'s end-to-end
    // figures over a sampled corpus (issue #21).
    auto* layered = new QWidget(this);
    auto* layout = new QVBoxLayout(layered);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(createControls());
    layout->addWidget(m_summary);
    layout->addWidget(m_error);
    layout->addWidget(split, 1);
    m_endToEnd = new EndToEndView(
        session, jobs, [](const QString& source) { return !runsAsIs(source); }, this);
    m_endToEnd->setObjectName(QStringLiteral("endToEndView"));
    m_endToEnd->setProperty("screenshotName", QStringLiteral("end-to-end"));
    m_views = new QTabWidget(this);
    m_views->setObjectName(QStringLiteral("precisionViews"));
    m_views->addTab(layered, tr("Layer by layer"));
    m_views->addTab(m_endToEnd, tr("End to end"));
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(6, 6, 6, 6);
    outer->addWidget(m_views);

    connect(m_heatmapPlot, &PlotWidget::cellClicked, this, &PrecisionPanel::selectCell);
    connect(
        m_heatmapPlot, &PlotWidget::cellContextMenuRequested, this, &PrecisionPanel::showCellMenu);
    connect(&m_session, &Session::modelChanged, this, [this] {
        updateCheckpointLabel();
        // Overlays are of the same model only: another model's run is no baseline.
        const bool dropped = !isOfSessionModel(m_overlay.get());
        if (dropped) {
            m_overlay.reset();
        }
        if (!isOfSessionModel(m_settledOverlay.get())) {
            m_settledOverlay.reset();
        }
        if (dropped && m_primary) {
            updateSummary();
            refreshViews();
        }
        // A demo comparison follows the model; anything the user ran or loaded stays.
        if (!m_userAction) {
            m_demoDone = false;
        }
        startDemoIfWanted();
    });
    updateCheckpointLabel();
    showDetail(*m_histogramPlot, *m_scatterPlot, *m_ownPlot, nullptr);
    m_heatmapPlot->setNote(tr("No comparison yet: run the model or compare two dumps."));
    m_heatmapPlot->rescaleAndReplot();
}

PrecisionPanel::~PrecisionPanel() = default;

bool PrecisionPanel::isOfSessionModel(const PrecisionRun* run) const
{
    // A run the panel started for the model the session has open; a dump comparison names no
    // session model.
    return run != nullptr && run->request
        && run->request->modelSource == fromQString(m_session.modelSource());
}

void PrecisionPanel::showEndToEnd() { m_views->setCurrentWidget(m_endToEnd); }

QWidget* PrecisionPanel::createControls()
{
    auto* box = new QWidget(this);
    auto* rows = new QVBoxLayout(box);
    rows->setContentsMargins(0, 0, 0, 0);
    // Rows of controls that wrap in a narrow dock rather than widen the window.
    auto* runRow = new FlowLayout;
    auto* viewRow = new FlowLayout;
    rows->addLayout(runRow);
    rows->addLayout(viewRow);

    m_target = createTargetPrecisionBox(box);
    m_target->setObjectName(QStringLiteral("targetPrecision"));
    m_backend = createBackendCombo(box);
    m_fp32Leg = new QCheckBox(tr("fp32 leg"), box);
    m_fp32Leg->setObjectName(QStringLiteral("fp32Leg"));
    m_fp32Leg->setToolTip(tr("Also run the backend in fp32 and judge it by the fp32 rules: a "
                             "structural fault (a misread config, an epsilon or a RoPE frequency "
                             "off) shows there even where the target precision's noise hides it. "
                             "On the CPU the target's fp32 is the reference itself."));
    const auto backendChosen = [this] {
        const bool onBackend = m_backend->currentData().toString() != QStringLiteral("cpu");
        m_fp32Leg->setEnabled(onBackend);
        if (!onBackend) {
            m_fp32Leg->setChecked(false);
        }
    };
    m_stream = new QCheckBox(tr("stream weights"), box);
    m_stream->setObjectName(QStringLiteral("streamWeights"));
    m_stream->setToolTip(tr("Read the weights layer by layer from the checkpoint (a model larger "
                            "than memory): the reference, the target and its inject-mode run "
                            "stream; a backend's target and its fp32 leg still load theirs "
                            "whole. The same results."));
    connect(m_backend, &QComboBox::currentIndexChanged, this, backendChosen);
    backendChosen();
    m_reference = new QComboBox(box);
    m_reference->setObjectName(QStringLiteral("referencePrecision"));
    m_reference->addItem(QStringLiteral("fp32"), int(exec::PrecisionMode::F32));
    m_reference->addItem(QStringLiteral("fp64"), int(exec::PrecisionMode::F64));
    m_prompt = new QLineEdit(toQString(demoPrompt()), box);
    m_prompt->setObjectName(QStringLiteral("prompt"));
    m_prompt->setToolTip(tr("Token ids (\"1, 2, 3\") or text (needs the checkpoint's tokenizer)"));
    m_tokens = new QSpinBox(box);
    m_tokens->setObjectName(QStringLiteral("tokens"));
    m_tokens->setRange(1, 512);
    m_tokens->setValue(8);
    m_tokens->setToolTip(tr("Greedy tokens to generate after the prompt"));
    m_runButton = new QPushButton(tr("Run"), box);
    m_runButton->setObjectName(QStringLiteral("runButton"));
    m_cancelButton = new QPushButton(tr("Cancel"), box);
    m_cancelButton->setObjectName(QStringLiteral("cancelButton"));
    m_cancelButton->setEnabled(false);
    m_compareButton = new QPushButton(tr("Compare two dumps…"), box);
    m_progress = new QProgressBar(box);
    m_progress->setRange(0, 1000);
    m_progress->setMaximumWidth(220);
    m_progress->setFormat(QString());
    m_progress->hide();
    runRow->addWidget(new QLabel(tr("Target"), box));
    runRow->addWidget(m_target);
    runRow->addWidget(new QLabel(tr("on"), box));
    runRow->addWidget(m_backend);
    runRow->addWidget(m_fp32Leg);
    runRow->addWidget(new QLabel(tr("vs"), box));
    runRow->addWidget(m_reference);
    runRow->addWidget(m_stream);
    runRow->addWidget(new QLabel(tr("Prompt"), box));
    runRow->addWidget(m_prompt, 1);
    runRow->addWidget(new QLabel(tr("Tokens"), box));
    runRow->addWidget(m_tokens);
    runRow->addWidget(m_runButton);
    runRow->addWidget(m_cancelButton);
    runRow->addWidget(m_progress);
    runRow->addWidget(m_compareButton);

    m_view = new QComboBox(box);
    m_view->setObjectName(QStringLiteral("heatmapView"));
    m_view->addItem(tr("Layers × sub-modules"));
    m_view->addItem(tr("Anchors × token positions"));
    m_metric = new QComboBox(box);
    m_metric->setObjectName(QStringLiteral("heatmapMetric"));
    for (const GridMetric metric : numerics::gridMetrics()) {
        m_metric->addItem(metricTitle(metric), int(metric));
    }
    // A long folder path must not widen the window: elided, in full in the tooltip.
    m_checkpoint = new ElidedLabel(box);
    m_checkpoint->setObjectName(QStringLiteral("checkpointSource"));
    m_checkpoint->setTextInteractionFlags(Qt::TextSelectableByMouse);
    viewRow->addWidget(new QLabel(tr("View"), box));
    viewRow->addWidget(m_view);
    viewRow->addWidget(new QLabel(tr("Colour by"), box));
    viewRow->addWidget(m_metric);
    viewRow->addWidget(m_checkpoint, 1);

    connect(m_runButton, &QPushButton::clicked, this, &PrecisionPanel::startFromControls);
    connect(m_prompt, &QLineEdit::returnPressed, this, &PrecisionPanel::startFromControls);
    connect(m_cancelButton, &QPushButton::clicked, this, [this] {
        m_runTicket->cancel();
        pollProgress();
        if (m_primary && m_primary->partial) {
            m_primary = m_settledPrimary;
            m_overlay = m_settledOverlay;
            refreshViews();
        }
        m_summary->setText(tr("Cancelled."));
    });
    connect(m_compareButton, &QPushButton::clicked, this, &PrecisionPanel::chooseDumps);
    connect(m_view, &QComboBox::currentIndexChanged, this, &PrecisionPanel::refreshViews);
    connect(m_metric, &QComboBox::currentIndexChanged, this, &PrecisionPanel::refreshViews);
    return box;
}

void PrecisionPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    startDemoIfWanted();
}

void PrecisionPanel::startDemoIfWanted()
{
    // The demo is a few seconds of CPU: only for a panel someone looks at, only once, and only
    // for a model that runs shrunk (a real checkpoint waits for the Run button).
    if (m_demoDone || !isVisible() || !m_session.hasModel() || runsAsIs(m_session.modelSource())) {
        return;
    }
    m_demoDone = true;
    PrecisionRunRequest request;
    request.prompt = demoPrompt();
    request.recordOnce = true;
    startRun(std::move(request));
}

void PrecisionPanel::startFromControls()
{
    PrecisionRunRequest request;
    const exec::PrecisionPlan target = targetPrecisionOf(*m_target);
    request.target.base = target.base;
    request.target.fp8Scaling = target.fp8Scaling;
    request.reference = exec::PrecisionMode(m_reference->currentData().toInt());
    request.backend = fromQString(m_backend->currentData().toString());
    request.fp32Leg = m_fp32Leg->isChecked();
    request.stream = m_stream->isChecked();
    request.prompt = fromQString(m_prompt->text());
    request.tokens = m_tokens->value();
    run(std::move(request));
}

void PrecisionPanel::run(PrecisionRunRequest request)
{
    m_userAction = true;
    m_demoDone = true;
    startRun(std::move(request));
}

void PrecisionPanel::startRun(PrecisionRunRequest request)
{
    if (request.modelSource.empty()) {
        if (!m_session.hasModel()) {
            showError(tr("No model is open: open a model or a checkpoint folder first."));
            return;
        }
        request.modelSource = fromQString(m_session.modelSource());
    }
    const QString title = tr("Precision run: %1").arg(toQString(request.target.describe()));
    startJob(title, [request](Progress& progress, std::stop_token stop, const Growing&) {
        return runPrecision(request, progress, stop);
    });
}

void PrecisionPanel::upcastLayer(int layer)
{
    if (!m_primary || !m_primary->request) {
        showError(tr("Upcasting needs a run started from this panel (not a comparison of dumps)."));
        return;
    }
    PrecisionRunRequest request = *m_primary->request;
    request.target.perLayer[layer] = upcastMode(request.reference);
    request.recordOnce = false;
    run(std::move(request));
}

void PrecisionPanel::compareDumps(const QString& reference, const QString& target)
{
    m_userAction = true;
    m_demoDone = true;
    startJob(tr("Comparing dumps"),
        [reference = std::filesystem::path(fromQString(reference)),
            target = std::filesystem::path(fromQString(target))](
            Progress& progress, std::stop_token stop, const Growing& growing) {
            return compareDumpFolders(reference, target, progress, stop, growing);
        });
}

void PrecisionPanel::chooseDumps()
{
    const QString reference = QFileDialog::getExistingDirectory(
        this, tr("Reference dump folder (dump.json + tensors.safetensors)"));
    if (reference.isEmpty()) {
        return;
    }
    const QString target = QFileDialog::getExistingDirectory(
        this, tr("Target dump folder"), QFileInfo(reference).absolutePath());
    if (!target.isEmpty()) {
        compareDumps(reference, target);
    }
}

void PrecisionPanel::startJob(const QString& title, Work work)
{
    m_runTitle = title;
    m_error->hide();
    m_summary->setText(title + QStringLiteral("…"));
    m_runButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_progress->setValue(0);
    m_progress->show();
    m_poll->start();
    if (!m_primary || !m_primary->partial) {
        m_settledPrimary = m_primary;
        m_settledOverlay = m_overlay;
    }
    m_jobs.startStaged<std::shared_ptr<const PrecisionRun>, Outcome>(
        *m_runTicket, title, this,
        [work = std::move(work)](Progress& progress, std::stop_token stop,
            const std::function<void(std::shared_ptr<const PrecisionRun> &&)>& stage) {
            return work(progress, stop, stage);
        },
        [this](std::shared_ptr<const PrecisionRun>&& sofar) { showGrowing(std::move(sofar)); },
        [this](Outcome&& outcome) { deliver(std::move(outcome)); });
}

void PrecisionPanel::showGrowing(std::shared_ptr<const PrecisionRun>&& sofar)
{
    // The comparison so far in place of the result, over what was shown before (of this model).
    m_overlay = sameModel(m_settledPrimary.get(), sofar.get()) ? m_settledPrimary : nullptr;
    m_primary = std::move(sofar);
    updateSummary();
    refreshViews();
    emit comparisonGrew(int(m_primary->comparison.rows.size()));
}

void PrecisionPanel::pollProgress()
{
    if (!m_runTicket->busy()) {
        m_poll->stop();
        m_progress->hide();
        m_runButton->setEnabled(true);
        m_cancelButton->setEnabled(false);
        return;
    }
    for (const auto& job : m_jobs.activeJobs()) {
        if (job.title == m_runTitle && job.progress) {
            m_progress->setValue(int(std::lround(job.progress->fraction() * 1000)));
            m_progress->setFormat(toQString(job.progress->stage()));
        }
    }
}

void PrecisionPanel::deliver(Outcome&& outcome)
{
    pollProgress();
    if (m_primary && m_primary->partial) {
        // Back to what was shown before the comparison started to grow.
        m_primary = m_settledPrimary;
        m_overlay = m_settledOverlay;
    }
    if (!outcome) {
        if (outcome.error().code != ErrorCode::Cancelled) {
            showError(toQString(outcome.error().message));
        }
        updateSummary();
        emit resultDelivered();
        return;
    }
    // The previous run becomes the overlay when it is of the same model.
    m_overlay = sameModel(m_primary.get(), outcome->get()) ? m_primary : nullptr;
    m_primary = std::move(*outcome);
    if (m_primary->recordedRun) {
        m_session.announceRecordedRun(*m_primary->recordedRun);
    } else if (!m_primary->recordError.empty()) {
        emit m_session.statusMessage(
            tr("The comparison was not recorded: %1").arg(toQString(m_primary->recordError)));
    }
    updateSummary();
    refreshViews();
    emit resultDelivered();
}

void PrecisionPanel::showError(const QString& message)
{
    m_error->setText(message);
    m_error->show();
}

QString PrecisionPanel::errorText() const
{
    return m_error->isVisibleTo(this) ? m_error->text() : QString();
}

void PrecisionPanel::updateCheckpointLabel()
{
    const QString source = m_session.modelSource();
    if (source.isEmpty()) {
        m_checkpoint->setFullText(tr("no model open"));
    } else if (runsAsIs(source)) {
        m_checkpoint->setFullText(tr("runs checkpoint %1").arg(source));
    } else {
        m_checkpoint->setFullText(
            tr("runs a shrunk %1 checkpoint (same architecture, random weights, cached)")
                .arg(source));
    }
}

void PrecisionPanel::updateSummary()
{
    if (!m_primary) {
        m_summary->clear();
        return;
    }
    const auto& c = m_primary->comparison;
    QString text = QStringLiteral("<b>%1</b> — %2: %3 pass, %4 warn, %5 fail, %6 not judged "
                                  "[%7]")
                       .arg(toQString(m_primary->label).toHtmlEscaped(), toQString(c.status()),
                           QString::number(c.passCount), QString::number(c.warnCount),
                           QString::number(c.failCount), QString::number(c.notJudgedCount),
                           toQString(c.table));
    if (m_primary->partial) {
        text += tr("; comparing: %n capture(s) so far", nullptr, int(c.rows.size()));
    } else if (c.firstDivergence) {
        text += tr("; first divergence (%1 error) at <b>%2</b>")
                    .arg(toQString(c.divergenceBasis),
                        toQString(c.rows[*c.firstDivergence].name).toHtmlEscaped());
    } else {
        text += tr("; no divergence (%1 error)").arg(toQString(c.divergenceBasis));
    }
    if (m_overlay) {
        text += tr("; overlaid: %1").arg(toQString(m_overlay->label).toHtmlEscaped());
    }
    QString dispatch;
    if (const auto& d = m_primary->dispatch; !d.ops.empty()) {
        text += tr("<br>Target on <b>%1</b> (%2): %3 operator calls native, %4 on the CPU "
                   "reference (hover for each operator)")
                    .arg(toQString(d.backend).toHtmlEscaped(), toQString(d.device).toHtmlEscaped(),
                        QString::number(d.nativeCalls()), QString::number(d.fallbackCalls()));
        dispatch = toQString(exec::formatDispatch(d));
    }
    // What the target rounded where (dumps from other tools carry no recipe).
    if (m_primary->target) {
        const std::string recipe = m_primary->target->info.extra.value("precision_recipe", "");
        if (!recipe.empty()) {
            text += tr("<br>Recipe: %1").arg(toQString(recipe).toHtmlEscaped());
        }
    }
    if (const auto& s = m_primary->stream) {
        text += tr("<br>Weights streamed layer by layer (%1): %2 read, resident at most %3")
                    .arg(m_primary->targetStreamed ? tr("reference and target")
                                                   : tr("reference; the target loaded whole"),
                        bytesText(Bytes(std::int64_t(s->bytesRead))),
                        bytesText(Bytes(std::int64_t(s->residentPeakBytes))));
    }
    if (const auto& leg = m_primary->fp32Leg) {
        text += tr("<br>fp32 leg (the backend in fp32 against the reference): %1")
                    .arg(toQString(exec::fp32LegSummary(*leg)).toHtmlEscaped());
    }
    m_summary->setToolTip(dispatch);
    m_summary->setText(text);
}

} // namespace day0::ui
