#pragma once

#include "history/run_record.h"

#include <QAbstractTableModel>

#include <vector>

namespace day0::ui {

/// The runs of the store as the runs panel lists them, newest first: id, time, kind, status,
/// model, label, plan, precision, duration and the one-line outcome. Read-only; SortRole gives
/// numbers and raw text for sorting, RunIdRole the run's id.
class RunTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Id,
        Created,
        Kind,
        Status,
        Model,
        Label,
        Plan,
        Precision,
        Duration,
        Message,
        ColumnCount
    };
    enum Roles { SortRole = Qt::UserRole, RunIdRole };

    explicit RunTableModel(QObject* parent = nullptr);

    /// Replaces the runs. Rows that stay keep nothing: views restore their selection by id.
    void setRuns(std::vector<history::RunInfo> runs);
    [[nodiscard]] const std::vector<history::RunInfo>& runs() const { return m_runs; }
    /// The run in `row`, or nullptr.
    [[nodiscard]] const history::RunInfo* run(int row) const;
    /// The row of run `id`, or -1.
    [[nodiscard]] int rowOf(RunId id) const;

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::vector<history::RunInfo> m_runs;
};

} // namespace day0::ui
