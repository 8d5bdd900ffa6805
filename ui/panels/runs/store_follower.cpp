#include "panels/runs/store_follower.h"

#include "history/recording.h"
#include "jobs/job_runner.h"
#include "session/session.h"

#include <QTimer>

#include <optional>

namespace day0::ui {

namespace {

constexpr int kPollMs = 2000;

} // namespace

StoreFollower::StoreFollower(
    Session& session, JobRunner& jobs, const JobTicket& listing, QObject* parent)
    : QObject(parent)
    , m_jobs(jobs)
    , m_listing(listing)
    , m_pollTicket(std::make_unique<JobTicket>())
    , m_timer(new QTimer(this))
{
    m_timer->setInterval(kPollMs);
    connect(m_timer, &QTimer::timeout, this, &StoreFollower::poll);
    m_timer->start();
    connect(&session, &Session::runRecorded, this, &StoreFollower::changed);
}

StoreFollower::~StoreFollower() = default;

void StoreFollower::poll()
{
    if (m_listing.busy() || m_pollTicket->busy()) {
        return;
    }
    m_jobs.start<std::optional<StoreStamp>>(
        *m_pollTicket, tr("Checking the run store"), this,
        [file = history::storePath()](Progress&, std::stop_token) { return readStamp(file); },
        [this](std::optional<StoreStamp>&& stamp) {
            if (stamp && *stamp != m_shown) {
                emit changed();
            }
        });
}

} // namespace day0::ui
