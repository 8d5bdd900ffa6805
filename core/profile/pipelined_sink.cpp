#include "profile/pipelined_sink.h"

namespace day0::profile::detail {

PipelinedSink::PipelinedSink(JsonEventSink& inner)
    : m_inner(inner)
    , m_worker([this] { work(); })
{
}

PipelinedSink::~PipelinedSink() { (void)finish(); }

Result<void> PipelinedSink::onEvents(std::string& json, std::vector<std::uint32_t>& starts)
{
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [&] { return m_queue.size() < 2 || m_error.has_value(); });
    if (m_error) {
        return *m_error;
    }
    Batch batch;
    batch.json.swap(json);
    batch.starts.swap(starts);
    // Hand a used buffer back, so that the scanner does not allocate a new one per batch.
    if (!m_spare.empty()) {
        json.swap(m_spare.back().json);
        starts.swap(m_spare.back().starts);
        m_spare.pop_back();
    }
    m_queue.push_back(std::move(batch));
    m_changed.notify_all();
    return success();
}

Result<void> PipelinedSink::finish()
{
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
        m_changed.notify_all();
    }
    if (m_worker.joinable()) {
        m_worker.join();
    }
    if (m_error) {
        return *m_error;
    }
    return success();
}

void PipelinedSink::work()
{
    while (true) {
        Batch batch;
        {
            std::unique_lock lock(m_mutex);
            m_changed.wait(lock, [&] { return !m_queue.empty() || m_closed; });
            if (m_queue.empty()) {
                return;
            }
            batch = std::move(m_queue.front());
            m_queue.pop_front();
            m_changed.notify_all();
        }
        auto r = m_inner.onEvents(batch.json, batch.starts);
        std::lock_guard lock(m_mutex);
        if (!r.ok() && !m_error) {
            m_error = r.error();
        }
        m_spare.push_back(std::move(batch));
        m_changed.notify_all();
    }
}

} // namespace day0::profile::detail
