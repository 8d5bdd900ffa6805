#pragma once

#include "plan/planner.h"

#include <QAbstractTableModel>

#include <functional>
#include <string>
#include <vector>

namespace day0::ui {

/// The planner's feasible layouts, fastest first: parallel sizes, training options, throughput,
/// step time (training) or time per output token (inference), memory, bubble and communication
/// shares. Read-only; SortRole gives numbers for sorting.
class LayoutTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Rank,
        Tp,
        Pp,
        Ep,
        Etp,
        Dp,
        Cp,
        Vpp,
        MicroBatch,
        Zero,
        Recompute,
        TokensPerSecond,
        StepTime,
        Memory,
        Bubble,
        Communication,
        ColumnCount
    };
    enum Roles { SortRole = Qt::UserRole };

    explicit LayoutTableModel(QObject* parent = nullptr);

    /// How a layout's memory figure was computed (the Memory column's tooltip), asked when the
    /// tooltip is shown, not for every layout of a sweep; empty when not known.
    using MemoryExplainer = std::function<std::string(const plan::PlannedLayout&)>;

    void setLayouts(std::vector<plan::PlannedLayout> layouts, plan::Mode mode, double deviceMemory,
        MemoryExplainer memoryWhy = {});
    [[nodiscard]] const std::vector<plan::PlannedLayout>& layouts() const { return m_layouts; }

    /// Fraction of the step spent in pipeline fill/drain, and exposed communication.
    [[nodiscard]] static double bubbleShare(const plan::PlannedLayout& layout, plan::Mode mode);
    [[nodiscard]] static double communicationShare(
        const plan::PlannedLayout& layout, plan::Mode mode);

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::vector<plan::PlannedLayout> m_layouts;
    MemoryExplainer m_memoryWhy;
    plan::Mode m_mode = plan::Mode::Train;
    double m_deviceMemory = 0;
};

/// The rejected layouts grouped by reason, most common first, with the closest miss.
class RejectionModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Reason, Count, Example, ColumnCount };
    enum Roles { SortRole = Qt::UserRole };

    explicit RejectionModel(QObject* parent = nullptr);
    void setGroups(std::vector<plan::RejectedGroup> groups);

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::vector<plan::RejectedGroup> m_groups;
};

} // namespace day0::ui
