#include "profile/chrome_events.h"

#include "profile/nccl.h"
#include "profile/privacy.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace day0::profile::detail {

namespace {

constexpr std::int64_t kStringKeyBase = std::numeric_limits<std::int64_t>::min() / 2;

bool isGpuCategory(Category c) { return isGpuWork(c) || c == Category::Sync; }

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    return s;
}

bool parseInteger(std::string_view s, std::int64_t& out)
{
    s = trim(s);
    if (s.empty()) {
        return false;
    }
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

} // namespace

Category classifyChromeEvent(std::string_view cat, std::string_view name)
{
    if (cat == "kernel" || cat == "Kernel") {
        return isCollectiveKernelName(name) ? Category::Communication : Category::Kernel;
    }
    if (cat == "cpu_op" || cat == "Operator") {
        return Category::CpuOp;
    }
    if (cat == "cuda_runtime" || cat == "Runtime" || cat == "cuda_driver" || cat == "Driver") {
        return Category::Runtime;
    }
    if (cat == "gpu_memcpy" || cat == "Memcpy") {
        return Category::Memcpy;
    }
    if (cat == "gpu_memset" || cat == "Memset") {
        return Category::Memset;
    }
    if (cat == "user_annotation" || cat == "gpu_user_annotation") {
        return Category::Annotation;
    }
    if (cat == "cuda_sync") {
        return Category::Sync;
    }
    // Our own exports name categories as categoryName() does.
    if (const auto own = categoryFromName(cat)) {
        return *own;
    }
    return Category::Other;
}

ChromeEventHandler::ChromeEventHandler(TraceBuilder& builder, std::uint16_t source)
    : m_builder(builder)
    , m_source(source)
{
}

StringId ChromeEventHandler::internText(std::string_view text)
{
    if (containsUserPath(text)) {
        return m_builder.intern(redactUserPaths(text));
    }
    return m_builder.intern(text);
}

std::int64_t ChromeEventHandler::idKey(const RawId& id)
{
    if (!id.present) {
        return 0;
    }
    if (!id.isString) {
        return id.number;
    }
    std::int64_t n = 0;
    if (parseInteger(id.text, n)) {
        return n;
    }
    const StringId s = internText(id.text);
    const auto [it, inserted] = m_stringIds.try_emplace(s, kStringKeyBase + std::int64_t(s));
    return it->second;
}

TrackId ChromeEventHandler::trackFor(const RawEvent& e, Lane lane)
{
    const Key key { idKey(e.pid), idKey(e.tid), lane };
    if (m_lastTrack != 0xFFFFFFFFu && key == m_lastKey) {
        return m_lastTrack;
    }
    auto it = m_tracks.find(key);
    if (it == m_tracks.end()) {
        Track t;
        t.lane = lane;
        t.pid = key.pid;
        t.tid = key.tid;
        t.source = m_source;
        const TrackId id = m_builder.addTrack(std::move(t));
        it = m_tracks.emplace(key, id).first;
        m_created.emplace_back(key, id);
        auto& proc = m_processes[key.pid];
        if (e.pid.isString && proc.text.empty()) {
            proc.text = redactUserPaths(e.pid.text);
        }
        if (e.tid.isString) {
            auto& thread = m_threads[{ key.pid, key.tid }];
            if (thread.name.empty()) {
                thread.name = redactUserPaths(trim(e.tid.text));
            }
        }
    }
    m_lastKey = key;
    m_lastTrack = it->second;
    return it->second;
}

