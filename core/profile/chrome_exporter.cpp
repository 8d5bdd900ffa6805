#include "profile/chrome_exporter.h"

#include "base/file_util.h"
#include "base/temp_output.h"
#include "base/utf8.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace day0::profile {

namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

/// Appends ns as µs with exactly three decimals, without floating point.
void appendMicros(std::string& out, std::int64_t ns)
{
    if (ns < 0) {
        out.push_back('-');
        ns = -ns;
    }
    fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

std::string_view chromeCategory(Category c, bool onGpu)
{
    switch (c) {
    case Category::Kernel:
        return "kernel";
    case Category::Communication:
        return onGpu ? "kernel" : "communication";
    case Category::Memcpy:
        return "gpu_memcpy";
    case Category::Memset:
        return "gpu_memset";
    case Category::Sync:
        return "cuda_sync";
    case Category::CpuOp:
        return "cpu_op";
    case Category::Runtime:
        return "cuda_runtime";
    case Category::Annotation:
        return onGpu ? "gpu_user_annotation" : "user_annotation";
    case Category::Other:
        break;
    }
    return "other";
}

void appendArgs(std::string& out, const std::vector<Arg>& args)
{
    out += "\"args\":{";
    bool first = true;
    for (const auto& a : args) {
        if (!first) {
            out.push_back(',');
        }
        first = false;
        appendJsonString(out, a.key);
        out.push_back(':');
        switch (a.type) {
        case ArgType::Int:
            fmt::format_to(std::back_inserter(out), "{}", a.intValue);
            break;
        case ArgType::Double:
            if (std::isfinite(a.doubleValue)) {
                fmt::format_to(std::back_inserter(out), "{}", a.doubleValue);
            } else {
                out += "null";
            }
            break;
        case ArgType::String:
            appendJsonString(out, a.text);
            break;
        case ArgType::Json:
            out.append(a.text);
            break;
        case ArgType::True:
            out += "true";
            break;
        case ArgType::False:
            out += "false";
            break;
        case ArgType::Null:
            out += "null";
            break;
        }
    }
    out.push_back('}');
}

/// Export ids of every track: (pid, tid) unique across the file.
struct Layout {
    std::vector<std::int64_t> pid;
    std::vector<std::int64_t> tid;
    std::map<std::int64_t, std::pair<std::string, std::string>> processes; // pid → name, label
    std::map<std::int64_t, std::int64_t> processSort;
};

Layout layoutOf(const Trace& trace)
{
    Layout l;
    const auto& tracks = trace.tracks();
    const bool multiRank = trace.ranks().size() > 1;
    std::map<std::tuple<std::int32_t, std::uint16_t, std::int32_t, std::int64_t>, std::int64_t>
        processIds;
    std::set<std::pair<std::int64_t, std::int64_t>> used;
    std::int64_t nextSynthetic = 1;
    for (std::size_t i = 0; i < tracks.size(); ++i) {
        const auto& t = tracks[i];
        const bool gpu
            = t.kind == TrackKind::Stream || (t.kind == TrackKind::Counter && t.device >= 0);
        const auto key = std::make_tuple(t.rank, t.source, gpu ? t.device : -1, gpu ? 0 : t.pid);
        auto it = processIds.find(key);
        if (it == processIds.end()) {
            std::int64_t pid = 0;
            // Kineto's convention for one rank: a GPU's pid is its index, host pids stay.
            const bool keep
                = !multiRank && (gpu ? t.device >= 0 : (t.pid >= 0 && t.pid < (1ll << 31)));
            pid = keep ? (gpu ? t.device : t.pid) : 0x10000000 + nextSynthetic++;
            it = processIds.emplace(key, pid).first;
            std::string label = gpu ? fmt::format("GPU {}", t.device) : std::string("CPU");
            std::string name
                = multiRank ? fmt::format("rank {}: {}", t.rank, t.processName) : t.processName;
            l.processes[pid] = { std::move(name), std::move(label) };
            l.processSort[pid] = std::int64_t(t.rank) * (1ll << 32)
                + (gpu ? (1ll << 24) + t.device : 0) + std::int64_t(i);
        }
        const std::int64_t pid = it->second;
        std::int64_t tid = t.kind == TrackKind::Counter ? 0 : t.tid;
        if (t.lane != Lane::Main || tid < -1 || tid > (1ll << 31)
            || used.count({ pid, tid }) != 0) {
            tid = 0x40000000 + std::int64_t(i);
        }
        used.insert({ pid, tid });
        l.pid.push_back(pid);
        l.tid.push_back(tid);
    }
    return l;
}

} // namespace

