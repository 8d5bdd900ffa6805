#include "panels/serving/request_timeline.h"

#include "base/units.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <utility>

namespace day0::ui {

namespace {

constexpr int kMargin = 6;
constexpr int kAxisHeight = 18;
constexpr int kLabelWidth = 36;
/// Rows at least this tall get a tick per token chunk; thinner ones would be all ticks.
constexpr double kTickRowHeight = 6.0;

QString secondsText(double seconds) { return durationText(Seconds(seconds)); }

} // namespace

std::vector<RequestBar> requestBars(const serve::BenchResult& result)
{
    std::vector<RequestBar> bars;
    bars.reserve(result.requests.size());
    for (const auto& q : result.requests) {
        RequestBar bar;
        bar.index = q.index;
        bar.sent = q.sentAt;
        bar.end = q.sentAt + std::max(q.ended, q.ok ? q.e2el : 0.0);
        bar.failed = !q.ok;
        // A failed request may still have streamed tokens before it broke.
        const bool sawToken = q.ok || !q.itl.empty() || q.ttft > 0;
        if (sawToken) {
            bar.firstToken = q.sentAt + q.ttft;
            double at = bar.firstToken;
            bar.tokens.push_back(at);
            for (const double gap : q.itl) {
                at += gap;
                bar.tokens.push_back(at);
            }
        }
        if (bar.failed) {
            bar.error = toQString(q.errorKind);
            if (!q.errorMessage.empty()) {
                bar.error += QStringLiteral(": ") + toQString(q.errorMessage);
            }
        }
        bars.push_back(std::move(bar));
    }
    return bars;
}

RequestTimeline::RequestTimeline(QWidget* parent)
    : QWidget(parent)
{
    setMinimumHeight(120);
    setMouseTracking(true);
}

void RequestTimeline::setLevel(const QString& label, const serve::BenchResult& result)
{
    m_title = tr("Requests of %1: send to end, TTFT then decode").arg(label);
    m_bars = requestBars(result);
    if (m_bars.empty()) {
        m_empty = tr("%1 sent no request").arg(label);
    }
    update();
}

void RequestTimeline::setEmptyText(const QString& text)
{
    m_title.clear();
    m_bars.clear();
    m_empty = text;
    update();
}

QRect RequestTimeline::plotRect() const
{
    return rect().adjusted(kMargin + kLabelWidth, kMargin + fontMetrics().height() + 2, -kMargin,
        -(kMargin + kAxisHeight));
}

double RequestTimeline::span() const
{
    double end = 0.0;
    for (const auto& b : m_bars) {
        end = std::max(end, b.end);
    }
    return end > 0 ? end : 1.0;
}

int RequestTimeline::barAt(QPoint pos) const
{
    const QRect plot = plotRect();
    if (m_bars.empty() || !plot.contains(pos)) {
        return -1;
    }
    const double rowHeight = double(plot.height()) / double(m_bars.size());
    const auto row = std::size_t((pos.y() - plot.top()) / rowHeight);
    if (row >= m_bars.size()) {
        return -1;
    }
    const double scale = plot.width() / span();
    const auto& b = m_bars[row];
    // Within a pixel either side, so a short failed request can still be pointed at.
    const double x = pos.x() - plot.left();
    return x >= b.sent * scale - 1 && x <= b.end * scale + 1 ? int(row) : -1;
}

void RequestTimeline::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.fillRect(rect(), palette().base());
    painter.setPen(palette().text().color());
    if (m_bars.empty()) {
        painter.drawText(rect().adjusted(kMargin, kMargin, -kMargin, -kMargin),
            Qt::AlignCenter | Qt::TextWordWrap, m_empty);
        return;
    }
    painter.drawText(QRect(kMargin, kMargin, width() - 2 * kMargin, fontMetrics().height()),
        Qt::AlignLeft | Qt::AlignVCenter, m_title);
    const QColor waiting = categoricalColor(1);
    const QColor decoding = categoricalColor(0);
    const QColor failed = errorColor();
    // The legend, right-aligned on the title's line.
    int legendX = width() - kMargin;
    const int swatch = fontMetrics().height() - 4;
    for (const auto& [text, colour] : { std::pair { tr("failed"), failed },
             std::pair { tr("decode"), decoding }, std::pair { tr("TTFT"), waiting } }) {
        legendX -= fontMetrics().horizontalAdvance(text);
        painter.drawText(legendX, kMargin + fontMetrics().ascent(), text);
        legendX -= swatch + 4;
        painter.fillRect(QRect(legendX, kMargin + 2, swatch, swatch), colour);
        legendX -= 10;
    }
    const QRect plot = plotRect();
    if (plot.width() < 4 || plot.height() < 1) {
        return;
    }
    const double scale = plot.width() / span();
    const double rowHeight = double(plot.height()) / double(m_bars.size());
    const double barHeight = std::max(1.0, rowHeight * 0.7);
    const QColor tick = palette().base().color();
    for (std::size_t i = 0; i < m_bars.size(); ++i) {
        const auto& b = m_bars[i];
        const double y = plot.top() + rowHeight * double(i) + (rowHeight - barHeight) / 2;
        const auto xAt = [&](double t) { return plot.left() + t * scale; };
        // At least a pixel wide, so a request refused at once still shows.
        const double x0 = xAt(b.sent);
        const double x1 = std::max(xAt(b.end), x0 + 1);
        const double split = b.firstToken >= 0 ? std::clamp(xAt(b.firstToken), x0, x1) : x1;
        painter.fillRect(
            QRectF(x0, y, split - x0, barHeight), b.failed ? failed.lighter(160) : waiting);
        if (split < x1) {
            painter.fillRect(QRectF(split, y, x1 - split, barHeight), decoding);
        }
        if (rowHeight >= kTickRowHeight && b.tokens.size() > 1) {
            // One tick per pixel column at most (Tracy's rule: draw what fits in a pixel).
            painter.setPen(tick);
            int lastColumn = -1;
            for (std::size_t t = 1; t < b.tokens.size(); ++t) {
                const int column = int(std::lround(xAt(b.tokens[t])));
                if (column != lastColumn) {
                    painter.drawLine(QPointF(column, y + barHeight * 0.25),
                        QPointF(column, y + barHeight * 0.75));
                    lastColumn = column;
                }
            }
        }
        if (b.failed) {
            painter.setPen(QPen(failed, 1.5));
            painter.setBrush(Qt::NoBrush);
            painter.drawRect(QRectF(x0, y, x1 - x0, barHeight));
            const double h = std::min(barHeight, 8.0);
            const QPointF c(x1 + h / 2 + 1, y + barHeight / 2);
            painter.drawLine(c + QPointF(-h / 2, -h / 2), c + QPointF(h / 2, h / 2));
            painter.drawLine(c + QPointF(-h / 2, h / 2), c + QPointF(h / 2, -h / 2));
        }
    }
    // The request indices every few rows, and the time axis.
    painter.setPen(palette().text().color());
    const int every = std::max(1, int(std::ceil(fontMetrics().height() / rowHeight)));
    for (std::size_t i = 0; i < m_bars.size(); i += std::size_t(every)) {
        const double y = plot.top() + rowHeight * (double(i) + 0.5);
        painter.drawText(QRectF(kMargin, y - fontMetrics().height() / 2.0, kLabelWidth - 4,
                             fontMetrics().height()),
            Qt::AlignRight | Qt::AlignVCenter, QString::number(m_bars[i].index));
    }
    painter.drawLine(plot.bottomLeft(), plot.bottomRight());
    const int ticks = std::max(1, plot.width() / 90);
    for (int t = 0; t <= ticks; ++t) {
        const double at = span() * t / ticks;
        const int x = plot.left() + int(at * scale);
        painter.drawLine(x, plot.bottom(), x, plot.bottom() + 3);
        const QString text = secondsText(at);
        const int w = fontMetrics().horizontalAdvance(text);
        painter.drawText(std::clamp(x - w / 2, 0, width() - w),
            plot.bottom() + 4 + fontMetrics().ascent(), text);
    }
}

bool RequestTimeline::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip) {
        return QWidget::event(event);
    }
    auto* help = static_cast<QHelpEvent*>(event);
    const int row = barAt(help->pos());
    if (row < 0) {
        QToolTip::hideText();
        event->ignore();
        return true;
    }
    const auto& b = m_bars[std::size_t(row)];
    QString text = tr("Request %1: sent at %2, ended after %3")
                       .arg(b.index)
                       .arg(secondsText(b.sent), secondsText(b.end - b.sent));
    if (b.firstToken >= 0) {
        text += QLatin1Char('\n')
            + tr("TTFT %1, %2 token chunks")
                  .arg(secondsText(b.firstToken - b.sent))
                  .arg(b.tokens.size());
    }
    if (b.failed) {
        text += QLatin1Char('\n') + tr("Failed: %1").arg(b.error);
    }
    QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace day0::ui
