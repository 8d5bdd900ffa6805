#include "panels/pipeline/pipeline_panel.h"

#include "base/progress.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/pipeline/figure_renderer.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStyle>
#include <QTableWidget>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

namespace day0::ui {

namespace {

enum Column { kStatus, kStep, kTime, kResult, kColumns };

QIcon statusIcon(pipeline::StepStatus status)
{
    QColor color = QColor(0x9a, 0xa3, 0xb2);
    switch (status) {
    case pipeline::StepStatus::Passed:
        color = okColor();
        break;
    case pipeline::StepStatus::Failed:
    case pipeline::StepStatus::Error:
        color = errorColor();
        break;
    case pipeline::StepStatus::Skipped:
        color = QColor(0xc9, 0x9a, 0x2e);
        break;
    case pipeline::StepStatus::Running:
        color = QColor(0x3d, 0x7e, 0xc9);
        break;
    case pipeline::StepStatus::Pending:
        break;
    }
    QPixmap pixmap(14, 14);
    pixmap.fill(Qt::transparent);
    QPainter painter(&pixmap);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setPen(Qt::NoPen);
    painter.setBrush(color);
    if (status == pipeline::StepStatus::Pending) {
        painter.setBrush(Qt::NoBrush);
        painter.setPen(QPen(color, 1.5));
    }
    painter.drawEllipse(QRectF(1.5, 1.5, 11, 11));
    return QIcon(pixmap);
}

const char* const kTitles[] = { "Weight acquisition and integrity",
    "Architecture check and format conversion", "Sharding for the plan and reassembly check",
    "Single-rank smoke test", "Multi-rank run equals single-rank",
    "Precision against the reference", "Performance and memory", "Serving under load", "Report" };

/// The rows' step ids: day0 validate's steps with the serving step before the report (its row
/// says "off" when the step is not asked for).
const std::vector<std::string>& rowStepIds()
{
    static const std::vector<std::string> ids = [] {
        auto out = pipeline::day0StepIds();
        out.insert(out.end() - 1, pipeline::kServingStepId);
        return out;
    }();
    return ids;
}

} // namespace

/// What a validation job hands back to the GUI thread.
struct PipelinePanel::Outcome {
    Result<pipeline::Validation> validation = Error::internal("not run");
    pipeline::ReportPaths paths;
    std::string writeError;
    std::optional<RunId> runId;
    std::string recordError;
};

PipelinePanel::PipelinePanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_stepProgress(std::make_shared<Progress>())
{
    buildUi();
    followSession();
    connect(&m_session, &Session::modelChanged, this, &PipelinePanel::followSession);
}

PipelinePanel::~PipelinePanel() { m_ticket->cancel(); }

void PipelinePanel::buildUi()
{
    m_model = new QLineEdit(this);
    m_model->setPlaceholderText(tr("checkpoint folder, config.json or bundled name"));
    auto* browse = new QPushButton(tr("Browse…"), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"));
        if (!dir.isEmpty()) {
            m_model->setText(dir);
        }
    });
    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(m_model, 1);
    modelRow->addWidget(browse);
    m_plan = new QLineEdit(QStringLiteral("tp=2,ep=2"), this);
    // Not the session's plan: that one is sized for the full model, while a validation from a
    // config runs on a shrunk checkpoint of a few layers and experts.
    m_plan->setToolTip(
        tr("Layout to shard the validated checkpoint for and to run multi-rank, "
           "e.g. tp=2,ep=2 (a shrunk checkpoint has 4 layers and up to 16 experts)"));
    m_precision = new QComboBox(this);
    for (const char* p :
        { "bf16", "fp16", "fp8", "int8", "nvfp4", "mxfp4", "int4", "int4-g32", "fp32" }) {
        m_precision->addItem(QString::fromLatin1(p));
    }
    m_backend = createBackendCombo(this);
    m_backend->setToolTip(tr("Where the precision and performance steps run the target; the "
                             "reference, smoke and multi-rank runs stay on the CPU"));
    m_tokens = new QSpinBox(this);
    m_tokens->setRange(1, 4096);
    m_tokens->setValue(8);
    auto* form = new QFormLayout;
    form->addRow(tr("Model"), modelRow);
    form->addRow(tr("Plan"), m_plan);
    form->addRow(tr("Precision"), m_precision);
    form->addRow(tr("Target on"), m_backend);
    form->addRow(tr("Tokens"), m_tokens);
    m_serve = new QCheckBox(tr("Serve the checkpoint under load and check its tokens"), this);
    m_serve->setChecked(true); // as day0 validate (--no-serve leaves it out)
    m_serve->setToolTip(
        tr("day0 validate's serving step: day0 serve in this process on the validated checkpoint "
           "(fp32, loopback), concurrency 1 and 4, every answer's tokens compared with the "
           "reference engine's"));
    form->addRow(tr("Serving"), m_serve);
    m_stream = new QCheckBox(tr("stream weights"), this);
    m_stream->setObjectName(QStringLiteral("streamWeights"));
    m_stream->setToolTip(
        tr("day0 validate --stream: the smoke, precision and performance steps read the weights "
           "layer by layer from the checkpoint (a model larger than memory), with the same "
           "figures; the multi-rank and serving steps, which hold the whole model, are skipped. "
           "Runs on the CPU only."));
    // Streamed runs compute on the CPU: the box follows the backend choice.
    const auto backendChosen = [this] {
        const bool onCpu = m_backend->currentData().toString() == QStringLiteral("cpu");
        m_stream->setEnabled(onCpu);
        if (!onCpu) {
            m_stream->setChecked(false);
        }
    };
    connect(m_backend, &QComboBox::currentIndexChanged, this, backendChosen);
    backendChosen();
    form->addRow(tr("Memory"), m_stream);