ArgsRef ChromeEventHandler::encodeArgs(const RawEvent& e, std::uint32_t& correlation,
    std::uint32_t& externalId, bool extractIds, std::int32_t* device)
{
    auto& args = m_builder.args();
    args.begin();
    for (const auto& a : e.args) {
        if (a.type == ArgType::Int) {
            // Per-event ids go to their own columns so that the remaining sets repeat and dedupe.
            if (extractIds && a.intValue > 0 && a.intValue <= 0xFFFFFFFFll) {
                if (a.key == "correlation") {
                    correlation = std::uint32_t(a.intValue);
                    continue;
                }
                if (a.key == "External id" || a.key == "external id") {
                    externalId = std::uint32_t(a.intValue);
                    continue;
                }
            }
            if (device != nullptr && a.key == "device") {
                *device = std::int32_t(a.intValue);
            }
        }
        const StringId key = m_builder.intern(a.key);
        switch (a.type) {
        case ArgType::Int:
            args.addInt(key, a.intValue);
            break;
        case ArgType::Double:
            args.addDouble(key, a.doubleValue);
            break;
        case ArgType::String:
            args.addString(key, internText(a.text));
            break;
        case ArgType::Json:
            args.addJson(key, internText(a.text));
            break;
        case ArgType::True:
        case ArgType::False:
            args.addBool(key, a.type == ArgType::True);
            break;
        case ArgType::Null:
            args.addNull(key);
            break;
        }
    }
    return args.commit();
}

void ChromeEventHandler::handleSlice(const RawEvent& e, Category category)
{
    const TrackId track = trackFor(e, Lane::Main);
    std::uint32_t correlation = 0;
    std::uint32_t externalId = 0;
    std::int32_t device = -1;
    const ArgsRef args = encodeArgs(e, correlation, externalId, true, &device);
    const StringId name = internText(e.name);
    if (isGpuCategory(category) || e.cat == "gpu_user_annotation") {
        auto& proc = m_processes[m_lastKey.pid];
        proc.gpu = true;
        if (proc.device < 0 && device >= 0) {
            proc.device = device;
        }
    }
    if (e.ph == 'X') {
        std::int64_t dur = e.hasDur ? e.dur : 0;
        if (dur < 0) {
            ++m_negativeDur;
            dur = 0;
        }
        // Both are in the time domain, so the sum cannot overflow; it may leave the domain.
        if (!validTime(e.ts + dur)) {
            ++m_outOfRange;
            return;
        }
        m_builder.addSlice(track, e.ts, e.ts + dur, name, category, correlation, externalId, args);
        return;
    }
    if (e.ph == 'B') {
        m_openB[track].push_back({ e.ts, name, category, args, correlation, externalId });
        return;
    }
    // 'E': closes the innermost open 'B' of the thread; its args are merged into the B's.
    auto& open = m_openB[track];
    if (open.empty()) {
        ++m_unmatchedE;
        return;
    }
    OpenSlice b = open.back();
    open.pop_back();
    if (args != 0) {
        std::vector<Arg> merged;
        m_builder.args().decode(b.args, m_builder.strings(), merged);
        std::vector<Arg> extra;
        m_builder.args().decode(args, m_builder.strings(), extra);
        m_builder.args().begin();
        for (const auto* list : { &merged, &extra }) {
            for (const auto& a : *list) {
                m_builder.addArg(a);
            }
        }
        b.args = m_builder.args().commit();
    }
    m_builder.addSlice(track, b.start, e.ts, b.name, b.category,
        b.correlation ? b.correlation : correlation, b.externalId ? b.externalId : externalId,
        b.args);
}

void ChromeEventHandler::handleMetadata(const RawEvent& e)
{
    const std::int64_t pid = idKey(e.pid);
    auto argText = [&](std::string_view key) -> std::string_view {
        for (const auto& a : e.args) {
            if (a.key == key && a.type == ArgType::String) {
                return a.text;
            }
        }
        return {};
    };
    auto argInt = [&](std::string_view key, std::int64_t& out) {
        for (const auto& a : e.args) {
            if (a.key == key && a.type == ArgType::Int) {
                out = a.intValue;
                return true;
            }
        }
        return false;
    };
    if (e.name == "process_name") {
        m_processes[pid].name = redactUserPaths(argText("name"));
    } else if (e.name == "process_labels") {
        m_processes[pid].label = redactUserPaths(argText("labels"));
    } else if (e.name == "process_sort_index") {
        auto& p = m_processes[pid];
        p.hasSort = argInt("sort_index", p.sortIndex);
    } else if (e.name == "thread_name") {
        m_threads[{ pid, idKey(e.tid) }].name = redactUserPaths(trim(argText("name")));
    } else if (e.name == "thread_sort_index") {
        auto& t = m_threads[{ pid, idKey(e.tid) }];
        t.hasSort = argInt("sort_index", t.sortIndex);
    }
}

