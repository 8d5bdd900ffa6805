#include "profile/nsys_importer.h"

#include "base/file_util.h"
#include "profile/byte_source.h"
#include "profile/nccl.h"
#include "profile/privacy.h"
#include "profile/sqlite_db.h"

#include <fmt/format.h>

#include <map>
#include <unordered_map>

namespace day0::profile {

namespace {

using detail::SqliteDb;
using detail::SqliteStmt;

constexpr std::int64_t kNoStream = 0xFFFFFFFFll;

std::int64_t pidOf(std::int64_t globalId) { return (globalId >> 24) & 0xFFFFFF; }
std::int64_t tidOf(std::int64_t globalId) { return globalId & 0xFFFFFF; }

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

class NsysReader {
public:
    NsysReader(const SqliteDb& db, TraceBuilder& builder, std::int32_t rank, std::uint16_t source)
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
    StringId str(std::int64_t nsysId)
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
    TrackId threadTrack(std::int64_t globalTid, Lane lane);
    TrackId streamTrack(std::int64_t device, std::int64_t stream, std::int64_t globalPid);
    Result<SqliteStmt> select(const std::string& table, const std::vector<std::string>& required,
        const std::vector<std::string>& optional);
    bool tick(Progress& progress, std::stop_token& stop);
    Result<void> readRuntime(Progress& progress, std::stop_token stop);
    Result<void> readGpuTable(
        const std::string& table, Category kind, Progress& progress, std::stop_token stop);
    Result<void> readNvtx(Progress& progress, std::stop_token stop);

