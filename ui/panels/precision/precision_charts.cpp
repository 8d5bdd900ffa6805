#include "panels/precision/precision_charts.h"

#include "history/layer_metrics.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <cmath>
#include <limits>

namespace day0::ui {

using numerics::GridMetric;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QString sci(double v)
{
    if (std::isnan(v)) {
        return QStringLiteral("–");
    }
    return QString::number(v, 'e', 2);
}

QString metricValueText(GridMetric metric, double v)
{
    if (std::isnan(v)) {
        return QStringLiteral("–");
    }
    if (metric == GridMetric::FloorRatio) {
        return toQString(numerics::formatFloorRatio(v));
    }
    if (metric == GridMetric::SnrDb) {
        return QString::number(v, 'f', 1) + QStringLiteral(" dB");
    }
    return sci(v);
}

// The captures of one sub-module in every layer ("" = the layer's output), by layer: the
// points of a depth curve.
std::vector<const numerics::CaptureComparison*> depthRows(
    const PrecisionRun& run, const std::string& subModule)
{
    std::vector<const numerics::CaptureComparison*> rows;
    for (const auto& row : run.comparison.rows) {
        if (row.layer < 0 || row.kind == numerics::OpKind::RouterSelection) {
            continue;
        }
        const auto at = history::parseAnchor(row.name);
        if (at.layer == row.layer && at.subModule == subModule) {
            rows.push_back(&row);
        }
    }
    return rows;
}

bool logMetric(GridMetric metric) { return metric != GridMetric::SnrDb; }

PlotSeries curve(const PrecisionRun& run, const std::string& subModule, GridMetric metric,
    const QString& name, QColor color, bool dashed)
{
    PlotSeries s { name, color, {}, {}, dashed, true, 6.0, true, {} };
    for (const auto* row : depthRows(run, subModule)) {
        const auto v = numerics::gridMetricValue(*row, metric);
        if (!v || !std::isfinite(*v) || (logMetric(metric) && *v <= 0)) {
            continue;
        }
        s.x << row->layer;
        s.y << *v;
        s.pointLabels << toQString(row->name) + QStringLiteral("\n") + metricTitle(metric)
                + QStringLiteral(": ") + metricValueText(metric, *v) + QStringLiteral("\n")
                + toQString(row->verdict.reason);
    }
    return s;
}

} // namespace

QString metricTitle(GridMetric metric)
{
    switch (metric) {
    case GridMetric::RelL2:
        return QObject::tr("relative L2 error");
    case GridMetric::MaxRel:
        return QObject::tr("max relative error");
    case GridMetric::CosineDistance:
        return QObject::tr("cosine distance (1 − cos)");
    case GridMetric::FloorRatio:
        return QObject::tr("ratio to noise floor");
    case GridMetric::OwnRelL2:
        return QObject::tr("own relative L2 error (inject mode)");
    case GridMetric::MaxAbs:
        return QObject::tr("max absolute error");
    case GridMetric::SnrDb:
        return QObject::tr("SNR (dB)");
    }
    return {};
}

namespace {

// Hover text on demand: the map keeps the run alive for as long as it is shown.
void attachHoverText(
    PrecisionHeatmap& h, const std::shared_ptr<const PrecisionRun>& run, GridMetric metric)
{
    h.data.cellText
        = [run, metric, rows = h.cellRows, values = h.data.values, columns = h.data.columns,
              positions = h.positions, labels = h.data.rowLabels](int row, int column) {
              const std::size_t i = std::size_t(row) * std::size_t(columns) + std::size_t(column);
              if (i >= rows.size() || rows[i] < 0) {
                  return QObject::tr("%1: no capture here").arg(labels.value(row));
              }
              return cellHoverText(*run, std::size_t(rows[i]), metric, values[qsizetype(i)],
                  positions ? column : -1);
          };
}

} // namespace