    m_start = new QPushButton(tr("Start"), this);
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setEnabled(false);
    m_open = new QPushButton(tr("Open report"), this);
    m_open->setEnabled(false);
    connect(m_start, &QPushButton::clicked, this, &PipelinePanel::start);
    connect(m_cancel, &QPushButton::clicked, this, &PipelinePanel::cancel);
    connect(m_open, &QPushButton::clicked, this, &PipelinePanel::openReport);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_start);
    buttons->addWidget(m_cancel);
    buttons->addStretch(1);
    buttons->addWidget(m_open);

    m_steps = new QTableWidget(int(std::size(kTitles)), kColumns, this);
    m_steps->setHorizontalHeaderLabels({ QString(), tr("Step"), tr("Time"), tr("Result") });
    m_steps->verticalHeader()->setVisible(false);
    m_steps->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_steps->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_steps->setWordWrap(false);
    auto* header = m_steps->horizontalHeader();
    header->setSectionResizeMode(kStatus, QHeaderView::ResizeToContents);
    header->setSectionResizeMode(kStep, QHeaderView::ResizeToContents);
    header->setSectionResizeMode(kTime, QHeaderView::ResizeToContents);
    header->setStretchLastSection(true);
    setKeyColumns(*m_steps, { kStatus, kStep, kTime, kResult }, kResult);
    resetSteps();

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setFormat(tr("idle"));
    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setPlaceholderText(tr("Step messages appear here."));
    m_summary = new QLabel(tr("Validate a model or checkpoint through the Day-0 steps (the serving "
                              "step when Serving is checked)."),
        this);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_steps);
    split->addWidget(m_log);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_summary);
    layout->addWidget(split, 1);

    m_timer = new QTimer(this);
    m_timer->setInterval(50);
    connect(m_timer, &QTimer::timeout, this, &PipelinePanel::pollProgress);
}

void PipelinePanel::followSession()
{
    // Follow the session until the user types something else.
    const QString source = m_session.modelSource();
    if (!source.isEmpty() && (m_model->text().isEmpty() || !m_model->isModified())) {
        m_model->setText(source);
        m_model->setModified(false);
    }
}

void PipelinePanel::resetSteps()
{
    for (int row = 0; row < m_steps->rowCount(); ++row) {
        auto* icon = new QTableWidgetItem(statusIcon(pipeline::StepStatus::Pending), QString());
        icon->setToolTip(tr("pending"));
        m_steps->setItem(row, kStatus, icon);
        m_steps->setItem(row, kStep, new QTableWidgetItem(QString::fromUtf8(kTitles[row])));
        m_steps->setItem(row, kTime, new QTableWidgetItem());
        m_steps->setItem(row, kResult, new QTableWidgetItem());
    }
    const auto& ids = rowStepIds();
    const auto serving = int(
        std::find(ids.begin(), ids.end(), std::string(pipeline::kServingStepId)) - ids.begin());
    if (!m_serve->isChecked() && serving < m_steps->rowCount()) {
        m_steps->item(serving, kResult)->setText(tr("off"));
    }
}

