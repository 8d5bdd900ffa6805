#include "widgets/plot_widget.h"

#include "widgets/formatting.h"

// QCustomPlot's header uses `foreach`; keep it available for that header alone.
#undef QT_NO_FOREACH
#include <QFileInfo>
#include <QSvgGenerator>
#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace day0::ui {

namespace {

QString formatValue(AxisFormat format, double value)
{
    switch (format) {
    case AxisFormat::Bytes:
        return bytesText(Bytes(std::llround(value)));
    case AxisFormat::Duration:
        return durationText(Seconds(value));
    case AxisFormat::Count:
        return countText(value);
    case AxisFormat::Percent:
        return QString::number(value * 100.0, 'f', value < 0.1 && value > 0 ? 1 : 0)
            + QStringLiteral(" %");
    case AxisFormat::Number:
        break;
    }
    return QString::number(value, 'g', 4);
}

// Linear ticks labelled like the tables. Byte axes step in binary units and label every tick in
// the same unit (the largest the axis reaches), so "750 GiB" is not followed by "1.22 TiB".
class FormatTicker : public QCPAxisTicker {
public:
    explicit FormatTicker(AxisFormat format)
        : m_format(format)
    {
    }

protected:
    double getTickStep(const QCPRange& range) override
    {
        if (m_format != AxisFormat::Bytes || range.size() <= 0) {
            return QCPAxisTicker::getTickStep(range);
        }
        const double reach = std::max(std::abs(range.lower), std::abs(range.upper));
        m_unit = 0;
        while (m_unit < 5 && std::pow(1024.0, m_unit + 1) <= reach) {
            ++m_unit;
        }
        const double unit = std::pow(1024.0, m_unit);
        return cleanMantissa(range.size() / unit / (tickCount() + 1e-10)) * unit;
    }
    QString getTickLabel(
        double tick, const QLocale& locale, QChar formatChar, int precision) override
    {
        if (m_format == AxisFormat::Number) {
            return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
        }
        if (m_format == AxisFormat::Bytes) {
            static const char* const kUnits[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
            if (tick == 0) {
                return QStringLiteral("0");
            }
            return QString::number(tick / std::pow(1024.0, m_unit), 'g', 4) + QLatin1Char(' ')
                + QString::fromLatin1(kUnits[m_unit]);
        }
        return formatValue(m_format, tick);
    }

private:
    AxisFormat m_format;
    int m_unit = 0;
};

class FormatLogTicker : public QCPAxisTickerLog {
public:
    explicit FormatLogTicker(AxisFormat format)
        : m_format(format)
    {
        setLogBase(m_format == AxisFormat::Bytes ? 1024.0 : 10.0);
    }

protected:
    QString getTickLabel(
        double tick, const QLocale& locale, QChar formatChar, int precision) override
    {
        if (m_format == AxisFormat::Number) {
            return QCPAxisTickerLog::getTickLabel(tick, locale, formatChar, precision);
        }
        return formatValue(m_format, tick);
    }

private:
    AxisFormat m_format;
};

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

struct PlotWidget::Private {
    QCustomPlot* plot = nullptr;
    QCPTextElement* title = nullptr;
    QCPLayoutGrid* center = nullptr;
    QCPColorScale* colorScale = nullptr;
    QCPColorMap* colorMap = nullptr;
    QCPItemText* note = nullptr;
    QCPItemRect* cellMark = nullptr; ///< frame around the selected heatmap cell
    QVector<QCPBars*> bars;
    QVector<QCPGraph*> lines;
    QVector<QCPCurve*> scatters;
    QVector<QCPGraph*> bands; ///< lower and upper graph of every band
    QVector<QStringList> scatterLabels;
    QVector<QStringList> lineLabels;
    QCPCurve* highlight = nullptr;
    QVector<QCPAbstractItem*> limitItems;
    QVector<double> hLimits;
    QVector<double> vLimits;
    QVector<QCPItemText*> vLabels; ///< labels of vertical lines, placed by rescaleAndReplot
    QStringList categories;
    bool horizontalBars = false;
    AxisFormat xFormat = AxisFormat::Number;
    AxisFormat yFormat = AxisFormat::Number;
    bool xLog = false;
    bool yLog = false;
    HeatmapData heatmap;

