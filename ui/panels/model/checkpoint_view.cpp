#include "panels/model/checkpoint_view.h"

#include "actions/verify.h"
#include "checkpoint/checkpoint_report.h"
#include "history/recording.h"
#include "panels/model/checkpoint_table_model.h"
#include "widgets/elided_label.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <chrono>

namespace day0::ui {

namespace ck = day0::checkpoint;

/// What the open job hands back: the checkpoint (kept for verification) and its tensor report.
struct CheckpointView::OpenResult {
    std::shared_ptr<const ck::Checkpoint> checkpoint;
    ck::TensorReport report;
    std::optional<Error> error;
};

/// What a hashing job hands back: the integrity report (nullopt without a manifest), or the
/// manifest written.
struct CheckpointView::HashResult {
    std::optional<ck::IntegrityReport> integrity;
    std::optional<ck::Manifest> written;
    std::optional<Error> error;
    std::optional<qint64> runId; ///< the verification's run in the store
    std::string recordError;
};

namespace {

constexpr ck::TensorStatus kFilterStatuses[] = { ck::TensorStatus::Ok, ck::TensorStatus::Missing,
    ck::TensorStatus::Unexpected, ck::TensorStatus::WrongShape, ck::TensorStatus::WrongDtype };

QString statusName(ck::TensorStatus s) { return toQString(std::string(ck::tensorStatusName(s))); }

QColor fileStatusColor(ck::FileStatus s)
{
    return s == ck::FileStatus::Ok ? QColor(0x27, 0xae, 0x60) : QColor(0xc0, 0x39, 0x2b);
}

QString displayName(const QString& path)
{
    const QFileInfo info(path);
    return info.fileName().isEmpty() ? path : info.fileName();
}

} // namespace

/// The Verify and Write Manifest jobs: `day0 verify [--write-manifest]`'s action on the opened
/// checkpoint, its record written off the GUI thread (verifying again is a new run).
CheckpointView::HashResult CheckpointView::hashJob(std::shared_ptr<const ck::Checkpoint> ckpt,
    const std::string& path, bool writeManifest, Progress& progress, std::stop_token stop)
{
    HashResult out;
    actions::VerifyOptions options;
    options.writeManifest = writeManifest;
    auto verified = actions::verifyCheckpoint(std::move(ckpt), path, options, progress, stop);
    if (!verified) {
        // Cancelled, or the manifest could not be read: `day0 verify` records nothing.
        out.error = verified.error();
        return out;
    }
    out.integrity = std::move(verified->integrity);
    out.written = std::move(verified->written);
    auto recorded = history::recordRun(verified->record);
    if (!recorded) {
        out.recordError = recorded.error().message;
    } else if (*recorded) {
        out.runId = (*recorded)->value();
    }
    return out;
}

CheckpointView::CheckpointView(JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_jobs(jobs)
    , m_openButton(new QPushButton(tr("Open Checkpoint…"), this))
    , m_verifyButton(new QPushButton(tr("Verify"), this))
    , m_manifestButton(new QPushButton(tr("Write Manifest"), this))
    , m_cancelButton(new QPushButton(tr("Cancel"), this))
    , m_pathLabel(new ElidedLabel(this))
    , m_progress(new QProgressBar(this))
    , m_progressTimer(new QTimer(this))
    , m_summary(new QLabel(this))
    , m_error(new QLabel(this))
    , m_verifyStatus(new QLabel(this))
    , m_filter(new QLineEdit(this))
    , m_statusFilter(new QComboBox(this))
    , m_model(new CheckpointTableModel(this))
    , m_proxy(new CheckpointFilterModel(this))
    , m_table(new QTableView(this))
    , m_verifyTable(new QTableWidget(0, 4, this))
{
    m_openButton->setObjectName(QStringLiteral("checkpointOpenButton"));
    m_openButton->setToolTip(
        tr("Open a checkpoint folder, a .safetensors or a .gguf file (File ▸ Open Checkpoint…)"));
    m_verifyButton->setToolTip(tr("Hash every file with SHA-256 against the folder's "
                                  "day0-manifest.json or SHA256SUMS"));
    m_manifestButton->setToolTip(
        tr("Hash the folder's files and write day0-manifest.json, to verify against later"));
    m_pathLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(true);
    m_progressTimer->setInterval(50);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setWordWrap(true);
    for (auto* label : { m_error, m_verifyStatus }) {
        label->setWordWrap(true);
        label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    }
    m_error->setStyleSheet(QStringLiteral("color: #c0392b;"));
    m_filter->setPlaceholderText(tr("Filter tensors by name"));
    m_statusFilter->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_filter->setClearButtonEnabled(true);

    m_proxy->setSourceModel(m_model);
    m_table->setModel(m_proxy);
    m_table->setObjectName(QStringLiteral("checkpointTensorTable"));
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(CheckpointTableModel::Name, Qt::AscendingOrder);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setShowGrid(false);
    m_table->setWordWrap(false);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(
        CheckpointTableModel::Name, QHeaderView::Stretch);

    m_verifyTable->setObjectName(QStringLiteral("checkpointVerifyTable"));
    m_verifyTable->setHorizontalHeaderLabels(
        { tr("File"), tr("Size"), tr("Status"), tr("Detail") });
    m_verifyTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_verifyTable->verticalHeader()->hide();
    m_verifyTable->setShowGrid(false);
    m_verifyTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_verifyTable->horizontalHeader()->setStretchLastSection(true);
    m_verifyTable->hide();
    setKeyColumns(*m_table,
        { CheckpointTableModel::Name, CheckpointTableModel::Dtype, CheckpointTableModel::Shape,
            CheckpointTableModel::Status });
    setKeyColumns(*m_verifyTable, { 0, 2, 3 }, 3);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_openButton);
    buttons->addWidget(m_verifyButton);
    buttons->addWidget(m_manifestButton);
    buttons->addWidget(m_cancelButton);
    buttons->addWidget(m_pathLabel, 1);
    auto* filters = new QHBoxLayout;
    filters->addWidget(m_filter, 1);
    filters->addWidget(m_statusFilter);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_table);
    split->addWidget(m_verifyTable);
    split->setSizes({ 300, 120 });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_summary);
    layout->addWidget(m_error);
    layout->addWidget(m_verifyStatus);
    layout->addLayout(filters);
    layout->addWidget(split, 1);

    connect(m_openButton, &QPushButton::clicked, this, &CheckpointView::chooseAndOpen);
    connect(m_verifyButton, &QPushButton::clicked, this, &CheckpointView::verify);
    connect(m_manifestButton, &QPushButton::clicked, this, &CheckpointView::writeManifest);
    connect(m_cancelButton, &QPushButton::clicked, this, &CheckpointView::cancel);
    connect(m_progressTimer, &QTimer::timeout, this, &CheckpointView::pollProgress);
    connect(m_filter, &QLineEdit::textChanged, m_proxy, &CheckpointFilterModel::setNameFilter);
    connect(m_statusFilter, &QComboBox::currentIndexChanged, this, [this] {
        const QVariant v = m_statusFilter->currentData();
        m_proxy->setStatus(v.isValid() ? std::optional(ck::TensorStatus(v.toInt())) : std::nullopt);
    });
    connect(&m_jobs, &JobRunner::jobFinished, this, &CheckpointView::onJobFinished);

    m_summary->setText(tr("No checkpoint open. Open a folder of safetensors shards, a "
                          ".safetensors or a .gguf file to list its tensors and verify it."));
    m_error->hide();
    m_verifyStatus->hide();
    m_manifestButton->hide();
    updateStatusFilter();
    updateButtons();
}

