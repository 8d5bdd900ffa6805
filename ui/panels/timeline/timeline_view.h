#pragma once

#include "panels/timeline/timeline_frame.h"
#include "panels/timeline/track_tree_model.h"

#include <QAbstractScrollArea>
#include <QHash>
#include <QPointer>

#include <memory>
#include <optional>
#include <vector>

class QThreadPool;
class QTimer;

namespace day0::ui {

/// A slice of one of the stacked traces.
struct SliceRef {
    int slot = 0;
    profile::SliceIndex slice = profile::kNoSlice;
    [[nodiscard]] bool valid() const { return slice != profile::kNoSlice; }
    bool operator==(const SliceRef&) const = default;
};

/// The timeline canvas (Tracy's design): rows of a TrackTreeModel on the left, time running
/// right, a ruler on top. Every pan, zoom or scroll asks a worker thread for a TimelineFrame (the
/// per-pixel draw lists of the visible tracks); paintEvent only paints the newest frame, moved and
/// scaled to the current window while the next one is prepared, so ten million slices pan as
/// smoothly as ten thousand.
///
/// Mouse: wheel zooms around the cursor (Shift+wheel or wheel over the labels scrolls), drag
/// pans, Shift+drag or a drag in the ruler selects a time range, a click selects a slice, a
/// double click zooms to it. Keys: W/S zoom, A/D pan, F zooms to the range or slice, 0 fits all,
/// Esc clears. Times are ns relative to each trace's first event.
class TimelineView : public QAbstractScrollArea {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);
    ~TimelineView() override;

    /// The rows to show (not owned); its collapse state drives the layout.
    void setModel(TrackTreeModel* model);
    [[nodiscard]] TrackTreeModel* model() const { return m_model; }
    /// The traces and their origins; fits the window to the longest.
    void setTraces(const TimelineTraces& traces);
    [[nodiscard]] const TimelineTraces& traces() const { return m_traces; }

    // --- window --------------------------------------------------------------------------
    [[nodiscard]] std::int64_t windowStart() const { return m_start; }
    [[nodiscard]] double nsPerPixel() const { return m_nsPerPixel; }
    [[nodiscard]] std::int64_t windowEnd() const;
    /// Shows [start, end) (relative ns) across the canvas.
    void zoomTo(std::int64_t start, std::int64_t end);
    void setWindow(std::int64_t start, double nsPerPixel);
    /// Shows every trace from its first to its last event.
    void zoomToFit();
    /// Zooms by `factor` (> 1 zooms in) keeping the time under canvas column `x` in place.
    void zoomAround(double x, double factor);
    /// Moves the window by `pixels` columns (positive: later).
    void panBy(double pixels);
    /// Pixel width of the time area.
    [[nodiscard]] int canvasWidth() const;

    // --- selection -------------------------------------------------------------------------
    [[nodiscard]] SliceRef selectedSlice() const { return m_selected; }
    /// Selects a slice (an invalid ref clears); with `reveal`, expands its row, scrolls to it and
    /// moves the window to show it. Emits sliceSelected when it changes.
    void selectSlice(const SliceRef& slice, bool reveal = false);
    /// The selected time range (relative ns), if any.
    [[nodiscard]] std::optional<std::pair<std::int64_t, std::int64_t>> range() const
    {
        return m_range;
    }
    /// Sets (or with nullopt clears) the range; emits rangeChanged.
    void setRange(std::optional<std::pair<std::int64_t, std::int64_t>> range);
    /// Highlights every slice named `name` in `slot` (kNotFound: none).
    void setHighlight(int slot, profile::StringId name);

    // --- geometry (tests, tools) -------------------------------------------------------------
    /// The slice under a viewport position, if any.
    [[nodiscard]] SliceRef sliceAt(const QPoint& viewportPos) const;
    /// The viewport position of the middle of a slice's visible part; nullopt when off screen.
    [[nodiscard]] std::optional<QPoint> slicePosition(const SliceRef& slice) const;
    /// Canvas x (viewport coordinates) of relative time `t`.
    [[nodiscard]] double xOf(std::int64_t t) const;
    /// Relative time at viewport x.
    [[nodiscard]] std::int64_t timeAt(double x) const;