    [[nodiscard]] QCPAxis* axis(Axis a) const { return a == Axis::X ? plot->xAxis : plot->yAxis; }
    /// The axis bars are placed along, and the one their values grow on.
    [[nodiscard]] QCPAxis* keyAxis() const { return horizontalBars ? plot->yAxis : plot->xAxis; }
    [[nodiscard]] QCPAxis* valueAxis() const { return horizontalBars ? plot->xAxis : plot->yAxis; }
    [[nodiscard]] AxisFormat valueFormat() const { return horizontalBars ? xFormat : yFormat; }
    void applyTicker(Axis a);
    void applyTheme(const QPalette& palette);
    [[nodiscard]] QString tooltipAt(const QPointF& pos) const;
    /// The heatmap cell under a pixel as (row, column); (-1, -1) when none.
    [[nodiscard]] QPoint cellAt(const QPointF& pos) const;
    [[nodiscard]] QString cellText(int row, int column) const;
    void removeHeatmap();
};

void PlotWidget::Private::applyTicker(Axis a)
{
    const bool log = a == Axis::X ? xLog : yLog;
    const AxisFormat format = a == Axis::X ? xFormat : yFormat;
    QCPAxis* ax = axis(a);
    ax->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (ax == keyAxis() && !categories.isEmpty()) {
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        const int every = std::max(1, int(std::ceil(categories.size() / 16.0)));
        for (int i = 0; i < categories.size(); i += every) {
            ticker->addTick(i, categories[i]);
        }
        ax->setTicker(ticker);
        return;
    }
    if (log) {
        ax->setTicker(QSharedPointer<FormatLogTicker>::create(format));
    } else {
        ax->setTicker(QSharedPointer<FormatTicker>::create(format));
    }
}

void PlotWidget::Private::applyTheme(const QPalette& palette)
{
    const QColor background = palette.color(QPalette::Base);
    const QColor text = palette.color(QPalette::WindowText);
    QColor grid = text;
    grid.setAlpha(40);
    QColor axisColor = text;
    axisColor.setAlpha(140);
    plot->setBackground(background);
    for (QCPAxis* ax : { plot->xAxis, plot->yAxis }) {
        ax->setBasePen(QPen(axisColor, 1));
        ax->setTickPen(QPen(axisColor, 1));
        ax->setSubTickPen(QPen(axisColor, 1));
        ax->setTickLabelColor(text);
        ax->setLabelColor(text);
        ax->grid()->setPen(QPen(grid, 1, Qt::SolidLine));
        ax->grid()->setSubGridVisible(false);
        ax->grid()->setZeroLinePen(Qt::NoPen);
    }
    plot->legend->setBrush(Qt::NoBrush);
    plot->legend->setBorderPen(Qt::NoPen);
    plot->legend->setTextColor(text);
    title->setTextColor(text);
    if (colorScale) {
        colorScale->axis()->setTickLabelColor(text);
        colorScale->axis()->setLabelColor(text);
        colorScale->axis()->setBasePen(QPen(axisColor));
        colorScale->axis()->setTickPen(QPen(axisColor));
    }
    if (note) {
        note->setColor(text);
    }
}

QString PlotWidget::Private::tooltipAt(const QPointF& pos) const
{
    QVariant details;
    for (int s = 0; s < scatters.size(); ++s) {
        const double dist = scatters[s]->selectTest(pos, false, &details);
        if (dist >= 0 && dist < 8.0) {
            const int i = details.value<QCPDataSelection>().dataRange().begin();
            const auto it = scatters[s]->data()->at(i);
            if (i < scatterLabels[s].size() && !scatterLabels[s][i].isEmpty()) {
                return scatterLabels[s][i];
            }
            return scatters[s]->name() + QStringLiteral("\n") + formatValue(xFormat, it->key)
                + QStringLiteral(", ") + formatValue(yFormat, it->value);
        }
    }
    for (int s = 0; s < lines.size(); ++s) {
        const double dist = lines[s]->selectTest(pos, false, &details);
        if (dist >= 0 && dist < 6.0) {
            const int i = details.value<QCPDataSelection>().dataRange().begin();
            const auto it = lines[s]->data()->at(i);
            if (i < lineLabels[s].size() && !lineLabels[s][i].isEmpty()) {
                return lineLabels[s][i];
            }
            return lines[s]->name() + QStringLiteral(": ") + formatValue(xFormat, it->key)
                + QStringLiteral(" → ") + formatValue(yFormat, it->value);
        }
    }
    if (!bars.isEmpty()) {
        const double key = horizontalBars ? plot->yAxis->pixelToCoord(pos.y())
                                          : plot->xAxis->pixelToCoord(pos.x());
        const double value = horizontalBars ? plot->xAxis->pixelToCoord(pos.x())
                                            : plot->yAxis->pixelToCoord(pos.y());
        const int category = int(std::lround(key));
        if (category >= 0 && category < categories.size() && value >= 0) {
            QString text
                = QStringLiteral("<b>") + categories[category] + QStringLiteral("</b><table>");
            double total = 0;
            for (const auto* b : bars) {
                const double v = b->data()->at(category)->value;
                total += v;
                if (v != 0.0) {
                    text += QStringLiteral("<tr><td>") + b->name()
                        + QStringLiteral("</td><td align=right>&nbsp;")
                        + formatValue(valueFormat(), v) + QStringLiteral("</td></tr>");
                }
            }
            text += QStringLiteral("<tr><td><b>total</b></td><td align=right>&nbsp;<b>")
                + formatValue(valueFormat(), total) + QStringLiteral("</b></td></tr></table>");
            return text;
        }
    }
    if (colorMap) {
        const QPoint cell = cellAt(pos);
        if (cell.x() >= 0) {
            return cellText(cell.x(), cell.y());
        }
    }
    return {};
}

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
    }
    if (colorScale) {
        center->remove(colorScale);
        center->simplify();
        colorScale = nullptr;
    }
    plot->yAxis->setRangeReversed(false);
}

