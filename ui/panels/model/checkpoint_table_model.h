#pragma once

#include "checkpoint/tensor_report.h"

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include <optional>

namespace day0::ui {

/// The tensors of an opened checkpoint, one row each: name, dtype, shape, shard file, bytes and
/// the status against the architecture (empty when the checkpoint has no config.json). Missing
/// tensors show the expected dtype and shape. Read-only.
class CheckpointTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Dtype, Shape, File, Bytes, Status, ColumnCount };
    enum Roles {
        SortRole = Qt::UserRole, ///< numbers for bytes, natural order for names, rank for status
        StatusRole, ///< int(checkpoint::TensorStatus)
    };

    explicit CheckpointTableModel(QObject* parent = nullptr);

    void setReport(checkpoint::TensorReport report);
    [[nodiscard]] const checkpoint::TensorReport& report() const { return m_report; }

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    checkpoint::TensorReport m_report;
};

/// Filters the tensor table by a name substring and, optionally, one status.
class CheckpointFilterModel final : public QSortFilterProxyModel {
    Q_OBJECT
public:
    explicit CheckpointFilterModel(QObject* parent = nullptr);
    /// Shows only rows with `status` (nullopt: every row).
    void setStatus(std::optional<checkpoint::TensorStatus> status);
    void setNameFilter(const QString& text);

protected:
    [[nodiscard]] bool filterAcceptsRow(int row, const QModelIndex& parent) const final;

private:
    std::optional<checkpoint::TensorStatus> m_status;
    QString m_name;
};

} // namespace day0::ui
