#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"
#include "profile/trace_builder.h"

#include <cstdint>
#include <map>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

namespace day0::cupti {

/// What a CUPTI activity record is, as far as the trace model cares.
enum class RecordKind {
    Kernel, ///< CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    Memcpy, ///< CUPTI_ACTIVITY_KIND_MEMCPY
    Memset, ///< CUPTI_ACTIVITY_KIND_MEMSET
    Runtime, ///< CUPTI_ACTIVITY_KIND_RUNTIME
    Driver, ///< CUPTI_ACTIVITY_KIND_DRIVER
    MarkerStart, ///< CUPTI_ACTIVITY_KIND_MARKER with the START flag (NVTX push / range start)
    MarkerEnd, ///< ... with the END flag
    MarkerInstant, ///< ... with the INSTANTANEOUS flag (nvtxMark)
    Sync, ///< CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
};

/// streamId of device-wide records (context synchronisation), as CUPTI reports it.
inline constexpr std::uint32_t kNoStream = 0xFFFFFFFFu;

/// One CUPTI activity record in plain C++ (the collector copies the fields it needs out of the
/// CUpti_Activity* structs, so conversion is testable without CUPTI). Times are CUPTI's ns.
struct ActivityRecord {
    RecordKind kind = RecordKind::Kernel;
    std::uint64_t start = 0; ///< also the timestamp of a marker
    std::uint64_t end = 0;
    std::uint32_t device = 0;
    std::uint32_t context = 0;
    std::uint32_t stream = 0;
    std::uint32_t correlation = 0;
    std::uint32_t process = 0; ///< API calls and markers
    std::uint32_t thread = 0; ///< API calls and markers
    std::string name; ///< kernel, API function (version suffix stripped) or marker name
    std::string domain; ///< marker domain
    std::uint32_t markerId = 0; ///< pairs a marker's start with its end
    std::int64_t bytes = 0; ///< memcpy, memset
    int copyKind = 0; ///< CUpti_ActivityMemcpyKind
    int srcKind = 0; ///< CUpti_ActivityMemoryKind
    int dstKind = 0;
    int memoryKind = 0; ///< memset
    int syncType = 0; ///< CUpti_ActivitySynchronizationType
    std::uint32_t grid[3] = { 0, 0, 0 };
    std::uint32_t block[3] = { 0, 0, 0 };
    int registers = 0;
    std::int64_t sharedBytes = 0; ///< static + dynamic
    std::uint32_t returnValue = 0; ///< API calls: nonzero on error
};

/// "HtoD", "DtoH", ... for a CUpti_ActivityMemcpyKind (Kineto's spelling); "Unknown" otherwise.
std::string_view memcpyKindName(int kind);
/// "Pageable", "Pinned", "Device", ... for a CUpti_ActivityMemoryKind.
std::string_view memoryKindName(int kind);
/// "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync" (Kineto's names).
std::string_view syncTypeName(int type);
/// "cudaLaunchKernel_v7000" → "cudaLaunchKernel".
std::string_view stripVersion(std::string_view apiName);

/// How CUPTI times map to the trace's (ns since the Unix epoch), and which rank/process it is.
struct ConvertOptions {
    std::int64_t clockOffsetNs = 0; ///< wall-clock ns minus CUPTI ns, sampled at start
    std::int32_t rank = 0;
    std::int64_t processId = 0; ///< the profiled process (stream tracks' pid)
    std::string sourceName = "cupti"; ///< SourceInfo::file
    std::map<std::uint32_t, std::string> deviceNames; ///< "NVIDIA H200" by device index
};

/// Turns activity records into a Trace: GPU work on one track per (device, stream), API calls
/// on one track per host thread, NVTX ranges on the thread's NVTX lane; a flow from each runtime
/// call (or, without one, driver call) to the GPU work of the same correlation id. Records may
/// arrive in any order (CUPTI delivers buffers per stream and per thread). Single-threaded.
class ActivityConverter {
public:
    explicit ActivityConverter(ConvertOptions options);

    /// Adds one record; a record with end < start or a time outside the trace domain is
    /// counted as dropped.
    void add(const ActivityRecord& record);
    /// Builds the trace; NVTX ranges left open and dropped records become warnings.
    Result<profile::Trace> finish(Progress& progress, std::stop_token stop);

    /// A non-fatal problem kept in the trace's warnings (e.g. records CUPTI itself dropped).
    void warn(std::string message) { m_builder.warn(std::move(message)); }

    [[nodiscard]] std::size_t dropped() const { return m_dropped; }

private:
    profile::TrackId streamTrack(std::uint32_t device, std::uint32_t stream);
    profile::TrackId threadTrack(std::uint32_t process, std::uint32_t thread, profile::Lane lane);
    bool toTime(std::uint64_t cuptiNs, std::int64_t& out) const;

    struct OpenMarker {
        std::int64_t start = 0;
        profile::StringId name = 0;
        std::uint32_t process = 0;
        std::uint32_t thread = 0;
    };

    ConvertOptions m_options;
    profile::TraceBuilder m_builder;
    std::uint16_t m_source = 0;
    std::map<std::pair<std::uint32_t, std::uint32_t>, profile::TrackId> m_streams;
    std::map<std::tuple<std::uint32_t, std::uint32_t, profile::Lane>, profile::TrackId> m_threads;
    std::unordered_map<std::uint32_t, profile::SliceIndex> m_runtimeByCorrelation;
    std::unordered_map<std::uint32_t, profile::SliceIndex> m_driverByCorrelation;
    std::vector<std::tuple<std::uint32_t, profile::SliceIndex, bool>>
        m_gpuWork; ///< corr, slice, sync
    std::unordered_map<std::uint32_t, OpenMarker> m_openMarkers;
    std::size_t m_dropped = 0;
};

/// The message shown when CUPTI refuses a second subscriber: names the likely other client
/// (Nsight Systems or Nsight Compute when CUDA_INJECTION64_PATH points at them).
std::string describeSubscriberConflict(const char* injectionPath);

} // namespace day0::cupti
