#include "cupti_collector.h"

#include <cupti.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace day0::cupti {

// The converter spells CUPTI's enums by value; keep them honest.
static_assert(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD == 1 && CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == 8
    && CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == 10);
static_assert(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE == 1 && CUPTI_ACTIVITY_MEMORY_KIND_DEVICE == 3
    && CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC == 7);
static_assert(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE == 1
    && CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE == 4);

namespace {

constexpr std::size_t kBufferBytes = std::size_t(8) << 20;
constexpr std::size_t kAlignment = 8;

constexpr std::array kKinds { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION };

/// What CUPTI's buffer callbacks (plain C functions without a user pointer) write into.
struct Sink {
    std::mutex mutex;
    std::vector<ActivityRecord> records;
    std::size_t droppedByCupti = 0;
    std::string error;
};

Sink& sink()
{
    static Sink s;
    return s;
}

std::atomic<bool> g_active { false };

const char* resultText(CUptiResult r)
{
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    return text != nullptr ? text : "unknown CUPTI error";
}

std::string callbackName(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
        return name;
    }
    return fmt::format(
        "{} API {}", domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver", cbid);
}

/// The fields every GPU activity record (kernel, memcpy, memset) names alike.
template <typename Activity>
void copyGpuFields(const Activity* a, RecordKind kind, ActivityRecord& r)
{
    r.kind = kind;
    r.start = a->start;
    r.end = a->end;
    r.device = a->deviceId;
    r.context = a->contextId;
    r.stream = a->streamId;
    r.correlation = a->correlationId;
}

/// Copies the fields the trace needs out of one CUPTI record; false for kinds not collected.
bool translate(const CUpti_Activity* a, ActivityRecord& r)
{
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
        copyGpuFields(k, RecordKind::Kernel, r);
        r.name = k->name != nullptr ? k->name : "kernel";
        r.grid[0] = std::uint32_t(k->gridX);
        r.grid[1] = std::uint32_t(k->gridY);
        r.grid[2] = std::uint32_t(k->gridZ);
        r.block[0] = std::uint32_t(k->blockX);
        r.block[1] = std::uint32_t(k->blockY);
        r.block[2] = std::uint32_t(k->blockZ);
        r.registers = int(k->registersPerThread);
        r.sharedBytes = std::int64_t(k->staticSharedMemory) + k->dynamicSharedMemory;
        return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
        copyGpuFields(m, RecordKind::Memcpy, r);
        r.bytes = std::int64_t(m->bytes);
        r.copyKind = m->copyKind;
        r.srcKind = m->srcKind;
        r.dstKind = m->dstKind;
        return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
        copyGpuFields(m, RecordKind::Memset, r);
        r.bytes = std::int64_t(m->bytes);
        r.memoryKind = m->memoryKind;
        return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(a);
        const bool runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        r.kind = runtime ? RecordKind::Runtime : RecordKind::Driver;
        r.start = api->start;
        r.end = api->end;
        r.process = api->processId;
        r.thread = api->threadId;
        r.correlation = api->correlationId;
        r.returnValue = api->returnValue;
        r.name = callbackName(
            runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api->cbid);
        return true;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(a);
        if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
            r.kind = RecordKind::MarkerInstant;
        } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
            r.kind = RecordKind::MarkerStart;
        } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
            r.kind = RecordKind::MarkerEnd;
        } else {
            return false;
        }
        r.start = m->timestamp;
        r.markerId = m->id;
        if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD
            || m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
            r.process = m->objectId.pt.processId;
            r.thread = m->objectId.pt.threadId;
        }
        r.name = m->name != nullptr ? m->name : "";
        r.domain = m->domain != nullptr ? m->domain : "";
        return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(a);
        r.kind = RecordKind::Sync;
        r.start = s->start;
        r.end = s->end;
        r.context = s->contextId;
        r.stream = s->streamId;
        r.correlation = s->correlationId;
        r.syncType = int(s->type);
        return true;
    }
    default:
        return false;
    }
}

void CUPTIAPI bufferRequested(std::uint8_t** buffer, std::size_t* size, std::size_t* maxRecords)
{
    *buffer = static_cast<std::uint8_t*>(
        ::operator new(kBufferBytes, std::align_val_t(kAlignment), std::nothrow));
    *size = *buffer != nullptr ? kBufferBytes : 0;
    *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(
    CUcontext, std::uint32_t streamId, std::uint8_t* buffer, std::size_t, std::size_t validSize)
{
    std::vector<ActivityRecord> records;
    CUpti_Activity* record = nullptr;
    for (;;) {
        const CUptiResult status = cuptiActivityGetNextRecord(buffer, validSize, &record);
        if (status != CUPTI_SUCCESS) {
            break; // CUPTI_ERROR_MAX_LIMIT_REACHED: the buffer is done
        }
        ActivityRecord r;
        if (translate(record, r)) {
            records.push_back(std::move(r));
        }
    }
    std::size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, streamId, &dropped);
    ::operator delete(buffer, std::align_val_t(kAlignment));
    auto& s = sink();
    std::lock_guard lock(s.mutex);
    s.droppedByCupti += dropped;
    s.records.insert(s.records.end(), std::make_move_iterator(records.begin()),
        std::make_move_iterator(records.end()));
}

