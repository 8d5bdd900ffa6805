#pragma once

#include "model/layer_graph.h"

#include <QAbstractTableModel>

namespace day0::ui {

/// Parameter counts per component (embedding, attention, experts, ...) with total, active per
/// token and share of the total, followed by a "total" row. Read-only.
class ParameterTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Component, Total, Active, Share, ColumnCount };
    enum Roles { SortRole = Qt::UserRole };

    explicit ParameterTableModel(QObject* parent = nullptr);

    void setCounts(const model::ParameterCounts& counts);
    [[nodiscard]] const model::ParameterCounts& counts() const { return m_counts; }

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    model::ParameterCounts m_counts;
};

} // namespace day0::ui
