#pragma once

#include "plan/memory_estimator.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;
class QTimer;
class QTreeWidget;

namespace day0::ui {

class JobRunner;
class JobTicket;
class PlotWidget;
class Session;

/// Per-device memory of the session's plan: controls for the workload, parallelism, dtypes and
/// training options; a stacked bar chart of the components per pipeline stage against the
/// device memory; memory against sequence length (training) or context (inference); and a
/// "does not fit by X GiB on rank R" verdict. Every change re-estimates off the GUI thread.
class MemoryPanel : public QWidget {
    Q_OBJECT
public:
    MemoryPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~MemoryPanel() override;

    /// The last estimate shown (tests); empty before the first or after an invalid plan.
    [[nodiscard]] const std::optional<plan::MemoryReport>& report() const { return m_report; }
    [[nodiscard]] PlotWidget* stageChart() const { return m_stageChart; }
    [[nodiscard]] PlotWidget* sweepChart() const { return m_sweepChart; }
    /// The verdict line ("fits …", "does not fit by …", or the plan's error).
    [[nodiscard]] QString verdict() const;
    /// Every figure of every stage, its tooltip the figure's formula and inputs.
    [[nodiscard]] QTreeWidget* figures() const { return m_figures; }
    /// The formula and inputs of the selected figure.
    [[nodiscard]] QString figureDetails() const;

    /// One point of the sweep chart: the most loaded rank at one length.
    struct SweepPoint {
        double length = 0;
        plan::RankMemory peak;
    };

private:
    struct Estimate {
        Result<plan::MemoryReport> report;
        std::vector<SweepPoint> sweep;
    };

    QWidget* createControls();
    void syncControls();
    void controlsEdited();
    void schedule();
    void display(Estimate&& estimate);
    void showStages(const plan::MemoryReport& report);
    void showSweep(const std::vector<SweepPoint>& sweep, double deviceMemory);
    void showFigures(const plan::MemoryReport& report);
    void showSelectedFigure();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    QTimer* m_debounce = nullptr;
    bool m_syncing = true; // controls are being filled from the session, not edited
    std::optional<plan::MemoryReport> m_report;

    QComboBox* m_mode = nullptr;
    QSpinBox* m_length = nullptr;
    QSpinBox* m_batch = nullptr;
    QSpinBox* m_tp = nullptr;
    QSpinBox* m_pp = nullptr;
    QSpinBox* m_ep = nullptr;
    QSpinBox* m_etp = nullptr;
    QSpinBox* m_dp = nullptr;
    QSpinBox* m_cp = nullptr;
    QSpinBox* m_vpp = nullptr;
    QSpinBox* m_microBatch = nullptr;
    QComboBox* m_zero = nullptr;
    QComboBox* m_recompute = nullptr;
    QComboBox* m_weights = nullptr;
    QComboBox* m_kv = nullptr;
    QComboBox* m_optimizer = nullptr;
    QLineEdit* m_command = nullptr;
    QLabel* m_verdict = nullptr;
    QLabel* m_details = nullptr;
    PlotWidget* m_stageChart = nullptr;
    PlotWidget* m_sweepChart = nullptr;
    QTreeWidget* m_figures = nullptr;
    QPlainTextEdit* m_figureDetails = nullptr;
};

} // namespace day0::ui
