// The activity tables of an Nsight Systems export: CUDA API calls, GPU work and NVTX.
#include "profile/nccl.h"
#include "profile/nsys_reader.h"
#include "profile/privacy.h"

#include <fmt/format.h>

namespace day0::profile::detail {

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
    const int cStart = stmt->columnIndex("start");
    const int cEnd = stmt->columnIndex("end");
    const int cTid = stmt->columnIndex("globalTid");
    const int cCorr = stmt->columnIndex("correlationId");
    const int cName = stmt->columnIndex("nameId");
    const int cRet = stmt->columnIndex("returnValue");
    const StringId keyReturn = m_builder.intern("return value");
    std::unordered_map<std::int64_t, StringId> apiNames;
    while (stmt->next()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        std::int64_t start = 0;
        std::int64_t end = 0;
        if (stmt->columnIsNull(cStart) || stmt->columnIsNull(cEnd)
            || !toTraceTime(stmt->columnInt(cStart), stmt->columnInt(cEnd), start, end)) {
            ++m_badRows;
            continue;
        }
        const std::int64_t nameId = stmt->columnInt(cName);
        auto nameIt = apiNames.find(nameId);
        if (nameIt == apiNames.end()) {
            const std::string stripped(stripApiVersion(m_builder.strings().view(str(nameId))));
            nameIt = apiNames.emplace(nameId, m_builder.intern(stripped)).first;
        }
        const std::int64_t globalTid = stmt->columnInt(cTid);
        auto& args = m_builder.args();
        args.begin();
        const std::int64_t ret = stmt->columnInt(cRet);
        if (ret != 0) {
            args.addInt(keyReturn, ret);
        }
        const auto corr = std::uint32_t(stmt->columnInt(cCorr));
        const SliceIndex idx = m_builder.addSlice(threadTrack(globalTid, Lane::Main), start, end,
            nameIt->second, Category::Runtime, corr, 0, args.commit());
        m_runtimeByCorrelation[(std::uint64_t(pidOf(globalTid)) << 32) | corr] = idx;
    }
    if (stmt->failed()) {
        return Error::badInput(fmt::format("{} (reading {})", stmt->error().message, table));
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
    auto col = [&](const char* name) { return stmt->columnIndex(name); };
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
    while (stmt->next()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        std::int64_t start = 0;
        std::int64_t end = 0;
        if (stmt->columnIsNull(cStart) || stmt->columnIsNull(cEnd)
            || !toTraceTime(stmt->columnInt(cStart), stmt->columnInt(cEnd), start, end)) {
            ++m_badRows;
            continue;
        }
        auto& args = m_builder.args();
        args.begin();
        StringId name = 0;
        Category category = kind;
        if (kind == Category::Kernel) {
            name = str(stmt->columnInt(cName));
            if (isCollectiveKernelName(m_builder.strings().view(name))) {
                category = Category::Communication;
            }
            if (col("gridX") >= 0) {
                args.addJson(kGrid,
                    m_builder.intern(fmt::format("[{}, {}, {}]", stmt->columnInt(col("gridX")),
                        stmt->columnInt(col("gridY")), stmt->columnInt(col("gridZ")))));
                args.addJson(kBlock,
                    m_builder.intern(fmt::format("[{}, {}, {}]", stmt->columnInt(col("blockX")),
                        stmt->columnInt(col("blockY")), stmt->columnInt(col("blockZ")))));
            }
            if (col("registersPerThread") >= 0) {
                args.addInt(kRegisters, stmt->columnInt(col("registersPerThread")));
            }
            if (col("staticSharedMemory") >= 0) {
                args.addInt(kShared,
                    stmt->columnInt(col("staticSharedMemory"))
                        + stmt->columnInt(col("dynamicSharedMemory")));
            }
        } else if (kind == Category::Memcpy || kind == Category::Memset) {
            const std::int64_t a = kind == Category::Memcpy ? stmt->columnInt(col("copyKind"))
                                                            : stmt->columnInt(col("memKind"));
            const std::int64_t b = kind == Category::Memcpy ? stmt->columnInt(col("srcKind")) : -1;
            const std::int64_t c = kind == Category::Memcpy ? stmt->columnInt(col("dstKind")) : -1;
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
            const std::int64_t bytes = stmt->columnInt(cBytes);
            args.addInt(kBytes, bytes);
            if (end > start) {
                args.addDouble(kBandwidth, double(bytes) / double(end - start));
            }
        } else {
            const std::int64_t type = stmt->columnInt(col("syncType"));
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
        const std::int64_t globalPid = stmt->columnInt(cPid);
        const auto corr = std::uint32_t(stmt->columnInt(cCorr));
        const SliceIndex idx = m_builder.addSlice(
            streamTrack(stmt->columnInt(cDevice), stmt->columnInt(cStream), globalPid), start, end,
            name, category, corr, 0, args.commit());
        const auto rt = m_runtimeByCorrelation.find((std::uint64_t(pidOf(globalPid)) << 32) | corr);
        if (rt != m_runtimeByCorrelation.end()) {
            m_builder.addFlow(
                rt->second, idx, kind == Category::Sync ? FlowKind::Other : FlowKind::Launch);
        }
    }
    if (stmt->failed()) {
        return Error::badInput(fmt::format("{} (reading {})", stmt->error().message, table));
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
    const int cStart = stmt->columnIndex("start");
    const int cEnd = stmt->columnIndex("end");
    const int cType = stmt->columnIndex("eventType");
    const int cTid = stmt->columnIndex("globalTid");
    const int cText = stmt->columnIndex("text");
    const int cTextId = stmt->columnIndex("textId");
    const int cDomain = stmt->columnIndex("domainId");
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
    while (stmt->next()) {
        if (!tick(progress, stop)) {
            return Error::cancelled();
        }
        const std::int64_t type = stmt->columnInt(cType);
        const std::string_view inlineText = stmt->columnText(cText);
        const StringId name = !inlineText.empty() || stmt->columnIsNull(cTextId)
            ? m_builder.intern(redactUserPaths(inlineText))
            : str(stmt->columnInt(cTextId));
        if (type == domainCreate) {
            domains[stmt->columnInt(cDomain)] = name;
            continue;
        }
        if (type != pushPop && type != startEnd && type != mark) {
            continue;
        }
        const bool range = type != mark;
        if (range && stmt->columnIsNull(cEnd)) {
            ++m_openRanges;
            continue;
        }
        const std::int64_t rawStart = stmt->columnInt(cStart);
        std::int64_t start = 0;
        std::int64_t end = 0;
        if (!toTraceTime(rawStart, range ? stmt->columnInt(cEnd) : rawStart, start, end)) {
            ++m_badRows;
            continue;
        }
        pending.push_back({ threadTrack(stmt->columnInt(cTid), Lane::Nvtx), start, end, name,
            stmt->columnInt(cDomain), range });
    }
    if (stmt->failed()) {
        return Error::badInput(fmt::format("{} (reading {})", stmt->error().message, table));
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
            m_builder.addSlice(p.track, p.start, p.end, p.name, Category::Annotation, 0, 0, ref);
        } else {
            m_builder.addInstant(p.track, p.start, p.name, Category::Annotation, ref);
        }
    }
    return success();
}

} // namespace day0::profile::detail
