#include "panels/runs/run_table_model.h"

#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QColor>

namespace day0::ui {

namespace {

QColor statusColor(history::RunStatus status)
{
    switch (status) {
    case history::RunStatus::Ok:
        return okColor();
    case history::RunStatus::Failed:
        return errorColor();
    case history::RunStatus::Error:
        return { 214, 120, 20 };
    case history::RunStatus::Cancelled:
        return { 140, 140, 140 };
    }
    return {};
}

QString tooltip(const history::RunInfo& run)
{
    QString text = QStringLiteral("<b>run %1</b> · %2<br>")
                       .arg(run.id.value())
                       .arg(toQString(run.uuid).toHtmlEscaped());
    const auto line = [&text](const QString& name, const std::string& value) {
        if (!value.empty()) {
            text += QStringLiteral("%1: %2<br>").arg(name, toQString(value).toHtmlEscaped());
        }
    };
    line(RunTableModel::tr("created"), history::formatLocal(run.created));
    line(RunTableModel::tr("model fingerprint"), run.modelFingerprint);
    line(RunTableModel::tr("backend"), run.backend);
    line(RunTableModel::tr("host"), run.host);
    line(RunTableModel::tr("software"), run.softwareVersion);
    line(RunTableModel::tr("command"), run.command);
    line(RunTableModel::tr("outcome"), run.message);
    return text;
}

} // namespace

RunTableModel::RunTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void RunTableModel::setRuns(std::vector<history::RunInfo> runs)
{
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
}

const history::RunInfo* RunTableModel::run(int row) const
{
    return row >= 0 && row < int(m_runs.size()) ? &m_runs[std::size_t(row)] : nullptr;
}

int RunTableModel::rowOf(RunId id) const
{
    for (std::size_t i = 0; i < m_runs.size(); ++i) {
        if (m_runs[i].id == id) {
            return int(i);
        }
    }
    return -1;
}

int RunTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_runs.size());
}

int RunTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const
{
    const history::RunInfo* r = index.isValid() ? run(index.row()) : nullptr;
    if (!r) {
        return {};
    }
    const auto column = Column(index.column());
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Id:
            return QString::number(r->id.value());
        case Created:
            return toQString(history::formatLocal(r->created));
        case Kind:
            return toQString(history::kindLabel(*r));
        case Status:
            return toQString(std::string(history::toString(r->status)));
        case Model:
            return toQString(r->modelName);
        case Label:
            return toQString(r->label);
        case Plan:
            return toQString(r->plan);
        case Precision:
            return toQString(r->precision);
        case Duration:
            return r->duration ? durationText(*r->duration) : QString();
        case Message:
            return toQString(r->message);
        case ColumnCount:
            break;
        }
        return {};
    case SortRole:
        switch (column) {
        case Id:
            return qlonglong(r->id.value());
        case Created:
            return qlonglong(r->created.time_since_epoch().count());
        case Duration:
            return r->duration ? r->duration->value : -1.0;
        default:
            return data(index, Qt::DisplayRole);
        }
    case RunIdRole:
        return qlonglong(r->id.value());
    case Qt::DecorationRole:
        if (column == Status) {
            return statusColor(r->status);
        }
        return {};
    case Qt::ToolTipRole:
        return tooltip(*r);
    case Qt::TextAlignmentRole:
        if (column == Id || column == Duration) {
            return int(Qt::AlignRight | Qt::AlignVCenter);
        }
        return {};
    default:
        return {};
    }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (Column(section)) {
    case Id:
        return tr("#");
    case Created:
        return tr("Created");
    case Kind:
        return tr("Kind");
    case Status:
        return tr("Status");
    case Model:
        return tr("Model");
    case Label:
        return tr("Label");
    case Plan:
        return tr("Plan");
    case Precision:
        return tr("Precision");
    case Duration:
        return tr("Duration");
    case Message:
        return tr("Outcome");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace day0::ui
