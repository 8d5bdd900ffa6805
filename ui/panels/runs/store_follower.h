#pragma once

#include "panels/runs/run_store_access.h"

#include <QObject>

#include <memory>

class QTimer;

namespace day0::ui {

class JobRunner;
class JobTicket;
class Session;

/// How a panel that lists the run store (the Runs panel, the Training view) follows it: asks
/// for a re-read when this session records a run, and every two seconds reads the store's stamp
/// off the GUI thread (another process may record or delete runs), asking again when it differs
/// from the stamp of the listing shown. Never polls while the panel's listing is being read.
class StoreFollower : public QObject {
    Q_OBJECT
public:
    /// `listing` is the ticket of the panel's own listing job.
    StoreFollower(Session& session, JobRunner& jobs, const JobTicket& listing, QObject* parent);
    ~StoreFollower() override;

    /// The stamp of the listing now shown (read beside its runs).
    void setShown(const StoreStamp& stamp) { m_shown = stamp; }

signals:
    /// The store changed: re-read it.
    void changed();

private:
    void poll();

    JobRunner& m_jobs;
    const JobTicket& m_listing;
    std::unique_ptr<JobTicket> m_pollTicket;
    QTimer* m_timer = nullptr;
    StoreStamp m_shown;
};

} // namespace day0::ui
