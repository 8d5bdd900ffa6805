// PlotWidget's fit to its size: tick labels thinned (or slanted) until neighbours do not collide,
// the title wrapped instead of cut, and an empty state in place of placeholder axes.
#include "widgets/plot_widget.h"
#include "widgets/plot_widget_p.h"

#include <QFontMetrics>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace day0::ui {

namespace {

constexpr int kDefaultTickCount = 5;
constexpr double kSlant = 35.0; // degrees, for long category names on the X axis
constexpr double kFitGap = 4.0; // pixels kept free between neighbouring labels
constexpr int kMaxFitPasses = 12;

QSizeF labelSize(const QFontMetrics& metrics, const QString& text)
{
    return metrics.boundingRect(QRect(), Qt::TextDontClip | Qt::AlignCenter, text).size();
}

/// `text`'s words in lines no wider than `room` pixels (a word wider than that stands alone).
QStringList wrapWords(const QString& text, const QFontMetrics& metrics, int room)
{
    QStringList lines;
    QString line;
    for (const QString& word : text.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
        const QString longer = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
        if (!line.isEmpty() && metrics.horizontalAdvance(longer) > room) {
            lines << line;
            line = word;
        } else {
            line = longer;
        }
    }
    if (!line.isEmpty()) {
        lines << line;
    }
    return lines;
}

} // namespace

bool tickLabelsCollide(const TickLabels& labels, double gap)
{
    const QFontMetrics metrics(labels.font);
    // An empty label (a log axis' unlabelled tick) draws nothing and collides with nothing.
    std::vector<int> order;
    for (int i = 0; i < labels.positions.size(); ++i) {
        if (!labels.labels.value(i).trimmed().isEmpty()) {
            order.push_back(i);
        }
    }
    std::sort(order.begin(), order.end(),
        [&](int a, int b) { return labels.positions[a] < labels.positions[b]; });
    const bool horizontal = labels.orientation == Qt::Horizontal;
    const double slant = std::sin(std::abs(labels.rotation) * M_PI / 180.0);
    for (size_t i = 1; i < order.size(); ++i) {
        const int a = order[i - 1];
        const int b = order[i];
        const double distance = labels.positions[b] - labels.positions[a];
        const QSizeF sa = labelSize(metrics, labels.labels[a]);
        const QSizeF sb = labelSize(metrics, labels.labels[b]);
        double needed = 0;
        if (horizontal && labels.rotation != 0.0) {
            // Slanted labels are parallel strips one line high: apart by distance × sin(angle).
            needed = std::max(sa.height(), sb.height()) / std::max(slant, 1e-6);
        } else if (horizontal) {
            needed = (sa.width() + sb.width()) / 2;
        } else {
            needed = (sa.height() + sb.height()) / 2;
        }
        if (distance < needed + gap) {
            return true;
        }
    }
    return false;
}

TickLabels PlotWidget::Private::labelsOf(QCPAxis* ax) const
{
    TickLabels out;
    out.font = ax->tickLabelFont();
    out.rotation = ax->tickLabelRotation();
    out.orientation = ax->orientation();
    const QVector<double> ticks = ax->tickVector();
    const QVector<QString> texts = ax->tickVectorLabels();
    if (!ax->visible() || !ax->tickLabels()) {
        return out;
    }
    for (int i = 0; i < ticks.size() && i < texts.size(); ++i) {
        out.positions << ax->coordToPixel(ticks[i]);
        out.labels << texts[i];
    }
    return out;
}

void PlotWidget::Private::installText(Axis a)
{
    QCPAxis* ax = axis(a);
    const TextTicks& t = *text[int(a)];
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int i = 0; i < t.keys.size() && i < t.labels.size(); i += std::max(1, t.every)) {
        ticker->addTick(t.keys[i], t.labels[i]);
    }
    ax->setTicker(ticker);
}

void PlotWidget::Private::resetTicks()
{
    for (const Axis a : { Axis::X, Axis::Y }) {
        if (auto& t = text[int(a)]) {
            t->every = t->baseEvery;
            if (a == Axis::X) {
                axis(a)->setTickLabelRotation(t->baseRotation);
            }
            installText(a);
        } else {
            axis(a)->ticker()->setTickCount(kDefaultTickCount);
        }
        axis(a)->setTickLabels(true);
    }
    if (colorScale) {
        colorScale->axis()->ticker()->setTickCount(kDefaultTickCount);
    }
}