CheckpointView::~CheckpointView() { m_ticket.cancel(); }

QString CheckpointView::summaryText() const { return m_summary->text(); }
QString CheckpointView::verifyText() const { return m_verifyStatus->text(); }
QString CheckpointView::errorText() const
{
    return m_error->isHidden() ? QString() : m_error->text();
}

void CheckpointView::chooseAndOpen()
{
    QString path = QFileDialog::getExistingDirectory(
        this, tr("Open a checkpoint folder (cancel to pick one file)"), m_path);
    if (path.isEmpty()) {
        path = QFileDialog::getOpenFileName(this, tr("Open a checkpoint file"), m_path,
            tr("Checkpoints (*.safetensors *.gguf);;All files (*)"));
    }
    if (!path.isEmpty()) {
        openCheckpoint(path);
    }
}

void CheckpointView::startJob(Job job, const QString& title)
{
    m_running = job;
    m_jobTitle = title;
    m_progress->setRange(0, 0);
    m_progress->setFormat(title + QStringLiteral("…"));
    m_progress->show();
    m_progressTimer->start();
    m_error->hide();
    updateButtons();
}

void CheckpointView::finishJob()
{
    m_running = Job::None;
    m_progressTimer->stop();
    m_progress->hide();
    updateButtons();
}

void CheckpointView::openCheckpoint(const QString& path)
{
    m_path = path;
    m_pathLabel->setFullText(QDir::toNativeSeparators(path));
    startJob(Job::Open, tr("Opening %1").arg(displayName(path)));
    const std::string p = fromQString(path);
    m_jobs.start<OpenResult>(
        m_ticket, m_jobTitle, this,
        [p](Progress& progress, std::stop_token stop) {
            OpenResult out;
            progress.setStage("reading headers and index");
            auto opened = ck::Checkpoint::open(p);
            if (!opened) {
                out.error = opened.error();
                return out;
            }
            if (stop.stop_requested()) {
                out.error = Error::cancelled();
                return out;
            }
            progress.setStage("checking tensors against config.json");
            auto report = ck::reportTensors(*opened);
            if (!report) {
                out.error = report.error();
                return out;
            }
            out.report = std::move(*report);
            out.checkpoint = std::make_shared<const ck::Checkpoint>(std::move(*opened));
            return out;
        },
        [this](OpenResult&& r) { deliverOpen(std::move(r)); });
}