    const SqliteDb& m_db;
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

std::map<std::int64_t, std::string> NsysReader::readEnum(const std::string& table, bool useName)
{
    std::map<std::int64_t, std::string> out;
    if (m_tables.count(table) == 0) {
        return out;
    }
    auto stmt = SqliteStmt::prepare(m_db, fmt::format("SELECT * FROM {}", table));
    if (!stmt.ok()) {
        return out;
    }
    const int id = stmt->column("id");
    const int text = stmt->column(useName ? "name" : "label");
    while (stmt->step()) {
        out[stmt->integer(id)] = std::string(stmt->text(text));
    }
    return out;
}

void NsysReader::readMetadata()
{
    if (m_tables.count("TARGET_INFO_SESSION_START_TIME") != 0) {
        auto stmt
            = SqliteStmt::prepare(m_db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
        if (stmt.ok() && stmt->step()) {
            m_baseNs = stmt->integer(0);
        }
    } else {
        m_builder.warn(fmt::format(
            "{}: no TARGET_INFO_SESSION_START_TIME; times are relative to the session start",
            m_db.name()));
    }
    if (m_tables.count("PROCESSES") != 0) {
        auto stmt = SqliteStmt::prepare(m_db, "SELECT pid, name FROM PROCESSES");
        while (stmt.ok() && stmt->step()) {
            // Executable paths may name the user's home folder: keep the file name only.
            m_processNames[stmt->integer(0)] = redactUserPaths(baseName(stmt->text(1)));
        }
    }
    if (m_tables.count("ThreadNames") != 0 && m_tables.count("StringIds") != 0) {
        auto stmt = SqliteStmt::prepare(m_db,
            "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId");
        while (stmt.ok() && stmt->step()) {
            m_threadNames[stmt->integer(0)] = redactUserPaths(stmt->text(1));
        }
    }
    if (m_tables.count("TARGET_INFO_GPU") != 0) {
        auto stmt = SqliteStmt::prepare(m_db, "SELECT id, name FROM TARGET_INFO_GPU");
        while (stmt.ok() && stmt->step()) {
            m_gpuNames[stmt->integer(0)] = std::string(stmt->text(1));
            m_builder.addDevice(
                { m_rank, std::int32_t(stmt->integer(0)), std::string(stmt->text(1)) });
        }
    }
}

Result<void> NsysReader::readStrings()
{
    auto stmt = SqliteStmt::prepare(m_db, "SELECT id, value FROM StringIds");
    if (!stmt.ok()) {
        return stmt.error();
    }
    while (stmt->step()) {
        m_rawStrings.emplace(stmt->integer(0), std::string(stmt->text(1)));
    }
    if (stmt->failed()) {
        return Error::badInput(
            fmt::format("{}: reading StringIds failed: {}", m_db.name(), m_db.lastError()));
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

Result<SqliteStmt> NsysReader::select(const std::string& table,
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
    return SqliteStmt::prepare(m_db, fmt::format("SELECT {} FROM {}", list, table));
}

bool NsysReader::tick(Progress& progress, std::stop_token& stop)
{
    if ((++m_rows & 4095) == 0) {
        progress.setDone(std::int64_t(m_rows));
        return !stop.stop_requested();
    }
    return true;
}

Result<void> NsysReader::readRuntime(Progress& progress, std::stop_token stop)
{
    const std::string table = "CUPTI_ACTIVITY_KIND_RUNTIME";
    if (m_tables.count(table) == 0) {
        return success();
    }
    auto stmt = select(
        table, { "start", "end", "globalTid", "correlationId", "nameId" }, { "returnValue" });
    if (!stmt.ok()) {
        m_builder.warn(stmt.error().message + "; the table was skipped");
        return success();
    }
    const int cStart = stmt->column("start");
    const int cEnd = stmt->column("end");
    const int cTid = stmt->column("globalTid");
    const int cCorr = stmt->column("correlationId");
    const int cName = stmt->column("nameId");
    const int cRet = stmt->column("returnValue");
    const StringId keyReturn = m_builder.intern("return value");
    std::unordered_map<std::int64_t, StringId> apiNames;
    while (stmt->step()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        if (stmt->isNull(cStart) || stmt->isNull(cEnd)
            || stmt->integer(cEnd) < stmt->integer(cStart)) {
            ++m_badRows;
            continue;
        }
        const std::int64_t nameId = stmt->integer(cName);
        auto nameIt = apiNames.find(nameId);
        if (nameIt == apiNames.end()) {
            const std::string stripped(stripApiVersion(m_builder.strings().view(str(nameId))));
            nameIt = apiNames.emplace(nameId, m_builder.intern(stripped)).first;
        }
        const std::int64_t globalTid = stmt->integer(cTid);
        auto& args = m_builder.args();
        args.begin();
        const std::int64_t ret = stmt->integer(cRet);
        if (ret != 0) {
            args.addInt(keyReturn, ret);
        }
        const auto corr = std::uint32_t(stmt->integer(cCorr));
        const SliceIndex idx = m_builder.addSlice(threadTrack(globalTid, Lane::Main),
            m_baseNs + stmt->integer(cStart), m_baseNs + stmt->integer(cEnd), nameIt->second,
            Category::Runtime, corr, 0, args.commit());
        m_runtimeByCorrelation[(std::uint64_t(pidOf(globalTid)) << 32) | corr] = idx;
    }
    if (stmt->failed()) {
        return Error::badInput(
            fmt::format("{}: reading {} failed: {}", m_db.name(), table, m_db.lastError()));
    }
    return success();
}

Result<void> NsysReader::readGpuTable(
    const std::string& table, Category kind, Progress& progress, std::stop_token stop)
{
    if (m_tables.count(table) == 0) {
        return success();
    }
    std::vector<std::string> optional;
    switch (kind) {
    case Category::Kernel:
        optional = { "demangledName", "shortName", "mangledName", "gridX", "gridY", "gridZ",
            "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory" };
        break;
    case Category::Memcpy:
        optional = { "bytes", "copyKind", "srcKind", "dstKind" };
        break;
    case Category::Memset:
        optional = { "bytes", "memKind", "value" };
        break;
    default:
        optional = { "syncType" };
    }
    auto stmt = select(
        table, { "start", "end", "deviceId", "streamId", "correlationId", "globalPid" }, optional);
    if (!stmt.ok()) {
        m_builder.warn(stmt.error().message + "; the table was skipped");
        return success();
    }
    const auto copyKinds = readEnum("ENUM_CUDA_MEMCPY_OPER", true);
    const auto memKinds = readEnum("ENUM_CUDA_MEM_KIND", false);
    const auto syncTypes = readEnum("ENUM_CUPTI_SYNC_TYPE", true);
    auto col = [&](const char* name) { return stmt->column(name); };
    const int cStart = col("start");
    const int cEnd = col("end");
    const int cDevice = col("deviceId");
    const int cStream = col("streamId");
    const int cCorr = col("correlationId");
    const int cPid = col("globalPid");
    const int cName = col("demangledName") >= 0
        ? col("demangledName")
        : (col("shortName") >= 0 ? col("shortName") : col("mangledName"));
    const int cBytes = col("bytes");
    const StringId kGrid = m_builder.intern("grid");
    const StringId kBlock = m_builder.intern("block");
    const StringId kRegisters = m_builder.intern("registers per thread");
    const StringId kShared = m_builder.intern("shared memory");
    const StringId kBytes = m_builder.intern("bytes");
    const StringId kBandwidth = m_builder.intern("memory bandwidth (GB/s)");
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, StringId> names;
    auto enumText = [](const std::map<std::int64_t, std::string>& e, std::int64_t v) {
        const auto it = e.find(v);
        return it != e.end() ? it->second : fmt::format("{}", v);
    };
    while (stmt->step()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        const std::int64_t start = stmt->integer(cStart);
        const std::int64_t end = stmt->integer(cEnd);
        if (stmt->isNull(cStart) || stmt->isNull(cEnd) || end < start) {
            ++m_badRows;
            continue;
        }
        auto& args = m_builder.args();
        args.begin();
        StringId name = 0;
        Category category = kind;
        if (kind == Category::Kernel) {
            name = str(stmt->integer(cName));
            if (isCollectiveKernelName(m_builder.strings().view(name))) {
                category = Category::Communication;
            }
            if (col("gridX") >= 0) {
                args.addJson(kGrid,
                    m_builder.intern(fmt::format("[{}, {}, {}]", stmt->integer(col("gridX")),
                        stmt->integer(col("gridY")), stmt->integer(col("gridZ")))));
                args.addJson(kBlock,
                    m_builder.intern(fmt::format("[{}, {}, {}]", stmt->integer(col("blockX")),
                        stmt->integer(col("blockY")), stmt->integer(col("blockZ")))));
            }
            if (col("registersPerThread") >= 0) {
                args.addInt(kRegisters, stmt->integer(col("registersPerThread")));
            }
            if (col("staticSharedMemory") >= 0) {
                args.addInt(kShared,
                    stmt->integer(col("staticSharedMemory"))
                        + stmt->integer(col("dynamicSharedMemory")));
            }
        } else if (kind == Category::Memcpy || kind == Category::Memset) {
            const std::int64_t a = kind == Category::Memcpy ? stmt->integer(col("copyKind"))
                                                            : stmt->integer(col("memKind"));
            const std::int64_t b = kind == Category::Memcpy ? stmt->integer(col("srcKind")) : -1;
            const std::int64_t c = kind == Category::Memcpy ? stmt->integer(col("dstKind")) : -1;
            auto it = names.find({ a, b, c });
            if (it == names.end()) {
                std::string text;
                if (kind == Category::Memcpy) {
                    // "CUDA_MEMCPY_KIND_HTOD" → "HtoD", as Kineto names copies.
                    std::string op = enumText(copyKinds, a);
                    if (const auto p = op.rfind('_'); p != std::string::npos) {
                        op = op.substr(p + 1);
                    }
                    if (const auto to = op.find("TO"); to != std::string::npos && op.size() > 2) {
                        op = std::string(1, op[0]) + "to" + op.substr(to + 2);
                    }
                    text = fmt::format(
                        "Memcpy {} ({} -> {})", op, enumText(memKinds, b), enumText(memKinds, c));
                } else {
                    text = fmt::format("Memset ({})", enumText(memKinds, a));
                }
                it = names.emplace(std::make_tuple(a, b, c), m_builder.intern(text)).first;
            }
            name = it->second;
            const std::int64_t bytes = stmt->integer(cBytes);
            args.addInt(kBytes, bytes);
            if (end > start) {
                args.addDouble(kBandwidth, double(bytes) / double(end - start));
            }
        } else {
            const std::int64_t type = stmt->integer(col("syncType"));
            auto it = names.find({ type, 0, 0 });
            if (it == names.end()) {
                static const std::map<std::string, std::string, std::less<>> kKineto = {
                    { "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event Sync" },
                    { "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT",
                        "Stream Wait Event" },
                    { "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream Sync" },
                    { "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context Sync" },
                };
                const std::string raw = enumText(syncTypes, type);
                const auto k = kKineto.find(raw);
                it = names
                         .emplace(std::make_tuple(type, 0, 0),
                             m_builder.intern(k != kKineto.end() ? k->second : raw))
                         .first;
            }
            name = it->second;
        }
        const std::int64_t globalPid = stmt->integer(cPid);
        const auto corr = std::uint32_t(stmt->integer(cCorr));
        const SliceIndex idx = m_builder.addSlice(
            streamTrack(stmt->integer(cDevice), stmt->integer(cStream), globalPid),
            m_baseNs + start, m_baseNs + end, name, category, corr, 0, args.commit());
        const auto rt = m_runtimeByCorrelation.find((std::uint64_t(pidOf(globalPid)) << 32) | corr);
        if (rt != m_runtimeByCorrelation.end()) {
            m_builder.addFlow(
                rt->second, idx, kind == Category::Sync ? FlowKind::Other : FlowKind::Launch);
        }
    }
    if (stmt->failed()) {
        return Error::badInput(
            fmt::format("{}: reading {} failed: {}", m_db.name(), table, m_db.lastError()));
    }
    return success();
}

Result<void> NsysReader::readNvtx(Progress& progress, std::stop_token stop)
{
    const std::string table = "NVTX_EVENTS";
    if (m_tables.count(table) == 0) {
        return success();
    }
    std::int64_t pushPop = 59;
    std::int64_t startEnd = 60;
    std::int64_t mark = 34;
    std::int64_t domainCreate = 75;
    for (const auto& [id, name] : readEnum("ENUM_NSYS_EVENT_TYPE", true)) {
        if (name == "NvtxPushPopRange") {
            pushPop = id;
        } else if (name == "NvtxStartEndRange") {
            startEnd = id;
        } else if (name == "NvtxMark") {
            mark = id;
        } else if (name == "NvtxDomainCreate") {
            domainCreate = id;
        }
    }
    auto stmt = select(
        table, { "start", "eventType", "globalTid" }, { "end", "text", "textId", "domainId" });
    if (!stmt.ok()) {
        m_builder.warn(stmt.error().message + "; the table was skipped");
        return success();
    }
    const int cStart = stmt->column("start");
    const int cEnd = stmt->column("end");
    const int cType = stmt->column("eventType");
    const int cTid = stmt->column("globalTid");
    const int cText = stmt->column("text");
    const int cTextId = stmt->column("textId");
    const int cDomain = stmt->column("domainId");
    const StringId kDomain = m_builder.intern("domain");
    std::unordered_map<std::int64_t, StringId> domains;
    struct Pending {
        TrackId track;
        std::int64_t start;
        std::int64_t end;
        StringId name;
        std::int64_t domain;
        bool range;
    };
    std::vector<Pending> pending;
    while (stmt->step()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        const std::int64_t type = stmt->integer(cType);
        const std::string_view inlineText = stmt->text(cText);
        const StringId name = !inlineText.empty() || stmt->isNull(cTextId)
            ? m_builder.intern(redactUserPaths(inlineText))
            : str(stmt->integer(cTextId));
        if (type == domainCreate) {
            domains[stmt->integer(cDomain)] = name;
            continue;
        }
        if (type != pushPop && type != startEnd && type != mark) {
            continue;
        }
        const bool range = type != mark;
        if (range && stmt->isNull(cEnd)) {
            ++m_openRanges;
            continue;
        }
        const std::int64_t start = stmt->integer(cStart);
        const std::int64_t end = range ? stmt->integer(cEnd) : start;
        if (end < start) {
            ++m_badRows;
            continue;
        }
        pending.push_back({ threadTrack(stmt->integer(cTid), Lane::Nvtx), start, end, name,
            stmt->integer(cDomain), range });
    }
    if (stmt->failed()) {
        return Error::badInput(
            fmt::format("{}: reading {} failed: {}", m_db.name(), table, m_db.lastError()));
    }
    // Domains may be created after their first use; their names are attached once all are known.
    for (const auto& p : pending) {
        auto& args = m_builder.args();
        args.begin();
        if (const auto d = domains.find(p.domain); p.domain != 0 && d != domains.end()) {
            args.addString(kDomain, d->second);
        }
        const ArgsRef ref = args.commit();
        if (p.range) {
            m_builder.addSlice(p.track, m_baseNs + p.start, m_baseNs + p.end, p.name,
                Category::Annotation, 0, 0, ref);
        } else {
            m_builder.addInstant(p.track, m_baseNs + p.start, p.name, Category::Annotation, ref);
        }
    }
    return success();
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
        auto count = SqliteStmt::prepare(m_db, fmt::format("SELECT COUNT(*) FROM {}", t));
        if (count.ok() && count->step()) {
            total += count->integer(0);
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
        auto v = SqliteStmt::prepare(
            m_db, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'");
        if (v.ok() && v->step()) {
            const std::string version(v->text(0));
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

Result<void> importFrom(const SqliteDb& db, TraceBuilder& builder, const ImportOptions& options,
    Progress& progress, std::stop_token stop)
{
    SourceInfo info;
    info.file = std::string(baseName(db.name()));
    info.format = "nsys";
    info.rank = options.rank.value_or(0);
    const auto source = builder.addSource(info);
    NsysReader reader(db, builder, info.rank, source);
    return reader.run(progress, stop);
}

} // namespace

Result<void> importNsysSqlite(const std::filesystem::path& path, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    const std::string name = displayPath(path);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        return Error::badInput(fmt::format("{}: cannot open", name));
    }
    unsigned char magic[2] = { 0, 0 };
    const std::size_t got = std::fread(magic, 1, 2, f);
    std::fclose(f);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        bool truncated = false;
        auto bytes = readAllBytes(path, &truncated);
        if (!bytes.ok()) {
            return bytes.error();
        }
        if (truncated) {
            return Error::badInput(fmt::format(
                "{}: the gzip data is truncated; an SQLite export must be complete", name));
        }
        return importNsysSqliteBytes(std::move(*bytes), name, builder, options, progress, stop);
    }
    auto db = SqliteDb::openFile(path.string(), name);
    if (!db.ok()) {
        return db.error();
    }
    return importFrom(*db, builder, options, progress, stop);
}

Result<void> importNsysSqliteBytes(std::string bytes, const std::string& name,
    TraceBuilder& builder, const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    auto db = SqliteDb::openBytes(std::move(bytes), name);
    if (!db.ok()) {
        return db.error();
    }
    return importFrom(*db, builder, options, progress, stop);
}

} // namespace day0::profile
