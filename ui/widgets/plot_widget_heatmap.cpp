// PlotWidget's heatmap: the colour map and scale, cell hover texts, selection and accessors.
#include "widgets/plot_widget.h"
#include "widgets/plot_widget_p.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::ui {

namespace {

QCPColorGradient sequentialGradient()
{
    // Perceptually ordered dark-blue → teal → yellow ramp (viridis-like stops).
    QCPColorGradient g;
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setColorStopAt(0.0, QColor(68, 1, 84));
    g.setColorStopAt(0.25, QColor(59, 82, 139));
    g.setColorStopAt(0.5, QColor(33, 145, 140));
    g.setColorStopAt(0.75, QColor(94, 201, 98));
    g.setColorStopAt(1.0, QColor(253, 231, 37));
    return g;
}

QCPColorGradient divergingGradient()
{
    // Blue for decreases, white for no change, red for increases (ColorBrewer RdBu stops).
    QCPColorGradient g;
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setColorStopAt(0.0, QColor(33, 102, 172));
    g.setColorStopAt(0.25, QColor(103, 169, 207));
    g.setColorStopAt(0.5, QColor(247, 247, 247));
    g.setColorStopAt(0.75, QColor(239, 138, 98));
    g.setColorStopAt(1.0, QColor(178, 24, 43));
    return g;
}

// The colour range of a heatmap: its finite values (positive ones on a log scale), symmetric
// around 0 for a change; NaN cells stay transparent and never stretch the scale.
QCPRange heatmapRange(const HeatmapData& data)
{
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const double v : data.values) {
        if (std::isfinite(v) && (!data.logScale || v > 0)) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    if (lo > hi) {
        return data.logScale ? QCPRange(0.1, 1.0) : QCPRange(-1.0, 1.0);
    }
    if (data.diverging) {
        const double m = std::max(std::abs(lo), std::abs(hi));
        return m > 0 ? QCPRange(-m, m) : QCPRange(-1.0, 1.0);
    }
    if (lo == hi) {
        return data.logScale ? QCPRange(lo / 2, hi * 2) : QCPRange(lo - 0.5, hi + 0.5);
    }
    return QCPRange(lo, hi);
}

} // namespace

QPoint PlotWidget::Private::cellAt(const QPointF& pos) const
{
    if (!colorMap || !plot->axisRect()->rect().contains(pos.toPoint())) {
        return { -1, -1 };
    }
    int key = 0;
    int value = 0;
    colorMap->data()->coordToCell(
        plot->xAxis->pixelToCoord(pos.x()), plot->yAxis->pixelToCoord(pos.y()), &key, &value);
    if (key < 0 || key >= heatmap.columns || value < 0 || value >= heatmap.rows) {
        return { -1, -1 };
    }
    return { value, key };
}

QString PlotWidget::Private::cellText(int row, int column) const
{
    if (row < 0 || row >= heatmap.rows || column < 0 || column >= heatmap.columns) {
        return {};
    }
    if (heatmap.cellText) {
        return heatmap.cellText(row, column);
    }
    const int index = row * heatmap.columns + column;
    const double v = heatmap.values[index];
    const QString rowLabel = row < heatmap.rowLabels.size() ? heatmap.rowLabels[row] : QString();
    const QString colLabel
        = column < heatmap.columnLabels.size() ? heatmap.columnLabels[column] : QString();
    return rowLabel + QStringLiteral(" · ") + colLabel + QStringLiteral("\n")
        + (std::isnan(v) ? PlotWidget::tr("no value") : formatValue(heatmap.valueFormat, v));
}

void PlotWidget::Private::removeHeatmap()
{
    if (cellMark) {
        plot->removeItem(cellMark);
        cellMark = nullptr;
    }
    if (colorMap) {
        plot->removePlottable(colorMap);
        colorMap = nullptr;
        // Its row and column names go with it.
        text[0].reset();
        text[1].reset();
    }
    if (colorScale) {
        center->remove(colorScale);
        center->simplify();
        colorScale = nullptr;
    }
    plot->yAxis->setRangeReversed(false);
}

