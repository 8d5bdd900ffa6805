#pragma once

#include "panels/timeline/timeline_frame.h"
#include "panels/timeline/timeline_view.h"
#include "session/session.h"

#include <QWidget>

#include <memory>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QStackedWidget;
class QTimer;
class QTreeView;

namespace day0::ui {

class JobRunner;
class JobTicket;
class KernelStatsModel;
class SliceDetails;
class TraceDiffPane;
class TrackTreeModel;

/// The profiler's timeline: the session's trace (and a second one stacked below it for
/// comparison) as rows per rank → device → stream or thread, a statistics table per kernel name
/// for the whole trace or the selected time range, and the selected slice's arguments and flows.
/// The kernel table and the timeline select each other. Traces are imported off the GUI thread
/// (File ▸ Open Trace…, the empty state's button, a drop, or `--trace FILE`) and recorded as
/// `day0 trace import` records them, once per unchanged file (importAndRecordTrace); the demo
/// trace the embedded default makes is shown, not recorded.
class TimelinePanel : public QWidget {
    Q_OBJECT
public:
    TimelinePanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~TimelinePanel() override;

    /// Imports `paths` (one trace; several files are several ranks) into `slot` in a background
    /// job; the result goes to the session. Errors are shown in the panel and emitted as
    /// Session::traceOpenFailed.
    void openTraces(
        const QStringList& paths, Session::TraceSlot slot = Session::TraceSlot::Primary);

    [[nodiscard]] TimelineView* view() const { return m_view; }
    [[nodiscard]] TrackTreeModel* trackModel() const { return m_tracks; }
    [[nodiscard]] KernelStatsModel* statsModel() const { return m_stats; }
    [[nodiscard]] QTreeView* statsView() const { return m_statsView; }
    [[nodiscard]] SliceDetails* details() const { return m_details; }
    /// The A → B kernel diff shown while a comparison trace is open.
    [[nodiscard]] TraceDiffPane* diffPane() const { return m_diff; }
    /// Runs the demo checkpoint (shrunk first when the cache lacks it) in a background job and
    /// shows its CPU trace; what the embedded default does when the panel is first shown.
    void runDemo();
    /// The slot whose statistics the table shows.
    [[nodiscard]] Session::TraceSlot statsSlot() const;
    /// True while the empty state ("Open trace…") is shown.
    [[nodiscard]] bool showsEmptyState() const;
    /// True while the empty state shows an import's progress.
    [[nodiscard]] bool importing() const;

protected:
    void showEvent(QShowEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    QWidget* createToolbar();
    QWidget* createEmptyState();
    QWidget* createStatsPane();
    void askAndOpen(Session::TraceSlot slot);
    void tracesChanged();
    void recomputeStats();
    void sliceSelected(const SliceRef& slice);
    void statsRowSelected();
    void rangeChanged(qint64 start, qint64 end);
    void updateStatsTitle();
    void setBusy(bool busy, const QString& text = {});
    /// The empty state's invitation to open a trace.
    [[nodiscard]] QString emptyStateText() const;
    void pollImport();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_loadTicket[2];
    std::unique_ptr<JobTicket> m_statsTicket;
    TimelineTraces m_traces;
    bool m_syncing = false; // selection is being mirrored, not made by the user
    bool m_demoStarted = false; // the embedded default's demo trace was asked for
    bool m_statsCategoryChosen = false; // the user picked the statistics' categories
    const void* m_statsDefaultFor = nullptr; // the trace the default categories were set for

    TrackTreeModel* m_tracks = nullptr;
    KernelStatsModel* m_stats = nullptr;
    QSortFilterProxyModel* m_statsProxy = nullptr;
    QStackedWidget* m_stack = nullptr;
    TimelineView* m_view = nullptr;
    QTreeView* m_statsView = nullptr;
    SliceDetails* m_details = nullptr;
    TraceDiffPane* m_diff = nullptr;
    QLabel* m_statsTitle = nullptr;
    QComboBox* m_statsCategories = nullptr;
    QComboBox* m_statsTrace = nullptr;
    QLineEdit* m_filter = nullptr;
    QLabel* m_emptyText = nullptr;
    QLabel* m_error = nullptr;
    QProgressBar* m_busy = nullptr;
    QTimer* m_progressTimer = nullptr;
    QString m_loadingTitle; // the running import's job title
    QPushButton* m_openButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QAction* m_compareAction = nullptr;
    QAction* m_closeCompareAction = nullptr;
    QAction* m_fitAction = nullptr;
    QAction* m_zoomRangeAction = nullptr;
    QAction* m_legendAction = nullptr;
    QAction* m_legendSeparator = nullptr;
};

} // namespace day0::ui
