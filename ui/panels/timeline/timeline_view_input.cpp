// TimelineView's input: mouse (pan, range, click, double click), wheel zoom, keys, tooltips.
#include "panels/timeline/timeline_view.h"
#include "widgets/formatting.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace day0::ui {

namespace {
constexpr int kClickSlop = 3; // pixels a press may move and still be a click
} // namespace

// --- events ------------------------------------------------------------------------------------

void TimelineView::resizeEvent(QResizeEvent* event)
{
    QAbstractScrollArea::resizeEvent(event);
    relayout();
    if (m_fitted) {
        zoomToFit();
    }
}

void TimelineView::scrollContentsBy(int, int)
{
    scheduleFrame();
    viewport()->update();
}

void TimelineView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton) {
        return;
    }
    const QPoint pos = event->position().toPoint();
    m_pressPos = pos;
    m_lastPos = pos;
    if (pos.x() < kLabelWidth && pos.y() >= kRulerHeight) {
        const Hit hit = hitRow(pos);
        if (hit.row && m_model) {
            const auto& row = m_model->visibleRows()[hit.row->visibleIndex];
            if (row.hasChildren) {
                m_model->setExpanded(row.node, !row.expanded);
            }
        }
        return;
    }
    if (pos.y() < kRulerHeight || (event->modifiers() & Qt::ShiftModifier)) {
        m_drag = Drag::Range;
        m_rangeAnchor = timeAt(pos.x());
        return;
    }
    m_drag = Drag::Pending;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event)
{
    const QPoint pos = event->position().toPoint();
    m_hoverX = pos.x() >= kLabelWidth ? pos.x() : -1;
    if (m_drag == Drag::Pending && (pos - m_pressPos).manhattanLength() > kClickSlop) {
        m_drag = Drag::Pan;
        setCursor(Qt::ClosedHandCursor);
    }
    if (m_drag == Drag::Pan) {
        const QPoint delta = pos - m_lastPos;
        verticalScrollBar()->setValue(verticalScrollBar()->value() - delta.y());
        panBy(-delta.x());
    } else if (m_drag == Drag::Range) {
        const std::int64_t t = timeAt(pos.x());
        setRange(std::pair(std::min(t, m_rangeAnchor), std::max(t, m_rangeAnchor)));
    }
    m_lastPos = pos;
    viewport()->update();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event)
{
    const QPoint pos = event->position().toPoint();
    if (m_drag == Drag::Pending) {
        selectSlice(sliceAt(pos));
    } else if (m_drag == Drag::Range && std::abs(pos.x() - m_pressPos.x()) <= kClickSlop) {
        setRange(std::nullopt);
    }
    m_drag = Drag::None;
    unsetCursor();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event)
{
    const SliceRef hit = sliceAt(event->position().toPoint());
    if (!hit.valid()) {
        return;
    }
    selectSlice(hit);
    const auto& trace = *m_traces.traces[std::size_t(hit.slot)];
    const std::int64_t origin = m_traces.origins[std::size_t(hit.slot)];
    const std::int64_t s = trace.sliceStart(hit.slice) - origin;
    const std::int64_t e = trace.sliceEnd(hit.slice) - origin;
    const std::int64_t margin = std::max<std::int64_t>((e - s) / 8, 50);
    zoomTo(s - margin, e + margin);
}

