#include "panels/planner/layout_table_model.h"

#include "widgets/formatting.h"

#include <QLocale>

namespace day0::ui {

LayoutTableModel::LayoutTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void LayoutTableModel::setLayouts(std::vector<plan::PlannedLayout> layouts, plan::Mode mode,
    double deviceMemory, MemoryExplainer memoryWhy)
{
    beginResetModel();
    m_layouts = std::move(layouts);
    m_memoryWhy = std::move(memoryWhy);
    m_mode = mode;
    m_deviceMemory = deviceMemory;
    endResetModel();
}

double LayoutTableModel::bubbleShare(const plan::PlannedLayout& l, plan::Mode mode)
{
    if (mode != plan::Mode::Train || l.training.stepTime <= 0) {
        return 0.0;
    }
    return l.training.breakdown.bubble / l.training.stepTime;
}

double LayoutTableModel::communicationShare(const plan::PlannedLayout& l, plan::Mode mode)
{
    if (mode == plan::Mode::Train) {
        const auto& b = l.training.breakdown;
        return l.training.stepTime > 0 ? (b.tp + b.ep + b.cp + b.pp + b.dp) / l.training.stepTime
                                       : 0.0;
    }
    const auto& b = l.inference.breakdown;
    return l.inference.tpot > 0 ? (b.tp + b.ep + b.pp) / l.inference.tpot : 0.0;
}

int LayoutTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_layouts.size());
}

int LayoutTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant LayoutTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount()) {
        return {};
    }
    const auto& p = m_layouts[std::size_t(index.row())];
    const auto& l = p.layout;
    if (role == Qt::TextAlignmentRole) {
        return index.column() == Recompute ? QVariant()
                                           : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole && index.column() == Memory && m_memoryWhy) {
        if (const std::string why = m_memoryWhy(p); !why.empty()) {
            return toQString(why);
        }
    }
    if (role == Qt::ToolTipRole) {
        return QString(toQString(plan::formatPlan(l.toPlan()))
            + tr("\nmost loaded: rank %1 (stage %2)").arg(p.mostLoadedRank).arg(p.mostLoadedStage));
    }
    if (role != Qt::DisplayRole && role != SortRole) {
        return {};
    }
    const bool sort = role == SortRole;
    const bool train = m_mode == plan::Mode::Train;
    auto percent = [&](double f) {
        return sort ? QVariant(f)
                    : QVariant(QString(QString::number(f * 100.0, 'f', 1) + QStringLiteral(" %")));
    };
    switch (Column(index.column())) {
    case Rank:
        return index.row() + 1;
    case Tp:
        return l.tp;
    case Pp:
        return l.pp;
    case Ep:
        return l.ep;
    case Etp:
        return l.etp;
    case Dp:
        return l.dp;
    case Cp:
        return l.cp;
    case Vpp:
        return l.vpp;
    case MicroBatch:
        return l.microBatch;
    case Zero:
        return train ? QVariant(l.zero) : QVariant(QStringLiteral("–"));
    case Recompute:
        return train ? toQString(plan::recomputeName(l.recompute)) : QStringLiteral("–");
    case TokensPerSecond:
        return sort ? QVariant(p.tokensPerSecond) : QVariant(countText(p.tokensPerSecond));
    case StepTime:
        return sort ? QVariant(p.stepTime) : QVariant(durationText(Seconds(p.stepTime)));
    case Memory:
        return sort ? QVariant(p.maxMemory) : QVariant(bytesText(Bytes(std::int64_t(p.maxMemory))));
    case Bubble:
        return train ? percent(bubbleShare(p, m_mode)) : QVariant(QStringLiteral("–"));
    case Communication:
        return percent(communicationShare(p, m_mode));
    case ColumnCount:
        break;
    }
    return {};
}

QVariant LayoutTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) {
        return {};
    }
    const bool train = m_mode == plan::Mode::Train;
    if (role == Qt::ToolTipRole) {
        switch (Column(section)) {
        case StepTime:
            return train ? tr("Estimated time of one optimizer step") : tr("Time per output token");
        case Memory:
            return tr("Memory of the most loaded rank");
        case Bubble:
            return tr("Share of the step spent filling and draining the pipeline");
        case Communication:
            return tr("Share of the step (or decode step) spent in exposed communication");
        default:
            return {};
        }
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    switch (Column(section)) {
    case Rank:
        return tr("#");
    case Tp:
        return tr("TP");
    case Pp:
        return tr("PP");
    case Ep:
        return tr("EP");
    case Etp:
        return tr("ETP");
    case Dp:
        return tr("DP");
    case Cp:
        return tr("CP");
    case Vpp:
        return tr("VPP");
    case MicroBatch:
        return train ? tr("MB") : tr("Batch");
    case Zero:
        return tr("ZeRO");
    case Recompute:
        return tr("Recompute");
    case TokensPerSecond:
        return tr("Tokens/s");
    case StepTime:
        return train ? tr("Step") : tr("TPOT");
    case Memory:
        return tr("Memory");
    case Bubble:
        return tr("Bubble");
    case Communication:
        return tr("Comm.");
    case ColumnCount:
        break;
    }
    return {};
}

RejectionModel::RejectionModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void RejectionModel::setGroups(std::vector<plan::RejectedGroup> groups)
{
    beginResetModel();
    m_groups = std::move(groups);
    endResetModel();
}

int RejectionModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_groups.size());
}

int RejectionModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RejectionModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount()) {
        return {};
    }
    const auto& g = m_groups[std::size_t(index.row())];
    if (role == Qt::TextAlignmentRole && index.column() == Count) {
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole) {
        return toQString(g.example.empty() ? g.reason : g.example);
    }
    if (role != Qt::DisplayRole && role != SortRole) {
        return {};
    }
    switch (Column(index.column())) {
    case Reason:
        return toQString(g.reason);
    case Count:
        return role == SortRole ? QVariant(qlonglong(g.count))
                                : QVariant(QLocale().toString(qlonglong(g.count)));
    case Example:
        return toQString(g.example);
    case ColumnCount:
        break;
    }
    return {};
}

QVariant RejectionModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (Column(section)) {
    case Reason:
        return tr("Rejected because");
    case Count:
        return tr("Layouts");
    case Example:
        return tr("Closest example");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace day0::ui
