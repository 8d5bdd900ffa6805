#include "profile/trace_scope.h"

namespace day0::profile {

namespace {

thread_local CpuTracer* activeTracer = nullptr;

} // namespace

TraceActivation::TraceActivation(CpuTracer& tracer) noexcept
    : m_previous(activeTracer)
{
    activeTracer = &tracer;
}

TraceActivation::~TraceActivation() { activeTracer = m_previous; }

CpuTracer* TraceActivation::current() noexcept { return activeTracer; }

TraceScope::TraceScope(std::string_view name, Category category) noexcept
    : m_tracer(activeTracer != nullptr && activeTracer->enabled() ? activeTracer : nullptr)
    , m_category(category)
{
    if (m_tracer != nullptr) {
        m_name = m_tracer->intern(name);
        m_start = CpuTracer::now();
    }
}

TraceScope::~TraceScope()
{
    if (m_tracer != nullptr) {
        m_tracer->record(m_name, m_category, m_start, CpuTracer::now());
    }
}

} // namespace day0::profile
