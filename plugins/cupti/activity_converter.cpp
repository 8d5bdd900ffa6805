#include "activity_converter.h"

#include "profile/nccl.h"

#include <fmt/format.h>

#include <array>

namespace day0::cupti {

using profile::Category;
using profile::Lane;
using profile::StringId;
using profile::TrackId;
using profile::TrackKind;

std::string_view memcpyKindName(int kind)
{
    static constexpr std::array<std::string_view, 11> kNames { "Unknown", "HtoD", "DtoH", "HtoA",
        "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
    return kind >= 0 && kind < int(kNames.size()) ? kNames[std::size_t(kind)] : "Unknown";
}

std::string_view memoryKindName(int kind)
{
    static constexpr std::array<std::string_view, 8> kNames { "Unknown", "Pageable", "Pinned",
        "Device", "Array", "Managed", "Device Static", "Managed Static" };
    return kind >= 0 && kind < int(kNames.size()) ? kNames[std::size_t(kind)] : "Unknown";
}

std::string_view syncTypeName(int type)
{
    static constexpr std::array<std::string_view, 5> kNames { "Sync", "Event Sync",
        "Stream Wait Event", "Stream Sync", "Context Sync" };
    return type >= 0 && type < int(kNames.size()) ? kNames[std::size_t(type)] : "Sync";
}

std::string_view stripVersion(std::string_view apiName)
{
    const auto p = apiName.rfind("_v");
    if (p == std::string_view::npos || p + 2 >= apiName.size()) {
        return apiName;
    }
    for (std::size_t i = p + 2; i < apiName.size(); ++i) {
        if (apiName[i] < '0' || apiName[i] > '9') {
            return apiName;
        }
    }
    return apiName.substr(0, p);
}

ActivityConverter::ActivityConverter(ConvertOptions options)
    : m_options(std::move(options))
{
    profile::SourceInfo info;
    info.file = m_options.sourceName;
    info.format = "cupti";
    info.rank = m_options.rank;
    m_source = m_builder.addSource(info);
    for (const auto& [device, name] : m_options.deviceNames) {
        m_builder.addDevice({ m_options.rank, std::int32_t(device), name });
    }
}

bool ActivityConverter::toTime(std::uint64_t cuptiNs, std::int64_t& out) const
{
    if (cuptiNs > std::uint64_t(profile::kMaxTimeNs)) {
        return false;
    }
    std::int64_t t = 0;
    if (__builtin_add_overflow(std::int64_t(cuptiNs), m_options.clockOffsetNs, &t)) {
        return false;
    }
    out = t;
    return profile::validTime(t);
}

TrackId ActivityConverter::streamTrack(std::uint32_t device, std::uint32_t stream)
{
    const auto key = std::make_pair(device, stream);
    if (const auto it = m_streams.find(key); it != m_streams.end()) {
        return it->second;
    }
    profile::Track t;
    t.kind = TrackKind::Stream;
    t.rank = m_options.rank;
    t.device = std::int32_t(device);
    t.pid = m_options.processId;
    t.tid = stream == kNoStream ? -1 : std::int64_t(stream);
    t.source = m_source;
    t.name = t.tid < 0 ? std::string("device-wide") : fmt::format("stream {}", t.tid);
    const auto name = m_options.deviceNames.find(device);
    t.processName = name != m_options.deviceNames.end()
        ? fmt::format("GPU {} ({})", device, name->second)
        : fmt::format("GPU {}", device);
    t.sortIndex = t.tid;
    const TrackId id = m_builder.addTrack(std::move(t));
    m_streams.emplace(key, id);
    return id;
}

TrackId ActivityConverter::threadTrack(std::uint32_t process, std::uint32_t thread, Lane lane)
{
    const auto key = std::make_tuple(process, thread, lane);
    if (const auto it = m_threads.find(key); it != m_threads.end()) {
        return it->second;
    }
    profile::Track t;
    t.kind = TrackKind::Thread;
    t.lane = lane;
    t.rank = m_options.rank;
    t.pid = process;
    t.tid = thread;
    t.source = m_source;
    t.name = lane == Lane::Nvtx ? fmt::format("NVTX (thread {})", thread)
                                : fmt::format("thread {}", thread);
    t.processName = fmt::format("process {}", process);
    t.sortIndex = std::int64_t(thread) * 2 + (lane == Lane::Nvtx ? 0 : 1);
    const TrackId id = m_builder.addTrack(std::move(t));
    m_threads.emplace(key, id);
    return id;
}

void ActivityConverter::add(const ActivityRecord& r)
{
    std::int64_t start = 0;
    std::int64_t end = 0;
    const bool marker = r.kind == RecordKind::MarkerStart || r.kind == RecordKind::MarkerEnd
        || r.kind == RecordKind::MarkerInstant;
    if (!toTime(r.start, start) || (!marker && (!toTime(r.end, end) || end < start))) {
        ++m_dropped;
        return;
    }
    auto& args = m_builder.args();
    switch (r.kind) {
    case RecordKind::Kernel: {
        const StringId name = m_builder.intern(r.name);
        args.begin();
        args.addJson(m_builder.intern("grid"),
            m_builder.intern(fmt::format("[{}, {}, {}]", r.grid[0], r.grid[1], r.grid[2])));
        args.addJson(m_builder.intern("block"),
            m_builder.intern(fmt::format("[{}, {}, {}]", r.block[0], r.block[1], r.block[2])));
        args.addInt(m_builder.intern("registers per thread"), r.registers);
        args.addInt(m_builder.intern("shared memory"), r.sharedBytes);
        const Category category
            = profile::isCollectiveKernelName(r.name) ? Category::Communication : Category::Kernel;
        const auto idx = m_builder.addSlice(streamTrack(r.device, r.stream), start, end, name,
            category, r.correlation, 0, args.commit());
        m_gpuWork.emplace_back(r.correlation, idx, false);
        return;
    }
    case RecordKind::Memcpy:
    case RecordKind::Memset: {
        const bool copy = r.kind == RecordKind::Memcpy;
        const StringId name = m_builder.intern(copy
                ? fmt::format("Memcpy {} ({} -> {})", memcpyKindName(r.copyKind),
                    memoryKindName(r.srcKind), memoryKindName(r.dstKind))
                : fmt::format("Memset ({})", memoryKindName(r.memoryKind)));
        args.begin();
        args.addInt(m_builder.intern("bytes"), r.bytes);
        if (end > start) {
            args.addDouble(
                m_builder.intern("memory bandwidth (GB/s)"), double(r.bytes) / double(end - start));
        }
        const auto idx = m_builder.addSlice(streamTrack(r.device, r.stream), start, end, name,
            copy ? Category::Memcpy : Category::Memset, r.correlation, 0, args.commit());
        m_gpuWork.emplace_back(r.correlation, idx, false);
        return;
    }
    case RecordKind::Sync: {
        const auto idx = m_builder.addSlice(streamTrack(r.device, r.stream), start, end,
            m_builder.intern(syncTypeName(r.syncType)), Category::Sync, r.correlation);
        m_gpuWork.emplace_back(r.correlation, idx, true);
        return;
    }
    case RecordKind::Runtime:
    case RecordKind::Driver: {
        const bool runtime = r.kind == RecordKind::Runtime;
        args.begin();
        args.addString(m_builder.intern("api"), m_builder.intern(runtime ? "runtime" : "driver"));
        if (r.returnValue != 0) {
            args.addInt(m_builder.intern("return value"), r.returnValue);
        }
        const auto idx = m_builder.addSlice(threadTrack(r.process, r.thread, Lane::Main), start,
            end, m_builder.intern(stripVersion(r.name)), Category::Runtime, r.correlation, 0,
            args.commit());
        (runtime ? m_runtimeByCorrelation : m_driverByCorrelation)[r.correlation] = idx;
        return;
    }
    case RecordKind::MarkerStart:
        m_openMarkers[r.markerId]
            = { start, m_builder.intern(r.domain.empty() ? r.name : r.domain + ": " + r.name),
                  r.process, r.thread };
        return;
    case RecordKind::MarkerEnd: {
        const auto it = m_openMarkers.find(r.markerId);
        if (it == m_openMarkers.end() || start < it->second.start) {
            ++m_dropped;
            return;
        }
        const auto& open = it->second;
        m_builder.addSlice(threadTrack(open.process, open.thread, Lane::Nvtx), open.start, start,
            open.name, Category::Annotation);
        m_openMarkers.erase(it);
        return;
    }
    case RecordKind::MarkerInstant:
        m_builder.addInstant(threadTrack(r.process, r.thread, Lane::Nvtx), start,
            m_builder.intern(r.name), Category::Annotation);
        return;
    }
}

Result<profile::Trace> ActivityConverter::finish(Progress& progress, std::stop_token stop)
{
    for (const auto& [correlation, slice, sync] : m_gpuWork) {
        if (correlation == 0) {
            continue;
        }
        auto from = m_runtimeByCorrelation.find(correlation);
        if (from == m_runtimeByCorrelation.end()) {
            from = m_driverByCorrelation.find(correlation);
            if (from == m_driverByCorrelation.end()) {
                continue;
            }
        }
        m_builder.addFlow(
            from->second, slice, sync ? profile::FlowKind::Other : profile::FlowKind::Launch);
    }
    if (!m_openMarkers.empty()) {
        m_builder.warn(fmt::format("cupti: {} NVTX range(s) were still open when profiling stopped",
            m_openMarkers.size()));
    }
    if (m_dropped > 0) {
        m_builder.warn(fmt::format("cupti: {} activity record(s) with invalid times or unmatched "
                                   "NVTX ends were dropped",
            m_dropped));
    }
    return m_builder.finish(progress, stop);
}

std::string describeSubscriberConflict(const char* injectionPath)
{
    std::string who = "another CUPTI client (Nsight Systems, Nsight Compute, the PyTorch "
                      "profiler or a second day0 profiler)";
    const std::string path = injectionPath != nullptr ? injectionPath : "";
    if (path.find("nsys") != std::string::npos || path.find("Nsight Systems") != std::string::npos
        || path.find("libToolsInjection") != std::string::npos) {
        who = fmt::format("Nsight Systems (CUDA_INJECTION64_PATH={})", path);
    } else if (path.find("ncu") != std::string::npos
        || path.find("Nsight Compute") != std::string::npos) {
        who = fmt::format("Nsight Compute (CUDA_INJECTION64_PATH={})", path);
    } else if (!path.empty()) {
        who = fmt::format("the CUPTI client injected by CUDA_INJECTION64_PATH={}", path);
    }
    return fmt::format("cupti: {} is already subscribed to this process and CUPTI allows only "
                       "one; stop it, or record with it and import its trace "
                       "(day0 trace import)",
        who);
}

} // namespace day0::cupti
