#pragma once

#include "widgets/plot_widget.h"

#include <QAbstractTableModel>
#include <QWidget>

#include <memory>
#include <string>
#include <vector>

// Declared only: moc cannot parse <compare>, which the core headers open with.
namespace day0::history {
struct BenchComparison;
struct RunInfo;
}

class QComboBox;
class QLabel;
class QTableView;

namespace day0::ui {

/// The load levels of two `bench serve` runs side by side, one row per level and quantity
/// (TTFT/TPOT/ITL/E2EL percentiles, throughputs, goodput, completed, failed, errors by kind):
/// the level, the quantity, A, B, B − A and the relative change, formatted by unit as the delta
/// table formats them. Read-only; history::compareBenches computes every number.
class BenchLevelTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Level, Quantity, A, B, Change, Relative, ColumnCount };
    enum Roles { ValueRole = Qt::UserRole }; ///< the number behind a value cell (NaN if none)

    explicit BenchLevelTableModel(QObject* parent = nullptr);
    ~BenchLevelTableModel() override;

    void setComparison(std::shared_ptr<const history::BenchComparison> comparison);
    /// The row of `quantity` at `level`, or -1.
    [[nodiscard]] int rowOf(int level, const std::string& quantity) const;

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::shared_ptr<const history::BenchComparison> m_comparison;
    std::vector<std::pair<std::size_t, std::size_t>> m_rows; ///< (level, quantity) indices
};

/// Two bench runs compared in the runs panel: the latency-against-load curves of both overlaid
/// (a low and a high percentile of the chosen latency; legends name run and time) above the
/// per-level table. Runs that are not two benches of the same model are said so instead.
/// GUI-thread object.
class BenchComparisonView : public QWidget {
    Q_OBJECT
public:
    explicit BenchComparisonView(QWidget* parent = nullptr);
    ~BenchComparisonView() override;

    /// Shows the levels of `a` (and `b` unless `single`).
    void setComparison(std::shared_ptr<const history::BenchComparison> comparison,
        const history::RunInfo& a, const history::RunInfo& b, bool single);

    [[nodiscard]] PlotWidget* curvePlot() const { return m_curves; }
    [[nodiscard]] QTableView* levelView() const { return m_view; }
    [[nodiscard]] BenchLevelTableModel* levelModel() const { return m_model; }
    [[nodiscard]] QComboBox* latencyBox() const { return m_latency; }
    [[nodiscard]] QString noteText() const;
    /// The curves handed to the plot: names (run, time, latency, percentile), colours, points.
    [[nodiscard]] const QVector<PlotSeries>& curves() const { return m_series; }

private:
    void showCurves();

    std::shared_ptr<const history::BenchComparison> m_comparison;
    QString m_nameA;
    QString m_nameB;
    bool m_single = false;
    QLabel* m_note = nullptr;
    QComboBox* m_latency = nullptr;
    PlotWidget* m_curves = nullptr;
    QVector<PlotSeries> m_series;
    QTableView* m_view = nullptr;
    BenchLevelTableModel* m_model = nullptr;
};

} // namespace day0::ui
