#pragma once

#include "profile/kernel_stats.h"

#include <QAbstractTableModel>

#include <vector>

namespace day0::ui {

/// Per-name statistics of a trace or a time range (profile::kernelStatistics): name, category,
/// count, total, self time (total less the slices nested inside), share of the summed self
/// times (so nested names' shares add to 100 %), mean, p50, p95 and max. Sort through a
/// QSortFilterProxyModel on SortRole; NameRole gives the full name of a row.
class KernelStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        CategoryColumn,
        CountColumn,
        TotalColumn,
        SelfColumn,
        ShareColumn,
        MeanColumn,
        P50Column,
        P95Column,
        MaxColumn,
        ColumnCount
    };
    enum Role {
        SortRole = Qt::UserRole, ///< numbers as numbers
        NameRole, ///< the full name (all columns)
    };

    explicit KernelStatsModel(QObject* parent = nullptr);

    void setStats(std::vector<profile::KernelStat> stats);
    [[nodiscard]] const std::vector<profile::KernelStat>& stats() const { return m_stats; }
    /// The row of a name, -1 if absent.
    [[nodiscard]] int rowOfName(const std::string& name) const;
    /// Sum of the rows' self times (ns): what the Share column divides by.
    [[nodiscard]] std::int64_t grandTotal() const { return m_total; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<profile::KernelStat> m_stats;
    std::vector<QString> m_display; // per row: the name shown
    std::int64_t m_total = 0;
};

/// Key/value rows describing one slice: its name, place and timing, then its arguments.
class SliceArgsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit SliceArgsModel(QObject* parent = nullptr);

    struct Row {
        QString key;
        QString value;
    };
    void setRows(std::vector<Row> rows);
    [[nodiscard]] const std::vector<Row>& rows() const { return m_rows; }
    /// The value of `key`, empty if absent.
    [[nodiscard]] QString value(const QString& key) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<Row> m_rows;
};

} // namespace day0::ui
