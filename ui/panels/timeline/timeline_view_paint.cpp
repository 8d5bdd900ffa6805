// TimelineView's painting: it only reads the prepared TimelineFrame, the layout and the window.
#include "panels/timeline/timeline_colors.h"
#include "panels/timeline/timeline_view.h"
#include "widgets/formatting.h"

#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>

#include <algorithm>
#include <array>
#include <cmath>

namespace day0::ui {

namespace {

QColor mix(const QColor& a, const QColor& b, double t)
{
    return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t),
        float(a.greenF() * (1 - t) + b.greenF() * t), float(a.blueF() * (1 - t) + b.blueF() * t));
}

// A 1-2-5 step of at least `raw` ns.
double niceStep(double raw)
{
    const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-3))));
    for (const double m : { 1.0, 2.0, 5.0, 10.0 }) {
        if (m * magnitude >= raw) {
            return m * magnitude;
        }
    }
    return 10.0 * magnitude;
}

// "1.25 ms": the unit fits the largest time on the ruler, the decimals fit the tick step.
QString rulerLabel(std::int64_t t, double step, double largest)
{
    if (t == 0) {
        return QStringLiteral("0");
    }
    struct Unit {
        double ns;
        const char* name;
    };
    constexpr std::array<Unit, 4> kUnits
        = { { { 1e9, "s" }, { 1e6, "ms" }, { 1e3, "µs" }, { 1.0, "ns" } } };
    Unit unit = kUnits.back();
    for (const auto& u : kUnits) {
        if (largest >= u.ns) {
            unit = u;
            break;
        }
    }
    const int decimals = std::clamp(int(std::ceil(std::log10(unit.ns / step) - 1e-9)), 0, 9);
    return QString::number(double(t) / unit.ns, 'f', decimals) + QLatin1Char(' ')
        + QString::fromUtf8(unit.name);
}

QString durationLabel(std::int64_t ns) { return durationText(Seconds(double(ns) * 1e-9)); }

} // namespace

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(viewport());
    p.fillRect(viewport()->rect(), palette().color(QPalette::Base));
    paintRows(p, viewport()->rect());
    p.setClipRect(QRect(kLabelWidth, kRulerHeight, viewport()->width() - kLabelWidth,
        viewport()->height() - kRulerHeight));
    paintSelection(p);
    paintFlows(p);
    p.setClipping(false);
    paintRuler(p);
}

void TimelineView::paintRows(QPainter& p, const QRect& visible)
{
    if (!m_model) {
        return;
    }
    const QPalette& pal = palette();
    const QColor base = pal.color(QPalette::Base);
    const QColor text = pal.color(QPalette::Text);
    const QColor window = pal.color(QPalette::Window);
    const QColor grid = mix(base, text, 0.07);
    const QColor separator = mix(base, text, 0.13);
    const int scroll = verticalScrollBar()->value();
    const int width = visible.width();
    p.save();
    p.setClipRect(QRect(0, kRulerHeight, width, visible.height() - kRulerHeight));

    // Grid lines of the ruler's major ticks, behind everything.
    const double step = niceStep(110.0 * m_nsPerPixel);
    p.setPen(grid);
    for (double t = std::ceil(double(m_start) / step) * step; xOf(std::int64_t(t)) < width;
         t += step) {
        const int x = int(xOf(std::int64_t(t)));
        p.drawLine(x, kRulerHeight, x, visible.height());
    }

    const auto& rows = m_model->visibleRows();
    const int top = scroll;
    const int bottom = scroll + visible.height() - kRulerHeight;
    auto first = std::upper_bound(m_layout.begin(), m_layout.end(), top,
        [](int value, const LaidRow& row) { return value < row.y; });
    if (first != m_layout.begin()) {
        --first;
    }
    int trackIndex = 0;
    for (auto it = first; it != m_layout.end() && it->y < bottom; ++it) {
        const auto& row = rows[it->visibleIndex];
        const int y = kRulerHeight + it->y - scroll;
        if (row.kind != TrackTreeModel::NodeKind::Track) {
            const double shade = row.kind == TrackTreeModel::NodeKind::Trace ? 0.16
                : row.kind == TrackTreeModel::NodeKind::Rank                 ? 0.09
                                                                             : 0.045;
            p.fillRect(QRect(0, y, width, it->height), mix(window, text, shade));
            trackIndex = 0;
            // What the header holds, in the time area it leaves empty.
            p.setPen(pal.color(QPalette::PlaceholderText));
            p.drawText(QRect(kLabelWidth + 10, y, width - kLabelWidth - 20, it->height),
                Qt::AlignVCenter | Qt::AlignLeft, m_model->detail(row.node));
        } else {
            if (trackIndex++ % 2 == 1) {
                p.fillRect(QRect(kLabelWidth, y, width - kLabelWidth, it->height),
                    pal.color(QPalette::AlternateBase));
            }
            p.fillRect(QRect(0, y, kLabelWidth, it->height), mix(window, base, 0.5));
            const TrackFrame* tf = m_frame ? m_frame->find(row.slot, row.track) : nullptr;
            p.save();
            p.setClipRect(
                QRect(kLabelWidth, std::max(y, kRulerHeight), width - kLabelWidth, it->height));
            if (tf && !tf->counter.empty()) {
                paintCounter(p, *it, y, *tf);
            } else {
                paintTrack(p, row, *it, y, tf);
            }
            p.restore();
        }
        p.setPen(separator);
        p.drawLine(0, y + it->height - 1, width, y + it->height - 1);
        paintLabel(p, row, y, it->height);
    }
    p.setPen(mix(window, text, 0.25));
    p.drawLine(kLabelWidth - 1, kRulerHeight, kLabelWidth - 1, visible.height());
    p.restore();
}

