#include "panels/timeline/kernel_stats_model.h"

#include "panels/timeline/timeline_colors.h"
#include "profile/timeline_query.h"
#include "widgets/formatting.h"

#include <QLocale>
#include <QRegularExpression>

#include <map>

namespace day0::ui {

namespace {
QString ns(double value) { return durationText(Seconds(value * 1e-9)); }

// A name for the table: the short name, and when two rows share it, what tells them apart (the
// template arguments after it, or the whole signature), without namespaces.
QString displayName(const std::string& full, bool disambiguate)
{
    const std::string_view shortName = profile::shortSliceName(full);
    if (!disambiguate) {
        return toQString(std::string(shortName));
    }
    const std::size_t pos = std::size_t(shortName.data() - full.data()) + shortName.size();
    std::string detail;
    if (pos < full.size() && full[pos] == '<') {
        int depth = 0;
        std::size_t end = pos;
        for (; end < full.size(); ++end) {
            depth += full[end] == '<' ? 1 : (full[end] == '>' ? -1 : 0);
            if (depth == 0) {
                break;
            }
        }
        detail = std::string(shortName) + full.substr(pos, end + 1 - pos);
    } else {
        detail = full;
    }
    static const QRegularExpression scope(QStringLiteral("\\b[A-Za-z_][A-Za-z0-9_]*::"));
    QString text = toQString(detail);
    text.remove(scope);
    text.remove(QStringLiteral("(anonymous namespace)::"));
    constexpr int kMaxLength = 140;
    if (text.size() > kMaxLength) {
        text = text.left(kMaxLength - 1) + QChar(0x2026);
    }
    return text;
}
} // namespace

KernelStatsModel::KernelStatsModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void KernelStatsModel::setStats(std::vector<profile::KernelStat> stats)
{
    beginResetModel();
    m_stats = std::move(stats);
    m_total = 0;
    std::map<std::string_view, int> uses;
    for (const auto& s : m_stats) {
        m_total += s.self;
        ++uses[profile::shortSliceName(s.name)];
    }
    m_display.clear();
    for (const auto& s : m_stats) {
        m_display.push_back(displayName(s.name, uses[profile::shortSliceName(s.name)] > 1));
    }
    endResetModel();
}

int KernelStatsModel::rowOfName(const std::string& name) const
{
    for (std::size_t i = 0; i < m_stats.size(); ++i) {
        if (m_stats[i].name == name) {
            return int(i);
        }
    }
    return -1;
}

int KernelStatsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_stats.size());
}

int KernelStatsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant KernelStatsModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_stats.size())) {
        return {};
    }
    const auto& s = m_stats[std::size_t(index.row())];
    const double share = m_total > 0 ? double(s.self) / double(m_total) : 0.0;
    if (role == NameRole) {
        return toQString(s.name);
    }
    if (role == SortRole) {
        switch (index.column()) {
        case NameColumn:
            return m_display[std::size_t(index.row())];
        case CategoryColumn:
            return toQString(std::string(profile::categoryName(s.category)));
        case CountColumn:
            return qulonglong(s.count);
        case TotalColumn:
            return qlonglong(s.total);
        case SelfColumn:
        case ShareColumn:
            return qlonglong(s.self);
        case MeanColumn:
            return s.mean;
        case P50Column:
            return s.p50;
        case P95Column:
            return s.p95;
        case MaxColumn:
            return qlonglong(s.max);
        default:
            return {};
        }
    }
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case NameColumn:
            return m_display[std::size_t(index.row())];
        case CategoryColumn:
            return toQString(std::string(profile::categoryName(s.category)));
        case CountColumn:
            return QLocale().toString(qulonglong(s.count));
        case TotalColumn:
            return ns(double(s.total));
        case SelfColumn:
            return ns(double(s.self));
        case ShareColumn:
            return QString(QString::number(share * 100.0, 'f', 1) + QStringLiteral(" %"));
        case MeanColumn:
            return ns(s.mean);
        case P50Column:
            return ns(s.p50);
        case P95Column:
            return ns(s.p95);
        case MaxColumn:
            return ns(double(s.max));
        default:
            return {};
        }
    case Qt::ToolTipRole:
        return index.column() == NameColumn ? toQString(s.name) : QVariant();
    case Qt::DecorationRole:
        return index.column() == CategoryColumn ? QVariant(categoryColor(s.category)) : QVariant();
    case Qt::TextAlignmentRole:
        return index.column() >= CountColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                             : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    default:
        return {};
    }
}

QVariant KernelStatsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) {
        return {};
    }
    if (role == Qt::TextAlignmentRole) {
        return section >= CountColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                      : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case TotalColumn:
            return tr("Summed duration of the slices, nested ones included");
        case SelfColumn:
            return tr("Total less the time of the slices nested directly inside them");
        case ShareColumn:
            return tr("Self time as a share of all rows' self time (shares add to 100 %)");
        default:
            return {};
        }
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    switch (section) {
    case NameColumn:
        return tr("Name");
    case CategoryColumn:
        return tr("Category");
    case CountColumn:
        return tr("Count");
    case TotalColumn:
        return tr("Total");
    case SelfColumn:
        return tr("Self");
    case ShareColumn:
        return tr("Share");
    case MeanColumn:
        return tr("Mean");
    case P50Column:
        return tr("p50");
    case P95Column:
        return tr("p95");
    case MaxColumn:
        return tr("Max");
    default:
        return {};
    }
}

SliceArgsModel::SliceArgsModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void SliceArgsModel::setRows(std::vector<Row> rows)
{
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

QString SliceArgsModel::value(const QString& key) const
{
    for (const auto& r : m_rows) {
        if (r.key == key) {
            return r.value;
        }
    }
    return {};
}

int SliceArgsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int SliceArgsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : 2;
}

QVariant SliceArgsModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_rows.size())) {
        return {};
    }
    const auto& r = m_rows[std::size_t(index.row())];
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole || role == Qt::EditRole) {
        return index.column() == 0 ? r.key : r.value;
    }
    return {};
}

QVariant SliceArgsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    return section == 0 ? tr("Property") : tr("Value");
}

} // namespace day0::ui
