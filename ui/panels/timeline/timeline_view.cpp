#include "panels/timeline/timeline_view.h"

#include "base/thread_pool.h"
#include "widgets/formatting.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QScrollBar>
#include <QThreadPool>
#include <QTimer>

#include <algorithm>
#include <cmath>

namespace day0::ui {

namespace {
constexpr double kMinNsPerPixel = 0.02; // 50 pixels per ns: far below any timer's resolution
constexpr int kHitTolerance = 3; // pixels around a thin slice that still hit it
} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QAbstractScrollArea(parent)
    , m_pool(new QThreadPool(this))
    , m_frameTimer(new QTimer(this))
{
    qRegisterMetaType<SliceRef>();
    setObjectName(QStringLiteral("timelineView"));
    setFrameShape(QFrame::NoFrame);
    setFocusPolicy(Qt::StrongFocus);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    viewport()->setMouseTracking(true);
    viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
    // One worker: a newer request waits for the running one and replaces older waiting ones.
    m_pool->setMaxThreadCount(1);
    m_frameTimer->setSingleShot(true);
    m_frameTimer->setInterval(0);
    connect(m_frameTimer, &QTimer::timeout, this, &TimelineView::requestFrame);
}

TimelineView::~TimelineView()
{
    // The worker posts back to this object; let it finish before the members go.
    m_pool->waitForDone();
}

void TimelineView::setModel(TrackTreeModel* model)
{
    if (m_model) {
        disconnect(m_model, nullptr, this, nullptr);
    }
    m_model = model;
    if (m_model) {
        connect(m_model, &TrackTreeModel::rowsLayoutChanged, this, &TimelineView::relayout);
        connect(m_model, &QAbstractItemModel::modelReset, this, &TimelineView::relayout);
    }
    relayout();
}

void TimelineView::setTraces(const TimelineTraces& traces)
{
    m_traces = traces;
    // Frames of the previous traces must not be painted (nor fill the name cache) any more.
    m_frame.reset();
    m_shortNames.clear();
    m_selected = {};
    m_range.reset();
    m_highlight = { profile::StringTable::kNotFound, profile::StringTable::kNotFound };
    relayout();
    zoomToFit();
}

// --- window ----------------------------------------------------------------------------------

std::int64_t TimelineView::windowEnd() const
{
    return m_start + std::int64_t(double(canvasWidth()) * m_nsPerPixel);
}

int TimelineView::canvasWidth() const { return std::max(1, viewport()->width() - kLabelWidth); }

std::int64_t TimelineView::totalSpan() const
{
    std::int64_t span = 0;
    for (std::size_t s = 0; s < 2; ++s) {
        if (m_traces.traces[s]) {
            span = std::max(span, m_traces.spans[s]);
        }
    }
    return std::max<std::int64_t>(span, 1000);
}

void TimelineView::clampWindow()
{
    const auto total = double(totalSpan());
    const double maxNsPerPixel = std::max(1.0, total * 4.0 / double(canvasWidth()));
    m_nsPerPixel = std::clamp(m_nsPerPixel, kMinNsPerPixel, maxNsPerPixel);
    const double window = m_nsPerPixel * double(canvasWidth());
    // Keep at least half the window over the traces.
    const double lo = -window / 2;
    const double hi = std::max(lo, total - window / 2);
    m_start = std::int64_t(std::clamp(double(m_start), lo, hi));
}

void TimelineView::setWindow(std::int64_t start, double nsPerPixel)
{
    m_fitted = false;
    m_start = start;
    m_nsPerPixel = nsPerPixel;
    clampWindow();
    emit windowChanged();
    scheduleFrame();
    viewport()->update();
}

void TimelineView::zoomTo(std::int64_t start, std::int64_t end)
{
    if (end <= start) {
        return;
    }
    setWindow(start, double(end - start) / double(canvasWidth()));
}

void TimelineView::zoomToFit()
{
    const std::int64_t span = totalSpan();
    const std::int64_t margin = span / 50;
    zoomTo(-margin, span + margin);
    // Until the user moves the window, a resize fits again (the first layout comes later).
    m_fitted = true;
}

void TimelineView::zoomAround(double x, double factor)
{
    if (factor <= 0) {
        return;
    }
    const double column = std::clamp(x - kLabelWidth, 0.0, double(canvasWidth()));
    const double t = double(m_start) + column * m_nsPerPixel;
    m_nsPerPixel /= factor;
    const auto total = double(totalSpan());
    m_nsPerPixel = std::clamp(
        m_nsPerPixel, kMinNsPerPixel, std::max(1.0, total * 4.0 / double(canvasWidth())));
    setWindow(std::int64_t(std::llround(t - column * m_nsPerPixel)), m_nsPerPixel);
}

void TimelineView::panBy(double pixels)
{
    setWindow(m_start + std::int64_t(std::llround(pixels * m_nsPerPixel)), m_nsPerPixel);
}

double TimelineView::xOf(std::int64_t t) const
{
    return double(kLabelWidth) + double(t - m_start) / m_nsPerPixel;
}

std::int64_t TimelineView::timeAt(double x) const
{
    return m_start + std::int64_t(std::llround((x - kLabelWidth) * m_nsPerPixel));
}

// --- layout ------------------------------------------------------------------------------------

int TimelineView::rowHeight(const TrackTreeModel::VisibleRow& row) const
{
    switch (row.kind) {
    case TrackTreeModel::NodeKind::Trace:
        return kHeaderHeight + 4;
    case TrackTreeModel::NodeKind::Rank:
    case TrackTreeModel::NodeKind::Group:
        return kHeaderHeight;
    case TrackTreeModel::NodeKind::Track:
        break;
    }
    const auto& trace = m_traces.traces[std::size_t(row.slot)];
    if (trace && row.track < trace->tracks().size()
        && trace->tracks()[row.track].kind == profile::TrackKind::Counter) {
        return kCounterHeight;
    }
    return std::max(1, row.depthsShown) * kDepthHeight + 2 * kTrackPadding;
}

void TimelineView::relayout()
{
    m_layout.clear();
    int y = 0;
    if (m_model) {
        const auto& rows = m_model->visibleRows();
        m_layout.reserve(rows.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const int h = rowHeight(rows[i]);
            m_layout.push_back({ i, y, h });
            y += h;
        }
    }
    m_contentHeight = y;
    const int page = std::max(0, viewport()->height() - kRulerHeight);
    verticalScrollBar()->setRange(0, std::max(0, m_contentHeight - page));
    verticalScrollBar()->setPageStep(page);
    verticalScrollBar()->setSingleStep(kDepthHeight * 2);
    scheduleFrame();
    viewport()->update();
}

TimelineView::Hit TimelineView::hitRow(const QPoint& pos) const
{
    if (pos.y() < kRulerHeight || !m_model) {
        return {};
    }
    const int y = pos.y() - kRulerHeight + verticalScrollBar()->value();
    const auto it = std::upper_bound(m_layout.begin(), m_layout.end(), y,
        [](int value, const LaidRow& row) { return value < row.y; });
    if (it == m_layout.begin()) {
        return {};
    }
    const LaidRow& row = *(it - 1);
    if (y >= row.y + row.height) {
        return {};
    }
    Hit hit { &row, -1 };
    const auto& visible = m_model->visibleRows()[row.visibleIndex];
    if (visible.kind == TrackTreeModel::NodeKind::Track && visible.depthsShown > 0) {
        const int inner = y - row.y - kTrackPadding;
        const int depth = inner / kDepthHeight;
        if (inner >= 0 && depth < visible.depthsShown) {
            hit.depth = depth;
        }
    }
    return hit;
}

const TimelineView::LaidRow* TimelineView::rowOfTrack(int slot, profile::TrackId track) const
{
    if (!m_model) {
        return nullptr;
    }
    const auto& rows = m_model->visibleRows();
    for (const auto& laid : m_layout) {
        const auto& r = rows[laid.visibleIndex];
        if (r.kind == TrackTreeModel::NodeKind::Track && r.slot == slot && r.track == track) {
            return &laid;
        }
    }
    return nullptr;
}

// --- selection ---------------------------------------------------------------------------------

SliceRef TimelineView::sliceAt(const QPoint& pos) const
{
    if (pos.x() < kLabelWidth) {
        return {};
    }
    const Hit hit = hitRow(pos);
    if (!hit.row || hit.depth < 0) {
        return {};
    }
    const auto& row = m_model->visibleRows()[hit.row->visibleIndex];
    const auto& trace = m_traces.traces[std::size_t(row.slot)];
    if (!trace) {
        return {};
    }
    const std::int64_t t = m_traces.origins[std::size_t(row.slot)] + timeAt(pos.x());
    const auto tolerance = std::int64_t(std::ceil(kHitTolerance * m_nsPerPixel));
    return { row.slot, profile::sliceNear(*trace, row.track, hit.depth, t, tolerance) };
}

std::optional<QRectF> TimelineView::sliceRect(const SliceRef& slice) const
{
    const auto& trace = slice.valid() ? m_traces.traces[std::size_t(slice.slot)] : nullptr;
    if (!trace || slice.slice >= trace->sliceCount()) {
        return std::nullopt;
    }
    const profile::TrackId track = trace->sliceTrack(slice.slice);
    const LaidRow* row = rowOfTrack(slice.slot, track);
    const int depth = trace->sliceDepth(slice.slice);
    if (!row || depth >= m_model->visibleRows()[row->visibleIndex].depthsShown) {
        return std::nullopt;
    }
    const std::int64_t origin = m_traces.origins[std::size_t(slice.slot)];
    const double x0 = xOf(trace->sliceStart(slice.slice) - origin);
    const double x1 = std::max(x0 + 1.0, xOf(trace->sliceEnd(slice.slice) - origin));
    const double y = kRulerHeight + row->y - verticalScrollBar()->value() + kTrackPadding
        + depth * kDepthHeight;
    return QRectF(x0, y, x1 - x0, kDepthHeight - 1);
}

std::optional<QPoint> TimelineView::slicePosition(const SliceRef& slice) const
{
    const auto rect = sliceRect(slice);
    if (!rect) {
        return std::nullopt;
    }
    const double x0 = std::max(rect->left(), double(kLabelWidth));
    const double x1 = std::min(rect->right(), double(viewport()->width() - 1));
    const double y = rect->center().y();
    if (x1 < x0 || y < kRulerHeight || y >= viewport()->height()) {
        return std::nullopt;
    }
    return QPoint(int((x0 + x1) / 2), int(y));
}

void TimelineView::selectSlice(const SliceRef& slice, bool reveal)
{
    const SliceRef normalized = slice.valid() ? slice : SliceRef {};
    if (reveal && normalized.valid()) {
        revealSlice(normalized);
    }
    if (normalized == m_selected) {
        return;
    }
    m_selected = normalized;
    viewport()->update();
    emit sliceSelected(m_selected);
}

void TimelineView::revealSlice(const SliceRef& slice)
{
    const auto& trace = m_traces.traces[std::size_t(slice.slot)];
    if (!trace || !m_model) {
        return;
    }
    m_model->reveal(slice.slot, trace->sliceTrack(slice.slice));
    if (const LaidRow* row = rowOfTrack(slice.slot, trace->sliceTrack(slice.slice))) {
        const int page = viewport()->height() - kRulerHeight;
        const int top = verticalScrollBar()->value();
        if (row->y < top || row->y + row->height > top + page) {
            verticalScrollBar()->setValue(row->y - page / 3);
        }
    }
    const std::int64_t origin = m_traces.origins[std::size_t(slice.slot)];
    const std::int64_t s = trace->sliceStart(slice.slice) - origin;
    const std::int64_t e = trace->sliceEnd(slice.slice) - origin;
    const std::int64_t window = windowEnd() - m_start;
    if (e - s > window * 8 / 10) {
        const std::int64_t margin = std::max<std::int64_t>((e - s) / 10, 1);
        zoomTo(s - margin, e + margin);
    } else if (s < m_start || e > windowEnd()) {
        setWindow((s + e) / 2 - window / 2, m_nsPerPixel);
    }
}

void TimelineView::setRange(std::optional<std::pair<std::int64_t, std::int64_t>> range)
{
    if (range && range->second <= range->first) {
        range.reset();
    }
    if (range == m_range) {
        return;
    }
    m_range = range;
    viewport()->update();
    emit rangeChanged(m_range ? m_range->first : 0, m_range ? m_range->second : 0);
}

void TimelineView::setHighlight(int slot, profile::StringId name)
{
    if (slot < 0 || slot > 1 || m_highlight[std::size_t(slot)] == name) {
        return;
    }
    m_highlight[std::size_t(slot)] = name;
    scheduleFrame();
}

// --- frames ------------------------------------------------------------------------------------

void TimelineView::setSynchronous(bool synchronous) { m_synchronous = synchronous; }

FrameRequest TimelineView::makeRequest() const
{
    FrameRequest request;
    request.traces = m_traces;
    request.start = m_start;
    request.nsPerPixel = m_nsPerPixel;
    request.width = canvasWidth();
    request.highlight = m_highlight;
    if (!m_model) {
        return request;
    }
    // The visible rows and half a page above and below, so scrolling shows prepared rows.
    const int page = std::max(1, viewport()->height() - kRulerHeight);
    const int top = verticalScrollBar()->value() - page / 2;
    const int bottom = verticalScrollBar()->value() + page + page / 2;
    const auto& rows = m_model->visibleRows();
    for (const auto& laid : m_layout) {
        if (laid.y + laid.height < top || laid.y > bottom) {
            continue;
        }
        const auto& r = rows[laid.visibleIndex];
        if (r.kind == TrackTreeModel::NodeKind::Track && m_traces.traces[std::size_t(r.slot)]) {
            request.tracks.push_back({ r.slot, r.track, r.depthsShown });
        }
    }
    return request;
}

void TimelineView::scheduleFrame()
{
    if (m_synchronous) {
        requestFrame();
    } else if (!m_frameTimer->isActive()) {
        m_frameTimer->start();
    }
}

void TimelineView::requestFrame()
{
    FrameRequest request = makeRequest();
    request.generation = ++m_generation;
    if (m_synchronous) {
        m_frame = std::make_shared<const TimelineFrame>(
            prepareFrame(request, {}, &ThreadPool::global()));
        viewport()->update();
        emit frameReady();
        return;
    }
    if (m_running) {
        m_pending = std::move(request);
        return;
    }
    startWorker(std::move(request));
}

void TimelineView::startWorker(FrameRequest request)
{
    m_running = true;
    m_pool->start([this, request = std::move(request)] {
        auto frame = std::make_shared<const TimelineFrame>(
            prepareFrame(request, {}, &ThreadPool::global()));
        QMetaObject::invokeMethod(
            this, [this, frame] { deliverFrame(frame); }, Qt::QueuedConnection);
    });
}

void TimelineView::deliverFrame(std::shared_ptr<const TimelineFrame> frame)
{
    m_running = false;
    if (frame->traces.traces == m_traces.traces) {
        m_frame = std::move(frame);
    }
    if (m_pending) {
        FrameRequest next = std::move(*m_pending);
        m_pending.reset();
        startWorker(std::move(next));
    }
    viewport()->update();
    emit frameReady();
}

bool TimelineView::frameIsCurrent() const
{
    return m_frame && m_frame->generation == m_generation && !m_running && !m_pending
        && !m_frameTimer->isActive();
}

bool TimelineView::waitForFrame(int timeoutMs)
{
    QElapsedTimer timer;
    timer.start();
    while (!frameIsCurrent() && timer.elapsed() < timeoutMs) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    }
    return frameIsCurrent();
}

} // namespace day0::ui
