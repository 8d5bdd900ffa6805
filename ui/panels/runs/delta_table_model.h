#pragma once

#include <QAbstractTableModel>

#include <string>
#include <vector>

// Declared only: moc cannot parse <compare>, which the core headers open with.
namespace day0::history {
struct MemoryBars;
struct MetricDelta;
struct RunComparison;
}

namespace day0::ui {

/// Timing, metric and memory deltas of two runs, one row per quantity: the run's duration, every
/// scalar metric (matched by name by history::compareRuns) and the memory components of the
/// shown ranks (history::memoryBars), with A, B, the change B − A and the relative change, each
/// formatted by its unit like the CLI. Read-only.
class DeltaTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Quantity, A, B, Change, Relative, ColumnCount };
    enum Roles { ValueRole = Qt::UserRole }; ///< the number behind a value cell (NaN if none)

    explicit DeltaTableModel(QObject* parent = nullptr);
    ~DeltaTableModel() override;

    /// Fills the rows from a comparison and the memory bars shown beside it.
    void setComparison(const history::RunComparison& comparison, const history::MemoryBars& bars);
    void clear();
    [[nodiscard]] const std::vector<history::MetricDelta>& rows() const { return m_rows; }

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

    /// A value as the table prints it: by unit ("s" durations, "B" bytes, "tok/s" counts).
    [[nodiscard]] static QString formatValue(double value, const std::string& unit, bool sign);
    /// One cell of a quantity row for `role`, as this table shows it; the bench comparison's
    /// per-level table shows its quantity rows through it too.
    [[nodiscard]] static QVariant cellData(
        const history::MetricDelta& row, Column column, int role);
    [[nodiscard]] static QString columnTitle(Column column);

private:
    std::vector<history::MetricDelta> m_rows;
};

} // namespace day0::ui