void TimelineView::wheelEvent(QWheelEvent* event)
{
    const QPoint pos = event->position().toPoint();
    const QPoint delta = event->angleDelta();
    if (pos.x() < kLabelWidth || (event->modifiers() & Qt::ShiftModifier)) {
        const int dy = delta.y() != 0 ? delta.y() : delta.x();
        verticalScrollBar()->setValue(verticalScrollBar()->value() - dy * kDepthHeight * 3 / 120);
    } else if (std::abs(delta.x()) > std::abs(delta.y())) {
        panBy(-double(delta.x()) / 120.0 * double(canvasWidth()) / 10.0);
    } else if (delta.y() != 0) {
        zoomAround(pos.x(), std::pow(1.2, double(delta.y()) / 120.0));
    }
    event->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* event)
{
    const double focusX = m_hoverX >= 0 ? m_hoverX : kLabelWidth + canvasWidth() / 2.0;
    switch (event->key()) {
    case Qt::Key_W:
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        zoomAround(focusX, 1.35);
        break;
    case Qt::Key_S:
    case Qt::Key_Minus:
        zoomAround(focusX, 1.0 / 1.35);
        break;
    case Qt::Key_A:
    case Qt::Key_Left:
        panBy(-canvasWidth() / 8.0);
        break;
    case Qt::Key_D:
    case Qt::Key_Right:
        panBy(canvasWidth() / 8.0);
        break;
    case Qt::Key_F:
        if (m_range) {
            zoomTo(m_range->first, m_range->second);
        } else if (m_selected.valid()) {
            revealSlice(m_selected);
            if (const auto& t = m_traces.traces[std::size_t(m_selected.slot)]) {
                const std::int64_t origin = m_traces.origins[std::size_t(m_selected.slot)];
                const std::int64_t s = t->sliceStart(m_selected.slice) - origin;
                const std::int64_t e = t->sliceEnd(m_selected.slice) - origin;
                const std::int64_t margin = std::max<std::int64_t>((e - s) / 8, 50);
                zoomTo(s - margin, e + margin);
            }
        }
        break;
    case Qt::Key_0:
    case Qt::Key_Home:
        zoomToFit();
        break;
    case Qt::Key_Escape:
        if (m_range) {
            setRange(std::nullopt);
        } else {
            selectSlice({});
        }
        break;
    default:
        QAbstractScrollArea::keyPressEvent(event);
        return;
    }
    event->accept();
}

void TimelineView::leaveEvent(QEvent* event)
{
    m_hoverX = -1;
    viewport()->update();
    QAbstractScrollArea::leaveEvent(event);
}

bool TimelineView::viewportEvent(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        showToolTip(static_cast<QHelpEvent*>(event)->pos());
        return true;
    }
    return QAbstractScrollArea::viewportEvent(event);
}

void TimelineView::showToolTip(const QPoint& pos)
{
    QString text;
    if (const SliceRef hit = sliceAt(pos); hit.valid()) {
        const auto& trace = *m_traces.traces[std::size_t(hit.slot)];
        const std::int64_t origin = m_traces.origins[std::size_t(hit.slot)];
        text
            = QStringLiteral("<b>%1</b><br>%2 · %3<br>start %4")
                  .arg(toQString(std::string(trace.sliceNameText(hit.slice))).toHtmlEscaped(),
                      toQString(std::string(profile::categoryName(trace.sliceCategory(hit.slice)))),
                      durationText(Seconds(double(trace.sliceDuration(hit.slice)) * 1e-9)),
                      durationText(Seconds(double(trace.sliceStart(hit.slice) - origin) * 1e-9)));
    } else if (const Hit row = hitRow(pos); row.row && m_model) {
        const auto& r = m_model->visibleRows()[row.row->visibleIndex];
        if (pos.x() < kLabelWidth) {
            text = m_model->label(r.node) + QStringLiteral("\n") + m_model->detail(r.node);
        } else if (m_frame && row.depth >= 0) {
            if (const TrackFrame* tf = m_frame->find(r.slot, r.track);
                tf && row.depth < int(tf->depths.size())) {
                const double fx = (double(timeAt(pos.x()) - m_frame->start)) / m_frame->nsPerPixel;
                for (const auto& run : tf->depths[std::size_t(row.depth)]) {
                    if (fx >= run.x0 && fx < run.x1) {
                        text
                            = tr("%n slice(s) here — zoom in to see them", nullptr, int(run.count));
                        break;
                    }
                }
            }
        }
    }
    if (text.isEmpty()) {
        QToolTip::hideText();
    } else {
        QToolTip::showText(viewport()->mapToGlobal(pos), text, viewport());
    }
}

} // namespace day0::ui