PrecisionHeatmap layerHeatmap(const std::shared_ptr<const PrecisionRun>& run, GridMetric metric)
{
    const auto grid = numerics::comparisonGrid(run->comparison);
    PrecisionHeatmap h;
    h.data.rows = int(grid.layers.size());
    h.data.columns = int(grid.columns.size());
    h.data.logScale = logMetric(metric);
    h.data.valueLabel = metricTitle(metric);
    for (const auto& column : grid.columns) {
        h.data.columnLabels << (column.empty() ? QObject::tr("layer output") : toQString(column));
    }
    for (std::size_t l = 0; l < grid.layers.size(); ++l) {
        h.data.rowLabels << QObject::tr("layer %1").arg(grid.layers[l]);
        h.rowLayers.push_back(grid.layers[l]);
        for (std::size_t c = 0; c < grid.columns.size(); ++c) {
            const int row = grid.cell(l, c);
            double value = kNaN;
            if (row >= 0) {
                value = numerics::gridMetricValue(run->comparison.rows[std::size_t(row)], metric)
                            .value_or(kNaN);
            }
            h.cellRows.push_back(row);
            h.data.values << value;
        }
    }
    attachHoverText(h, run, metric);
    return h;
}

PrecisionHeatmap positionHeatmap(const std::shared_ptr<const PrecisionRun>& run,
    const numerics::PositionGrid& grid, GridMetric metric)
{
    PrecisionHeatmap h;
    h.positions = true;
    h.data.rows = int(grid.anchors.size());
    h.data.columns = int(grid.positions);
    h.data.logScale = logMetric(metric);
    h.data.valueLabel = metricTitle(metric);
    const std::int64_t prompt = run->comparison.reference.promptLength;
    for (std::int64_t p = 0; p < grid.positions; ++p) {
        h.data.columnLabels << (prompt > 0 && p >= prompt
                ? QStringLiteral("g%1").arg(p - prompt + 1)
                : QString::number(p));
    }
    for (std::size_t a = 0; a < grid.anchors.size(); ++a) {
        const auto& row = run->comparison.rows[grid.anchors[a]];
        h.data.rowLabels << toQString(row.name);
        h.rowLayers.push_back(row.layer);
        for (std::int64_t p = 0; p < grid.positions; ++p) {
            h.cellRows.push_back(int(grid.anchors[a]));
            h.data.values << grid.values[a * std::size_t(grid.positions) + std::size_t(p)];
        }
    }
    attachHoverText(h, run, metric);
    return h;
}

QString cellHoverText(const PrecisionRun& run, std::size_t index, GridMetric metric, double value,
    std::int64_t position)
{
    const auto& row = run.comparison.rows[index];
    QString text = toQString(row.name) + QStringLiteral("  (")
        + toQString(std::string(numerics::opKindName(row.kind)))
        + (row.opPrecision.empty() ? QString() : QStringLiteral(", ") + toQString(row.opPrecision))
        + QStringLiteral(")");
    if (position >= 0) {
        text += QObject::tr("\ntoken position %1").arg(position);
    }
    text += QStringLiteral("\n") + metricTitle(metric) + QStringLiteral(": ")
        + metricValueText(metric, value);
    if (row.metrics) {
        const auto& m = *row.metrics;
        text += QObject::tr("\nrel L2 %1 · max rel %2 · 1−cos %3 · max abs %4")
                    .arg(sci(m.relL2), sci(m.maxRel), sci(std::max(0.0, 1.0 - m.cosine)),
                        sci(m.maxAbs));
    }
    if (row.own) {
        text += QObject::tr("\nown rel L2 %1 (inject mode)").arg(sci(row.own->relL2));
    }
    const auto& v = row.verdict;
    text += QObject::tr("\nverdict: %1").arg(toQString(v.reason));
    if (!v.rule.empty()) {
        QString limits;
        if (run.table) {
            for (const auto& rule : run.table->rules) {
                if (rule.id == v.rule) {
                    limits = QObject::tr(": rel L2 ≤ %1, floor %2 u, warn above %3× floor")
                                 .arg(sci(rule.maxRelL2))
                                 .arg(rule.floorUnits)
                                 .arg(rule.maxFloorRatio);
                }
            }
        }
        text += QObject::tr("\nrule %1 of table %2%3%4")
                    .arg(toQString(v.rule), toQString(v.table),
                        run.table && !run.table->source.empty() ? QStringLiteral(" (")
                                + toQString(run.table->source) + QStringLiteral(")")
                                                                : QString(),
                        limits);
        text += QObject::tr("\njudged on the %1 error; limit here %2, noise floor %3 (%4)")
                    .arg(toQString(v.basis), sci(v.limit), sci(v.floor), toQString(v.floorSource));
    }
    return text;
}

