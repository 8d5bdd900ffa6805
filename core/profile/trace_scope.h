#pragma once

#include "profile/cpu_tracer.h"

#include <string_view>

namespace day0::profile {

/// Makes `tracer` the one TraceScope records into on the calling thread while this object lives
/// (nested activations restore the previous one). Lets code deep in the engine be traced
/// without passing a tracer through every call: a command activates its tracer around the work.
class TraceActivation {
public:
    explicit TraceActivation(CpuTracer& tracer) noexcept;
    ~TraceActivation();
    TraceActivation(const TraceActivation&) = delete;
    TraceActivation& operator=(const TraceActivation&) = delete;

    /// The tracer active on the calling thread, or nullptr.
    [[nodiscard]] static CpuTracer* current() noexcept;

private:
    CpuTracer* m_previous;
};

/// Times its own lifetime as one event of the calling thread's active tracer (nothing, at the
/// cost of one thread-local read, when none is active or it is stopped). The name is interned
/// on first use per tracer; prefer CpuTracer::Scope with a pre-interned name in hot loops.
class TraceScope {
public:
    explicit TraceScope(std::string_view name, Category category = Category::CpuOp) noexcept;
    ~TraceScope();
    TraceScope(const TraceScope&) = delete;
    TraceScope& operator=(const TraceScope&) = delete;

private:
    CpuTracer* m_tracer;
    TracerName m_name = 0;
    Category m_category;
    std::int64_t m_start = 0;
};

} // namespace day0::profile
