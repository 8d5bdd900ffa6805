#pragma once

#include "profile/trace_diff.h"

#include <QAbstractTableModel>

#include <vector>

namespace day0::ui {

/// The kernel-by-kernel comparison of trace A (the session's primary trace) with trace B (the
/// comparison): status (added, removed, slower, faster), counts, total and mean time in each and
/// the change of the mean. Read-only; sort on SortRole.
class TraceDiffModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        StatusColumn,
        CountAColumn,
        CountBColumn,
        MeanAColumn,
        MeanBColumn,
        ChangeColumn,
        TotalDeltaColumn,
        ColumnCount
    };
    enum Roles { SortRole = Qt::UserRole, NameRole, StatusRole };

    explicit TraceDiffModel(QObject* parent = nullptr);

    void setRows(std::vector<profile::DiffRow> rows);
    [[nodiscard]] const std::vector<profile::DiffRow>& rows() const { return m_rows; }
    /// Rows with `status`.
    [[nodiscard]] int count(profile::DiffStatus status) const;

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::vector<profile::DiffRow> m_rows;
};

} // namespace day0::ui
