#pragma once

#include "plan/planner.h"
#include "profile/step_times.h"

#include <QWidget>

#include <functional>
#include <memory>
#include <string>

class QCheckBox;
class QComboBox;
class QLabel;
class QDoubleSpinBox;
class QSortFilterProxyModel;
class QSplitter;
class QSpinBox;
class QTableView;

namespace day0::ui {

class JobRunner;
class JobTicket;
class LayoutTableModel;
class PlotWidget;
class RejectionModel;
class Session;

/// Runs the core planner for the session's model, cluster and workload off the GUI thread and
/// shows the feasible layouts (sortable table), memory against throughput with the Pareto front,
/// and the rejected layouts grouped by reason. Selecting a layout makes it the session's plan,
/// so the memory and topology panels follow. After a model or cluster change the fastest layout
/// is applied.
class PlannerPanel : public QWidget {
    Q_OBJECT
public:
    PlannerPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~PlannerPanel() override;

    /// Starts a sweep (the newest request wins; the status bar can cancel it).
    void runPlanner();
    /// Sets the memory headroom (percent of device memory left free beyond the estimate; the
    /// preference, 10 by default) and plans again when a model is open.
    void setHeadroomPercent(int percent);
    [[nodiscard]] int headroomPercent() const;
    /// Applies the layout in row `row` of the layout model (fastest first) to the session.
    void applyLayout(int row);

    [[nodiscard]] LayoutTableModel* layoutModel() const { return m_layouts; }
    [[nodiscard]] RejectionModel* rejectionModel() const { return m_rejections; }
    [[nodiscard]] QTableView* layoutView() const { return m_layoutView; }
    [[nodiscard]] PlotWidget* scatter() const { return m_scatter; }
    [[nodiscard]] QString summaryText() const;

    /// Below this width the chart goes under the tables, so the table's key columns and their
    /// headers are read whole (the docked default at 1280×720).
    static constexpr int kSideBySideWidth = 900;

signals:
    /// A sweep finished and the table holds its result.
    void planned();

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    /// `memoryWhy`: how a layout's memory was computed, asked when its Memory tooltip shows.
    void display(Result<plan::PlanResult>&& result,
        std::function<std::string(const plan::PlannedLayout&)> memoryWhy = {});
    void showScatter();
    /// The summary: the sweep's, then the open trace's measured step beside the best layout's
    /// estimate (training, when the trace marks ProfilerStep ranges).
    void showSummary();
    /// Reads the open trace's ProfilerStep ranges off the GUI thread, then shows the summary.
    void readTraceSteps();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    std::unique_ptr<JobTicket> m_stepsTicket; ///< reading the open trace's steps
    bool m_applyBest = true;
    plan::Mode m_mode = plan::Mode::Train;
    LayoutTableModel* m_layouts = nullptr;
    RejectionModel* m_rejections = nullptr;
    QSortFilterProxyModel* m_layoutProxy = nullptr;
    QTableView* m_layoutView = nullptr;
    QTableView* m_rejectionView = nullptr;
    PlotWidget* m_scatter = nullptr;
    QSplitter* m_split = nullptr; ///< tables beside the chart, or above it when narrow
    QSpinBox* m_top = nullptr;
    QDoubleSpinBox* m_headroom = nullptr;
    QComboBox* m_precision = nullptr; ///< BF16 / the checkpoint's, FP8 weights, FP8 weights + KV
    QCheckBox* m_overlap = nullptr; ///< TP and expert all-to-all overlapped with compute
    QCheckBox* m_nodeDedup = nullptr; ///< expert dispatch deduplicated per node
    QLabel* m_summary = nullptr;
    QString m_sweepSummary; ///< the sweep's part of the summary
    double m_bestStep = 0; ///< the best training layout's estimated step, seconds; 0: none
    profile::StepTimes m_steps; ///< the open trace's ProfilerStep ranges
};

} // namespace day0::ui
