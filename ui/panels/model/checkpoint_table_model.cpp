#include "panels/model/checkpoint_table_model.h"

#include "checkpoint/safetensors.h"
#include "widgets/formatting.h"

#include <QBrush>
#include <QColor>

namespace day0::ui {

namespace ck = day0::checkpoint;

namespace {

QString shapeText(const std::vector<std::int64_t>& shape)
{
    return toQString(ck::formatShape(shape));
}

QColor statusColor(ck::TensorStatus status)
{
    switch (status) {
    case ck::TensorStatus::Ok:
        return QColor(0x27, 0xae, 0x60);
    case ck::TensorStatus::Missing:
    case ck::TensorStatus::WrongShape:
    case ck::TensorStatus::WrongDtype:
        return QColor(0xc0, 0x39, 0x2b);
    case ck::TensorStatus::Unexpected:
        return QColor(0xd3, 0x84, 0x00);
    case ck::TensorStatus::Unchecked:
        break;
    }
    return {};
}

} // namespace

CheckpointTableModel::CheckpointTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void CheckpointTableModel::setReport(ck::TensorReport report)
{
    beginResetModel();
    m_report = std::move(report);
    endResetModel();
}

int CheckpointTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_report.rows.size());
}

int CheckpointTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CheckpointTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const auto& r = m_report.rows[std::size_t(index.row())];
    const bool missing = r.status == ck::TensorStatus::Missing;
    if (role == StatusRole) {
        return int(r.status);
    }
    if (role == Qt::ToolTipRole) {
        return r.message.empty() ? QVariant() : QVariant(toQString(r.message));
    }
    if (role == Qt::TextAlignmentRole) {
        return index.column() == Bytes ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    }
    if (role == Qt::ForegroundRole) {
        if (index.column() == Status) {
            const QColor c = statusColor(r.status);
            return c.isValid() ? QVariant(QBrush(c)) : QVariant();
        }
        return missing ? QVariant(QBrush(QColor(0x95, 0x95, 0x95))) : QVariant();
    }
    if (role == SortRole) {
        switch (index.column()) {
        case Bytes:
            return qulonglong(r.bytes);
        case Status:
            return int(r.status);
        case Name:
            return index.row(); // rows come in natural name order (layers.2 before layers.10)
        default:
            break;
        }
        role = Qt::DisplayRole;
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    switch (index.column()) {
    case Name:
        return toQString(r.name);
    case Dtype:
        if (missing || r.status == ck::TensorStatus::WrongDtype) {
            return missing
                ? toQString(r.expectedDtype)
                : tr("%1 (expected %2)").arg(toQString(r.dtype), toQString(r.expectedDtype));
        }
        return toQString(r.dtype);
    case Shape:
        if (missing) {
            return shapeText(r.expectedShape);
        }
        if (r.status == ck::TensorStatus::WrongShape) {
            return tr("%1 (expected %2)").arg(shapeText(r.shape), shapeText(r.expectedShape));
        }
        return shapeText(r.shape);
    case File:
        return toQString(r.file);
    case Bytes:
        return missing ? QString() : bytesText(day0::Bytes(std::int64_t(r.bytes)));
    case Status:
        return toQString(std::string(ck::tensorStatusName(r.status)));
    default:
        return {};
    }
}

QVariant CheckpointTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (section) {
    case Name:
        return tr("Tensor");
    case Dtype:
        return tr("Dtype");
    case Shape:
        return tr("Shape");
    case File:
        return tr("Shard");
    case Bytes:
        return tr("Bytes");
    case Status:
        return tr("Status");
    default:
        return {};
    }
}

CheckpointFilterModel::CheckpointFilterModel(QObject* parent)
    : QSortFilterProxyModel(parent)
{
    setSortRole(CheckpointTableModel::SortRole);
}

void CheckpointFilterModel::setStatus(std::optional<ck::TensorStatus> status)
{
    m_status = status;
    invalidateFilter();
}

void CheckpointFilterModel::setNameFilter(const QString& text)
{
    m_name = text;
    invalidateFilter();
}

bool CheckpointFilterModel::filterAcceptsRow(int row, const QModelIndex& parent) const
{
    const QModelIndex name = sourceModel()->index(row, CheckpointTableModel::Name, parent);
    if (m_status && name.data(CheckpointTableModel::StatusRole).toInt() != int(*m_status)) {
        return false;
    }
    return m_name.isEmpty() || name.data().toString().contains(m_name, Qt::CaseInsensitive);
}

} // namespace day0::ui
