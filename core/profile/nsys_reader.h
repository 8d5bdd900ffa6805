#pragma once

// The Nsight Systems SQLite reader behind importNsysSqlite. Internal header.

#include "base/progress.h"
#include "base/result.h"
#include "base/sqlite_db.h"
#include "profile/trace_builder.h"

#include <cstdint>
#include <map>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace day0::profile::detail {

/// streamId of device-wide records (context and event synchronisation).
inline constexpr std::int64_t kNoStream = 0xFFFFFFFFll;

/// The process and thread ids packed into an nsys globalPid/globalTid.
inline std::int64_t pidOf(std::int64_t globalId) { return (globalId >> 24) & 0xFFFFFF; }
inline std::int64_t tidOf(std::int64_t globalId) { return globalId & 0xFFFFFF; }

/// "cudaLaunchKernel_v7000" → "cudaLaunchKernel": the versioned names nsys stores would not
/// line up with Kineto's in a diff.
std::string_view stripApiVersion(std::string_view name);

/// Reads one export into a builder as one source.
class NsysReader {
public:
    NsysReader(
        const sqlite::Database& db, TraceBuilder& builder, std::int32_t rank, std::uint16_t source)
        : m_db(db)
        , m_builder(builder)
        , m_rank(rank)
        , m_source(source)
    {
    }

    Result<void> run(Progress& progress, std::stop_token stop);

private:
    std::map<std::int64_t, std::string> readEnum(const std::string& table, bool useName);
    void readMetadata();
    Result<void> readStrings();
    /// Interns an nsys string on first use: StringIds also holds process environments and
    /// paths that no event refers to, and those must not enter the trace.
    StringId str(std::int64_t nsysId);
    TrackId threadTrack(std::int64_t globalTid, Lane lane);
    TrackId streamTrack(std::int64_t device, std::int64_t stream, std::int64_t globalPid);
    Result<sqlite::Statement> select(const std::string& table,
        const std::vector<std::string>& required, const std::vector<std::string>& optional);
    bool tick(Progress& progress, std::stop_token& stop);
    /// Session-relative start/end → absolute ns; false when out of order or out of range.
    bool toTraceTime(
        std::int64_t start, std::int64_t end, std::int64_t& outStart, std::int64_t& outEnd) const;
    Result<void> readRuntime(Progress& progress, std::stop_token stop);
    Result<void> readGpuTable(
        const std::string& table, Category kind, Progress& progress, std::stop_token stop);
    Result<void> readNvtx(Progress& progress, std::stop_token stop);

    const sqlite::Database& m_db;
    TraceBuilder& m_builder;
    std::int32_t m_rank;
    std::uint16_t m_source;
    std::set<std::string> m_tables;
    std::unordered_map<std::int64_t, std::string> m_rawStrings;
    std::unordered_map<std::int64_t, StringId> m_strings;
    std::unordered_map<std::int64_t, std::string> m_processNames;
    std::unordered_map<std::int64_t, std::string> m_threadNames;
    std::map<std::int64_t, std::string> m_gpuNames;
    std::map<std::pair<std::int64_t, Lane>, TrackId> m_threadTracks;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, TrackId> m_streamTracks;
    std::unordered_map<std::uint64_t, SliceIndex> m_runtimeByCorrelation;
    std::int64_t m_baseNs = 0;
    std::uint64_t m_rows = 0;
    std::uint64_t m_badRows = 0;
    std::uint64_t m_openRanges = 0;
};

} // namespace day0::profile::detail
