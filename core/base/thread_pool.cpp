#include "base/thread_pool.h"

#include <atomic>

namespace day0 {

ThreadPool::ThreadPool(std::size_t threads)
{
    if (threads == 0) {
        threads = std::max(1u, std::thread::hardware_concurrency());
    }
    m_workers.reserve(threads);
    for (std::size_t i = 0; i < threads; ++i) {
        m_workers.emplace_back([this] { workerLoop(); });
    }
}

ThreadPool::~ThreadPool()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    for (auto& worker : m_workers) {
        worker.join();
    }
}

void ThreadPool::enqueue(std::function<void()> job)
{
    {
        std::lock_guard lock(m_mutex);
        m_jobs.push(std::move(job));
    }
    m_cv.notify_one();
}

void ThreadPool::workerLoop()
{
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [this] { return m_stopping || !m_jobs.empty(); });
            if (m_jobs.empty()) {
                return;
            }
            job = std::move(m_jobs.front());
            m_jobs.pop();
        }
        job();
    }
}

void ThreadPool::parallelFor(std::size_t count, const std::function<void(std::size_t)>& fn)
{
    if (count == 0) {
        return;
    }
    // Workers pull indices from a shared counter, so uneven items balance themselves; the
    // calling thread helps too, which also makes nested use from a worker safe.
    std::atomic<std::size_t> next { 0 };
    auto drain = [&] {
        for (std::size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
            fn(i);
        }
    };
    const std::size_t helpers = std::min(count - 1, size());
    std::vector<std::future<void>> futures;
    futures.reserve(helpers);
    for (std::size_t i = 0; i < helpers; ++i) {
        futures.push_back(submit(drain));
    }
    drain();
    for (auto& f : futures) {
        f.get();
    }
}

ThreadPool& ThreadPool::global()
{
    static ThreadPool pool;
    return pool;
}

} // namespace day0