void TimelineView::paintTrack(QPainter& p, const TrackTreeModel::VisibleRow& row,
    const LaidRow& laid, int top, const TrackFrame* tf)
{
    (void)laid;
    if (!tf || !m_frame) {
        return;
    }
    const auto& trace = *m_frame->traces.traces[std::size_t(row.slot)];
    const QColor base = palette().color(QPalette::Base);
    const QColor highlightPen = palette().color(QPalette::Text);
    // The frame may be older than the window (the next one is being prepared): move and scale.
    const double scale = m_frame->nsPerPixel / m_nsPerPixel;
    const double offset = double(m_frame->start - m_start) / m_nsPerPixel + kLabelWidth;
    const bool highlighting
        = m_frame->highlight[std::size_t(row.slot)] != profile::StringTable::kNotFound;
    constexpr std::array<double, 4> kShadeStrength = { 0.38, 0.58, 0.78, 1.0 };
    const QFontMetrics metrics(p.font());
    const int right = viewport()->width();
    const int depths = std::min<int>(row.depthsShown, int(tf->depths.size()));
    for (int d = 0; d < depths; ++d) {
        const double y = top + kTrackPadding + d * kDepthHeight;
        const double h = kDepthHeight - 1;
        for (const SliceRun& run : tf->depths[std::size_t(d)]) {
            double x0 = offset + run.x0 * scale;
            double x1 = offset + run.x1 * scale;
            if (x1 < kLabelWidth || x0 > right) {
                continue;
            }
            x0 = std::max(x0, double(kLabelWidth));
            x1 = std::min(x1, double(right));
            const bool whole = (run.flags & SliceRun::Whole) != 0;
            const profile::Category category = trace.sliceCategory(run.slice);
            QColor color = whole ? sliceColor(category, trace.sliceName(run.slice))
                                 : categoryColor(category);
            double strength = kShadeStrength[std::min<std::size_t>(run.shade, 3)];
            if (highlighting && (run.flags & SliceRun::Highlight) == 0) {
                strength *= 0.3;
            }
            if (strength < 1.0) {
                color = mix(base, color, strength);
            }
            const QRectF rect(x0, y, std::max(1.0, x1 - x0), h);
            p.fillRect(rect, color);
            if (highlighting && (run.flags & SliceRun::Highlight) != 0) {
                p.setPen(QPen(highlightPen, 1.0));
                p.setBrush(Qt::NoBrush);
                p.drawRect(rect.adjusted(0.5, 0.5, -0.5, -0.5));
            }
            if (!whole || rect.width() < 28) {
                continue;
            }
            const quint64 key = (quint64(row.slot) << 32) | trace.sliceName(run.slice);
            auto name = m_shortNames.constFind(key);
            if (name == m_shortNames.constEnd()) {
                name = m_shortNames.insert(key,
                    toQString(
                        std::string(profile::shortSliceName(trace.sliceNameText(run.slice)))));
            }
            const QString duration = durationLabel(trace.sliceDuration(run.slice));
            const int room = int(rect.width()) - 8;
            QString label = *name + QStringLiteral("  ") + duration;
            if (metrics.horizontalAdvance(label) > room) {
                label = metrics.elidedText(*name, Qt::ElideRight, room);
            }
            if (label.isEmpty() || label == QStringLiteral("…")) {
                continue;
            }
            p.setPen(textColorOn(color));
            p.drawText(rect.adjusted(4, 0, -4, 0), Qt::AlignVCenter | Qt::AlignLeft, label);
        }
    }
    paintInstants(p, trace, top, *tf, offset, scale);
}