PlotWidget::PlotWidget(QWidget* parent)
    : QWidget(parent)
    , d(std::make_unique<Private>())
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    d->plot = new QCustomPlot(this);
    layout->addWidget(d->plot);
    d->plot->setAntialiasedElements(QCP::aeAll);
    d->plot->setNoAntialiasingOnDrag(true);
    d->plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

    // Layout: title row, centre (axis rect + optional colour scale), legend row.
    auto* grid = d->plot->plotLayout();
    auto* rect = d->plot->axisRect();
    grid->take(rect);
    grid->simplify();
    QFont titleFont = font();
    titleFont.setBold(true);
    d->title = new QCPTextElement(d->plot, QString(), titleFont);
    d->title->setVisible(false);
    grid->addElement(0, 0, d->title);
    d->center = new QCPLayoutGrid;
    grid->addElement(1, 0, d->center);
    d->center->addElement(0, 0, rect);
    rect->insetLayout()->take(d->plot->legend);
    // The legend sits between two empty stretching cells: a layout cell is no wider than its
    // narrowest element allows, so a legend of one short entry would otherwise narrow the plot.
    auto* legendRow = new QCPLayoutGrid;
    grid->addElement(2, 0, legendRow);
    legendRow->addElement(0, 0, new QCPLayoutElement(d->plot));
    legendRow->addElement(0, 1, d->plot->legend);
    legendRow->addElement(0, 2, new QCPLayoutElement(d->plot));
    legendRow->setColumnStretchFactors({ 1.0, 0.001, 1.0 });
    legendRow->setColumnSpacing(0);
    grid->setRowStretchFactor(0, 0.001);
    grid->setRowStretchFactor(2, 0.001);
    grid->setRowSpacing(0);
    d->plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    d->plot->legend->setWrap(6);
    d->plot->legend->setMargins(QMargins(6, 0, 6, 2));
    d->plot->legend->setVisible(true);
    QFont legendFont = font();
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.9);
    d->plot->legend->setFont(legendFont);
    d->plot->setMouseTracking(true);

    connect(d->plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
        const QString text = d->tooltipAt(event->position());
        if (text.isEmpty()) {
            QToolTip::hideText();
        } else {
            QToolTip::showText(event->globalPosition().toPoint(), text, d->plot);
        }
    });
    connect(d->plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        if (d->colorMap) {
            const QPoint cell = d->cellAt(event->position());
            if (cell.x() >= 0 && event->button() == Qt::RightButton) {
                emit cellContextMenuRequested(
                    cell.x(), cell.y(), event->globalPosition().toPoint());
                return;
            }
            if (cell.x() >= 0 && event->button() == Qt::LeftButton) {
                emit cellClicked(cell.x(), cell.y());
                return;
            }
        }
        QVariant details;
        for (int s = 0; s < d->scatters.size(); ++s) {
            const double dist = d->scatters[s]->selectTest(event->position(), false, &details);
            if (dist >= 0 && dist < 8.0) {
                emit pointClicked(s, details.value<QCPDataSelection>().dataRange().begin());
                return;
            }
        }
        if (!d->bars.isEmpty()) {
            const double key = d->horizontalBars
                ? d->plot->yAxis->pixelToCoord(event->position().y())
                : d->plot->xAxis->pixelToCoord(event->position().x());
            const int c = int(std::lround(key));
            if (c >= 0 && c < d->categories.size()) {
                emit categoryClicked(c);
            }
        }
    });
    clear();
}

