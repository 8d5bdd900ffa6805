#pragma once

#include "panels/timeline/timeline_frame.h"
#include "panels/timeline/timeline_view.h"

#include <QWidget>

class QLabel;
class QTableView;

namespace day0::ui {

class SliceArgsModel;

/// What is known about the selected slice: name, track, timing and arguments in a table, and its
/// flows as links ("launched by cudaLaunchKernel on thread 4711", "launches gemm on stream 7")
/// that follow the flow to the other end.
class SliceDetails : public QWidget {
    Q_OBJECT
public:
    explicit SliceDetails(QWidget* parent = nullptr);

    /// Shows `slice` of `traces` (an invalid ref shows a hint).
    void showSlice(const TimelineTraces& traces, const SliceRef& slice);
    [[nodiscard]] SliceArgsModel* argsModel() const { return m_args; }
    /// The slices the flow links lead to, in the order shown.
    [[nodiscard]] const std::vector<SliceRef>& flowTargets() const { return m_targets; }
    /// Where a track is: "rank 0 · GPU 0 · stream 7".
    static QString trackPath(const profile::Trace& trace, profile::TrackId track);

signals:
    /// The user followed a flow link.
    void followRequested(const day0::ui::SliceRef& slice);

private:
    QLabel* m_title = nullptr;
    QLabel* m_flows = nullptr;
    QTableView* m_table = nullptr;
    SliceArgsModel* m_args = nullptr;
    std::vector<SliceRef> m_targets;
};

} // namespace day0::ui