void TimelineView::paintInstants(QPainter& p, const profile::Trace& trace, int top,
    const TrackFrame& tf, double offset, double scale)
{
    // Instant events as small downward triangles on the track's top edge, one per pixel column
    // (a column holding several gets a darker outline), over the slices.
    if (tf.instants.empty()) {
        return;
    }
    const int right = viewport()->width();
    const QColor outline = palette().color(QPalette::Text);
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    for (const auto& mark : tf.instants) {
        const double x = offset + (mark.column + 0.5) * scale;
        if (x < kLabelWidth || x > right) {
            continue;
        }
        const QColor color = categoryColor(trace.instantCategory(mark.first));
        const double y = top + 1.0;
        const QPointF triangle[3]
            = { QPointF(x - 4.0, y), QPointF(x + 4.0, y), QPointF(x, y + 7.0) };
        p.setPen(QPen(mark.count > 1 ? outline : color.darker(160), mark.count > 1 ? 1.2 : 0.8));
        p.setBrush(color);
        p.drawPolygon(triangle, 3);
    }
    p.restore();
}

void TimelineView::paintCounter(QPainter& p, const LaidRow& laid, int top, const TrackFrame& tf)
{
    const double scale = m_frame->nsPerPixel / m_nsPerPixel;
    const double offset = double(m_frame->start - m_start) / m_nsPerPixel + kLabelWidth;
    // Values from zero (or the smallest negative one) to the largest in the window.
    const double lo = std::min(tf.counterRange.first, 0.0);
    const double hi = tf.counterRange.second;
    const double span = hi > lo ? hi - lo : 1.0;
    const double y0 = top + laid.height - kTrackPadding;
    const double h = laid.height - 2.0 * kTrackPadding - 10;
    QPainterPath area;
    bool open = false;
    double lastX = 0;
    for (std::size_t x = 0; x < tf.counter.size(); ++x) {
        const auto& c = tf.counter[x];
        const double px = offset + double(x) * scale;
        if (!c.defined) {
            if (open) {
                area.lineTo(lastX, y0);
                area.closeSubpath();
                open = false;
            }
            continue;
        }
        const double y = y0 - (c.max - lo) / span * h;
        if (!open) {
            area.moveTo(px, y0);
            open = true;
        }
        area.lineTo(px, y);
        area.lineTo(px + scale, y);
        lastX = px + scale;
    }
    if (open) {
        area.lineTo(lastX, y0);
        area.closeSubpath();
    }
    const QColor color = categoryColor(profile::Category::Memcpy);
    p.setPen(QPen(color.darker(130), 1.0));
    p.setBrush(mix(palette().color(QPalette::Base), color, 0.55));
    p.drawPath(area);
    p.setPen(palette().color(QPalette::PlaceholderText));
    QFont small = p.font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    p.setFont(small);
    p.drawText(QRectF(kLabelWidth + 4, top + 1, 300, 12), Qt::AlignLeft | Qt::AlignTop,
        tr("max %1").arg(QString::number(hi, 'g', 4)));
}

