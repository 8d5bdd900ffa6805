#include "panels/model/parameter_table_model.h"

#include "widgets/formatting.h"

#include <QFont>
#include <QLocale>

namespace day0::ui {

ParameterTableModel::ParameterTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void ParameterTableModel::setCounts(const model::ParameterCounts& counts)
{
    beginResetModel();
    m_counts = counts;
    endResetModel();
}

int ParameterTableModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid() || m_counts.byComponent.empty()) {
        return 0;
    }
    return int(m_counts.byComponent.size()) + 1;
}

int ParameterTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ParameterTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount()) {
        return {};
    }
    const bool totalRow = index.row() == int(m_counts.byComponent.size());
    const std::int64_t total
        = totalRow ? m_counts.total : m_counts.byComponent[std::size_t(index.row())].total;
    const std::int64_t active
        = totalRow ? m_counts.active : m_counts.byComponent[std::size_t(index.row())].active;
    const double share = m_counts.total > 0 ? double(total) / double(m_counts.total) : 0.0;

    if (role == Qt::FontRole && totalRow) {
        QFont font;
        font.setBold(true);
        return font;
    }
    if (role == Qt::TextAlignmentRole) {
        return index.column() == Component ? QVariant()
                                           : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole && index.column() != Component) {
        return QString(QLocale().toString(qlonglong(index.column() == Active ? active : total))
            + tr(" parameters"));
    }
    if (role != Qt::DisplayRole && role != SortRole) {
        return {};
    }
    const bool sort = role == SortRole;
    switch (Column(index.column())) {
    case Component:
        return totalRow ? tr("total")
                        : toQString(model::componentName(
                            m_counts.byComponent[std::size_t(index.row())].component));
    case Total:
        return sort ? QVariant(qlonglong(total)) : QVariant(countText(double(total)));
    case Active:
        return sort ? QVariant(qlonglong(active)) : QVariant(countText(double(active)));
    case Share:
        return sort
            ? QVariant(share)
            : QVariant(QString(QString::number(share * 100.0, 'f', 1) + QStringLiteral(" %")));
    case ColumnCount:
        break;
    }
    return {};
}

QVariant ParameterTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) {
        return {};
    }
    if (role == Qt::ToolTipRole && Column(section) == Active) {
        return tr("Active parameters per token: those a token passes through (its routed and "
                  "shared experts, not every expert)");
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    switch (Column(section)) {
    case Component:
        return tr("Component");
    case Total:
        return tr("Total");
    case Active:
        return tr("Active");
    case Share:
        return tr("Share");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace day0::ui