void CUPTIAPI ignoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) { }

/// Kernel synchronisation records carry only a context; the stream track needs the device.
std::uint32_t deviceOfContext(std::uint32_t context,
    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& contextDevice)
{
    for (const auto& [c, d] : contextDevice) {
        if (c == context) {
            return d;
        }
    }
    return 0;
}

} // namespace

CuptiCollector::CuptiCollector(ConvertOptions options)
    : m_options(std::move(options))
{
}

CuptiCollector::~CuptiCollector()
{
    if (m_running) {
        disable();
    }
}

Result<void> CuptiCollector::start()
{
    if (g_active.exchange(true)) {
        return Error::badInput("cupti: a collector is already recording in this process");
    }
    // NVTX ranges reach CUPTI only through NVTX's injection hook, which NVTX reads at its first
    // call in the process: point it at the CUPTI library loaded here unless the user (or another
    // tool) already chose one.
    Dl_info self {};
    if (::dladdr(reinterpret_cast<void*>(&cuptiGetTimestamp), &self) != 0 && self.dli_fname) {
        ::setenv("NVTX_INJECTION64_PATH", self.dli_fname, 0);
    }
    CUpti_SubscriberHandle subscriber = nullptr;
    const CUptiResult subscribed = cuptiSubscribe(&subscriber, ignoreCallback, nullptr);
    if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        g_active = false;
        return Error::unsupported(describeSubscriberConflict(std::getenv("CUDA_INJECTION64_PATH")));
    }
    if (subscribed != CUPTI_SUCCESS) {
        g_active = false;
        return Error::unsupported(
            fmt::format("cupti: cuptiSubscribe failed: {} (is an NVIDIA driver installed?)",
                resultText(subscribed)));
    }
    m_subscriber = subscriber;
    {
        auto& s = sink();
        std::lock_guard lock(s.mutex);
        s.records.clear();
        s.droppedByCupti = 0;
    }
    if (const auto r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        r != CUPTI_SUCCESS) {
        disable();
        return Error::unsupported(
            fmt::format("cupti: cuptiActivityRegisterCallbacks failed: {}", resultText(r)));
    }
    for (const auto kind : kKinds) {
        const CUptiResult r = cuptiActivityEnable(kind);
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
            disable();
            return Error::unsupported(
                describeSubscriberConflict(std::getenv("CUDA_INJECTION64_PATH")));
        }
        if (r != CUPTI_SUCCESS) {
            disable();
            return Error::unsupported(fmt::format(
                "cupti: cuptiActivityEnable(kind {}) failed: {}", int(kind), resultText(r)));
        }
    }
    // CUPTI's clock and the wall clock, sampled back to back: the trace is in Unix-epoch ns.
    std::uint64_t cuptiNow = 0;
    cuptiGetTimestamp(&cuptiNow);
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch())
                          .count();
    m_options.clockOffsetNs = std::int64_t(wall) - std::int64_t(cuptiNow);
    if (m_options.processId == 0) {
        m_options.processId = ::getpid();
    }
    m_running = true;
    return success();
}

void CuptiCollector::disable()
{
    for (const auto kind : kKinds) {
        cuptiActivityDisable(kind);
    }
    if (m_subscriber != nullptr) {
        cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(m_subscriber));
        m_subscriber = nullptr;
    }
    m_running = false;
    g_active = false;
}

Result<profile::Trace> CuptiCollector::stop(Progress& progress, std::stop_token stop)
{
    if (!m_running) {
        return Error::badInput("cupti: stop() without a successful start()");
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable();
    std::vector<ActivityRecord> records;
    std::size_t droppedByCupti = 0;
    {
        auto& s = sink();
        std::lock_guard lock(s.mutex);
        records.swap(s.records);
        droppedByCupti = s.droppedByCupti;
    }
    // Synchronisation records name a context, not a device: map it through the GPU work.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> contextDevice;
    for (const auto& r : records) {
        if (r.kind == RecordKind::Kernel || r.kind == RecordKind::Memcpy
            || r.kind == RecordKind::Memset) {
            if (deviceOfContext(r.context, contextDevice) == 0 && r.device != 0) {
                contextDevice.emplace_back(r.context, r.device);
            }
        }
    }
    ActivityConverter converter(m_options);
    for (auto& r : records) {
        if (r.kind == RecordKind::Sync) {
            r.device = deviceOfContext(r.context, contextDevice);
        }
        converter.add(r);
    }
    if (droppedByCupti > 0) {
        converter.warn(fmt::format(
            "cupti: CUPTI dropped {} record(s) (its buffers were full)", droppedByCupti));
    }
    return converter.finish(progress, stop);
}

} // namespace day0::cupti
