#include "profile/cpu_tracer.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace day0::profile {

namespace {

std::atomic<std::uint64_t> nextTracerId { 1 };

/// The calling thread's buffer for the tracer it last recorded into.
struct LocalSlot {
    std::uint64_t tracer = 0;
    void* buffer = nullptr;
};
thread_local LocalSlot localSlot;

} // namespace

CpuTracer::ThreadBuffer::~ThreadBuffer()
{
    // Chunks after the head are owned through the raw next pointers.
    Chunk* c = head ? head->next.load() : nullptr;
    while (c != nullptr) {
        Chunk* next = c->next.load();
        delete c;
        c = next;
    }
}

CpuTracer::CpuTracer()
    : m_id(nextTracerId.fetch_add(1))
{
    m_names.emplace_back();
}

CpuTracer::~CpuTracer() = default;

std::int64_t CpuTracer::now() noexcept
{
    timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void CpuTracer::start()
{
    {
        std::lock_guard lock(m_mutex);
        // Buffers stay registered with their threads and keep their chunks for reuse.
        for (auto& b : m_buffers) {
            b->count.store(0, std::memory_order_release);
            b->tail = b->head.get();
        }
        m_startedAt = now();
    }
    m_enabled.store(true, std::memory_order_release);
}

TracerName CpuTracer::intern(std::string_view name)
{
    std::lock_guard lock(m_mutex);
    const auto [it, added] = m_nameIndex.try_emplace(std::string(name), TracerName(m_names.size()));
    if (added) {
        m_names.emplace_back(name);
    }
    return it->second;
}

CpuTracer::ThreadBuffer& CpuTracer::localBuffer()
{
    if (localSlot.tracer == m_id) {
        return *static_cast<ThreadBuffer*>(localSlot.buffer);
    }
    std::lock_guard lock(m_mutex);
    const auto tid = std::int64_t(::syscall(SYS_gettid));
    // This thread may have recorded here before and into another tracer since.
    for (auto& b : m_buffers) {
        if (b->tid == tid) {
            localSlot.tracer = m_id;
            localSlot.buffer = b.get();
            return *b;
        }
    }
    auto buffer = std::make_unique<ThreadBuffer>();
    buffer->tid = tid;
    buffer->head = std::make_unique<Chunk>();
    buffer->tail = buffer->head.get();
    m_buffers.push_back(std::move(buffer));
    localSlot.tracer = m_id;
    localSlot.buffer = m_buffers.back().get();
    return *m_buffers.back();
}

void CpuTracer::setThreadName(std::string_view name)
{
    ThreadBuffer& b = localBuffer();
    std::lock_guard lock(m_mutex);
    b.name = std::string(name);
}

void CpuTracer::push(const Event& e) noexcept
{
    ThreadBuffer& b = localBuffer();
    const std::size_t n = b.count.load(std::memory_order_relaxed);
    const std::size_t slot = n % kChunkEvents;
    if (slot == 0 && n > 0) {
        // Chunks are reused after start(); allocate only past the end of the chain.
        Chunk* next = b.tail->next.load(std::memory_order_acquire);
        if (next == nullptr) {
            next = new Chunk();
            b.tail->next.store(next, std::memory_order_release);
        }
        b.tail = next;
    }
    b.tail->events[slot] = e;
    b.count.store(n + 1, std::memory_order_release);
}

void CpuTracer::record(
    TracerName name, Category category, std::int64_t start, std::int64_t end) noexcept
{
    push({ start, end, name, category, 0 });
}

void CpuTracer::instant(TracerName name, Category category, std::int64_t ts) noexcept
{
    if (enabled()) {
        push({ ts, ts, name, category, 1 });
    }
}

std::size_t CpuTracer::eventCount() const
{
    std::lock_guard lock(m_mutex);
    std::size_t total = 0;
    for (const auto& b : m_buffers) {
        total += b->count.load(std::memory_order_acquire);
    }
    return total;
}

void CpuTracer::exportTo(TraceBuilder& builder, std::int32_t rank) const
{
    std::lock_guard lock(m_mutex);
    SourceInfo info;
    info.format = "day0-tracer";
    info.file = "day0 CPU tracer";
    info.rank = rank;
    const std::uint16_t source = builder.addSource(info);
    std::vector<StringId> names;
    names.reserve(m_names.size());
    for (const auto& n : m_names) {
        names.push_back(builder.intern(n));
    }
    const std::int64_t pid = ::getpid();
    for (const auto& b : m_buffers) {
        const std::size_t count = b->count.load(std::memory_order_acquire);
        if (count == 0) {
            continue;
        }
        Track t;
        t.kind = TrackKind::Thread;
        t.rank = rank;
        t.pid = pid;
        t.tid = b->tid;
        t.source = source;
        t.name = b->name.empty() ? fmt::format("thread {}", b->tid) : b->name;
        t.processName = "day0";
        t.sortIndex = b->tid;
        const TrackId track = builder.addTrack(std::move(t));
        const Chunk* chunk = b->head.get();
        for (std::size_t i = 0; i < count; ++i) {
            if (i > 0 && i % kChunkEvents == 0) {
                chunk = chunk->next.load(std::memory_order_acquire);
            }
            const Event& e = chunk->events[i % kChunkEvents];
            const StringId name = e.name < names.size() ? names[e.name] : 0;
            if (e.instant != 0) {
                builder.addInstant(track, e.start, name, e.category);
            } else {
                builder.addSlice(track, e.start, e.end, name, e.category);
            }
        }
    }
}

Result<Trace> CpuTracer::toTrace(std::int32_t rank) const
{
    TraceBuilder builder;
    exportTo(builder, rank);
    Progress progress;
    return builder.finish(progress, {});
}

} // namespace day0::profile