pipeline::ValidateOptions PipelinePanel::options() const
{
    pipeline::ValidateOptions o;
    o.model = fromQString(m_model->text().trimmed());
    o.plan = fromQString(m_plan->text().trimmed());
    o.precision = fromQString(m_precision->currentText());
    o.tokens = m_tokens->value();
    o.serve = m_serve->isChecked();
    o.stream = m_stream->isChecked();
    o.work = m_workDir.isEmpty() ? pipeline::defaultWorkDir(o.model)
                                 : std::filesystem::path(fromQString(m_workDir));
    return o;
}

bool PipelinePanel::running() const { return m_ticket->busy(); }

void PipelinePanel::start()
{
    const auto o = options();
    if (o.model.empty()) {
        m_summary->setText(tr("Choose a model or checkpoint first."));
        return;
    }
    const quint64 generation = ++m_generation;
    resetSteps();
    m_log->clear();
    m_open->setEnabled(false);
    m_reportPath.clear();
    m_start->setEnabled(false);
    m_cancel->setEnabled(true);
    m_summary->setText(tr("Validating %1…").arg(toQString(o.model)));
    m_stepProgress->setTotal(0);
    m_stepProgress->setDone(0);
    m_timer->start();

    QPointer<PipelinePanel> self(this);
    auto post = [self, generation](bool started, const pipeline::StepRecord& step) {
        QMetaObject::invokeMethod(
            self.data(),
            [self, generation, started, step] {
                if (!self) {
                    return;
                }
                if (started) {
                    self->stepStarted(generation, step);
                } else {
                    self->stepFinished(generation, step);
                }
            },
            Qt::QueuedConnection);
    };
    m_jobs.start<Outcome>(
        *m_ticket, tr("Validating %1").arg(toQString(o.model)), this,
        [o, backendName = fromQString(m_backend->currentData().toString()), post,
            stepProgress = m_stepProgress](Progress& progress, std::stop_token stop) {
            Outcome out;
            auto backend = openBackend(backendName);
            if (!backend) {
                out.validation = backend.error();
                return out;
            }
            pipeline::ValidateOptions options = o;
            options.backend = std::move(*backend);
            pipeline::PipelineObserver observer;
            observer.stepStarted = [post](const pipeline::StepRecord& s) { post(true, s); };
            observer.stepFinished = [post](const pipeline::StepRecord& s) { post(false, s); };
            // `day0 validate`'s action and record, written off the GUI thread.
            auto validated = pipeline::validate(options,
                { o.work / "junit.xml", o.work / "report.html", o.work / "report.json" },
                figureRenderer(stop), progress, stop, observer, stepProgress.get());
            if (!validated) {
                out.validation = validated.error();
                return out;
            }
            out.paths = validated->written;
            if (validated->reportsError) {
                out.writeError = validated->reportsError->message;
            }
            auto recorded = history::recordRun(validated->record);
            out.validation = std::move(validated->validation);
            if (!recorded) {
                out.recordError = recorded.error().message;
            } else if (*recorded) {
                out.runId = **recorded;
            }
            return out;
        },
        [this](Outcome&& outcome) { deliver(std::move(outcome)); });
}

void PipelinePanel::cancel()
{
    if (m_ticket->busy()) {
        m_ticket->cancel();
        m_summary->setText(tr("Cancelled."));
        m_log->appendPlainText(tr("cancelled by the user"));
    }
    m_timer->stop();
    m_start->setEnabled(true);
    m_cancel->setEnabled(false);
    m_progress->setFormat(tr("cancelled"));
    emit finished(1);
}