void CheckpointView::deliverOpen(OpenResult&& result)
{
    finishJob();
    m_verifyTable->setRowCount(0);
    m_verifyTable->hide();
    m_verifyStatus->hide();
    m_manifestButton->hide();
    if (result.error) {
        m_checkpoint.reset();
        m_model->setReport({});
        m_summary->setText(tr("Could not open %1.").arg(QDir::toNativeSeparators(m_path)));
        showError(toQString(result.error->message));
        updateStatusFilter();
        updateButtons();
        return;
    }
    m_checkpoint = std::move(result.checkpoint);
    m_model->setReport(std::move(result.report));
    // Structural problems (a truncated shard, an index naming a missing file) are listed, each
    // naming its file; the tensors that could be read are still shown.
    QStringList problems;
    for (const auto& p : m_checkpoint->problems()) {
        problems << (p.warning ? tr("warning: ") : QString()) + toQString(p.error.message);
    }
    constexpr int kShown = 12;
    if (problems.size() > kShown) {
        const auto more = problems.size() - kShown;
        problems = problems.mid(0, kShown);
        problems << tr("… and %1 more").arg(more);
    }
    if (!problems.isEmpty()) {
        showError(problems.join(QLatin1Char('\n')));
    }
    updateSummary();
    updateStatusFilter();
    updateButtons();
    emit opened(m_path);
}

void CheckpointView::verify()
{
    if (!m_checkpoint) {
        return;
    }
    startJob(Job::Verify, tr("Verifying %1").arg(displayName(m_path)));
    m_jobs.start<HashResult>(
        m_ticket, m_jobTitle, this,
        [ckpt = m_checkpoint, path = fromQString(m_path)](Progress& progress,
            std::stop_token stop) { return hashJob(ckpt, path, false, progress, stop); },
        [this](HashResult&& r) { deliverVerify(std::move(r)); });
}

