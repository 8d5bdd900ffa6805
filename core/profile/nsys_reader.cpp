#include "profile/nsys_reader.h"

#include "profile/privacy.h"

#include <fmt/format.h>

#include <cstdio>

namespace day0::profile::detail {

/// "cudaLaunchKernel_v7000" → "cudaLaunchKernel": the versioned names nsys stores would not
/// line up with Kineto's in a diff.
std::string_view stripApiVersion(std::string_view name)
{
    const std::size_t v = name.rfind("_v");
    if (v == std::string_view::npos || v + 2 >= name.size()) {
        return name;
    }
    for (std::size_t i = v + 2; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') {
            return name;
        }
    }
    return name.substr(0, v);
}

StringId NsysReader::str(std::int64_t nsysId)
{
    if (const auto it = m_strings.find(nsysId); it != m_strings.end()) {
        return it->second;
    }
    const auto raw = m_rawStrings.find(nsysId);
    if (raw == m_rawStrings.end()) {
        return m_strings[nsysId] = m_builder.intern(fmt::format("<string {}>", nsysId));
    }
    const StringId id = containsUserPath(raw->second)
        ? m_builder.intern(redactUserPaths(raw->second))
        : m_builder.intern(raw->second);
    m_strings.emplace(nsysId, id);
    return id;
}

std::map<std::int64_t, std::string> NsysReader::readEnum(const std::string& table, bool useName)
{
    std::map<std::int64_t, std::string> out;
    if (m_tables.count(table) == 0) {
        return out;
    }
    auto stmt = m_db.prepare(fmt::format("SELECT * FROM {}", table));
    if (!stmt.ok()) {
        return out;
    }
    const int id = stmt->columnIndex("id");
    const int text = stmt->columnIndex(useName ? "name" : "label");
    while (stmt->next()) {
        out[stmt->columnInt(id)] = std::string(stmt->columnText(text));
    }
    return out;
}

