#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace day0 {

/// Progress of one piece of long work, written by workers and polled by a front end.
/// Thread-safe: counters are atomics, the stage label is guarded by a mutex.
class Progress {
public:
    /// Sets the total amount of work (units are the caller's: bytes, layers, layouts...).
    void setTotal(std::int64_t total) { m_total.store(total, std::memory_order_relaxed); }
    /// Adds finished work.
    void advance(std::int64_t amount = 1) { m_done.fetch_add(amount, std::memory_order_relaxed); }
    /// Sets the finished amount outright.
    void setDone(std::int64_t done) { m_done.store(done, std::memory_order_relaxed); }
    /// Names the current stage ("hashing model-00003-of-00009.safetensors").
    void setStage(std::string stage)
    {
        std::lock_guard lock(m_mutex);
        m_stage = std::move(stage);
    }

    [[nodiscard]] std::int64_t total() const { return m_total.load(std::memory_order_relaxed); }
    [[nodiscard]] std::int64_t done() const { return m_done.load(std::memory_order_relaxed); }
    [[nodiscard]] std::string stage() const
    {
        std::lock_guard lock(m_mutex);
        return m_stage;
    }
    /// Fraction finished in [0, 1]; 0 while the total is unknown.
    [[nodiscard]] double fraction() const
    {
        const auto t = total();
        if (t <= 0) {
            return 0.0;
        }
        const double f = double(done()) / double(t);
        return f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
    }

private:
    std::atomic<std::int64_t> m_total { 0 };
    std::atomic<std::int64_t> m_done { 0 };
    mutable std::mutex m_mutex;
    std::string m_stage;
};

} // namespace day0