void appendJsonString(std::string& out, std::string_view text)
{
    out.push_back('"');
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(char(c));
            ++i;
        } else if (c < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", unsigned(c));
            ++i;
        } else if (c < 0x80) {
            out.push_back(char(c));
            ++i;
        } else {
            const std::size_t len = utf8SequenceLength(text.substr(i));
            if (len == 0) {
                out += "\xEF\xBF\xBD";
                ++i;
            } else {
                out.append(text.data() + i, len);
                i += len;
            }
        }
    }
    out.push_back('"');
}

Result<void> writeChromeJson(const Trace& trace,
    const std::function<Result<void>(std::string_view)>& write, Progress& progress,
    std::stop_token stop)
{
    const Layout layout = layoutOf(trace);
    const auto& tracks = trace.tracks();
    const auto [t0, t1] = trace.timeRange();
    const std::int64_t base = t0 >= 0 ? (t0 / 1000000000) * 1000000000 : t0;
    progress.setTotal(std::int64_t(
        trace.sliceCount() + trace.flowCount() + trace.instantCount() + trace.counterCount()));
    progress.setStage("writing Chrome trace JSON");

    std::string out;
    out.reserve(kFlushBytes + 65536);
    auto flushIfFull = [&]() -> Result<void> {
        if (out.size() >= kFlushBytes) {
            DAY0_TRY(write(out));
            out.clear();
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
        }
        return success();
    };
    fmt::format_to(std::back_inserter(out),
        "{{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":{},", base);
    out += "\"otherData\":{\"producer\":\"day0\"}";
    if (trace.ranks().size() == 1) {
        const auto& s = trace.sources().front();
        fmt::format_to(std::back_inserter(out), ",\"distributedInfo\":{{\"rank\":{}", s.rank);
        if (s.worldSize > 0) {
            fmt::format_to(std::back_inserter(out), ",\"world_size\":{}", s.worldSize);
        }
        if (!s.backend.empty()) {
            out += ",\"backend\":";
            appendJsonString(out, s.backend);
        }
        out += "},\"deviceProperties\":[";
        for (std::size_t i = 0; i < trace.devices().size(); ++i) {
            fmt::format_to(std::back_inserter(out), "{}{{\"id\":{},\"name\":", i ? "," : "",
                trace.devices()[i].device);
            appendJsonString(out, trace.devices()[i].name);
            out += "}";
        }
        out += "]";
    }
    out += ",\"traceEvents\":[\n";
    bool first = true;
    auto begin = [&]() {
        if (!first) {
            out += ",\n";
        }
        first = false;
    };
    for (const auto& [pid, names] : layout.processes) {
        begin();
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":",
            pid);
        appendJsonString(out, names.first);
        out += "}},\n";
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":{},\"tid\":0,\"args\":{{"
            "\"labels\":",
            pid);
        appendJsonString(out, names.second);
        out += "}},\n";
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_"
            "index\":{}}}}}",
            pid, layout.processSort.at(pid));
    }
    for (std::size_t i = 0; i < tracks.size(); ++i) {
        if (tracks[i].kind == TrackKind::Counter) {
            continue;
        }
        begin();
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            layout.pid[i], layout.tid[i]);
        appendJsonString(out, tracks[i].name);
        out += "}},\n";
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_"
            "index\":{}}}}}",
            layout.pid[i], layout.tid[i], std::int64_t(i));
    }
    std::int64_t done = 0;
    for (std::size_t t = 0; t < tracks.size(); ++t) {
        const bool onGpu = tracks[t].kind == TrackKind::Stream;
        const auto [a, b] = trace.trackSlices(TrackId(t));
        for (SliceIndex i = a; i < b; ++i) {
            begin();
            fmt::format_to(std::back_inserter(out), "{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":",
                chromeCategory(trace.sliceCategory(i), onGpu));
            appendJsonString(out, trace.sliceNameText(i));
            fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", layout.pid[t],
                layout.tid[t]);
            appendMicros(out, trace.sliceStart(i) - base);
            out += ",\"dur\":";
            appendMicros(out, trace.sliceDuration(i));
            out.push_back(',');
            appendArgs(out, trace.sliceArgs(i));
            out.push_back('}');
            DAY0_TRY(flushIfFull());
        }
        done += b - a;
        progress.setDone(done);
    }
    for (std::size_t f = 0; f < trace.flowCount(); ++f) {
        const SliceIndex from = trace.flowFrom(f);
        const SliceIndex to = trace.flowTo(f);
        const TrackId tf = trace.sliceTrack(from);
        const TrackId tt = trace.sliceTrack(to);
        const char* cat = trace.flowKind(f) == FlowKind::Launch ? "ac2g"
            : trace.flowKind(f) == FlowKind::FwdBwd             ? "fwdbwd"
                                                                : "flow";
        begin();
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"s\",\"cat\":\"{}\",\"name\":\"{}\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
            cat, cat, f + 1, layout.pid[tf], layout.tid[tf]);
        appendMicros(out, trace.sliceStart(from) - base);
        fmt::format_to(std::back_inserter(out),
            "}},\n{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"{}\",\"name\":\"{}\",\"id\":{},\"pid\":{},"
            "\"tid\":{},\"ts\":",
            cat, cat, f + 1, layout.pid[tt], layout.tid[tt]);
        appendMicros(out, trace.sliceStart(to) - base);
        out.push_back('}');
        DAY0_TRY(flushIfFull());
    }
    for (std::size_t i = 0; i < trace.instantCount(); ++i) {
        const TrackId t = trace.instantTrack(i);
        begin();
        fmt::format_to(std::back_inserter(out),
            "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"{}\",\"name\":",
            chromeCategory(trace.instantCategory(i), tracks[t].kind == TrackKind::Stream));
        appendJsonString(out, trace.text(trace.instantName(i)));
        fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", layout.pid[t],
            layout.tid[t]);
        appendMicros(out, trace.instantTime(i) - base);
        out.push_back(',');
        appendArgs(out, trace.instantArgs(i));
        out.push_back('}');
        DAY0_TRY(flushIfFull());
    }
    for (std::size_t i = 0; i < trace.counterCount(); ++i) {
        const TrackId t = trace.counterTrack(i);
        begin();
        out += "{\"ph\":\"C\",\"name\":";
        appendJsonString(out, tracks[t].name);
        fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"ts\":", layout.pid[t]);
        appendMicros(out, trace.counterTime(i) - base);
        const double v = trace.counterValue(i);
        if (std::isfinite(v)) {
            fmt::format_to(std::back_inserter(out), ",\"args\":{{\"value\":{}}}}}", v);
        } else {
            out += ",\"args\":{\"value\":null}}";
        }
        DAY0_TRY(flushIfFull());
    }
    out += "\n]}\n";
    DAY0_TRY(write(out));
    progress.setDone(progress.total());
    return success();
}