void ChromeEventHandler::handleCounter(const RawEvent& e)
{
    const std::int64_t pid = idKey(e.pid);
    for (const auto& a : e.args) {
        double value = 0.0;
        if (a.type == ArgType::Int) {
            value = double(a.intValue);
        } else if (a.type == ArgType::Double) {
            value = a.doubleValue;
        } else {
            continue;
        }
        std::string name = e.args.size() == 1 && (a.key == "value" || a.key == e.name)
            ? std::string(e.name)
            : fmt::format("{} {}", e.name, a.key);
        name = redactUserPaths(name);
        const std::string key = fmt::format("{}\x1f{}", pid, name);
        auto it = m_counterTracks.find(key);
        if (it == m_counterTracks.end()) {
            Track t;
            t.kind = TrackKind::Counter;
            t.pid = pid;
            t.tid = 0;
            t.source = m_source;
            t.name = name;
            const TrackId id = m_builder.addTrack(std::move(t));
            m_created.emplace_back(Key { pid, -1, Lane::Main }, id);
            it = m_counterTracks.emplace(key, id).first;
        }
        m_builder.addCounter(it->second, e.ts, value);
    }
}

void ChromeEventHandler::handle(const RawEvent& e)
{
    ++m_handled;
    if (e.ph == 'M') {
        handleMetadata(e);
        return;
    }
    if (!e.hasTs) {
        ++m_missingTs;
        return;
    }
    if (!validTime(e.ts) || (e.hasDur && !validTime(e.dur))) {
        ++m_outOfRange;
        return;
    }
    switch (e.ph) {
    case 'X':
    case 'B':
    case 'E':
        handleSlice(e, classifyChromeEvent(e.cat, e.name));
        return;
    case 'i':
    case 'I': {
        const TrackId track = trackFor(e, Lane::Main);
        std::uint32_t c = 0;
        std::uint32_t x = 0;
        const ArgsRef args = encodeArgs(e, c, x, false, nullptr);
        m_builder.addInstant(
            track, e.ts, internText(e.name), classifyChromeEvent(e.cat, e.name), args);
        return;
    }
    case 'C':
        handleCounter(e);
        return;
    case 's':
    case 't':
    case 'f': {
        if (!e.hasId) {
            ++m_skippedPhases[e.ph];
            return;
        }
        FlowEndpoint p;
        p.track = trackFor(e, Lane::Main);
        p.ts = e.ts;
        p.id = e.id;
        p.category = m_builder.intern(e.cat);
        p.source = m_source;
        p.phase = e.ph;
        p.bindNext = e.ph == 'f' && !e.bindEnclosing;
        p.kind = (e.cat == "ac2g" || e.cat == "async_cpu_to_gpu" || e.cat == "async")
            ? FlowKind::Launch
            : (e.cat == "fwdbwd" ? FlowKind::FwdBwd : FlowKind::Other);
        m_builder.addFlowEndpoint(p);
        return;
    }
    case 'b':
    case 'e':
    case 'n': {
        if (!e.hasId) {
            ++m_skippedPhases[e.ph];
            return;
        }
        RawEvent onProcess = e;
        onProcess.tid = RawId { true, false, -1, {} };
        const TrackId track = trackFor(onProcess, Lane::Async);
        const StringId cat = m_builder.intern(e.cat);
        const Category category = classifyChromeEvent(e.cat, e.name);
        std::uint32_t c = 0;
        std::uint32_t x = 0;
        const ArgsRef args = encodeArgs(e, c, x, false, nullptr);
        if (e.ph == 'n') {
            m_builder.addInstant(track, e.ts, internText(e.name), category, args);
        } else if (e.ph == 'b') {
            m_openAsync[{ cat, e.id }]
                = { track, OpenSlice { e.ts, internText(e.name), category, args, 0, 0 } };
        } else {
            const auto it = m_openAsync.find({ cat, e.id });
            if (it == m_openAsync.end()) {
                ++m_unmatchedE;
                return;
            }
            const auto& [t, b] = it->second;
            m_builder.addSlice(t, b.start, e.ts, b.name, b.category, 0, 0, b.args);
            m_openAsync.erase(it);
        }
        return;
    }
    default:
        ++m_skippedPhases[e.ph == 0 ? '?' : e.ph];
    }
}

