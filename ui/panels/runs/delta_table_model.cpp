#include "panels/runs/delta_table_model.h"

#include "history/comparison_views.h"
#include "history/metric_labels.h"
#include "history/run_compare.h"
#include "widgets/formatting.h"

#include <QLocale>

#include <cmath>
#include <limits>

namespace day0::ui {

DeltaTableModel::DeltaTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

DeltaTableModel::~DeltaTableModel() = default;

void DeltaTableModel::setComparison(
    const history::RunComparison& comparison, const history::MemoryBars& bars)
{
    beginResetModel();
    m_rows.clear();
    const auto seconds = [](const std::optional<Seconds>& s) {
        return s ? std::optional<double>(s->value) : std::nullopt;
    };
    m_rows.push_back(
        { "duration", "s", seconds(comparison.durationA), seconds(comparison.durationB) });
    m_rows.insert(m_rows.end(), comparison.metrics.begin(), comparison.metrics.end());
    const auto bytes = [](const std::optional<history::MemorySlot>& slot, Bytes value) {
        return slot ? std::optional<double>(double(value.value)) : std::nullopt;
    };
    for (std::size_t i = 0; i < bars.components.size(); ++i) {
        m_rows.push_back({ "memory · " + bars.components[i], "B", bytes(bars.slotA, bars.a[i]),
            bytes(bars.slotB, bars.b[i]) });
    }
    if (bars.slotA || bars.slotB) {
        m_rows.push_back({ "memory · total", "B", bytes(bars.slotA, bars.totalA),
            bytes(bars.slotB, bars.totalB) });
    }
    endResetModel();
}

void DeltaTableModel::clear()
{
    beginResetModel();
    m_rows.clear();
    endResetModel();
}

int DeltaTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int DeltaTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QString DeltaTableModel::formatValue(double value, const std::string& unit, bool sign)
{
    if (std::isnan(value)) {
        return QStringLiteral("NaN");
    }
    const QString prefix = sign && value > 0 ? QStringLiteral("+") : QString();
    if (unit == "s") {
        return value < 0 ? QStringLiteral("−") + durationText(Seconds(-value))
                         : prefix + durationText(Seconds(value));
    }
    if (unit == "B") {
        return value < 0 ? QStringLiteral("−") + bytesText(Bytes(std::llround(-value)))
                         : prefix + bytesText(Bytes(std::llround(value)));
    }
    if (unit == "tok/s") {
        return value < 0 ? QStringLiteral("−") + countText(-value) + QStringLiteral(" tok/s")
                         : prefix + countText(value) + QStringLiteral(" tok/s");
    }
    const QLocale locale;
    QString text = std::abs(value) < 1e15 && value == std::round(value)
        ? locale.toString(qlonglong(value))
        : locale.toString(value, 'g', 4);
    if (!unit.empty()) {
        text += QLatin1Char(' ') + toQString(unit);
    }
    return prefix + text;
}

QVariant DeltaTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_rows.size())) {
        return {};
    }
    return cellData(m_rows[std::size_t(index.row())], Column(index.column()), role);
}

QVariant DeltaTableModel::cellData(const history::MetricDelta& row, Column column, int role)
{
    const auto value = [&]() -> std::optional<double> {
        switch (column) {
        case A:
            return row.a;
        case B:
            return row.b;
        case Change:
            return row.delta();
        case Relative:
            return row.relative();
        default:
            return std::nullopt;
        }
    }();
    switch (role) {
    case Qt::DisplayRole:
        if (column == Quantity) {
            return toQString(history::metricLabel(row.name)); // the key is in the tooltip
        }
        if (!value) {
            return (column == A || column == B) ? tr("—") : QString();
        }
        if (column == Relative) {
            const QString percent = QLocale().toString(100.0 * std::abs(*value), 'f', 1);
            return QString((*value > 0          ? QStringLiteral("+")
                                   : *value < 0 ? QStringLiteral("−")
                                                : QString())
                + percent + QStringLiteral(" %"));
        }
        return formatValue(*value, row.unit, column == Change);
    case ValueRole:
        return value ? *value : std::numeric_limits<double>::quiet_NaN();
    case Qt::TextAlignmentRole:
        return column == Quantity ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                  : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ToolTipRole:
        if (column == Quantity) {
            return toQString(row.name);
        }
        if (value) {
            return QString(
                QLocale().toString(*value, 'g', 17) + QLatin1Char(' ') + toQString(row.unit));
        }
        return {};
    default:
        return {};
    }
}

QString DeltaTableModel::columnTitle(Column column)
{
    switch (column) {
    case Quantity:
        return tr("Quantity");
    case A:
        return tr("A");
    case B:
        return tr("B");
    case Change:
        return tr("B − A");
    case Relative:
        return tr("Change");
    case ColumnCount:
        break;
    }
    return {};
}

QVariant DeltaTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    return columnTitle(Column(section));
}

} // namespace day0::ui
