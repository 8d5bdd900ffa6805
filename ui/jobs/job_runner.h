#pragma once

#include "base/progress.h"

#include <QObject>
#include <QPointer>
#include <QString>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <vector>

class QThreadPool;

namespace day0::ui {

/// One stream of requests of which only the newest matters (hotspot's JobTracker): each start
/// bumps the generation and cancels the previous job; a result is delivered only while its
/// generation is still the newest. Owned by the receiver; safe to destroy while a job runs.
class JobTicket {
public:
    JobTicket();
    /// Cancels the running job (its result will never be delivered).
    void cancel();
    /// True while a job started on this ticket has not delivered or been superseded.
    [[nodiscard]] bool busy() const;

private:
    friend class JobRunner;
    struct State {
        std::atomic<std::uint64_t> generation { 0 };
        std::atomic<bool> busy { false };
        std::stop_source stop;
    };
    std::shared_ptr<State> m_state;
};

/// A job as the status bar sees it.
struct JobInfo {
    std::uint64_t id = 0;
    QString title;
    std::shared_ptr<Progress> progress;
    std::stop_source stop;
};

/// Runs work off the GUI thread and brings results back to it. Work gets a Progress to fill and
/// a stop_token to poll; results reach `deliver` on the GUI thread only if the job is still the
/// newest on its ticket and `receiver` still exists. GUI-thread object.
class JobRunner : public QObject {
    Q_OBJECT
public:
    explicit JobRunner(QObject* parent = nullptr);
    ~JobRunner() override;

    /// Starts `work` on a worker thread; `deliver` receives its result on the GUI thread.
    template <typename T>
    void start(JobTicket& ticket, const QString& title, QObject* receiver,
        std::function<T(Progress&, std::stop_token)> work, std::function<void(T&&)> deliver)
    {
        startErased(ticket, title, receiver,
            [work = std::move(work), deliver = std::move(deliver)](Progress& progress,
                std::stop_token stop, const PostStage&) -> std::function<void()> {
                auto result = std::make_shared<T>(work(progress, stop));
                return [deliver, result] { deliver(std::move(*result)); };
            });
    }

    /// Starts `work` whose results arrive in stages (hotspot's parser: a summary first, the
    /// rest as it is computed): each value `work` hands to its `stage` callback reaches
    /// `onStage` on the GUI thread, in order, under the same rule as the final result (only
    /// while the job is the newest on its ticket, not cancelled, and `receiver` exists);
    /// `deliver` gets the final result after every stage.
    template <typename S, typename T>
    void startStaged(JobTicket& ticket, const QString& title, QObject* receiver,
        std::function<T(Progress&, std::stop_token, const std::function<void(S&&)>&)> work,
        std::function<void(S&&)> onStage, std::function<void(T&&)> deliver)
    {
        startErased(ticket, title, receiver,
            [work = std::move(work), onStage = std::move(onStage), deliver = std::move(deliver)](
                Progress& progress, std::stop_token stop,
                const PostStage& post) -> std::function<void()> {
                const std::function<void(S &&)> stage = [&post, onStage](S&& value) {
                    auto shared = std::make_shared<S>(std::move(value));
                    post([onStage, shared] { onStage(std::move(*shared)); });
                };
                auto result = std::make_shared<T>(work(progress, stop, stage));
                return [deliver, result] { deliver(std::move(*result)); };
            });
    }

    /// The jobs currently running, oldest first.
    [[nodiscard]] std::vector<JobInfo> activeJobs() const { return m_active; }
    /// Requests every running job to stop.
    void cancelAll();
    /// Blocks until every worker is idle and pending results are delivered (tests, shutdown).
    void waitForIdle();

signals:
    void jobStarted(quint64 id, const QString& title);
    void jobFinished(quint64 id);

private:
    /// Runs a closure on the GUI thread under the job's delivery rule (an interim stage).
    using PostStage = std::function<void(std::function<void()>)>;
    using ErasedWork
        = std::function<std::function<void()>(Progress&, std::stop_token, const PostStage&)>;
    void startErased(JobTicket& ticket, const QString& title, QObject* receiver, ErasedWork work);
    void finish(std::uint64_t id);

    QThreadPool* m_pool = nullptr;
    std::vector<JobInfo> m_active;
    std::uint64_t m_nextId = 1;
};

} // namespace day0::ui