std::pair<QString, QString> depthLegendNames(
    const PrecisionRun& primary, const PrecisionRun& overlay)
{
    const auto name = [](const PrecisionRun& run) {
        return run.finishedAt.empty()
            ? toQString(run.label)
            : QObject::tr("%1 · %2").arg(toQString(run.label), toQString(run.finishedAt));
    };
    QString a = name(primary);
    QString b = name(overlay);
    if (a == b) {
        a += QLatin1Char(' ') + QObject::tr("(current)");
        b += QLatin1Char(' ') + QObject::tr("(previous)");
    }
    return { a, b };
}

void showDepth(PlotWidget& plot, const PrecisionRun& primary, const PrecisionRun* overlay,
    GridMetric metric, const std::string& subModule)
{
    plot.clear();
    plot.setTitle(
        QObject::tr("Error against depth: %1 of %2")
            .arg(metricTitle(metric),
                subModule.empty() ? QObject::tr("the layer outputs") : toQString(subModule)));
    plot.setAxisLabel(PlotWidget::Axis::X, QObject::tr("decoder layer"));
    plot.setAxisLabel(PlotWidget::Axis::Y, metricTitle(metric));
    plot.setLogScale(PlotWidget::Axis::Y, logMetric(metric));
    const auto names = overlay != nullptr ? depthLegendNames(primary, *overlay)
                                          : std::pair(toQString(primary.label), QString());
    QVector<PlotSeries> lines;
    lines << curve(primary, subModule, metric, names.first, categoricalColor(0), false);
    if (metric == GridMetric::RelL2) {
        auto own = curve(primary, subModule, GridMetric::OwnRelL2,
            QObject::tr("own error (inject)"), categoricalColor(2), true);
        if (!own.x.isEmpty()) {
            lines << own;
        }
    }
    if (overlay != nullptr) {
        lines << curve(*overlay, subModule, metric, names.second, categoricalColor(1), true);
    }
    // The band and the floor are defined on relative L2; the floor ratio shows them in floor
    // units. Other metrics have no tolerance of their own.
    const bool relative = metric == GridMetric::RelL2 || metric == GridMetric::OwnRelL2;
    if (relative || metric == GridMetric::FloorRatio) {
        PlotBand band { QObject::tr("tolerance (floor … limit)"), okColor(), {}, {}, {} };
        PlotSeries floor { QObject::tr("noise floor"), QColor(128, 128, 128), {}, {}, true, false,
            6.0, true, {} };
        for (const auto* row : depthRows(primary, subModule)) {
            const auto& v = row->verdict;
            if (v.floor <= 0 || v.limit <= 0) {
                continue;
            }
            band.x << row->layer;
            floor.x << row->layer;
            band.lower << (relative ? v.floor : 1.0);
            band.upper << (relative ? v.limit : v.limit / v.floor);
            floor.y << (relative ? v.floor : 1.0);
        }
        if (!band.x.isEmpty()) {
            plot.setBands({ band });
            lines << floor;
        }
    } else {
        plot.setNote(QObject::tr("tolerances are defined on relative L2"));
    }
    plot.setLineSeries(lines);
    const auto& c = primary.comparison;
    if (c.firstDivergence) {
        const auto& row = c.rows[*c.firstDivergence];
        if (row.layer >= 0) {
            plot.addVerticalLine({ double(row.layer),
                QObject::tr("first divergence: %1").arg(toQString(row.name)), errorColor() });
        }
    }
    plot.rescaleAndReplot();
}

