#include "panels/serving/bench_level_model.h"

#include "serve/bench_check.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QColor>

#include <cmath>
#include <limits>

namespace day0::ui {

namespace {

struct ColumnInfo {
    const char* title;
    const char* tip;
};

// Definitions follow vLLM's `vllm bench serve` (calculate_metrics), as `day0 bench serve` does.
const ColumnInfo kColumns[BenchLevelModel::ColumnCount] = {
    { "Level", "The load level: concurrency cap and/or request rate, prompt→output tokens" },
    { "OK", "Requests that completed" },
    { "Failed", "Requests that ended in an error (see Errors)" },
    { "Req/s", "Completed requests over the level's duration (first send to last completion)" },
    { "Output tok/s", "Output tokens of completed requests over the level's duration" },
    { "Total tok/s", "Prompt and output tokens of completed requests over the duration" },
    { "Goodput req/s",
        "Completed requests meeting every SLO over the duration (vLLM's request_goodput); "
        "empty without SLOs" },
    { "Tok/s/user", "Mean over requests of 1 / TPOT (AIPerf's output_token_throughput_per_user)" },
    { "TTFT p50 ms", "Time to first token: send to the first chunk carrying a token" },
    { "TTFT p90 ms", "Time to first token, 90th percentile" },
    { "TTFT p99 ms", "Time to first token, 99th percentile" },
    { "TPOT p50 ms", "Time per output token after the first: (E2EL − TTFT) / (output − 1)" },
    { "TPOT p90 ms", "Time per output token, 90th percentile" },
    { "TPOT p99 ms", "Time per output token, 99th percentile" },
    { "ITL p50 ms", "Inter-token latency: gaps between chunks carrying tokens" },
    { "ITL p90 ms", "Inter-token latency, 90th percentile" },
    { "ITL p99 ms", "Inter-token latency, 99th percentile" },
    { "E2EL p50 ms", "End-to-end latency: send to the last chunk carrying a token" },
    { "E2EL p90 ms", "End-to-end latency, 90th percentile" },
    { "E2EL p99 ms", "End-to-end latency, 99th percentile" },
    { "Errors", "Failed requests by kind (http_<status>, timeout, connection_refused, …)" },
    { "Check",
        "Greedy tokens compared with the reference engine on the same checkpoint (--check): "
        "the first divergence" },
};

struct Percentile {
    const char* metric;
    double p;
};

Percentile percentileOf(int column)
{
    static const char* const kMetrics[] = { "ttft", "tpot", "itl", "e2el" };
    static const double kP[] = { 50, 90, 99 };
    const int k = column - BenchLevelModel::TtftP50;
    return { kMetrics[k / 3], kP[k % 3] };
}

QString number(double value, int decimals)
{
    return std::isnan(value) ? QString() : QString::number(value, 'f', decimals);
}

} // namespace

double levelPercentile(const serve::BenchResult& result, const std::string& name, double p)
{
    const auto it = result.metrics.find(name);
    if (it == result.metrics.end() || it->second.count == 0) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    for (const auto& [q, v] : it->second.percentiles) {
        if (q == p) {
            return v;
        }
    }
    return p == 50 ? it->second.median : std::numeric_limits<double>::quiet_NaN();
}

QString errorsText(const serve::BenchResult& result)
{
    QStringList parts;
    for (const auto& [kind, n] : result.errorsByKind) {
        parts << QStringLiteral("%1: %2").arg(toQString(kind)).arg(n);
    }
    return parts.join(QStringLiteral(", "));
}

QString checkText(const actions::BenchLevelOutcome& level)
{
    if (!level.check) {
        return {};
    }
    const auto& c = *level.check;
    if (c.divergences.empty()) {
        return QObject::tr("%1 compared, none diverge").arg(c.checked);
    }
    return QObject::tr("%1 of %2 diverge; first: %3")
        .arg(c.divergences.size())
        .arg(c.checked)
        .arg(toQString(serve::describeDivergence(c.divergences.front())));
}

BenchLevelModel::BenchLevelModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void BenchLevelModel::clear()
{
    beginResetModel();
    m_levels.clear();
    endResetModel();
}

void BenchLevelModel::append(const actions::BenchLevelOutcome& level)
{
    const int row = int(m_levels.size());
    beginInsertRows({}, row, row);
    m_levels.push_back(level);
    endInsertRows();
}

int BenchLevelModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_levels.size());
}

int BenchLevelModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant BenchLevelModel::display(const actions::BenchLevelOutcome& level, int column) const
{
    const auto& r = level.result;
    switch (column) {
    case Level:
        return toQString(level.label);
    case Completed:
        return r.completed;
    case Failed:
        return r.failed;
    case RequestRate:
        return number(r.requestThroughput, 2);
    case OutputRate:
        return number(r.outputThroughput, 1);
    case TotalRate:
        return number(r.totalTokenThroughput, 1);
    case Goodput:
        return r.options.slos.any() ? number(r.goodput, 2) : QString();
    case PerUser:
        return r.perUser.count > 0 ? number(r.perUser.mean, 1) : QString();
    case Errors:
        return errorsText(r);
    case Check:
        return checkText(level);
    default:
        break;
    }
    const auto [metric, p] = percentileOf(column);
    return number(levelPercentile(r, metric, p), 2);
}

QVariant BenchLevelModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) {
        return {};
    }
    const auto& level = m_levels[std::size_t(index.row())];
    switch (role) {
    case Qt::DisplayRole:
        return display(level, index.column());
    case Qt::ToolTipRole:
        if (index.column() == Level || index.column() == Errors || index.column() == Check) {
            const QString text = display(level, index.column()).toString();
            return text.isEmpty() ? QVariant() : QVariant(text);
        }
        return {};
    case Qt::TextAlignmentRole:
        if (index.column() == Level || index.column() == Errors || index.column() == Check) {
            return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
        }
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ForegroundRole:
        if ((index.column() == Failed && level.result.failed > 0)
            || (index.column() == Check && level.check && !level.check->divergences.empty())) {
            return errorColor();
        }
        return {};
    default:
        return {};
    }
}

QVariant BenchLevelModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) {
        return {};
    }
    if (role == Qt::DisplayRole) {
        return tr(kColumns[section].title);
    }
    if (role == Qt::ToolTipRole) {
        return tr(kColumns[section].tip);
    }
    return {};
}

} // namespace day0::ui