void ChromeEventHandler::finish(std::int32_t rank)
{
    for (const auto& [key, id] : m_created) {
        auto& t = m_builder.track(id);
        t.rank = rank;
        const auto pit = m_processes.find(key.pid);
        const Process empty;
        const Process& proc = pit != m_processes.end() ? pit->second : empty;
        const auto thit = m_threads.find({ key.pid, key.tid });
        const Thread* thread = thit != m_threads.end() ? &thit->second : nullptr;
        std::int32_t labelledDevice = -1;
        if (std::int64_t n = 0; proc.label.rfind("GPU ", 0) == 0
            && parseInteger(std::string_view(proc.label).substr(4), n)) {
            labelledDevice = std::int32_t(n);
        }
        if (proc.gpu && t.kind != TrackKind::Counter) {
            t.kind = TrackKind::Stream;
            // The "device" arg of GPU events, else a "GPU n" label, else Kineto's pid = device.
            t.device = proc.device >= 0 ? proc.device
                : labelledDevice >= 0
                ? labelledDevice
                : (key.pid >= 0 && key.pid < 4096 ? std::int32_t(key.pid) : -1);
        } else if (t.kind == TrackKind::Counter && proc.gpu) {
            t.device = proc.device >= 0 ? proc.device : labelledDevice;
        }
        std::string processName
            = !proc.label.empty() && proc.label != "CPU" ? proc.label : proc.name;
        if (processName.empty()) {
            processName = !proc.text.empty() ? proc.text : fmt::format("process {}", key.pid);
        }
        t.processName = std::move(processName);
        t.sortIndex = thread != nullptr && thread->hasSort ? thread->sortIndex : key.tid;
        if (t.kind == TrackKind::Counter) {
            continue;
        }
        if (t.lane == Lane::Async) {
            t.name = "async";
        } else if (thread != nullptr && !thread->name.empty()) {
            t.name = thread->name;
        } else if (t.kind == TrackKind::Stream) {
            t.name = key.tid < 0 ? std::string("device-wide") : fmt::format("stream {}", key.tid);
        } else {
            t.name = fmt::format("thread {}", key.tid);
        }
        // "stream 7" as a string tid (Kineto 2021) still names stream 7.
        if (t.kind == TrackKind::Stream && key.tid < kStringKeyBase / 2) {
            std::int64_t stream = 0;
            if (t.name.rfind("stream ", 0) == 0
                && parseInteger(std::string_view(t.name).substr(7), stream)) {
                t.tid = stream;
            }
        }
    }
    std::size_t unclosed = 0;
    for (const auto& [track, open] : m_openB) {
        unclosed += open.size();
    }
    if (unclosed > 0) {
        m_builder.warn(
            fmt::format("{} 'B' events have no matching 'E' and were skipped", unclosed));
    }
    if (!m_openAsync.empty()) {
        m_builder.warn(fmt::format(
            "{} async 'b' events have no matching 'e' and were skipped", m_openAsync.size()));
    }
    if (m_unmatchedE > 0) {
        m_builder.warn(fmt::format(
            "{} end events ('E'/'e') have no matching begin and were skipped", m_unmatchedE));
    }
    if (m_outOfRange > 0) {
        m_builder.warn(fmt::format(
            "{} events with times beyond ±146 years of the Unix epoch were skipped", m_outOfRange));
    }
    if (m_missingTs > 0) {
        m_builder.warn(fmt::format("{} events without a timestamp were skipped", m_missingTs));
    }
    if (m_negativeDur > 0) {
        m_builder.warn(fmt::format(
            "{} 'X' events with a negative duration were kept with duration 0", m_negativeDur));
    }
    if (!m_skippedPhases.empty()) {
        std::string list;
        std::uint64_t total = 0;
        for (const auto& [ph, n] : m_skippedPhases) {
            list += fmt::format("{}'{}' ×{}", list.empty() ? "" : ", ", ph, n);
            total += n;
        }
        m_builder.warn(
            fmt::format("{} events of unsupported phases were skipped ({})", total, list));
    }
}

} // namespace day0::profile::detail