PlotWidget::~PlotWidget() = default;

void PlotWidget::clear()
{
    d->removeHeatmap();
    d->plot->clearPlottables();
    d->plot->clearItems();
    d->bars.clear();
    d->lines.clear();
    d->scatters.clear();
    d->bands.clear();
    d->scatterLabels.clear();
    d->lineLabels.clear();
    d->highlight = nullptr;
    d->note = nullptr;
    d->cellMark = nullptr;
    d->limitItems.clear();
    d->hLimits.clear();
    d->vLimits.clear();
    d->vLabels.clear();
    d->categories.clear();
    d->horizontalBars = false;
    d->xFormat = d->yFormat = AxisFormat::Number;
    d->xLog = d->yLog = false;
    d->applyTicker(Axis::X);
    d->applyTicker(Axis::Y);
    d->plot->xAxis->setLabel(QString());
    d->plot->yAxis->setLabel(QString());
    d->plot->xAxis->setTickLabelRotation(0.0);
    d->applyTheme(palette());
}

void PlotWidget::setTitle(const QString& title)
{
    d->title->setText(title);
    d->title->setVisible(!title.isEmpty());
}

void PlotWidget::setAxisLabel(Axis axis, const QString& label) { d->axis(axis)->setLabel(label); }

void PlotWidget::setAxisFormat(Axis axis, AxisFormat format)
{
    (axis == Axis::X ? d->xFormat : d->yFormat) = format;
    d->applyTicker(axis);
}

void PlotWidget::setLogScale(Axis axis, bool log)
{
    (axis == Axis::X ? d->xLog : d->yLog) = log;
    d->applyTicker(axis);
}

void PlotWidget::setLegendVisible(bool visible) { d->plot->legend->setVisible(visible); }

void PlotWidget::setStackedBars(
    const QStringList& categories, const QVector<BarLayer>& layers, Qt::Orientation orientation)
{
    for (auto* b : d->bars) {
        d->plot->removePlottable(b);
    }
    d->bars.clear();
    d->categories = categories;
    d->horizontalBars = orientation == Qt::Horizontal;
    d->plot->yAxis->setRangeReversed(d->horizontalBars);
    QVector<double> keys(categories.size());
    for (int i = 0; i < keys.size(); ++i) {
        keys[i] = i;
    }
    const double width = categories.size() > 64 ? 0.9 : 0.65;
    QCPBars* below = nullptr;
    for (const auto& layer : layers) {
        auto* bars = new QCPBars(d->keyAxis(), d->valueAxis());
        bars->setName(layer.name);
        bars->setWidth(width);
        bars->setStackingGap(0);
        bars->setAntialiased(false);
        bars->setPen(QPen(layer.color.darker(115), categories.size() > 64 ? 0 : 1));
        bars->setBrush(layer.color);
        QVector<double> values = layer.values;
        values.resize(categories.size());
        bars->setData(keys, values, true);
        if (below) {
            bars->moveAbove(below);
        }
        below = bars;
        d->bars.push_back(bars);
    }
    d->applyTicker(Axis::X);
    d->applyTicker(Axis::Y);
}

