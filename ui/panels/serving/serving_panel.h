#pragma once

#include "actions/staged_bench.h"

#include <QWidget>

#include <memory>

class QCheckBox;
class QComboBox;
class QDockWidget;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;
class QTimer;

namespace day0 {
class Progress;
}

namespace day0::ui {

class BenchLevelModel;
class ElidedLabel;
class JobRunner;
class JobTicket;
class LocalServerBox;
class PlotWidget;
class RequestTimeline;
class Session;
class StageTable;

/// Load tests of an OpenAI-compatible endpoint (`day0 bench serve --stages`, the same core:
/// actions::runStagedBench): the target is the session's checkpoint served in-process on a
/// loopback port (a bundled model or a config: its shrunk checkpoint) or a URL typed by the user;
/// the load levels are edited in a table; Run runs them in order as a background job with
/// progress and Cancel. Each finished level adds a row of TTFT/TPOT/ITL/E2EL percentiles,
/// throughputs, goodput under the SLOs, errors by kind and the --check outcome, and a point of
/// the tokens/s/user against tokens/s curve; the selected level's requests (the newest level's
/// until one is selected) are drawn on a timeline. A standing local server of the session's
/// checkpoint can be started and stopped (LocalServerBox): while it runs, benches of the session
/// checkpoint run against it instead of a server of their own. A finished run is recorded in
/// the run store (a bench run, as the CLI's). For a model that runs shrunk, the default stages
/// run once when the panel is first shown (not recorded).
class ServingPanel : public QWidget {
    Q_OBJECT
public:
    ServingPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~ServingPanel() override;

    /// Runs the stages in the table against the chosen target (cancels a running bench).
    void run();
    /// Requests the running bench to stop (requests in flight finish first).
    void cancel();
    /// True while a bench runs.
    [[nodiscard]] bool running() const;

    // Tests and screenshots.
    [[nodiscard]] QComboBox* targetBox() const { return m_target; }
    [[nodiscard]] QLineEdit* urlEdit() const { return m_url; }
    [[nodiscard]] StageTable* stageTable() const { return m_stages; }
    [[nodiscard]] QCheckBox* checkBox() const { return m_check; }
    [[nodiscard]] QDoubleSpinBox* ttftSlo() const { return m_ttft; }
    [[nodiscard]] QDoubleSpinBox* tpotSlo() const { return m_tpot; }
    [[nodiscard]] QPushButton* runButton() const { return m_runButton; }
    [[nodiscard]] QPushButton* cancelButton() const { return m_cancelButton; }
    [[nodiscard]] QTableView* resultView() const { return m_resultView; }
    [[nodiscard]] BenchLevelModel* resultModel() const { return m_model; }
    [[nodiscard]] PlotWidget* paretoPlot() const { return m_pareto; }
    [[nodiscard]] PlotWidget* latencyPlot() const { return m_latency; }
    [[nodiscard]] QLabel* summaryLabel() const { return m_summary; }
    [[nodiscard]] RequestTimeline* requestTimeline() const { return m_timeline; }
    [[nodiscard]] LocalServerBox* serverBox() const { return m_serverBox; }
    /// The run id the last finished bench was recorded as; 0 when none.
    [[nodiscard]] qint64 recordedRun() const { return m_recorded; }

signals:
    /// A bench ended: 0 every request completed (and matched, when checked), 1 a request failed
    /// or diverged, 2 it could not run (the summary says why), 3 cancelled.
    void finished(int exitCode);

protected:
    void showEvent(QShowEvent* event) override;

private:
    struct Outcome;

    void buildUi();
    /// Runs the default levels once, not recorded, when the panel is looked at with a model that
    /// runs shrunk.
    void startDemoIfWanted();
    void followSession();
    void startJob(actions::StagedBenchRequest request, bool record);
    void levelDone(quint64 generation, actions::BenchLevelOutcome&& level);
    void deliver(quint64 generation, Outcome&& outcome);
    void pollProgress();
    void refreshCharts();
    /// Shows level `row`'s requests on the timeline (the empty state for none).
    void showTimeline(int row);
    void setIdle();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    std::shared_ptr<Progress> m_progressState;
    quint64 m_generation = 0;
    int m_levelCount = 0;
    bool m_demoDone = false;
    QDockWidget* m_dock = nullptr; ///< the dock holding the panel, when docked
    bool m_dockShown = false; ///< its tab is the current one
    qint64 m_recorded = 0;
    QComboBox* m_target = nullptr;
    ElidedLabel* m_checkpoint = nullptr;
    QLineEdit* m_url = nullptr;
    StageTable* m_stages = nullptr;
    QDoubleSpinBox* m_ttft = nullptr;
    QDoubleSpinBox* m_tpot = nullptr;
    QDoubleSpinBox* m_e2el = nullptr;
    QCheckBox* m_check = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_summary = nullptr;
    BenchLevelModel* m_model = nullptr;
    QTableView* m_resultView = nullptr;
    PlotWidget* m_pareto = nullptr;
    PlotWidget* m_latency = nullptr;
    RequestTimeline* m_timeline = nullptr;
    LocalServerBox* m_serverBox = nullptr;
    QTimer* m_timer = nullptr;
};

} // namespace day0::ui