void PlotWidget::setHeatmap(const HeatmapData& data)
{
    d->removeHeatmap();
    d->heatmap = data;
    if (data.rows <= 0 || data.columns <= 0 || data.values.size() < data.rows * data.columns) {
        return;
    }
    d->colorMap = new QCPColorMap(d->plot->xAxis, d->plot->yAxis);
    d->colorMap->data()->setSize(data.columns, data.rows);
    d->colorMap->data()->setRange(QCPRange(0, data.columns - 1), QCPRange(0, data.rows - 1));
    const QCPRange range = heatmapRange(data);
    for (int r = 0; r < data.rows; ++r) {
        for (int c = 0; c < data.columns; ++c) {
            double v = data.values[r * data.columns + c];
            // A log scale has no place for 0 (an exact match): drawn in the lowest colour.
            if (data.logScale && v <= 0) {
                v = range.lower;
            }
            d->colorMap->data()->setCell(c, r, v);
        }
    }
    d->colorMap->setInterpolate(false);
    d->colorScale = new QCPColorScale(d->plot);
    d->center->addElement(0, 1, d->colorScale);
    // The colour scale takes the width it needs; the map gets the rest.
    d->center->setColumnStretchFactors({ 1.0, 0.001 });
    d->colorScale->setType(QCPAxis::atRight);
    d->colorScale->setBarWidth(12);
    d->colorScale->axis()->setLabel(data.valueLabel);
    if (data.logScale) {
        d->colorScale->setDataScaleType(QCPAxis::stLogarithmic);
        d->colorScale->axis()->setTicker(QSharedPointer<FormatLogTicker>::create(data.valueFormat));
    } else {
        d->colorScale->axis()->setTicker(QSharedPointer<FormatTicker>::create(data.valueFormat));
    }
    d->colorMap->setColorScale(d->colorScale);
    QCPColorGradient gradient = data.diverging ? divergingGradient() : sequentialGradient();
    gradient.setNanHandling(QCPColorGradient::nhTransparent);
    d->colorMap->setGradient(gradient);
    d->colorMap->setDataRange(range);
    auto* group = new QCPMarginGroup(d->plot);
    d->plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    d->colorScale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    d->colorMap->removeFromLegend();

    TextTicks rows;
    for (int r = 0; r < data.rowLabels.size() && r < data.rows; ++r) {
        rows.keys << r;
        rows.labels << data.rowLabels[r];
    }
    rows.baseEvery = rows.every = std::max(1, int(std::ceil(data.rows / 30.0)));
    d->text[int(Axis::Y)] = rows;
    d->installText(Axis::Y);
    d->plot->yAxis->setRangeReversed(true);
    TextTicks columns;
    for (int c = 0; c < data.columnLabels.size() && c < data.columns; ++c) {
        columns.keys << c;
        columns.labels << data.columnLabels[c];
    }
    columns.baseEvery = columns.every = std::max(1, int(std::ceil(data.columns / 16.0)));
    // Long column names (sub-modules) are slanted so that neighbours do not overlap.
    const bool longLabels = data.columns > 3
        && std::any_of(data.columnLabels.begin(), data.columnLabels.end(),
            [](const QString& label) { return label.size() > 8; });
    columns.baseRotation = longLabels ? 35.0 : 0.0;
    d->text[int(Axis::X)] = columns;
    d->installText(Axis::X);
    d->plot->xAxis->setTickLabelRotation(columns.baseRotation);
    d->applyTheme(palette());
}

QSize PlotWidget::heatmapSize() const
{
    return d->colorMap ? QSize(d->heatmap.columns, d->heatmap.rows) : QSize();
}

double PlotWidget::heatmapCell(int row, int column) const
{
    if (!d->colorMap || row < 0 || row >= d->heatmap.rows || column < 0
        || column >= d->heatmap.columns) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return d->heatmap.values[row * d->heatmap.columns + column];
}

void PlotWidget::setHeatmapSelection(int row, int column)
{
    if (d->cellMark) {
        d->plot->removeItem(d->cellMark);
        d->cellMark = nullptr;
    }
    if (d->colorMap && row >= 0 && row < d->heatmap.rows && column >= 0
        && column < d->heatmap.columns) {
        d->cellMark = new QCPItemRect(d->plot);
        d->cellMark->topLeft->setCoords(column - 0.5, row - 0.5);
        d->cellMark->bottomRight->setCoords(column + 0.5, row + 0.5);
        d->cellMark->setPen(QPen(palette().color(QPalette::Highlight), 2.5));
        d->cellMark->setBrush(Qt::NoBrush);
    }
    d->plot->replot(QCustomPlot::rpQueuedReplot);
}

QPoint PlotWidget::heatmapSelection() const
{
    if (!d->cellMark) {
        return { -1, -1 };
    }
    const QPointF at = d->cellMark->topLeft->coords();
    return { int(std::lround(at.y() + 0.5)), int(std::lround(at.x() + 0.5)) };
}

QString PlotWidget::heatmapCellText(int row, int column) const
{
    return d->colorMap ? d->cellText(row, column) : QString();
}

QPoint PlotWidget::heatmapCellPosition(int row, int column)
{
    if (!d->colorMap || row < 0 || row >= d->heatmap.rows || column < 0
        || column >= d->heatmap.columns) {
        return { -1, -1 };
    }
    d->plot->replot(QCustomPlot::rpImmediateRefresh);
    const QPoint inPlot(int(std::lround(d->plot->xAxis->coordToPixel(column))),
        int(std::lround(d->plot->yAxis->coordToPixel(row))));
    return d->plot->mapTo(this, inPlot);
}

} // namespace day0::ui