void PlotWidget::setLineSeries(const QVector<PlotSeries>& series)
{
    for (auto* g : d->lines) {
        d->plot->removePlottable(g);
    }
    d->lines.clear();
    d->lineLabels.clear();
    for (const auto& s : series) {
        auto* g = d->plot->addGraph();
        g->setName(s.name);
        QPen pen(s.color, 2);
        pen.setStyle(s.dashed ? Qt::DashLine : Qt::SolidLine);
        g->setPen(pen);
        g->setLineStyle(QCPGraph::lsLine);
        if (s.markers) {
            g->setScatterStyle(
                QCPScatterStyle(QCPScatterStyle::ssDisc, s.color, s.color, s.markerSize));
        }
        g->setData(s.x, s.y);
        if (!s.inLegend) {
            g->removeFromLegend();
        }
        d->lines.push_back(g);
        d->lineLabels.push_back(s.pointLabels);
    }
}

void PlotWidget::setScatter(const QVector<PlotSeries>& series)
{
    for (auto* g : d->scatters) {
        d->plot->removePlottable(g);
    }
    d->scatters.clear();
    d->scatterLabels.clear();
    if (d->highlight) {
        d->plot->removePlottable(d->highlight);
        d->highlight = nullptr;
    }
    for (const auto& s : series) {
        // A curve keeps the points in the caller's order (a graph sorts them by x).
        auto* g = new QCPCurve(d->plot->xAxis, d->plot->yAxis);
        g->setName(s.name);
        g->setLineStyle(QCPCurve::lsNone);
        QColor fill = s.color;
        fill.setAlpha(150);
        g->setScatterStyle(
            QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(s.color, 1.2), fill, s.markerSize));
        QVector<double> t(s.x.size());
        std::iota(t.begin(), t.end(), 0.0);
        g->setData(t, s.x, s.y);
        if (!s.inLegend) {
            g->removeFromLegend();
        }
        d->scatters.push_back(g);
        d->scatterLabels.push_back(s.pointLabels);
    }
}

void PlotWidget::setBands(const QVector<PlotBand>& bands)
{
    for (auto* g : d->bands) {
        d->plot->removePlottable(g);
    }
    d->bands.clear();
    for (const auto& band : bands) {
        auto* lower = d->plot->addGraph();
        auto* upper = d->plot->addGraph();
        QColor edge = band.color;
        edge.setAlpha(110);
        QColor fill = band.color;
        fill.setAlpha(45);
        lower->setPen(QPen(edge, 1));
        lower->setData(band.x, band.lower);
        lower->removeFromLegend();
        upper->setName(band.name);
        upper->setPen(QPen(edge, 1));
        upper->setBrush(fill);
        upper->setData(band.x, band.upper);
        upper->setChannelFillGraph(lower);
        // Bands sit under the lines they frame.
        lower->setLayer(QStringLiteral("background"));
        upper->setLayer(QStringLiteral("background"));
        d->bands << lower << upper;
    }
}

