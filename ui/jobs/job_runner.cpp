#include "jobs/job_runner.h"

#include <QCoreApplication>
#include <QThread>
#include <QThreadPool>

#include <algorithm>

namespace day0::ui {

JobTicket::JobTicket()
    : m_state(std::make_shared<State>())
{
}

void JobTicket::cancel()
{
    m_state->generation.fetch_add(1);
    m_state->stop.request_stop();
    m_state->busy = false;
}

bool JobTicket::busy() const { return m_state->busy.load(); }

JobRunner::JobRunner(QObject* parent)
    : QObject(parent)
    , m_pool(new QThreadPool(this))
{
    // Two workers: one for the newest request while a superseded one winds down.
    m_pool->setMaxThreadCount(std::max(2, QThread::idealThreadCount() / 2));
}

JobRunner::~JobRunner()
{
    cancelAll();
    m_pool->waitForDone();
}

void JobRunner::startErased(
    JobTicket& ticket, const QString& title, QObject* receiver, ErasedWork work)
{
    auto state = ticket.m_state;
    // The previous request on this ticket is obsolete: stop it and never deliver it.
    state->stop.request_stop();
    state->stop = std::stop_source();
    const std::uint64_t generation = state->generation.fetch_add(1) + 1;
    state->busy = true;

    JobInfo info;
    info.id = m_nextId++;
    info.title = title;
    info.progress = std::make_shared<Progress>();
    info.stop = state->stop;
    m_active.push_back(info);
    emit jobStarted(info.id, title);

    QPointer<QObject> target(receiver);
    auto progress = info.progress;
    const auto id = info.id;
    const auto stop = info.stop;
    m_pool->start([this, work = std::move(work), state, generation, target, progress, id, stop] {
        const PostStage post
            = [this, state, generation, target, stop](std::function<void()> stage) {
                  QMetaObject::invokeMethod(
                      this,
                      [stage = std::move(stage), state, generation, target, stop] {
                          if (state->generation.load() != generation || stop.stop_requested()
                              || target.isNull()) {
                              return;
                          }
                          stage();
                      },
                      Qt::QueuedConnection);
              };
        auto deliver = work(*progress, stop.get_token(), post);
        QMetaObject::invokeMethod(
            this,
            [this, deliver = std::move(deliver), state, generation, target, id, stop] {
                finish(id);
                const bool newest = state->generation.load() == generation;
                if (!newest || stop.stop_requested() || target.isNull()) {
                    return;
                }
                state->busy = false;
                deliver();
            },
            Qt::QueuedConnection);
    });
}

void JobRunner::finish(std::uint64_t id)
{
    const auto it = std::find_if(
        m_active.begin(), m_active.end(), [id](const JobInfo& j) { return j.id == id; });
    if (it != m_active.end()) {
        m_active.erase(it);
        emit jobFinished(id);
    }
}

void JobRunner::cancelAll()
{
    for (auto& job : m_active) {
        job.stop.request_stop();
    }
}

void JobRunner::waitForIdle()
{
    m_pool->waitForDone();
    QCoreApplication::sendPostedEvents(this, QEvent::MetaCall);
}

} // namespace day0::ui