Result<void> exportChromeJson(
    const Trace& trace, const std::filesystem::path& path, Progress& progress, std::stop_token stop)
{
    const std::string name = displayPath(path);
    auto temp = TempOutput::create(path, TempOutput::Kind::File);
    if (!temp) {
        return temp.error();
    }
    const std::filesystem::path& tmp = temp->path();
    const bool gz = path.extension() == ".gz";
    Result<void> result = success();
    if (gz) {
        gzFile f = gzopen(tmp.c_str(), "wb6");
        if (f == nullptr) {
            return Error::badInput(fmt::format("{}: cannot write: {}", name, std::strerror(errno)));
        }
        result = writeChromeJson(
            trace,
            [&](std::string_view text) -> Result<void> {
                if (gzwrite(f, text.data(), unsigned(text.size())) != int(text.size())) {
                    return Error::badInput(fmt::format("{}: write failed", name));
                }
                return success();
            },
            progress, stop);
        if (gzclose(f) != Z_OK && result.ok()) {
            result = Error::badInput(fmt::format("{}: write failed", name));
        }
    } else {
        std::FILE* f = std::fopen(tmp.c_str(), "wb");
        if (f == nullptr) {
            return Error::badInput(fmt::format("{}: cannot write: {}", name, std::strerror(errno)));
        }
        result = writeChromeJson(
            trace,
            [&](std::string_view text) -> Result<void> {
                if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
                    return Error::badInput(
                        fmt::format("{}: write failed: {}", name, std::strerror(errno)));
                }
                return success();
            },
            progress, stop);
        if (std::fclose(f) != 0 && result.ok()) {
            result = Error::badInput(fmt::format("{}: write failed", name));
        }
    }
    if (!result.ok()) {
        return result;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        return Error::badInput(fmt::format("{}: cannot rename into place: {}", name, ec.message()));
    }
    temp->release();
    return success();
}

} // namespace day0::profile