void PlotWidget::setHighlightedPoint(int series, int index)
{
    if (d->highlight) {
        d->plot->removePlottable(d->highlight);
        d->highlight = nullptr;
    }
    if (series < 0 || series >= d->scatters.size() || index < 0
        || index >= d->scatters[series]->dataCount()) {
        d->plot->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const auto it = d->scatters[series]->data()->at(index);
    d->highlight = new QCPCurve(d->plot->xAxis, d->plot->yAxis);
    d->highlight->setName(tr("selected"));
    d->highlight->removeFromLegend();
    d->highlight->setLineStyle(QCPCurve::lsNone);
    d->highlight->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle,
        QPen(palette().color(QPalette::Highlight), 2.5), Qt::NoBrush, 16));
    d->highlight->setData({ 0.0 }, { it->key }, { it->value });
    d->plot->replot(QCustomPlot::rpQueuedReplot);
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

    auto rowTicker = QSharedPointer<QCPAxisTickerText>::create();
    const int rowEvery = std::max(1, int(std::ceil(data.rows / 30.0)));
    for (int r = 0; r < data.rowLabels.size() && r < data.rows; r += rowEvery) {
        rowTicker->addTick(r, data.rowLabels[r]);
    }
    d->plot->yAxis->setTicker(rowTicker);
    d->plot->yAxis->setRangeReversed(true);
    auto colTicker = QSharedPointer<QCPAxisTickerText>::create();
    const int colEvery = std::max(1, int(std::ceil(data.columns / 16.0)));
    for (int c = 0; c < data.columnLabels.size() && c < data.columns; c += colEvery) {
        colTicker->addTick(c, data.columnLabels[c]);
    }
    d->plot->xAxis->setTicker(colTicker);
    // Long column names (sub-modules) are slanted so that neighbours do not overlap.
    const bool longLabels = data.columns > 3
        && std::any_of(data.columnLabels.begin(), data.columnLabels.end(),
            [](const QString& label) { return label.size() > 8; });
    d->plot->xAxis->setTickLabelRotation(longLabels ? 35.0 : 0.0);
    d->applyTheme(palette());
}

void PlotWidget::addHorizontalLine(const LimitLine& line)
{
    auto* item = new QCPItemStraightLine(d->plot);
    item->point1->setCoords(0, line.value);
    item->point2->setCoords(1, line.value);
    item->setPen(QPen(line.color, 1.5, Qt::DashLine));
    auto* label = new QCPItemText(d->plot);
    label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    label->position->setTypeY(QCPItemPosition::ptPlotCoords);
    label->position->setAxisRect(d->plot->axisRect());
    label->position->setCoords(0.995, line.value);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    label->setText(line.label);
    label->setColor(line.color);
    d->limitItems << item << label;
    d->hLimits << line.value;
}

void PlotWidget::addVerticalLine(const LimitLine& line)
{
    auto* item = new QCPItemStraightLine(d->plot);
    item->point1->setCoords(line.value, 0);
    item->point2->setCoords(line.value, 1);
    item->setPen(QPen(line.color, 1.5, Qt::DashLine));
    auto* label = new QCPItemText(d->plot);
    label->position->setTypeX(QCPItemPosition::ptPlotCoords);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setAxisRect(d->plot->axisRect());
    label->position->setCoords(line.value, 0.01);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setPadding(QMargins(4, 0, 0, 0));
    label->setText(line.label);
    label->setColor(line.color);
    d->limitItems << item << label;
    d->vLimits << line.value;
    d->vLabels << label;
}

void PlotWidget::setNote(const QString& text)
{
    if (!d->note) {
        d->note = new QCPItemText(d->plot);
        d->note->position->setType(QCPItemPosition::ptAxisRectRatio);
        d->note->position->setCoords(0.5, 0.45);
        d->note->setPositionAlignment(Qt::AlignCenter);
        d->note->setColor(palette().color(QPalette::WindowText));
    }
    d->note->setText(text);
    d->note->setVisible(!text.isEmpty());
}

