#pragma once

#include "pipeline/day0_steps.h"

#include <QString>
#include <QWidget>

#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;

namespace day0 {
class Progress;
}

namespace day0::ui {

class JobRunner;
class JobTicket;
class Session;

/// Runs the Day-0 validation (`day0 validate`, the same core) as a background job: pick the
/// model or checkpoint (the session's by default), plan, precision and tokens; Start shows each
/// step with a status icon, duration and summary as it finishes, the running step's progress
/// and a log; Cancel stops it. When it ends the JUnit XML, JSON and HTML reports are written to
/// the work folder, the run is recorded (Session::runRecorded) and "Open report" opens the HTML.
class PipelinePanel : public QWidget {
    Q_OBJECT
public:
    PipelinePanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~PipelinePanel() override;

    /// Starts a validation with the current inputs (cancels a running one).
    void start();
    /// Requests the running validation to stop.
    void cancel();
    /// Where validations keep their checkpoints and reports; default: defaultWorkDir(model).
    void setWorkDir(const QString& dir) { m_workDir = dir; }
    /// The HTML report of the last finished validation, empty before one.
    [[nodiscard]] QString reportPath() const { return m_reportPath; }
    /// True while a validation runs.
    [[nodiscard]] bool running() const;

    [[nodiscard]] QLineEdit* modelEdit() const { return m_model; }
    [[nodiscard]] QLineEdit* planEdit() const { return m_plan; }
    [[nodiscard]] QComboBox* precisionBox() const { return m_precision; }
    [[nodiscard]] QComboBox* backendBox() const { return m_backend; }
    [[nodiscard]] QCheckBox* streamBox() const { return m_stream; }
    [[nodiscard]] QTableWidget* stepTable() const { return m_steps; }
    [[nodiscard]] QPlainTextEdit* logView() const { return m_log; }
    [[nodiscard]] QPushButton* startButton() const { return m_start; }
    [[nodiscard]] QPushButton* cancelButton() const { return m_cancel; }
    [[nodiscard]] QPushButton* openReportButton() const { return m_open; }
    [[nodiscard]] QLabel* summaryLabel() const { return m_summary; }

signals:
    /// A validation ended (passed, failed, cancelled or could not start).
    void finished(int exitCode);

private:
    struct Outcome;

    void buildUi();
    void followSession();
    void resetSteps();
    void stepStarted(quint64 generation, const pipeline::StepRecord& step);
    void stepFinished(quint64 generation, const pipeline::StepRecord& step);
    void deliver(Outcome&& outcome);
    void pollProgress();
    void openReport();
    [[nodiscard]] pipeline::ValidateOptions options() const;

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    std::shared_ptr<Progress> m_stepProgress;
    quint64 m_generation = 0;
    QString m_workDir;
    QString m_reportPath;
    QLineEdit* m_model = nullptr;
    QLineEdit* m_plan = nullptr;
    QComboBox* m_precision = nullptr;
    QComboBox* m_backend = nullptr; ///< where the target runs ("cpu" or a backend plugin)
    QSpinBox* m_tokens = nullptr;
    QCheckBox* m_serve = nullptr; ///< the serving step, on as in day0 validate
    QCheckBox* m_stream = nullptr; ///< --stream: the weights read layer by layer
    QPushButton* m_start = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_open = nullptr;
    QTableWidget* m_steps = nullptr;
    QProgressBar* m_progress = nullptr;
    QPlainTextEdit* m_log = nullptr;
    QLabel* m_summary = nullptr;
    QTimer* m_timer = nullptr;
};

} // namespace day0::ui
