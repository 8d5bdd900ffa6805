// day0 trace import|stats|diff|export: profiling traces (Kineto/Chrome JSON, Nsight Systems
// SQLite).
#include "actions/records.h"
#include "actions/trace_import.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "interrupt.h"
#include "profile/chrome_exporter.h"
#include "profile/collectives.h"
#include "profile/importer.h"
#include "profile/kernel_stats.h"
#include "profile/temporal_breakdown.h"
#include "profile/time_range.h"
#include "profile/trace_diff.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>

namespace day0::cli {

namespace {

using namespace day0::profile;
using nlohmann::json;

struct TraceArgs {
    std::vector<std::string> files;
    int rank = -1;
    int top = 15;
    bool applyAlignment = false;
    std::string chromeOut;
    double thresholdPercent = 5.0;
    bool cpu = false;
    std::string range; ///< stats: "START:END" from the trace's first event
};

std::string ns(std::int64_t v) { return formatDuration(Seconds(double(v) * 1e-9)); }
std::string ns(double v) { return formatDuration(Seconds(v * 1e-9)); }

std::string shorten(std::string_view text, std::size_t width)
{
    if (text.size() <= width) {
        return std::string(text);
    }
    // Keep both ends: kernel names differ in their template arguments as often as in their head.
    const std::size_t head = (width - 3) * 2 / 3;
    return std::string(text.substr(0, head)) + "..."
        + std::string(text.substr(text.size() - (width - 3 - head)));
}

/// A kernel name for tables: without "void ", namespace qualifiers and the parameter list,
/// elided in the middle when still too long (JSON output keeps full names).
std::string kernelLabel(std::string_view name, std::size_t width)
{
    if (name.substr(0, 5) == "void ") {
        name.remove_prefix(5);
    }
    // A parameter list directly follows the function name; "Memcpy DtoD (Device -> Device)" keeps
    // its parenthesis.
    if (!name.empty() && name.back() == ')') {
        int depth = 0;
        for (std::size_t i = name.size(); i-- > 0;) {
            depth += name[i] == ')' ? 1 : (name[i] == '(' ? -1 : 0);
            if (depth == 0) {
                if (i > 0 && name[i - 1] != ' ') {
                    name = name.substr(0, i);
                }
                break;
            }
        }
    }
    std::string out;
    for (std::size_t i = 0; i < name.size();) {
        if (name.compare(i, 23, "(anonymous namespace)::") == 0) {
            i += 23;
            continue;
        }
        std::size_t j = i;
        while (j < name.size()
            && (std::isalnum(static_cast<unsigned char>(name[j])) || name[j] == '_')) {
            ++j;
        }
        if (j > i && name.compare(j, 2, "::") == 0) {
            i = j + 2; // a qualifier: "at::native::" and the like
            continue;
        }
        if (j == i) {
            out.push_back(name[i++]);
        } else {
            out.append(name.substr(i, j - i));
            i = j;
        }
    }
    return shorten(out, width);
}

Result<Trace> load(
    const std::vector<std::string>& files, const TraceArgs& args, const GlobalOptions& global)
{
    ImportOptions options;
    if (args.rank >= 0) {
        options.rank = args.rank;
    }
    std::vector<std::filesystem::path> paths(files.begin(), files.end());
    Progress progress;
    ProgressBar bar(progress, "importing", !global.quiet);
    return importTraces(paths, options, progress, interruptToken());
}

void printWarnings(const Trace& trace)
{
    for (const auto& w : trace.warnings()) {
        printWarning(w);
    }
}

json countsJson(const Trace& trace)
{
    const auto c = trace.counts();
    json byCategory = json::object();
    for (int i = 0; i < kCategoryCount; ++i) {
        byCategory[std::string(categoryName(Category(i)))] = c.byCategory[i];
    }
    return { { "slices", c.slices }, { "flows", c.flows }, { "instants", c.instants },
        { "counters", c.counters }, { "tracks", c.tracks }, { "ranks", trace.ranks() },
        { "by_category", byCategory },
        { "gpu_kernels",
            c.byCategory[std::size_t(Category::Kernel)]
                + c.byCategory[std::size_t(Category::Communication)] } };
}

int runImport(const TraceArgs& args, const GlobalOptions& global)
{
    ImportOptions options;
    if (args.rank >= 0) {
        options.rank = args.rank;
    }
    Result<actions::TraceImportOutcome> imported = Error::cancelled();
    {
        Progress progress;
        ProgressBar bar(progress, "importing", !global.quiet);
        imported = actions::importTraceFiles(
            { args.files.begin(), args.files.end() }, options, progress, interruptToken());
    }
    if (!imported) {
        return reportError(imported.error());
    }
    const auto& trace = imported->trace;
    const double seconds = imported->seconds;
    printWarnings(*trace);
    const auto runId = recordResult(imported->record);
    const auto [t0, t1] = trace->timeRange();
    const auto memory = trace->memory();
    if (global.json) {
        json out = countsJson(*trace);
        out["files"] = json::array();
        for (const auto& s : trace->sources()) {
            out["files"].push_back({ { "file", s.file }, { "format", s.format }, { "rank", s.rank },
                { "world_size", s.worldSize }, { "backend", s.backend } });
        }
        out["devices"] = json::array();
        for (const auto& d : trace->devices()) {
            out["devices"].push_back(
                { { "rank", d.rank }, { "device", d.device }, { "name", d.name } });
        }
        out["start_ns"] = t0;
        out["span_ns"] = t1 - t0;
        out["memory_bytes"] = memory.total();
        out["import_seconds"] = seconds;
        out["run_id"] = runId ? json(runId->value()) : json(nullptr);
        out["warnings"] = trace->warnings();
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    for (const auto& s : trace->sources()) {
        fmt::print("{}: {} trace, rank {}{}{}\n", s.file, s.format, s.rank,
            s.worldSize > 0 ? fmt::format(" of {}", s.worldSize) : std::string(),
            s.backend.empty() ? std::string() : fmt::format(" ({})", s.backend));
    }
    const auto c = trace->counts();
    fmt::print("{} slices, {} flows, {} instants, {} counter samples on {} tracks; span {}\n",
        c.slices, c.flows, c.instants, c.counters, c.tracks, ns(t1 - t0));
    std::string cats;
    for (int i = 0; i < kCategoryCount; ++i) {
        if (c.byCategory[i] > 0) {
            cats += fmt::format(
                "{}{} {}", cats.empty() ? "" : ", ", categoryName(Category(i)), c.byCategory[i]);
        }
    }
    fmt::print("by category: {}\n\n", cats.empty() ? "none" : cats);
    Table table({ "rank", "device", "track", "process", "slices", "depth" },
        { Table::Align::Right, Table::Align::Left, Table::Align::Left, Table::Align::Left,
            Table::Align::Right, Table::Align::Right });
    const auto& tracks = trace->tracks();
    std::vector<std::size_t> order(tracks.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::tie(tracks[a].rank, tracks[a].device, tracks[a].kind, tracks[a].sortIndex)
            < std::tie(tracks[b].rank, tracks[b].device, tracks[b].kind, tracks[b].sortIndex);
    });
    for (const std::size_t i : order) {
        const auto& t = tracks[i];
        const auto [a, b] = trace->trackSlices(TrackId(i));
        table.addRow({ std::to_string(t.rank),
            t.device >= 0 ? fmt::format("GPU {}", t.device) : "host", shorten(t.name, 40),
            shorten(t.processName, 30), std::to_string(b - a), std::to_string(t.maxDepth) });
    }
    fmt::print("{}\n", table.render());
    for (const auto& d : trace->devices()) {
        fmt::print("rank {} GPU {}: {}\n", d.rank, d.device, d.name);
    }
    fmt::print("in memory: {} ({:.1f} bytes per slice); imported in {:.2f} s\n",
        formatBytes(Bytes(std::int64_t(memory.total()))),
        c.slices ? double(memory.total()) / double(c.slices) : 0.0, seconds);
    return 0;
}

void alignIfAsked(Trace& trace, const TraceArgs& args, std::vector<ClockOffset>& offsets)
{
    offsets = suggestClockAlignment(trace);
    if (!args.applyAlignment) {
        return;
    }
    for (const auto& o : offsets) {
        if (o.usable) {
            trace.applyClockOffset(o.rank, o.offsetNs);
        } else {
            printWarning(fmt::format(
                "rank {}: not enough matching collectives to align its clock; left as recorded",
                o.rank));
        }
    }
}

int runStats(const TraceArgs& args, const GlobalOptions& global)
{
    const auto started = std::chrono::steady_clock::now();
    auto loaded = load(args.files, args, global);
    if (!loaded.ok()) {
        return reportError(loaded.error());
    }
    Trace& trace = *loaded;
    printWarnings(trace);
    std::vector<ClockOffset> offsets;
    alignIfAsked(trace, args, offsets);
    // A range counts from the trace's first event, as the timeline's axis does; the statistics
    // are the ones the timeline computes for a selection.
    TimeRange range;
    if (!args.range.empty()) {
        auto parsed = parseTimeRange(args.range);
        if (!parsed) {
            return reportError(parsed.error().withContext("--range"));
        }
        range = parsed->shifted(trace.timeRange().first);
    }
    KernelStatsOptions kernelOptions;
    kernelOptions.rangeStart = range.start;
    kernelOptions.rangeEnd = range.end;
    const auto breakdown = temporalBreakdown(trace, range.start, range.end);
    const auto kernels = kernelStatistics(trace, kernelOptions);
    // CPU work (operators, runtime calls, annotated phases): asked for, or all a CPU-only trace
    // (a day0 run) holds.
    const bool showCpu = args.cpu || kernels.empty();
    std::vector<KernelStat> cpuOps;
    if (showCpu) {
        KernelStatsOptions cpuOptions = kernelOptions;
        cpuOptions.categories = { Category::CpuOp, Category::Runtime, Category::Annotation };
        cpuOps = kernelStatistics(trace, cpuOptions);
    }
    const std::size_t cpuTop
        = args.top < 0 ? cpuOps.size() : std::min(cpuOps.size(), std::size_t(args.top));
    const auto collectives = collectiveStatistics(trace);
    const std::size_t top
        = args.top < 0 ? kernels.size() : std::min(kernels.size(), std::size_t(args.top));
    auto record = actions::traceRunRecord(trace, args.files, "stats",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    for (const auto& r : breakdown) {
        record.addMetric(fmt::format("rank{}.compute_s", r.rank), double(r.compute) * 1e-9, "s");
        record.addMetric(
            fmt::format("rank{}.communication_s", r.rank), double(r.communication) * 1e-9, "s");
        record.addMetric(fmt::format("rank{}.idle_s", r.rank), double(r.idle) * 1e-9, "s");
    }
    const auto runId = recordResult(record);
    if (global.json) {
        json out = countsJson(trace);
        json ranks = json::array();
        for (const auto& r : breakdown) {
            ranks.push_back(
                { { "rank", r.rank }, { "span_ns", r.span }, { "compute_ns", r.compute },
                    { "communication_ns", r.communication }, { "memory_ns", r.memory },
                    { "idle_ns", r.idle }, { "communication_total_ns", r.communicationTotal },
                    { "overlap_ns", r.overlap }, { "overlap_percent", r.overlapPercent() } });
        }
        json ks = json::array();
        for (std::size_t i = 0; i < top; ++i) {
            const auto& k = kernels[i];
            ks.push_back({ { "name", k.name }, { "category", categoryName(k.category) },
                { "count", k.count }, { "total_ns", k.total }, { "mean_ns", k.mean },
                { "p50_ns", k.p50 }, { "p95_ns", k.p95 }, { "min_ns", k.min },
                { "max_ns", k.max } });
        }
        json cpu = json::array();
        for (std::size_t i = 0; i < cpuTop; ++i) {
            const auto& k = cpuOps[i];
            cpu.push_back({ { "name", k.name }, { "category", categoryName(k.category) },
                { "count", k.count }, { "total_ns", k.total }, { "mean_ns", k.mean },
                { "p50_ns", k.p50 }, { "p95_ns", k.p95 }, { "min_ns", k.min },
                { "max_ns", k.max } });
        }
        json cs = json::array();
        for (const auto& c : collectives) {
            cs.push_back({ { "rank", c.rank }, { "collective", collectiveName(c.collective) },
                { "naming",
                    c.naming == NcclNaming::Legacy          ? "ncclKernel"
                        : c.naming == NcclNaming::Device    ? "ncclDevKernel"
                        : c.naming == NcclNaming::Symmetric ? "ncclSymkDevKernel"
                                                            : "other" },
                { "algorithm", c.algorithm }, { "count", c.count }, { "total_ns", c.total },
                { "max_ns", c.max } });
        }
        json al = json::array();
        for (const auto& o : offsets) {
            al.push_back({ { "rank", o.rank }, { "reference", o.reference },
                { "offset_ns", o.offsetNs }, { "mad_ns", o.madNs }, { "matched", o.matched },
                { "lag", o.lag }, { "usable", o.usable } });
        }
        if (range.bounded()) {
            const auto origin = trace.timeRange().first;
            out["range"] = { { "trace_start_ns", origin },
                { "start_ns", range.start == INT64_MIN ? json(nullptr) : json(range.start) },
                { "end_ns", range.end == INT64_MAX ? json(nullptr) : json(range.end) } };
        }
        out["breakdown"] = ranks;
        out["kernels"] = ks;
        out["kernel_names"] = kernels.size();
        if (showCpu) {
            out["cpu_ops"] = cpu;
            out["cpu_op_names"] = cpuOps.size();
        }
        out["collectives"] = cs;
        out["alignment"] = al;
        out["alignment_applied"] = args.applyAlignment;
        out["run_id"] = runId ? json(runId->value()) : json(nullptr);
        out["warnings"] = trace.warnings();
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    if (range.bounded()) {
        const auto [first, last] = trace.timeRange();
        const auto from = std::max(range.start, first);
        const auto to = std::min(range.end, last);
        fmt::print("Range {} to {} after the trace's first event ({} of its {}): kernels that "
                   "start in it; GPU time clipped to it\n\n",
            ns(from - first), ns(to - first), ns(std::max<std::int64_t>(0, to - from)),
            ns(last - first));
    }
    Table b({ "rank", "span", "compute", "communication", "memcpy/set", "idle", "comm overlap" },
        std::vector<Table::Align>(7, Table::Align::Right));
    auto pct = [](std::int64_t part, std::int64_t whole) {
        return whole > 0 ? fmt::format("{:.1f}%", 100.0 * double(part) / double(whole))
                         : std::string("-");
    };
    for (const auto& r : breakdown) {
        b.addRow({ std::to_string(r.rank), ns(r.span),
            fmt::format("{} {}", ns(r.compute), pct(r.compute, r.span)),
            fmt::format("{} {}", ns(r.communication), pct(r.communication, r.span)),
            fmt::format("{} {}", ns(r.memory), pct(r.memory, r.span)),
            fmt::format("{} {}", ns(r.idle), pct(r.idle, r.span)),
            r.communicationTotal > 0 ? fmt::format("{:.1f}%", r.overlapPercent()) : "-" });
    }
    fmt::print("GPU time per rank (union over streams; communication and memcpy count only time "
               "not spent computing)\n{}\n",
        breakdown.empty() ? "no GPU work in this trace\n" : b.render());
    Table k({ "kernel", "category", "count", "total", "mean", "p50", "p95", "max" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    for (std::size_t i = 0; i < top; ++i) {
        const auto& s = kernels[i];
        k.addRow({ kernelLabel(s.name, 80), std::string(categoryName(s.category)),
            std::to_string(s.count), ns(s.total), ns(s.mean), ns(s.p50), ns(s.p95), ns(s.max) });
    }
    fmt::print("Top {} of {} GPU kernels, copies and sets by total time\n{}\n", top, kernels.size(),
        k.render());
    if (showCpu) {
        Table c({ "CPU op", "category", "count", "total", "mean", "p50", "p95", "max" },
            { Table::Align::Left, Table::Align::Left, Table::Align::Right, Table::Align::Right,
                Table::Align::Right, Table::Align::Right, Table::Align::Right,
                Table::Align::Right });
        for (std::size_t i = 0; i < cpuTop; ++i) {
            const auto& s = cpuOps[i];
            c.addRow({ kernelLabel(s.name, 80), std::string(categoryName(s.category)),
                std::to_string(s.count), ns(s.total), ns(s.mean), ns(s.p50), ns(s.p95),
                ns(s.max) });
        }
        fmt::print("Top {} of {} CPU ops, runtime calls and annotations by total time (inclusive: "
                   "a scope counts the scopes inside it)\n{}\n",
            cpuTop, cpuOps.size(), c.render());
    }
    if (!collectives.empty()) {
        Table c({ "rank", "collective", "kernel names", "algorithm", "count", "total", "max" },
            { Table::Align::Right, Table::Align::Left, Table::Align::Left, Table::Align::Left,
                Table::Align::Right, Table::Align::Right, Table::Align::Right });
        for (const auto& s : collectives) {
            c.addRow({ std::to_string(s.rank), std::string(collectiveName(s.collective)),
                s.naming == NcclNaming::Legacy          ? "ncclKernel_*"
                    : s.naming == NcclNaming::Device    ? "ncclDevKernel_*"
                    : s.naming == NcclNaming::Symmetric ? "ncclSymkDevKernel_*"
                                                        : "other",
                s.algorithm, std::to_string(s.count), ns(s.total), ns(s.max) });
        }
        fmt::print("Collectives\n{}\n", c.render());
    }
    if (!offsets.empty()) {
        Table a({ "rank", "reference", "suggested offset", "± (MAD)", "matched", "status" },
            { Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
                Table::Align::Right, Table::Align::Left });
        for (const auto& o : offsets) {
            a.addRow({ std::to_string(o.rank), std::to_string(o.reference), ns(o.offsetNs),
                ns(o.madNs), std::to_string(o.matched),
                !o.usable ? "too few collectives"
                          : (args.applyAlignment ? "applied" : "not applied") });
        }
        fmt::print("Clock alignment from collective end times{}\n{}",
            args.applyAlignment ? "" : " (pass --apply-alignment to use it)", a.render());
    }
    return 0;
}

int runDiff(const TraceArgs& args, const GlobalOptions& global)
{
    if (args.files.size() != 2) {
        return reportError(Error::badInput("trace diff: expected two trace files, A and B"));
    }
    auto a = load({ args.files[0] }, args, global);
    if (!a.ok()) {
        return reportError(a.error());
    }
    auto b = load({ args.files[1] }, args, global);
    if (!b.ok()) {
        return reportError(b.error());
    }
    printWarnings(*a);
    printWarnings(*b);
    DiffOptions options;
    options.thresholdPercent = args.thresholdPercent;
    options.includeCpu = args.cpu;
    const auto rows = diffTraces(*a, *b, options);
    std::size_t byStatus[5] = {};
    for (const auto& r : rows) {
        ++byStatus[std::size_t(r.status)];
    }
    const std::size_t top = args.top < 0 ? rows.size() : std::size_t(args.top);
    if (global.json) {
        json out;
        out["a"] = displayPath(args.files[0]);
        out["b"] = displayPath(args.files[1]);
        out["threshold_percent"] = args.thresholdPercent;
        json summary = json::object();
        json list = json::array();
        for (int s = 0; s < 5; ++s) {
            summary[std::string(diffStatusName(DiffStatus(s)))] = byStatus[s];
        }
        for (const auto& r : rows) {
            list.push_back({ { "name", r.name }, { "category", categoryName(r.category) },
                { "status", diffStatusName(r.status) }, { "count_a", r.countA },
                { "count_b", r.countB }, { "total_a_ns", r.totalA }, { "total_b_ns", r.totalB },
                { "mean_a_ns", r.meanA }, { "mean_b_ns", r.meanB },
                { "mean_change_percent", r.meanChangePercent } });
        }
        out["summary"] = summary;
        out["rows"] = list;
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    fmt::print("A: {}\nB: {}\n{} added, {} removed, {} slower, {} faster, {} unchanged (mean "
               "change threshold {}%)\n\n",
        displayPath(args.files[0]), displayPath(args.files[1]), byStatus[0], byStatus[1],
        byStatus[2], byStatus[3], byStatus[4], args.thresholdPercent);
    Table t({ "status", "name", "category", "count A→B", "mean A", "mean B", "change", "total Δ" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Left, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    std::size_t shown = 0;
    for (const auto& r : rows) {
        if (shown++ >= top) {
            break;
        }
        const bool both = r.countA > 0 && r.countB > 0;
        t.addRow({ std::string(diffStatusName(r.status)), kernelLabel(r.name, 80),
            std::string(categoryName(r.category)), fmt::format("{}→{}", r.countA, r.countB),
            r.countA ? ns(r.meanA) : "-", r.countB ? ns(r.meanB) : "-",
            both ? fmt::format("{:+.1f}%", r.meanChangePercent) : "-",
            (r.totalB >= r.totalA ? "+" : "-")
                + ns(std::int64_t(std::llabs(r.totalB - r.totalA))) });
    }
    fmt::print("{}", t.render());
    if (rows.size() > top) {
        fmt::print("({} more rows; --top -1 shows all)\n", rows.size() - top);
    }
    return 0;
}

int runExport(const TraceArgs& args, const GlobalOptions& global)
{
    if (args.chromeOut.empty()) {
        return reportError(Error::badInput("trace export: --chrome OUT is required"));
    }
    auto loaded = load(args.files, args, global);
    if (!loaded.ok()) {
        return reportError(loaded.error());
    }
    Trace& trace = *loaded;
    printWarnings(trace);
    std::vector<ClockOffset> offsets;
    alignIfAsked(trace, args, offsets);
    Progress progress;
    {
        ProgressBar bar(progress, "exporting", !global.quiet);
        auto r = exportChromeJson(trace, args.chromeOut, progress, interruptToken());
        if (!r.ok()) {
            return reportError(r.error());
        }
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(args.chromeOut, ec);
    if (global.json) {
        json out = countsJson(trace);
        out["output"] = displayPath(args.chromeOut);
        out["bytes"] = size;
        out["alignment_applied"] = args.applyAlignment;
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    fmt::print("wrote {} ({}): {} slices, {} flows, {} instants, {} counter samples\n",
        displayPath(args.chromeOut), formatBytes(Bytes(std::int64_t(size))), trace.sliceCount(),
        trace.flowCount(), trace.instantCount(), trace.counterCount());
    return 0;
}

std::function<int()> setupTrace(CLI::App& app, const GlobalOptions& global)
{
    auto args = std::make_shared<TraceArgs>();
    app.require_subcommand(1);
    // --json and --quiet are declared on "trace"; let the verbs below pass them up.
    app.fallthrough();
    auto files = [&](CLI::App* sub, const char* what) {
        sub->add_option("files", args->files, what)->required();
        sub->add_option("--rank", args->rank,
            "file the events under this rank (several files: ranks from it upwards)");
    };
    CLI::App* import = app.add_subcommand("import", "read trace files and print what they hold");
    files(import,
        "Kineto/Chrome trace JSON (.json, .json.gz) or Nsight Systems SQLite exports; one per "
        "rank");
    CLI::App* stats = app.add_subcommand(
        "stats", "kernel statistics, GPU time breakdown, overlap, collectives, clock alignment");
    files(stats, "trace files, one per rank");
    stats->add_option("--top", args->top, "kernels to list (-1: all)")->capture_default_str();
    stats->add_flag("--cpu", args->cpu,
        "also list CPU ops, runtime calls and annotations (always for a trace without GPU work)");
    stats->add_flag("--apply-alignment", args->applyAlignment,
        "shift ranks by the suggested clock offsets first");
    stats->add_option("--range", args->range,
        "START:END from the trace's first event (ns, or with a unit: 20us, 1.5ms, 2s; an end may "
        "be empty): kernel statistics of slices starting in it and GPU time clipped to it");
    CLI::App* diff = app.add_subcommand(
        "diff", "compare two traces kernel by kernel (added, removed, slower, faster)");
    files(diff, "trace A and trace B");
    diff->add_option("--threshold", args->thresholdPercent,
            "mean duration change (%) below which a kernel is unchanged")
        ->capture_default_str();
    diff->add_option("--top", args->top, "rows to list (-1: all)")->capture_default_str();
    diff->add_flag("--cpu", args->cpu, "also compare CPU ops and runtime calls");
    CLI::App* exp = app.add_subcommand("export", "write Chrome trace JSON that Perfetto opens");
    files(exp, "trace files, one per rank");
    exp->add_option("--chrome", args->chromeOut, "output file (.json, or .json.gz to compress)")
        ->required();
    exp->add_flag("--apply-alignment", args->applyAlignment,
        "shift ranks by the suggested clock offsets first");
    return [args, &global, import, stats, diff, exp]() {
        if (import->parsed()) {
            return runImport(*args, global);
        }
        if (stats->parsed()) {
            return runStats(*args, global);
        }
        if (diff->parsed()) {
            return runDiff(*args, global);
        }
        if (exp->parsed()) {
            return runExport(*args, global);
        }
        return 2;
    };
}

const bool kRegistered = registerCommand({ "trace",
    "import, summarise, compare and export profiling traces (Kineto JSON, Nsight Systems SQLite)",
    80, setupTrace });

} // namespace

} // namespace day0::cli