void PlotWidget::Private::fitTicks()
{
    // An axis title longer than its axis is wrapped onto more lines (re-laid out once).
    if (wrapAxisLabels()) {
        auto* layout = plot->plotLayout();
        layout->update(QCPLayoutElement::upPreparation);
        layout->update(QCPLayoutElement::upMargins);
        layout->update(QCPLayoutElement::upLayout);
    }
    // Each pass widens the spacing of one crowded axis; a pass only ever thins, so this ends.
    for (int pass = 0; pass < kMaxFitPasses; ++pass) {
        bool changed = false;
        for (const Axis a : { Axis::X, Axis::Y }) {
            QCPAxis* ax = axis(a);
            if (!tickLabelsCollide(labelsOf(ax), kFitGap)) {
                continue;
            }
            if (auto& t = text[int(a)]) {
                if (a == Axis::X && ax->tickLabelRotation() == 0.0) {
                    ax->setTickLabelRotation(kSlant);
                } else if (t->every < t->keys.size()) {
                    t->every *= 2;
                    installText(a);
                } else {
                    continue;
                }
            } else if (ax->ticker()->tickCount() > 1) {
                ax->ticker()->setTickCount(ax->ticker()->tickCount() - 1);
            } else if (ax->tickLabels()) {
                // Too small for even two labels: none, rather than a pile; a resize brings
                // them back (resetTicks).
                ax->setTickLabels(false);
            } else {
                continue;
            }
            changed = true;
        }
        if (colorScale && tickLabelsCollide(labelsOf(colorScale->axis()), kFitGap)
            && colorScale->axis()->ticker()->tickCount() > 2) {
            colorScale->axis()->ticker()->setTickCount(
                colorScale->axis()->ticker()->tickCount() - 1);
            changed = true;
        }
        if (!changed) {
            return;
        }
        auto* layout = plot->plotLayout();
        layout->update(QCPLayoutElement::upPreparation);
        layout->update(QCPLayoutElement::upMargins);
        layout->update(QCPLayoutElement::upLayout);
    }
}

bool PlotWidget::Private::hasData() const
{
    return !bars.isEmpty() || !lines.isEmpty() || !scatters.isEmpty() || !bands.isEmpty()
        || colorMap != nullptr;
}

void PlotWidget::Private::updateEmptyState()
{
    const bool empty = !hasData();
    for (QCPAxis* ax : { plot->xAxis, plot->yAxis }) {
        ax->setVisible(!empty);
        ax->grid()->setVisible(!empty);
    }
    plot->legend->setVisible(legendWanted && !empty);
    for (auto* item : limitItems) {
        item->setVisible(!empty);
    }
    const bool noted = note && note->visible() && !note->text().isEmpty();
    if (!emptyNote) {
        emptyNote = new QCPItemText(plot);
        emptyNote->position->setType(QCPItemPosition::ptAxisRectRatio);
        emptyNote->position->setCoords(0.5, 0.45);
        emptyNote->setPositionAlignment(Qt::AlignCenter);
        emptyNote->setText(PlotWidget::tr("Nothing to show yet."));
    }
    emptyNote->setColor(plot->xAxis->labelColor());
    emptyNote->setVisible(empty && !noted);
}

void PlotWidget::Private::wrapTitle(int width)
{
    const QFontMetrics metrics(title->font());
    const int room = std::max(40, width - 12);
    const QStringList lines = wrapWords(fullTitle, metrics, room);
    title->setText(lines.join(QLatin1Char('\n')));
}

bool PlotWidget::Private::wrapAxisLabels()
{
    bool changed = false;
    for (const Axis a : { Axis::X, Axis::Y }) {
        QCPAxis* ax = axis(a);
        const QFontMetrics metrics(ax->labelFont());
        const QRect rect = ax->axisRect()->rect();
        const int room = std::max(1, a == Axis::X ? rect.width() : rect.height());
        QStringList lines = wrapWords(fullLabel[int(a)], metrics, room);
        // A word longer than a very short axis is elided rather than run past it.
        for (QString& l : lines) {
            l = metrics.elidedText(l, Qt::ElideRight, room);
        }
        const QString wrapped = lines.join(QLatin1Char('\n'));
        if (wrapped != ax->label()) {
            ax->setLabel(wrapped);
            changed = true;
        }
    }
    return changed;
}

QStringList PlotWidget::axisLabelLines(Axis axis)
{
    d->plot->replot(QCustomPlot::rpImmediateRefresh);
    const QString label = d->axis(axis)->label();
    return label.isEmpty() ? QStringList() : label.split(QLatin1Char('\n'));
}

int PlotWidget::axisLength(Axis axis)
{
    d->plot->replot(QCustomPlot::rpImmediateRefresh);
    const QRect rect = d->axis(axis)->axisRect()->rect();
    return axis == Axis::X ? rect.width() : rect.height();
}

bool PlotWidget::showsEmptyState() const { return !d->hasData(); }

QString PlotWidget::noteText() const
{
    if (d->note && d->note->visible() && !d->note->text().isEmpty()) {
        return d->note->text();
    }
    return d->emptyNote && !d->hasData() ? d->emptyNote->text() : QString();
}

QStringList PlotWidget::titleLines() const
{
    return d->title->visible() ? d->title->text().split(QLatin1Char('\n')) : QStringList();
}

TickLabels PlotWidget::tickLabels(Axis axis)
{
    d->plot->replot(QCustomPlot::rpImmediateRefresh);
    TickLabels labels = d->labelsOf(d->axis(axis));

    const QPoint offset = d->plot->mapTo(this, QPoint(0, 0));
    for (double& p : labels.positions) {
        p += labels.orientation == Qt::Horizontal ? offset.x() : offset.y();
    }
    return labels;
}

} // namespace day0::ui
