#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace day0 {

/// A fixed-size pool of worker threads running queued tasks in FIFO order. Thread-safe.
class ThreadPool {
public:
    /// Starts `threads` workers (0: one per hardware thread).
    explicit ThreadPool(std::size_t threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    [[nodiscard]] std::size_t size() const { return m_workers.size(); }

    /// Queues `fn` and returns a future for its result.
    template <typename Fn> auto submit(Fn fn) -> std::future<std::invoke_result_t<Fn>>
    {
        using R = std::invoke_result_t<Fn>;
        auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
        auto future = task->get_future();
        enqueue([task] { (*task)(); });
        return future;
    }

    /// Runs fn(i) for i in [0, count) on the pool and waits for all of them.
    void parallelFor(std::size_t count, const std::function<void(std::size_t)>& fn);

    /// A process-wide pool sized to the machine.
    static ThreadPool& global();

private:
    void enqueue(std::function<void()> job);
    void workerLoop();

    std::vector<std::thread> m_workers;
    std::queue<std::function<void()>> m_jobs;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_stopping = false;
};

} // namespace day0
