#pragma once

#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "jobs/job_runner.h"

#include <QWidget>

#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;
class QTableWidget;
class QTimer;

namespace day0::ui {

class CheckpointFilterModel;
class ElidedLabel;
class CheckpointTableModel;

/// A checkpoint (folder, .safetensors or .gguf) opened in the model panel: its tensors with
/// their status against the architecture of the config.json beside them, filterable and
/// sortable, a summary line, and SHA-256 verification of its files against the manifest found
/// there (or writing one). Opening and hashing run as background jobs with progress and cancel;
/// errors are shown in place and name the file. Each finished verification is recorded in the
/// run store off the GUI thread, as `day0 verify` records it (a cancelled or failed-to-run one is
/// not). GUI-thread object.
class CheckpointView : public QWidget {
    Q_OBJECT
public:
    CheckpointView(JobRunner& jobs, QWidget* parent = nullptr);
    ~CheckpointView() override;

    /// Opens `path` in the background; the newest request wins.
    void openCheckpoint(const QString& path);
    /// Asks for a folder (or, when cancelled, a file) and opens it.
    void chooseAndOpen();
    /// Hashes the open checkpoint's files against its manifest in the background.
    void verify();
    /// Hashes the folder's files and writes day0-manifest.json there, in the background.
    void writeManifest();
    /// Stops the running job; its result is dropped.
    void cancel();

    [[nodiscard]] QString path() const { return m_path; }
    [[nodiscard]] bool busy() const { return m_running != Job::None; }
    [[nodiscard]] CheckpointTableModel* tableModel() const { return m_model; }
    [[nodiscard]] CheckpointFilterModel* filterModel() const { return m_proxy; }
    [[nodiscard]] QTableWidget* verifyTable() const { return m_verifyTable; }
    /// The summary line ("sharded safetensors · 5 files · 212 tensors, 4.2 MiB · 212 ok").
    [[nodiscard]] QString summaryText() const;
    /// The verification verdict or the manifest offer.
    [[nodiscard]] QString verifyText() const;
    /// The error shown in the panel (empty when none).
    [[nodiscard]] QString errorText() const;
    [[nodiscard]] QPushButton* verifyButton() const { return m_verifyButton; }
    [[nodiscard]] QPushButton* writeManifestButton() const { return m_manifestButton; }
    [[nodiscard]] QPushButton* cancelButton() const { return m_cancelButton; }

signals:
    /// A checkpoint finished opening (its table is filled).
    void opened(const QString& path);
    /// A verification delivered its report.
    void verified(bool ok);
    /// A verification was recorded in the run store as run `id` (actions::verifyRunRecord,
    /// the record of `day0 verify`).
    void runRecorded(qint64 id);
    /// A verification could not be recorded; the message names the store.
    void recordFailed(const QString& message);

private:
    enum class Job { None, Open, Verify, WriteManifest };
    struct OpenResult;
    struct HashResult;

    void startJob(Job job, const QString& title);
    void finishJob();
    void pollProgress();
    void onJobFinished();
    void deliverOpen(OpenResult&& result);
    static HashResult hashJob(std::shared_ptr<const checkpoint::Checkpoint> checkpoint,
        const std::string& path, bool writeManifest, Progress& progress, std::stop_token stop);
    void announceRecord(const HashResult& result);
    void deliverVerify(HashResult&& result);
    void deliverManifest(HashResult&& result);
    void showIntegrity(const checkpoint::IntegrityReport& report);
    void updateSummary();
    void updateStatusFilter();
    void updateButtons();
    void showError(const QString& text);

    JobRunner& m_jobs;
    JobTicket m_ticket;
    Job m_running = Job::None;
    QString m_jobTitle;
    QString m_path;
    std::shared_ptr<const checkpoint::Checkpoint> m_checkpoint;

    QPushButton* m_openButton = nullptr;
    QPushButton* m_verifyButton = nullptr;
    QPushButton* m_manifestButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    ElidedLabel* m_pathLabel = nullptr;
    QProgressBar* m_progress = nullptr;
    QTimer* m_progressTimer = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_verifyStatus = nullptr;
    QLineEdit* m_filter = nullptr;
    QComboBox* m_statusFilter = nullptr;
    CheckpointTableModel* m_model = nullptr;
    CheckpointFilterModel* m_proxy = nullptr;
    QTableView* m_table = nullptr;
    QTableWidget* m_verifyTable = nullptr;
};

} // namespace day0::ui