void PlotWidget::rescaleAndReplot()
{
    auto* plot = d->plot;
    plot->rescaleAxes(true);
    auto pad = [](QCPAxis* ax, bool log, const QVector<double>& limits, bool fromZero) {
        QCPRange r = ax->range();
        for (double v : limits) {
            r.expand(v);
        }
        if (log) {
            ax->setRange(r.lower > 0 ? r.lower / 1.5 : 1e-9, r.upper * 1.5);
            return;
        }
        const double span = r.size() > 0 ? r.size() : std::max(1.0, std::abs(r.upper));
        const double lower = fromZero && r.lower >= 0 ? 0.0 : r.lower - span * 0.05;
        ax->setRange(lower, r.upper + span * 0.08);
    };
    const bool hasBars = !d->bars.isEmpty();
    if (hasBars) {
        const bool h = d->horizontalBars;
        pad(d->valueAxis(), h ? d->xLog : d->yLog, h ? d->vLimits : d->hLimits, true);
        d->keyAxis()->setRange(-0.6, d->categories.size() - 0.4);
    } else if (d->colorMap) {
        plot->xAxis->setRange(-0.5, d->heatmap.columns - 0.5);
        plot->yAxis->setRange(-0.5, d->heatmap.rows - 0.5);
    } else {
        pad(plot->yAxis, d->yLog, d->hLimits, false);
        pad(plot->xAxis, d->xLog, d->vLimits, false);
    }
    // A line's label goes on the side with more room, so it is not cut at the plot's edge.
    const QCPRange x = plot->xAxis->range();
    for (QCPItemText* label : d->vLabels) {
        const double at = label->position->coords().x();
        const bool rightHalf = d->xLog && at > 0 && x.lower > 0
            ? std::log(at / x.lower) > 0.5 * std::log(x.upper / x.lower)
            : at > x.center();
        label->setPositionAlignment((rightHalf ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
        label->setPadding(rightHalf ? QMargins(0, 0, 4, 0) : QMargins(4, 0, 0, 0));
    }
    plot->replot(QCustomPlot::rpQueuedReplot);
}

QString PlotWidget::exportTo(const QString& path, QSize size)
{
    if (!size.isValid()) {
        size = d->plot->size().isEmpty() ? QSize(1200, 700) : d->plot->size();
    }
    const QString suffix = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (suffix == QStringLiteral("png")) {
        ok = d->plot->savePng(path, size.width(), size.height(), 2.0);
    } else if (suffix == QStringLiteral("pdf")) {
        ok = d->plot->savePdf(path, size.width(), size.height());
    } else if (suffix == QStringLiteral("svg")) {
        QSvgGenerator generator;
        generator.setFileName(path);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setTitle(d->title->text());
        QCPPainter painter;
        ok = painter.begin(&generator);
        if (ok) {
            d->plot->toPainter(&painter, size.width(), size.height());
            ok = painter.end();
        }
    } else {
        return tr("%1: unknown image format '%2' (use .png, .pdf or .svg)").arg(path, suffix);
    }
    return ok ? QString() : tr("%1: could not be written").arg(path);
}

QImage PlotWidget::toImage(QSize size)
{
    if (!size.isValid()) {
        size = d->plot->size();
    }
    return d->plot->toPixmap(size.width(), size.height()).toImage();
}

int PlotWidget::barLayerCount() const { return int(d->bars.size()); }
int PlotWidget::lineSeriesCount() const { return int(d->lines.size()); }
int PlotWidget::scatterSeriesCount() const { return int(d->scatters.size()); }
int PlotWidget::bandCount() const { return int(d->bands.size() / 2); }

double PlotWidget::barValue(int layer, int category) const
{
    if (layer < 0 || layer >= d->bars.size() || category < 0
        || category >= d->bars[layer]->dataCount()) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return d->bars[layer]->data()->at(category)->value;
}

QVector<QPointF> PlotWidget::linePoints(int series) const
{
    QVector<QPointF> points;
    if (series < 0 || series >= d->lines.size()) {
        return points;
    }
    for (auto it = d->lines[series]->data()->constBegin();
         it != d->lines[series]->data()->constEnd(); ++it) {
        points.append(QPointF(it->key, it->value));
    }
    return points;
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

void PlotWidget::resizeEvent(QResizeEvent* event)
{
    d->plot->legend->setWrap(std::max(1, width() / 150));
    QWidget::resizeEvent(event);
}

void PlotWidget::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange) {
        d->applyTheme(palette());
        d->plot->replot(QCustomPlot::rpQueuedReplot);
    }
    QWidget::changeEvent(event);
}

} // namespace day0::ui