    // --- frames ------------------------------------------------------------------------------
    /// Prepares frames on the calling thread when a view change asks for one (benchmarks,
    /// screenshots); by default they are prepared on a worker thread.
    void setSynchronous(bool synchronous);
    /// The frame painted last (or to be painted next).
    [[nodiscard]] std::shared_ptr<const TimelineFrame> frame() const { return m_frame; }
    /// True when the painted frame matches the current window and rows.
    [[nodiscard]] bool frameIsCurrent() const;
    /// Runs the event loop until the frame is current or `timeoutMs` passes.
    bool waitForFrame(int timeoutMs = 5000);

    static constexpr int kLabelWidth = 250;
    static constexpr int kRulerHeight = 28;
    static constexpr int kDepthHeight = 19;
    static constexpr int kHeaderHeight = 24;
    static constexpr int kTrackPadding = 3;
    static constexpr int kCounterHeight = 42;

signals:
    void sliceSelected(const day0::ui::SliceRef& slice);
    /// The range changed (nullopt-like: start >= end when cleared).
    void rangeChanged(qint64 start, qint64 end);
    void windowChanged();
    void frameReady();

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;
    bool viewportEvent(QEvent* event) override;
    void scrollContentsBy(int dx, int dy) override;

private:
    struct LaidRow {
        std::size_t visibleIndex = 0; ///< into model->visibleRows()
        int y = 0; ///< content coordinates (0 = first row, below the ruler)
        int height = 0;
    };
    struct Hit {
        const LaidRow* row = nullptr;
        int depth = -1;
    };

    void relayout();
    void scheduleFrame();
    void requestFrame();
    void startWorker(FrameRequest request);
    void deliverFrame(std::shared_ptr<const TimelineFrame> frame);
    [[nodiscard]] FrameRequest makeRequest() const;
    [[nodiscard]] Hit hitRow(const QPoint& viewportPos) const;
    [[nodiscard]] const LaidRow* rowOfTrack(int slot, profile::TrackId track) const;
    [[nodiscard]] int rowHeight(const TrackTreeModel::VisibleRow& row) const;
    [[nodiscard]] std::int64_t totalSpan() const;
    void clampWindow();
    void revealSlice(const SliceRef& slice);
    void showToolTip(const QPoint& pos);

    // Painting (timeline_view_paint.cpp).
    void paintRows(QPainter& p, const QRect& visible);
    void paintTrack(QPainter& p, const TrackTreeModel::VisibleRow& row, const LaidRow& laid,
        int top, const TrackFrame* track);
    void paintInstants(QPainter& p, const profile::Trace& trace, int top, const TrackFrame& tf,
        double offset, double scale);
    void paintCounter(QPainter& p, const LaidRow& laid, int top, const TrackFrame& track);
    void paintLabel(QPainter& p, const TrackTreeModel::VisibleRow& row, int top, int height);
    void paintSelection(QPainter& p);
    void paintFlows(QPainter& p);
    void paintRuler(QPainter& p);
    [[nodiscard]] std::optional<QRectF> sliceRect(const SliceRef& slice) const;

    QPointer<TrackTreeModel> m_model;
    TimelineTraces m_traces;
    std::vector<LaidRow> m_layout;
    int m_contentHeight = 0;

    std::int64_t m_start = 0;
    double m_nsPerPixel = 1.0;
    bool m_fitted = true; // the window shows everything and follows resizes

    SliceRef m_selected;
    std::optional<std::pair<std::int64_t, std::int64_t>> m_range;
    std::array<profile::StringId, 2> m_highlight { profile::StringTable::kNotFound,
        profile::StringTable::kNotFound };

    // Interaction.
    enum class Drag { None, Pending, Pan, Range };
    Drag m_drag = Drag::None;
    QPoint m_pressPos;
    QPoint m_lastPos;
    std::int64_t m_rangeAnchor = 0;
    int m_hoverX = -1;

    // Frames.
    bool m_synchronous = false;
    QThreadPool* m_pool = nullptr;
    QTimer* m_frameTimer = nullptr;
    bool m_running = false;
    std::optional<FrameRequest> m_pending;
    std::uint64_t m_generation = 0;
    std::shared_ptr<const TimelineFrame> m_frame;
    QHash<quint64, QString> m_shortNames; // (slot, name id) → shortened name for labels
};

} // namespace day0::ui

Q_DECLARE_METATYPE(day0::ui::SliceRef)