void TimelineView::paintLabel(
    QPainter& p, const TrackTreeModel::VisibleRow& row, int top, int height)
{
    const QPalette& pal = palette();
    const int indent = 8 + row.level * 14;
    const int lineHeight = std::min(height,
        row.kind == TrackTreeModel::NodeKind::Track ? kDepthHeight + 2 * kTrackPadding : height);
    if (row.hasChildren) {
        // A disclosure triangle: ▾ expanded, ▸ collapsed.
        const double cx = indent + 4;
        const double cy = top + lineHeight / 2.0;
        QPainterPath tri;
        if (row.expanded) {
            tri.moveTo(cx - 4, cy - 2);
            tri.lineTo(cx + 4, cy - 2);
            tri.lineTo(cx, cy + 3);
        } else {
            tri.moveTo(cx - 2, cy - 4);
            tri.lineTo(cx + 3, cy);
            tri.lineTo(cx - 2, cy + 4);
        }
        tri.closeSubpath();
        p.setRenderHint(QPainter::Antialiasing, true);
        p.fillPath(tri, pal.color(QPalette::Text));
        p.setRenderHint(QPainter::Antialiasing, false);
    }
    QFont font = p.font();
    font.setBold(row.kind != TrackTreeModel::NodeKind::Track);
    p.save();
    p.setFont(font);
    const int x = indent + 14;
    const int available = kLabelWidth - x - 8;
    QString text = m_model->label(row.node);
    QString count;
    if (row.kind == TrackTreeModel::NodeKind::Track) {
        const QString detail = m_model->detail(row.node);
        count = detail.section(QLatin1Char(' '), 0, 0);
    }
    const QFontMetrics metrics(font);
    const int countWidth = count.isEmpty() ? 0 : metrics.horizontalAdvance(count) + 8;
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRect(x, top, available - countWidth, lineHeight), Qt::AlignVCenter | Qt::AlignLeft,
        metrics.elidedText(text, Qt::ElideMiddle, available - countWidth));
    if (!count.isEmpty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(QRect(x, top, available, lineHeight), Qt::AlignVCenter | Qt::AlignRight, count);
    }
    p.restore();
}

void TimelineView::paintSelection(QPainter& p)
{
    const QColor highlight = palette().color(QPalette::Highlight);
    if (m_range) {
        const double x0 = xOf(m_range->first);
        const double x1 = xOf(m_range->second);
        QColor band = highlight;
        band.setAlpha(38);
        p.fillRect(QRectF(x0, kRulerHeight, x1 - x0, viewport()->height()), band);
        p.setPen(QPen(highlight, 1.0));
        p.drawLine(QPointF(x0, kRulerHeight), QPointF(x0, viewport()->height()));
        p.drawLine(QPointF(x1, kRulerHeight), QPointF(x1, viewport()->height()));
    }
    if (m_hoverX >= kLabelWidth && m_drag != Drag::Pan) {
        QColor line = palette().color(QPalette::Text);
        line.setAlpha(90);
        p.setPen(QPen(line, 1.0, Qt::DashLine));
        p.drawLine(m_hoverX, kRulerHeight, m_hoverX, viewport()->height());
    }
    if (const auto rect = sliceRect(m_selected)) {
        p.setRenderHint(QPainter::Antialiasing, true);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(palette().color(QPalette::Base), 3.0));
        p.drawRect(rect->adjusted(-1, -1, 1, 1));
        p.setPen(QPen(palette().color(QPalette::Text), 1.6));
        p.drawRect(rect->adjusted(-1, -1, 1, 1));
        p.setRenderHint(QPainter::Antialiasing, false);
    }
}

