#pragma once

#include "profile/json_event_scanner.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace day0::profile::detail {

/// Runs a sink on a second thread, so that reading, inflating and cutting the file overlap with
/// parsing and building. Batches are handed over by swapping buffers; at most two wait. The inner
/// sink's onTopLevel runs on the caller's thread and must not touch what onEvents uses.
class PipelinedSink final : public JsonEventSink {
public:
    explicit PipelinedSink(JsonEventSink& inner);
    ~PipelinedSink() override;
    PipelinedSink(const PipelinedSink&) = delete;
    PipelinedSink& operator=(const PipelinedSink&) = delete;

    Result<void> onEvents(std::string& json, std::vector<std::uint32_t>& starts) override;
    [[nodiscard]] bool wantsKey(std::string_view key) const override
    {
        return m_inner.wantsKey(key);
    }
    void onTopLevel(std::string_view key, std::string_view rawJson) override
    {
        m_inner.onTopLevel(key, rawJson);
    }

    /// Waits until every batch is processed; returns the first error of the inner sink.
    Result<void> finish();

private:
    struct Batch {
        std::string json;
        std::vector<std::uint32_t> starts;
    };
    void work();

    JsonEventSink& m_inner;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<Batch> m_queue;
    std::vector<Batch> m_spare;
    std::optional<Error> m_error;
    bool m_closed = false;
    std::thread m_worker;
};

} // namespace day0::profile::detail
