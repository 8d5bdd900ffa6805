#include "panels/timeline/trace_diff_model.h"

#include "profile/timeline_query.h"
#include "widgets/formatting.h"

#include <QBrush>
#include <QColor>

#include <algorithm>
#include <cmath>

namespace day0::ui {

namespace {

QString ns(double v) { return durationText(Seconds(v * 1e-9)); }

QColor statusColor(profile::DiffStatus s)
{
    switch (s) {
    case profile::DiffStatus::Added:
        return QColor(0x29, 0x80, 0xb9);
    case profile::DiffStatus::Removed:
        return QColor(0x8e, 0x44, 0xad);
    case profile::DiffStatus::Slower:
        return QColor(0xc0, 0x39, 0x2b);
    case profile::DiffStatus::Faster:
        return QColor(0x27, 0xae, 0x60);
    case profile::DiffStatus::Unchanged:
        break;
    }
    return {};
}

} // namespace

TraceDiffModel::TraceDiffModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void TraceDiffModel::setRows(std::vector<profile::DiffRow> rows)
{
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

int TraceDiffModel::count(profile::DiffStatus status) const
{
    return int(std::count_if(m_rows.begin(), m_rows.end(),
        [status](const profile::DiffRow& r) { return r.status == status; }));
}

int TraceDiffModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int TraceDiffModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant TraceDiffModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const auto& r = m_rows[std::size_t(index.row())];
    const bool inA = r.status != profile::DiffStatus::Added;
    const bool inB = r.status != profile::DiffStatus::Removed;
    const bool compared = inA && inB;
    switch (role) {
    case NameRole:
        return toQString(r.name);
    case StatusRole:
        return int(r.status);
    case Qt::ToolTipRole:
        return index.column() == NameColumn ? QVariant(toQString(r.name)) : QVariant();
    case Qt::TextAlignmentRole:
        return index.column() >= CountAColumn ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                              : QVariant();
    case Qt::ForegroundRole:
        if (index.column() == StatusColumn || index.column() == ChangeColumn) {
            const QColor c = statusColor(r.status);
            return c.isValid() ? QVariant(QBrush(c)) : QVariant();
        }
        return {};
    case SortRole:
        switch (index.column()) {
        case NameColumn:
            return toQString(r.name);
        case StatusColumn:
            return int(r.status);
        case CountAColumn:
            return qulonglong(r.countA);
        case CountBColumn:
            return qulonglong(r.countB);
        case MeanAColumn:
            return r.meanA;
        case MeanBColumn:
            return r.meanB;
        case ChangeColumn:
            return r.meanChangePercent;
        case TotalDeltaColumn:
            return qlonglong(r.totalB - r.totalA);
        default:
            return {};
        }
    case Qt::DisplayRole:
        switch (index.column()) {
        case NameColumn:
            return toQString(std::string(profile::shortSliceName(r.name)));
        case StatusColumn:
            return toQString(std::string(profile::diffStatusName(r.status)));
        case CountAColumn:
            return inA ? QVariant(qulonglong(r.countA)) : QVariant(QStringLiteral("–"));
        case CountBColumn:
            return inB ? QVariant(qulonglong(r.countB)) : QVariant(QStringLiteral("–"));
        case MeanAColumn:
            return inA ? ns(r.meanA) : QStringLiteral("–");
        case MeanBColumn:
            return inB ? ns(r.meanB) : QStringLiteral("–");
        case ChangeColumn:
            return compared ? QStringLiteral("%1%2 %")
                                  .arg(r.meanChangePercent >= 0 ? QStringLiteral("+") : QString())
                                  .arg(r.meanChangePercent, 0, 'f', 1)
                            : QString();
        case TotalDeltaColumn: {
            const double delta = double(r.totalB - r.totalA);
            return QString(
                (delta >= 0 ? QStringLiteral("+") : QStringLiteral("−")) + ns(std::abs(delta)));
        }
        default:
            return {};
        }
    default:
        return {};
    }
}

QVariant TraceDiffModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (section) {
    case NameColumn:
        return tr("Kernel");
    case StatusColumn:
        return tr("Change");
    case CountAColumn:
        return tr("Count A");
    case CountBColumn:
        return tr("Count B");
    case MeanAColumn:
        return tr("Mean A");
    case MeanBColumn:
        return tr("Mean B");
    case ChangeColumn:
        return tr("Mean Δ");
    case TotalDeltaColumn:
        return tr("Total B − A");
    default:
        return {};
    }
}

} // namespace day0::ui