void CheckpointView::announceRecord(const HashResult& result)
{
    if (result.runId) {
        emit runRecorded(*result.runId);
    } else if (!result.recordError.empty()) {
        emit recordFailed(
            tr("The verification was not recorded: %1").arg(toQString(result.recordError)));
    }
}

void CheckpointView::deliverVerify(HashResult&& result)
{
    finishJob();
    if (result.error) {
        showError(toQString(result.error->message));
        return;
    }
    announceRecord(result);
    if (!result.integrity) {
        m_verifyStatus->setText(
            tr("%1 has no %2 or %3, so its file hashes cannot be checked. Write Manifest hashes "
               "the files now and writes %2 beside them, to verify against later.")
                .arg(QDir::toNativeSeparators(toQString(m_checkpoint->root().string())),
                    toQString(std::string(ck::kManifestName)),
                    toQString(std::string(ck::kSha256SumsName))));
        m_verifyStatus->setStyleSheet(QString());
        m_verifyStatus->show();
        m_manifestButton->show();
        m_manifestButton->setEnabled(true);
        return;
    }
    showIntegrity(*result.integrity);
    emit verified(result.integrity->ok());
}

void CheckpointView::showIntegrity(const ck::IntegrityReport& report)
{
    m_verifyTable->setSortingEnabled(false);
    m_verifyTable->setRowCount(int(report.files.size()));
    QStringList failures;
    for (int row = 0; row < int(report.files.size()); ++row) {
        const auto& f = report.files[std::size_t(row)];
        auto* status = new QTableWidgetItem(toQString(std::string(ck::fileStatusName(f.status))));
        status->setForeground(fileStatusColor(f.status));
        m_verifyTable->setItem(row, 0, new QTableWidgetItem(toQString(f.file)));
        auto* size = new QTableWidgetItem(bytesText(Bytes(std::int64_t(f.actualSize))));
        size->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        m_verifyTable->setItem(row, 1, size);
        m_verifyTable->setItem(row, 2, status);
        m_verifyTable->setItem(row, 3,
            new QTableWidgetItem(
                f.message.empty() ? toQString(f.actualSha256) : toQString(f.message)));
        if (f.status != ck::FileStatus::Ok) {
            failures << toQString(f.message);
        }
    }
    m_verifyTable->show();
    const double rate = report.seconds > 0 ? double(report.bytesHashed) / report.seconds : 0.0;
    m_verifyStatus->setText(
        tr("%1: %2 of %3 files ok, %4 hashed in %5 (%6/s)")
            .arg(toQString(report.manifest))
            .arg(report.files.size() - report.failures())
            .arg(report.files.size())
            .arg(bytesText(Bytes(std::int64_t(report.bytesHashed))),
                durationText(Seconds(report.seconds)), bytesText(Bytes(std::int64_t(rate)))));
    m_verifyStatus->setStyleSheet(
        report.ok() ? QStringLiteral("color: #27ae60;") : QStringLiteral("color: #c0392b;"));
    m_verifyStatus->show();
    if (!failures.isEmpty()) {
        showError(failures.join(QLatin1Char('\n')));
    }
}

void CheckpointView::writeManifest()
{
    if (!m_checkpoint) {
        return;
    }
    startJob(Job::WriteManifest, tr("Writing the manifest of %1").arg(displayName(m_path)));
    m_jobs.start<HashResult>(
        m_ticket, m_jobTitle, this,
        [ckpt = m_checkpoint, path = fromQString(m_path)](Progress& progress,
            std::stop_token stop) { return hashJob(ckpt, path, true, progress, stop); },
        [this](HashResult&& r) { deliverManifest(std::move(r)); });
}

void CheckpointView::deliverManifest(HashResult&& result)
{
    finishJob();
    if (result.error) {
        showError(toQString(result.error->message));
        return;
    }
    announceRecord(result);
    m_verifyStatus->setText(tr("Wrote %1 (%2 files). Verify checks the files against it.")
                                .arg(QDir::toNativeSeparators(
                                    toQString((m_checkpoint->root() / ck::kManifestName).string())))
                                .arg(result.written->files.size()));
    m_verifyStatus->setStyleSheet(QString());
    m_verifyStatus->show();
    m_manifestButton->hide();
}