void showDetail(
    PlotWidget& histogram, PlotWidget& scatter, PlotWidget& ownChart, const CellDetail* detail)
{
    histogram.clear();
    scatter.clear();
    ownChart.clear();
    if (detail == nullptr) {
        for (PlotWidget* p : { &histogram, &scatter, &ownChart }) {
            p->setNote(QObject::tr("click a heatmap cell"));
            p->rescaleAndReplot();
        }
        return;
    }
    const QString where = toQString(detail->anchor)
        + (detail->position >= 0 ? QObject::tr(" @ position %1").arg(detail->position) : QString());
    if (detail->histogram) {
        const auto& h = *detail->histogram;
        QStringList categories;
        BarLayer counts { QObject::tr("elements"), categoricalColor(0), {} };
        for (std::size_t b = 0; b < h.counts.size(); ++b) {
            // Only decades are labelled: 48 log-spaced bins leave no room for more.
            const double decade = std::log10(h.edges[b]);
            categories << (std::abs(decade - std::round(decade)) < 1e-6
                    ? QStringLiteral("1e%1").arg(int(std::round(decade)))
                    : QString());
            counts.values << double(h.counts[b]);
        }
        histogram.setStackedBars(categories, { counts });
        histogram.setTitle(QObject::tr("Error histogram: %1").arg(where));
        histogram.setAxisLabel(PlotWidget::Axis::X,
            QObject::tr("relative error  (%1 exact, %2 below, %3 at or above %4, %5 non-finite)")
                .arg(h.exact)
                .arg(h.below)
                .arg(h.above)
                .arg(h.edges.back())
                .arg(h.nonFinite));
        histogram.setAxisLabel(PlotWidget::Axis::Y, QObject::tr("elements"));
        histogram.setLegendVisible(false);
    } else {
        histogram.setNote(toQString(detail->note));
    }
    if (!detail->scatter.empty()) {
        PlotSeries points { QObject::tr("elements"), categoricalColor(0), {}, {}, false, false, 3.0,
            false, {} };
        for (const auto& p : detail->scatter) {
            points.x << p.value;
            points.y << p.error;
        }
        scatter.setScatter({ points });
        scatter.setTitle(QObject::tr("Value against error (%1 points)").arg(points.x.size()));
        scatter.setAxisLabel(PlotWidget::Axis::X, QObject::tr("reference value"));
        scatter.setAxisLabel(PlotWidget::Axis::Y, QObject::tr("target − reference"));
        scatter.setLegendVisible(false);
    } else {
        scatter.setNote(toQString(detail->note));
    }
    QStringList categories { QObject::tr("accumulated"), QObject::tr("own"),
        QObject::tr("inherited") };
    BarLayer values { QObject::tr("relative L2"), categoricalColor(0), {} };
    const double acc = detail->accumulated.value_or(0.0);
    values.values << acc;
    if (detail->own) {
        // Errors add roughly, not exactly: inherited is what the own error does not explain.
        values.values << *detail->own << std::max(0.0, acc - *detail->own);
    }
    ownChart.setStackedBars(categories, { values }, Qt::Horizontal);
    ownChart.setTitle(detail->own
            ? QObject::tr("own %1 vs inherited %2").arg(sci(*detail->own), sci(acc - *detail->own))
            : QObject::tr("own error: %1").arg(toQString(detail->note)));
    ownChart.setAxisLabel(PlotWidget::Axis::X, QObject::tr("relative L2 error"));
    ownChart.setLegendVisible(false);
    for (PlotWidget* p : { &histogram, &scatter, &ownChart }) {
        p->rescaleAndReplot();
    }
}

} // namespace day0::ui