void TimelineView::paintFlows(QPainter& p)
{
    const auto& trace
        = m_selected.valid() ? m_traces.traces[std::size_t(m_selected.slot)] : nullptr;
    if (!trace) {
        return;
    }
    std::vector<std::pair<SliceRef, SliceRef>> arrows;
    for (const std::size_t f : trace->flowsFrom(m_selected.slice)) {
        arrows.push_back({ m_selected, { m_selected.slot, trace->flowTo(f) } });
    }
    for (const std::size_t f : trace->flowsTo(m_selected.slice)) {
        arrows.push_back({ { m_selected.slot, trace->flowFrom(f) }, m_selected });
    }
    p.setRenderHint(QPainter::Antialiasing, true);
    QColor color = palette().color(QPalette::Text);
    color.setAlpha(200);
    for (const auto& [from, to] : arrows) {
        const auto a = sliceRect(from);
        const auto b = sliceRect(to);
        if (!a || !b) {
            continue;
        }
        const bool down = b->top() > a->top();
        const QPointF p0(a->left(), down ? a->bottom() : a->top());
        const QPointF p1(b->left(), down ? b->top() : b->bottom());
        const double midY = (p0.y() + p1.y()) / 2;
        QPainterPath path(p0);
        path.cubicTo(QPointF(p0.x(), midY), QPointF(p1.x(), midY), p1);
        p.setPen(QPen(color, 1.5));
        p.setBrush(Qt::NoBrush);
        p.drawPath(path);
        const double dir = down ? -1.0 : 1.0;
        QPainterPath head;
        head.moveTo(p1);
        head.lineTo(p1 + QPointF(-4, 7 * dir));
        head.lineTo(p1 + QPointF(4, 7 * dir));
        head.closeSubpath();
        p.fillPath(head, color);
    }
    p.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineView::paintRuler(QPainter& p)
{
    const QPalette& pal = palette();
    const int width = viewport()->width();
    const QColor window = pal.color(QPalette::Window);
    const QColor text = pal.color(QPalette::Text);
    p.fillRect(QRect(0, 0, width, kRulerHeight), window);
    p.setPen(mix(window, text, 0.3));
    p.drawLine(0, kRulerHeight - 1, width, kRulerHeight - 1);
    p.drawLine(kLabelWidth - 1, 0, kLabelWidth - 1, kRulerHeight);

    QFont small = p.font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    p.setFont(small);
    // The window's scale, left of the ruler.
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(QRect(8, 0, kLabelWidth - 16, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
        tr("window %1").arg(durationLabel(windowEnd() - m_start)));

    const double step = niceStep(110.0 * m_nsPerPixel);
    const double largest = std::max(std::abs(double(m_start)), std::abs(double(windowEnd())));
    p.save();
    p.setClipRect(QRect(kLabelWidth, 0, width - kLabelWidth, kRulerHeight));
    for (double t = std::floor(double(m_start) / step) * step; xOf(std::int64_t(t)) < width;
         t += step) {
        const double x = xOf(std::int64_t(std::llround(t)));
        p.setPen(mix(window, text, 0.45));
        p.drawLine(QPointF(x, kRulerHeight - 9), QPointF(x, kRulerHeight - 1));
        for (int minor = 1; minor < 5; ++minor) {
            const double mx = x + minor * step / 5.0 / m_nsPerPixel;
            p.drawLine(QPointF(mx, kRulerHeight - 4), QPointF(mx, kRulerHeight - 1));
        }
        p.setPen(text);
        p.drawText(QRectF(x + 3, 2, 140, kRulerHeight - 10), Qt::AlignLeft | Qt::AlignVCenter,
            rulerLabel(std::int64_t(std::llround(t)), step, largest));
    }
    const QColor highlight = pal.color(QPalette::Highlight);
    if (m_range) {
        const double x0 = xOf(m_range->first);
        const double x1 = xOf(m_range->second);
        QColor band = highlight;
        band.setAlpha(70);
        p.fillRect(QRectF(x0, 0, x1 - x0, kRulerHeight - 1), band);
        const QString label = durationLabel(m_range->second - m_range->first);
        const QFontMetrics metrics(small);
        const double w = metrics.horizontalAdvance(label) + 12;
        const QRectF box((x0 + x1 - w) / 2, 3, w, kRulerHeight - 8);
        p.fillRect(box, highlight);
        p.setPen(pal.color(QPalette::HighlightedText));
        p.drawText(box, Qt::AlignCenter, label);
    }
    if (m_hoverX >= kLabelWidth) {
        const QString label = rulerLabel(timeAt(m_hoverX), step / 10.0, largest);
        const QFontMetrics metrics(small);
        const double w = metrics.horizontalAdvance(label) + 10;
        const QRectF box(std::min(double(m_hoverX) + 4, width - w - 2), 3, w, kRulerHeight - 8);
        p.fillRect(box, text);
        p.setPen(pal.color(QPalette::Base));
        p.drawText(box, Qt::AlignCenter, label);
    }
    p.restore();
}

} // namespace day0::ui
