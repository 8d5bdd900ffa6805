#pragma once

#include <QWidget>

#include <memory>
#include <optional>
#include <string>

// Declared only: moc cannot parse <compare>, which the core headers open with.
namespace day0::history {
struct BenchComparison;
enum class LayerChange;
struct MemorySlot;
struct RunComparison;
}

class QComboBox;
class QSplitter;
class QLabel;
class QTableView;

namespace day0::ui {

class BenchComparisonView;
class DeltaTableModel;
class PlotWidget;

/// Two runs side by side, or one run alone: the error-versus-depth curves of both, the
/// layers × sub-modules heatmap of the change from A to B, memory bars of each run's shown rank,
/// and the table of timing, metric and memory deltas. Every number it draws comes from
/// history::compareRuns and the views of history/comparison_views.h; this widget only picks the
/// metric, sub-module, change measure and rank, and draws. GUI-thread object.
class RunComparisonView : public QWidget {
    Q_OBJECT
public:
    explicit RunComparisonView(QWidget* parent = nullptr);
    ~RunComparisonView() override;

    /// Shows `comparison` (A is the baseline). With `single`, shows run A alone. With `bench`
    /// (either run is a `bench serve` run), the load levels side by side take the place of the
    /// per-layer views and memory.
    void setComparison(std::shared_ptr<const history::RunComparison> comparison, bool single,
        std::shared_ptr<const history::BenchComparison> bench = nullptr);
    /// Empties every view and shows `message` instead.
    void clear(const QString& message);

    [[nodiscard]] const history::RunComparison* comparison() const { return m_comparison.get(); }
    [[nodiscard]] bool single() const { return m_single; }
    [[nodiscard]] PlotWidget* depthPlot() const { return m_depth; }
    [[nodiscard]] PlotWidget* heatmapPlot() const { return m_heatmap; }
    [[nodiscard]] PlotWidget* memoryPlot() const { return m_memory; }
    [[nodiscard]] BenchComparisonView* benchView() const { return m_bench; }
    [[nodiscard]] QTableView* deltaView() const { return m_deltaView; }
    [[nodiscard]] DeltaTableModel* deltaModel() const { return m_deltas; }
    /// The layer metric, sub-module, change measure and memory rank choosers.
    [[nodiscard]] QComboBox* metricBox() const { return m_metricBox; }
    [[nodiscard]] QComboBox* subModuleBox() const { return m_subModuleBox; }
    [[nodiscard]] QComboBox* changeBox() const { return m_changeBox; }
    [[nodiscard]] QComboBox* slotBox() const { return m_slotBox; }
    [[nodiscard]] QString headerText() const;

    /// The metric, sub-module ("" = layer output), change measure and rank now chosen.
    [[nodiscard]] std::string metric() const;
    [[nodiscard]] std::string subModule() const;
    [[nodiscard]] history::LayerChange change() const;
    [[nodiscard]] std::optional<history::MemorySlot> memorySlot() const;

private:
    void fillChoosers();
    void fillSubModules();
    void showHeader();
    void showDepth();
    void showHeatmap();
    void showMemory();

    std::shared_ptr<const history::RunComparison> m_comparison;
    bool m_single = false;
    QLabel* m_header = nullptr;
    QWidget* m_layerControls = nullptr; ///< metric, sub-module and change choosers
    QWidget* m_layerViews = nullptr; ///< depth curve and heatmap; hidden for runs without layers
    QComboBox* m_metricBox = nullptr;
    QComboBox* m_subModuleBox = nullptr;
    QComboBox* m_changeBox = nullptr;
    QComboBox* m_slotBox = nullptr;
    PlotWidget* m_depth = nullptr;
    PlotWidget* m_heatmap = nullptr;
    PlotWidget* m_memory = nullptr;
    BenchComparisonView* m_bench = nullptr; ///< shown for bench runs
    QTableView* m_deltaView = nullptr;
    DeltaTableModel* m_deltas = nullptr;
};

} // namespace day0::ui