void CheckpointView::cancel()
{
    if (m_running == Job::None) {
        return;
    }
    const Job was = m_running;
    m_ticket.cancel();
    finishJob();
    showError(was == Job::Open ? tr("Opening %1 was cancelled.").arg(m_path)
                               : tr("Hashing was cancelled; no file was judged."));
}

void CheckpointView::onJobFinished()
{
    // A job cancelled from the status bar never delivers: leave the busy state then (delivery
    // follows jobFinished at once, so by the next turn of the event loop it has happened).
    QTimer::singleShot(0, this, [this] {
        if (m_running == Job::None) {
            return;
        }
        const auto active = m_jobs.activeJobs();
        const bool running = std::any_of(active.begin(), active.end(),
            [this](const JobInfo& job) { return job.title == m_jobTitle; });
        if (!running) {
            m_ticket.cancel();
            finishJob();
            showError(tr("%1 was cancelled.").arg(m_jobTitle));
        }
    });
}

void CheckpointView::pollProgress()
{
    for (const auto& job : m_jobs.activeJobs()) {
        if (job.title != m_jobTitle) {
            continue;
        }
        const auto total = job.progress->total();
        if (total > 0) {
            m_progress->setRange(0, 1000);
            m_progress->setValue(int(job.progress->fraction() * 1000));
            m_progress->setFormat(m_jobTitle + QStringLiteral(": %p%"));
        }
        return;
    }
}

void CheckpointView::updateSummary()
{
    if (!m_checkpoint) {
        return;
    }
    const auto& report = m_model->report();
    QString text = tr("<b>%1</b> · %2 · %3 files · %4 tensors, %5")
                       .arg(displayName(m_path).toHtmlEscaped(),
                           toQString(std::string(ck::checkpointFormatName(m_checkpoint->format()))))
                       .arg(m_checkpoint->files().size())
                       .arg(report.rows.size() - report.count(ck::TensorStatus::Missing))
                       .arg(bytesText(Bytes(std::int64_t(report.bytes))));
    if (report.checked) {
        QStringList counts;
        for (const auto s : kFilterStatuses) {
            if (const auto c = report.count(s); c > 0 || s == ck::TensorStatus::Ok) {
                counts << tr("%1 %2").arg(c).arg(statusName(s));
            }
        }
        text += QStringLiteral(" · ") + counts.join(QStringLiteral(", "));
        text += report.ok() ? tr(" — matches config.json") : tr(" — differs from config.json");
    } else {
        text += tr(" · not checked (no config.json beside the weights)");
    }
    m_summary->setText(text);
}

void CheckpointView::updateStatusFilter()
{
    const QSignalBlocker block(m_statusFilter);
    m_statusFilter->clear();
    const auto& report = m_model->report();
    m_statusFilter->addItem(tr("All statuses (%1)").arg(report.rows.size()));
    if (report.checked) {
        for (const auto s : kFilterStatuses) {
            m_statusFilter->addItem(tr("%1 (%2)").arg(statusName(s)).arg(report.count(s)), int(s));
        }
    }
    m_statusFilter->setEnabled(report.checked);
    m_proxy->setStatus(std::nullopt);
}

void CheckpointView::updateButtons()
{
    const bool idle = m_running == Job::None;
    m_openButton->setEnabled(idle);
    m_verifyButton->setEnabled(idle && m_checkpoint != nullptr);
    m_manifestButton->setEnabled(idle && m_checkpoint != nullptr);
    m_cancelButton->setVisible(!idle);
    if (idle) {
        m_progress->hide();
    }
}

void CheckpointView::showError(const QString& text)
{
    m_error->setText(text);
    m_error->setVisible(!text.isEmpty());
}

} // namespace day0::ui