void NsysReader::readMetadata()
{
    if (m_tables.count("TARGET_INFO_SESSION_START_TIME") != 0) {
        auto stmt = m_db.prepare("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
        if (stmt.ok() && stmt->next()) {
            m_baseNs = stmt->columnInt(0);
            if (!validTime(m_baseNs)) {
                m_builder.warn(fmt::format("{}: session start {} ns is out of range; times are "
                                           "relative to the session start",
                    m_db.name(), m_baseNs));
                m_baseNs = 0;
            }
        }
    } else {
        m_builder.warn(fmt::format(
            "{}: no TARGET_INFO_SESSION_START_TIME; times are relative to the session start",
            m_db.name()));
    }
    if (m_tables.count("PROCESSES") != 0) {
        auto stmt = m_db.prepare("SELECT pid, name FROM PROCESSES");
        while (stmt.ok() && stmt->next()) {
            // Executable paths may name the user's home folder: keep the file name only.
            m_processNames[stmt->columnInt(0)] = redactUserPaths(baseName(stmt->columnText(1)));
        }
    }
    if (m_tables.count("ThreadNames") != 0 && m_tables.count("StringIds") != 0) {
        auto stmt = m_db.prepare(
            "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId");
        while (stmt.ok() && stmt->next()) {
            m_threadNames[stmt->columnInt(0)] = redactUserPaths(stmt->columnText(1));
        }
    }
    if (m_tables.count("TARGET_INFO_GPU") != 0) {
        auto stmt = m_db.prepare("SELECT id, name FROM TARGET_INFO_GPU");
        while (stmt.ok() && stmt->next()) {
            m_gpuNames[stmt->columnInt(0)] = std::string(stmt->columnText(1));
            m_builder.addDevice(
                { m_rank, std::int32_t(stmt->columnInt(0)), std::string(stmt->columnText(1)) });
        }
    }
}

Result<void> NsysReader::readStrings()
{
    auto stmt = m_db.prepare("SELECT id, value FROM StringIds");
    if (!stmt.ok()) {
        return stmt.error();
    }
    while (stmt->next()) {
        m_rawStrings.emplace(stmt->columnInt(0), std::string(stmt->columnText(1)));
    }
    if (stmt->failed()) {
        return Error::badInput(fmt::format("{} (reading StringIds)", stmt->error().message));
    }
    return success();
}

TrackId NsysReader::threadTrack(std::int64_t globalTid, Lane lane)
{
    const auto key = std::make_pair(globalTid, lane);
    const auto it = m_threadTracks.find(key);
    if (it != m_threadTracks.end()) {
        return it->second;
    }
    Track t;
    t.kind = TrackKind::Thread;
    t.lane = lane;
    t.rank = m_rank;
    t.pid = pidOf(globalTid);
    t.tid = tidOf(globalTid);
    t.source = m_source;
    const auto name = m_threadNames.find(globalTid);
    const std::string thread
        = name != m_threadNames.end() ? name->second : fmt::format("thread {}", t.tid);
    t.name = lane == Lane::Nvtx ? fmt::format("NVTX ({})", thread) : thread;
    const auto proc = m_processNames.find(t.pid);
    t.processName = proc != m_processNames.end() ? proc->second : fmt::format("process {}", t.pid);
    t.sortIndex = t.tid * 2 + (lane == Lane::Nvtx ? 0 : 1);
    const TrackId id = m_builder.addTrack(std::move(t));
    m_threadTracks.emplace(key, id);
    return id;
}

TrackId NsysReader::streamTrack(std::int64_t device, std::int64_t stream, std::int64_t globalPid)
{
    const std::int64_t pid = pidOf(globalPid);
    const auto key = std::make_tuple(device, stream, pid);
    const auto it = m_streamTracks.find(key);
    if (it != m_streamTracks.end()) {
        return it->second;
    }
    Track t;
    t.kind = TrackKind::Stream;
    t.rank = m_rank;
    t.device = std::int32_t(device);
    t.pid = pid;
    t.tid = stream == kNoStream ? -1 : stream;
    t.source = m_source;
    t.name = t.tid < 0 ? std::string("device-wide") : fmt::format("stream {}", t.tid);
    const auto gpu = m_gpuNames.find(device);
    t.processName = gpu != m_gpuNames.end() ? fmt::format("GPU {} ({})", device, gpu->second)
                                            : fmt::format("GPU {}", device);
    t.sortIndex = t.tid;
    const TrackId id = m_builder.addTrack(std::move(t));
    m_streamTracks.emplace(key, id);
    return id;
}

Result<sqlite::Statement> NsysReader::select(const std::string& table,
    const std::vector<std::string>& required, const std::vector<std::string>& optional)
{
    const auto cols = m_db.columns(table);
    std::string list;
    for (const auto& c : required) {
        if (cols.count(c) == 0) {
            return Error::badInput(
                fmt::format("{}: table {} has no column '{}'", m_db.name(), table, c));
        }
        list += (list.empty() ? "" : ", ") + c;
    }
    for (const auto& c : optional) {
        if (cols.count(c) != 0) {
            list += ", " + c;
        }
    }
    return m_db.prepare(fmt::format("SELECT {} FROM {}", list, table));
}

bool NsysReader::toTraceTime(
    std::int64_t start, std::int64_t end, std::int64_t& outStart, std::int64_t& outEnd) const
{
    if (end < start || __builtin_add_overflow(start, m_baseNs, &outStart)
        || __builtin_add_overflow(end, m_baseNs, &outEnd)) {
        return false;
    }
    return validTime(outStart) && validTime(outEnd);
}

bool NsysReader::tick(Progress& progress, std::stop_token& stop)
{
    if ((++m_rows & 4095) == 0) {
        progress.setDone(std::int64_t(m_rows));
        return !stop.stop_requested();
    }
    return true;
}

Result<void> NsysReader::run(Progress& progress, std::stop_token stop)
{
    auto tables = m_db.tables();
    if (!tables.ok()) {
        return tables.error();
    }
    m_tables = std::move(*tables);
    static const std::vector<std::string> kActivity = { "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS" };
    std::int64_t total = 0;
    bool any = false;
    for (const auto& t : kActivity) {
        if (m_tables.count(t) == 0) {
            continue;
        }
        any = true;
        auto count = m_db.prepare(fmt::format("SELECT COUNT(*) FROM {}", t));
        if (count.ok() && count->next()) {
            total += count->columnInt(0);
        }
    }
    if (!any) {
        return Error::badInput(
            fmt::format("{}: no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table: not an Nsight "
                        "Systems SQLite export, or one without CUDA/NVTX data",
                m_db.name()));
    }
    if (m_tables.count("StringIds") == 0) {
        return Error::badInput(
            fmt::format("{}: missing table StringIds, so no event can be named", m_db.name()));
    }
    if (m_tables.count("META_DATA_EXPORT") != 0) {
        auto v = m_db.prepare(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'");
        if (v.ok() && v->next()) {
            const std::string version(v->columnText(0));
            int major = 0;
            int minor = 0;
            if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2 || major != 3
                || minor < 16 || minor > 24) {
                m_builder.warn(
                    fmt::format("{}: export schema {} is outside the tested range 3.16–3.24; "
                                "columns were matched by name",
                        m_db.name(), version));
            }
        }
    }
    progress.setTotal(total);
    progress.setStage("reading " + m_db.name());
    readMetadata();
    DAY0_TRY(readStrings());
    DAY0_TRY(readRuntime(progress, stop));
    DAY0_TRY(readGpuTable("CUPTI_ACTIVITY_KIND_KERNEL", Category::Kernel, progress, stop));
    DAY0_TRY(readGpuTable("CUPTI_ACTIVITY_KIND_MEMCPY", Category::Memcpy, progress, stop));
    DAY0_TRY(readGpuTable("CUPTI_ACTIVITY_KIND_MEMSET", Category::Memset, progress, stop));
    DAY0_TRY(readGpuTable("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", Category::Sync, progress, stop));
    DAY0_TRY(readNvtx(progress, stop));
    progress.setDone(total);
    if (m_badRows > 0) {
        m_builder.warn(
            fmt::format("{}: skipped {} rows without a valid start/end", m_db.name(), m_badRows));
    }
    if (m_openRanges > 0) {
        m_builder.warn(
            fmt::format("{}: skipped {} NVTX ranges that never ended", m_db.name(), m_openRanges));
    }
    return success();
}

} // namespace day0::profile::detail
