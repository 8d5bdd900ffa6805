#pragma once

#include "jobs/job_runner.h"
#include "session/session.h"

#include <QWidget>

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTreeView;

namespace day0::ui {

class TraceDiffModel;

/// Kernel by kernel, what changed from trace A (primary) to trace B (comparison) — the same
/// core diff as `day0 trace diff A B`: kernels added, removed, slower and faster, with counts,
/// means and the change. Recomputed in a background job whenever either trace changes; empty
/// with a hint while no comparison is open. GUI-thread object.
class TraceDiffPane : public QWidget {
    Q_OBJECT
public:
    TraceDiffPane(Session& session, JobRunner& jobs, QWidget* parent = nullptr);

    [[nodiscard]] TraceDiffModel* model() const { return m_model; }
    [[nodiscard]] QTreeView* view() const { return m_view; }
    /// "3 added, 0 removed, 2 slower, 1 faster (threshold 5 %)", or the hint.
    [[nodiscard]] QString summaryText() const;

signals:
    /// A diff was delivered (both traces present) or cleared.
    void diffChanged(bool available);

private:
    void recompute();

    Session& m_session;
    JobRunner& m_jobs;
    JobTicket m_ticket;
    TraceDiffModel* m_model = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTreeView* m_view = nullptr;
    QLabel* m_summary = nullptr;
    QLineEdit* m_filter = nullptr;
};

} // namespace day0::ui