void PipelinePanel::stepStarted(quint64 generation, const pipeline::StepRecord& step)
{
    if (generation != m_generation || !m_ticket->busy()) {
        return;
    }
    const auto& ids = rowStepIds();
    const auto row = int(std::find(ids.begin(), ids.end(), step.id) - ids.begin());
    if (row < m_steps->rowCount()) {
        m_steps->item(row, kStatus)->setIcon(statusIcon(pipeline::StepStatus::Running));
        m_steps->item(row, kStatus)->setToolTip(tr("running"));
        m_steps->item(row, kResult)->setText(tr("running…"));
    }
    m_log->appendPlainText(tr("▶ %1").arg(toQString(step.title)));
}

void PipelinePanel::stepFinished(quint64 generation, const pipeline::StepRecord& step)
{
    if (generation != m_generation || !m_ticket->busy()) {
        return;
    }
    const auto& ids = rowStepIds();
    const auto row = int(std::find(ids.begin(), ids.end(), step.id) - ids.begin());
    const QString status = toQString(pipeline::stepStatusName(step.status));
    const QString text = toQString(step.reason.empty() ? step.report.summary : step.reason);
    if (row < m_steps->rowCount()) {
        m_steps->item(row, kStatus)->setIcon(statusIcon(step.status));
        m_steps->item(row, kStatus)->setToolTip(status);
        m_steps->item(row, kTime)->setText(durationText(step.duration));
        m_steps->item(row, kResult)->setText(text);
        m_steps->item(row, kResult)->setToolTip(text);
    }
    for (const auto& line : step.log) {
        m_log->appendPlainText(QStringLiteral("  ") + toQString(line));
    }
    for (const auto& line : step.report.details) {
        m_log->appendPlainText(QStringLiteral("  ") + toQString(line));
    }
    m_log->appendPlainText(
        tr("%1 %2 (%3): %4").arg(status, toQString(step.title), durationText(step.duration), text));
}

void PipelinePanel::pollProgress()
{
    const auto total = m_stepProgress->total();
    const auto done = m_stepProgress->done();
    const QString stage = toQString(m_stepProgress->stage());
    if (total > 0) {
        m_progress->setValue(int(1000.0 * double(std::min(done, total)) / double(total)));
        m_progress->setFormat(QStringLiteral("%1 — %p%").arg(stage));
    } else {
        m_progress->setValue(0);
        m_progress->setFormat(stage.isEmpty() ? tr("starting") : stage);
    }
}

void PipelinePanel::deliver(Outcome&& outcome)
{
    m_timer->stop();
    m_start->setEnabled(true);
    m_cancel->setEnabled(false);
    if (!outcome.validation) {
        m_progress->setFormat(tr("could not start"));
        m_summary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(errorColor().name(),
                                   toQString(outcome.validation.error().message).toHtmlEscaped()));
        emit finished(2);
        return;
    }
    const auto& result = outcome.validation->result;
    int passed = 0;
    for (const auto& s : result.steps) {
        passed += s.status == pipeline::StepStatus::Passed;
    }
    m_progress->setValue(1000);
    m_progress->setFormat(result.passed() ? tr("passed") : tr("failed"));
    QString text = tr("%1 of %2 steps passed in %3.")
                       .arg(passed)
                       .arg(result.steps.size())
                       .arg(durationText(result.duration));
    if (!outcome.writeError.empty()) {
        text += QLatin1Char(' ')
            + tr("The reports were not written: %1").arg(toQString(outcome.writeError));
    } else {
        m_reportPath = QString::fromStdString(outcome.paths.html.string());
        m_open->setEnabled(true);
        text += QLatin1Char(' ')
            + tr("Reports in %1.")
                  .arg(QDir::toNativeSeparators(
                      QString::fromStdString(outcome.paths.html.parent_path().string())));
    }
    m_summary->setText(text);
    if (outcome.runId) {
        m_session.announceRecordedRun(outcome.runId->value());
    } else if (!outcome.recordError.empty()) {
        emit m_session.statusMessage(
            tr("The validation was not recorded: %1").arg(toQString(outcome.recordError)));
    }
    emit finished(result.exitCode());
}

void PipelinePanel::openReport()
{
    if (!m_reportPath.isEmpty()) {
        QDesktopServices::openUrl(QUrl::fromLocalFile(m_reportPath));
    }
}

} // namespace day0::ui
