#pragma once

#include "numerics/comparison_grid.h"
#include "panels/precision/end_to_end_view.h"
#include "panels/precision/precision_charts.h"
#include "panels/precision/precision_work.h"

#include <QWidget>

#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTimer;

namespace day0::ui {

class ElidedLabel;
class JobRunner;
class JobTicket;
class PlotWidget;
class Session;

/// Precision of a run against its reference, layer by layer (issue #5): a layers × sub-modules
/// (or anchors × token positions) heatmap of the chosen error metric on a log scale, hover with
/// the verdict and the tolerance rule that decided it; a clicked cell's error histogram,
/// value-against-error scatter and own-against-inherited error; error against depth with the
/// tolerance band, noise floor and first divergence, the previous comparison overlaid. Runs the
/// session's model in a chosen precision (its shrunk checkpoint for a bundled model), upcasts a
/// layer and reruns, or compares two dump folders, all as background jobs; results are recorded
/// in the run store. On the embedded demo it runs bf16 against fp32 on first show.
class PrecisionPanel : public QWidget {
    Q_OBJECT
public:
    PrecisionPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~PrecisionPanel() override;

    /// Runs the session's model as `request` asks (its modelSource is filled from the session
    /// when empty); the comparison shown so far becomes the overlay.
    void run(PrecisionRunRequest request);
    /// Reruns the current run with decoder layer `layer` in the reference precision.
    void upcastLayer(int layer);
    /// Compares two dump folders (reference first).
    void compareDumps(const QString& reference, const QString& target);
    /// Switches the heatmap between layers × sub-modules and anchors × token positions.
    void setPositionsView(bool positions);
    void setMetric(numerics::GridMetric metric);
    /// Selects a heatmap cell (row 0 at the top) and computes its detail, as a click does.
    void selectCell(int row, int column);

    // Tests and screenshots.
    /// The "End to end" view (`day0 eval`) and the tabs that switch to it.
    [[nodiscard]] EndToEndView* endToEndView() const { return m_endToEnd; }
    void showEndToEnd();
    [[nodiscard]] PlotWidget* heatmapPlot() const { return m_heatmapPlot; }
    [[nodiscard]] PlotWidget* depthPlot() const { return m_depthPlot; }
    [[nodiscard]] PlotWidget* histogramPlot() const { return m_histogramPlot; }
    [[nodiscard]] PlotWidget* scatterPlot() const { return m_scatterPlot; }
    [[nodiscard]] PlotWidget* ownPlot() const { return m_ownPlot; }
    [[nodiscard]] std::shared_ptr<const PrecisionRun> current() const { return m_primary; }
    [[nodiscard]] std::shared_ptr<const PrecisionRun> overlay() const { return m_overlay; }
    /// The comparison row behind a heatmap cell, -1 when none.
    [[nodiscard]] int rowAt(int row, int column) const { return m_heatmap.rowAt(row, column); }
    /// The sub-module the depth chart follows through the layers ("" = the layer outputs).
    [[nodiscard]] const std::string& depthSubModule() const { return m_depthSubModule; }
    /// The heatmap row showing decoder layer `layer`, -1 when none.
    [[nodiscard]] int heatmapRowOfLayer(int layer) const;
    [[nodiscard]] const std::optional<CellDetail>& detail() const { return m_detail; }
    /// The error shown in the panel, empty when none.
    [[nodiscard]] QString errorText() const;

signals:
    /// A run or comparison finished (shown, or its error shown).
    void resultDelivered();
    /// A comparison of dumps still running shows its first `rows` judged captures.
    void comparisonGrew(int rows);

protected:
    void showEvent(QShowEvent* event) override;

private:
    /// True for a run of the session's current model (overlays are of one model only).
    [[nodiscard]] bool isOfSessionModel(const PrecisionRun* run) const;

    using Outcome = Result<std::shared_ptr<const PrecisionRun>>;
    /// Hands a comparison so far (PrecisionRun::partial) to the GUI thread.
    using Growing = std::function<void(std::shared_ptr<const PrecisionRun>&&)>;
    using Work = std::function<Outcome(Progress&, std::stop_token, const Growing&)>;

    QWidget* createControls();
    void startDemoIfWanted();
    void startFromControls();
    void startRun(PrecisionRunRequest request);
    void chooseDumps();
    void startJob(const QString& title, Work work);
    void showGrowing(std::shared_ptr<const PrecisionRun>&& sofar);
    void deliver(Outcome&& outcome);
    void refreshViews();
    void updateDepth();
    void showHeatmap(PrecisionHeatmap&& heatmap);
    void selectDefaultCell();
    void showCellMenu(int row, int column, const QPoint& globalPos);
    void showError(const QString& message);
    void pollProgress();
    void updateSummary();
    void updateCheckpointLabel();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_runTicket;
    std::unique_ptr<JobTicket> m_gridTicket;
    std::unique_ptr<JobTicket> m_detailTicket;
    std::shared_ptr<const PrecisionRun> m_primary;
    std::shared_ptr<const PrecisionRun> m_overlay;
    /// What was shown when the running job started: restored when it fails or is cancelled
    /// after showing its comparison so far.
    std::shared_ptr<const PrecisionRun> m_settledPrimary;
    std::shared_ptr<const PrecisionRun> m_settledOverlay;
    PrecisionHeatmap m_heatmap;
    std::optional<CellDetail> m_detail;
    std::string m_depthSubModule; ///< what the depth chart follows ("" = layer outputs)
    QString m_runTitle;
    bool m_demoDone = false; ///< the demo ran for this model (or the user loaded something)
    bool m_userAction = false; ///< the user ran or loaded something: no more demos

    QComboBox* m_target = nullptr;
    QCheckBox* m_fp32Leg = nullptr;
    QCheckBox* m_stream = nullptr; ///< stream the weights layer by layer
    QComboBox* m_backend = nullptr; ///< "cpu" or a backend plugin's name
    QComboBox* m_reference = nullptr;
    QLineEdit* m_prompt = nullptr;
    QSpinBox* m_tokens = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QPushButton* m_compareButton = nullptr;
    QProgressBar* m_progress = nullptr;
    ElidedLabel* m_checkpoint = nullptr;
    QComboBox* m_view = nullptr;
    QComboBox* m_metric = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_error = nullptr;
    QTimer* m_poll = nullptr;
    PlotWidget* m_heatmapPlot = nullptr;
    PlotWidget* m_depthPlot = nullptr;
    PlotWidget* m_histogramPlot = nullptr;
    PlotWidget* m_scatterPlot = nullptr;
    PlotWidget* m_ownPlot = nullptr;
    QTabWidget* m_views = nullptr;
    EndToEndView* m_endToEnd = nullptr;
};

} // namespace day0::ui
