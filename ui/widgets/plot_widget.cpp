#include "widgets/plot_widget.h"

#include "widgets/formatting.h"
#include "widgets/plot_widget_p.h"

#include <QFileInfo>
#include <QSvgGenerator>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace day0::ui {

namespace {
constexpr QSize kMinimumPlotSize(160, 120);
}

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

void PlotWidget::Private::applyTicker(Axis a)
{
    const bool log = a == Axis::X ? xLog : yLog;
    const AxisFormat format = a == Axis::X ? xFormat : yFormat;
    QCPAxis* ax = axis(a);
    ax->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (ax == keyAxis() && !categories.isEmpty()) {
        TextTicks t;
        for (int i = 0; i < categories.size(); ++i) {
            t.keys << i;
        }
        t.labels = categories;
        t.baseEvery = t.every = std::max(1, int(std::ceil(categories.size() / 16.0)));
        text[int(a)] = t;
        installText(a);
        return;
    }
    text[int(a)].reset();
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

PlotWidget::PlotWidget(QWidget* parent)
    : QWidget(parent)
    , d(std::make_unique<Private>())
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    d->plot = new QCustomPlot(this);
    // A plot squeezes its own content (ticks thinned, title wrapped): it never sets the
    // window's minimum size from its title, legend or labels.
    d->plot->setMinimumSize(kMinimumPlotSize);
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
    // Empty state before each replot; tick labels fitted after each layout, before drawing.
    connect(d->plot, &QCustomPlot::beforeReplot, this, [this] { d->updateEmptyState(); });
    connect(d->plot, &QCustomPlot::afterLayout, this, [this] { d->fitTicks(); });

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
    d->emptyNote = nullptr;
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
    d->fullLabel[0].clear();
    d->fullLabel[1].clear();
    d->plot->xAxis->setTickLabelRotation(0.0);
    d->applyTheme(palette());
}

void PlotWidget::setTitle(const QString& title)
{
    d->fullTitle = title;
    d->wrapTitle(width());
    d->title->setVisible(!title.isEmpty());
}

void PlotWidget::setAxisLabel(Axis axis, const QString& label)
{
    d->fullLabel[int(axis)] = label;
    d->axis(axis)->setLabel(label);
}

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

void PlotWidget::setLegendVisible(bool visible)
{
    d->legendWanted = visible;
    d->plot->legend->setVisible(visible);
}

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

void PlotWidget::resizeEvent(QResizeEvent* event)
{
    d->plot->legend->setWrap(std::max(1, width() / 150));
    // A new size may give room for more labels, or less for the title.
    d->resetTicks();
    d->wrapTitle(width());
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
