// day0 runs list|show|compare|export|delete: the run history kept in the SQLite store.
#include "base/file_util.h"
#include "base/json_util.h"
#include "command.h"
#include "history/bench_comparison.h"
#include "history/recording.h"
#include "history/run_compare.h"
#include "history/run_json.h"
#include "history/run_store.h"
#include "table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

namespace day0::cli {

namespace {

using namespace day0::history;
using Align = Table::Align;

struct RunsArgs {
    // list
    std::string model, kind, tool, status, since, until, label, precision;
    std::int64_t limit = 50;
    // show, export
    std::string run;
    bool layers = false;
    std::string output;
    // compare
    std::string a, b;
    std::size_t top = 10;
    bool all = false;
    // delete, import
    std::vector<std::string> victims;
    std::vector<std::string> imports;
};

std::string formatValue(double value, const std::string& unit)
{
    if (std::isnan(value)) {
        return "NaN";
    }
    if (unit == "B") {
        return formatBytes(Bytes(std::int64_t(value)));
    }
    if (unit == "s") {
        return formatDuration(Seconds(value));
    }
    const std::string number = fmt::format("{:.4g}", value);
    return unit.empty() ? number : number + " " + unit;
}

std::string formatSigned(double value, const std::string& unit)
{
    const std::string text = formatValue(value, unit);
    return value > 0.0 ? "+" + text : text;
}

std::string optionalValue(const std::optional<double>& value, const std::string& unit)
{
    return value ? formatValue(*value, unit) : "-";
}

std::string formatRelative(const std::optional<double>& relative)
{
    return relative ? fmt::format("{:+.1f}%", *relative * 100.0) : "";
}

std::string formatBytesDelta(Bytes delta)
{
    return delta.value > 0 ? "+" + formatBytes(delta) : formatBytes(delta);
}

// Reads the store for a query; a missing store is an error naming the path.
Result<RunStore> openExisting()
{
    RunStore::Options options;
    options.createIfMissing = false;
    return RunStore::open(storePath(), options);
}

Result<RunFilter> filterFrom(const RunsArgs& args)
{
    RunFilter filter;
    filter.model = args.model;
    filter.label = args.label;
    filter.precision = args.precision;
    filter.tool = args.tool;
    filter.limit = args.limit;
    if (!args.kind.empty()) {
        auto kind = parseRunKind(args.kind);
        if (!kind) {
            // bench, train, eval... are tools of a kind ("run (bench)" in KIND), not kinds.
            return Error::badInput(fmt::format("--kind: {}; a tool's runs (bench, train, eval, "
                                               "...) are listed with --tool {}",
                kind.error().message, args.kind));
        }
        filter.kind = *kind;
    }
    if (!args.status.empty()) {
        auto status = parseRunStatus(args.status);
        DAY0_TRY(status);
        filter.status = *status;
    }
    const Timestamp reference = now();
    if (!args.since.empty()) {
        auto since = parseTime(args.since, reference);
        if (!since) {
            return since.error().withContext("--since");
        }
        filter.since = *since;
    }
    if (!args.until.empty()) {
        auto until = parseTime(args.until, reference);
        if (!until) {
            return until.error().withContext("--until");
        }
        filter.until = *until;
    }
    return filter;
}

std::string durationText(const std::optional<Seconds>& duration)
{
    return duration ? formatDuration(*duration) : "-";
}

int runList(const RunsArgs& args, const GlobalOptions& global)
{
    auto filter = filterFrom(args);
    if (!filter) {
        return reportError(filter.error());
    }
    const auto file = storePath();
    std::vector<RunInfo> runs;
    std::int64_t total = 0;
    if (std::filesystem::exists(file)) {
        auto store = openExisting();
        if (!store) {
            return reportError(store.error());
        }
        auto listed = store->list(*filter);
        auto counted = store->count(*filter);
        if (!listed || !counted) {
            return reportError(listed ? counted.error() : listed.error());
        }
        runs = std::move(listed).value();
        total = *counted;
    }
    if (global.json) {
        nlohmann::json out { { "store", file.string() }, { "total", total },
            { "runs", nlohmann::json::array() } };
        for (const RunInfo& info : runs) {
            out["runs"].push_back(toJson(info));
        }
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    if (runs.empty()) {
        fmt::print(
            stderr, "no runs{} in {}\n", total > 0 ? " on this page" : "", displayPath(file));
        return 0;
    }
    Table table(
        { "ID", "CREATED", "KIND", "STATUS", "MODEL", "PLAN", "PRECISION", "DURATION", "LABEL" },
        { Align::Right, Align::Left, Align::Left, Align::Left, Align::Left, Align::Left,
            Align::Left, Align::Right, Align::Left });
    for (const RunInfo& info : runs) {
        table.addRow({ std::to_string(info.id.value()), formatLocal(info.created), kindLabel(info),
            std::string(toString(info.status)), info.modelName, info.plan, info.precision,
            durationText(info.duration), info.label });
    }
    fmt::print("{}", table.render());
    if (std::int64_t(runs.size()) < total) {
        fmt::print(
            stderr, "showing the newest {} of {} runs (--limit 0 lists all)\n", runs.size(), total);
    }
    return 0;
}

void printHeader(const RunRecord& run)
{
    const RunInfo& info = run.info;
    fmt::print("run {}  {}\n", info.id.value(), info.uuid);
    Table header({ "FIELD", "VALUE" });
    const auto field = [&](const char* name, const std::string& value) {
        if (!value.empty()) {
            header.addRow({ name, value });
        }
    };
    field("kind", kindLabel(info));
    field("status",
        std::string(toString(info.status)) + (info.message.empty() ? "" : ": " + info.message));
    field("created", formatLocal(info.created));
    field("label", info.label);
    field("model",
        info.modelName
            + (info.modelFingerprint.empty() ? "" : "  (" + info.modelFingerprint + ")"));
    field("plan", info.plan);
    field("precision", info.precision);
    field("backend", info.backend);
    field("duration", info.duration ? formatDuration(*info.duration) : "");
    field("host", info.host);
    field("version", info.softwareVersion);
    field("command", info.command);
    for (const Property& p : run.properties) {
        field(p.key.c_str(), p.value);
    }
    fmt::print("{}", header.render());
}

// Memory as one row per rank and stage, one column per component, plus the total.
void printMemory(const std::vector<MemoryEntry>& memory)
{
    std::vector<std::string> components;
    std::map<std::pair<int, int>, std::map<std::string, Bytes>> cells;
    for (const MemoryEntry& e : memory) {
        if (std::find(components.begin(), components.end(), e.component) == components.end()) {
            components.push_back(e.component);
        }
        cells[{ e.rank, e.stage }][e.component] = e.bytes;
    }
    std::vector<std::string> head { "RANK", "STAGE" };
    head.insert(head.end(), components.begin(), components.end());
    head.emplace_back("total");
    Table table(head, std::vector<Align>(head.size(), Align::Right));
    for (const auto& [key, byComponent] : cells) {
        std::vector<std::string> row { key.first < 0 ? "-" : std::to_string(key.first),
            key.second < 0 ? "-" : std::to_string(key.second) };
        Bytes total;
        for (const auto& c : components) {
            const auto it = byComponent.find(c);
            row.push_back(it == byComponent.end() ? "-" : formatBytes(it->second));
            total += it == byComponent.end() ? Bytes(0) : it->second;
        }
        row.push_back(formatBytes(total));
        table.addRow(std::move(row));
    }
    fmt::print("\nmemory\n{}", table.render());
}

void printLayers(const LayerMetrics& layers, bool all)
{
    Table stats({ "LAYER METRIC", "ROWS", "NaN", "MIN", "MAX", "MAX AT" },
        { Align::Left, Align::Right, Align::Right, Align::Right, Align::Right, Align::Left });
    for (const LayerMetricStats& s : summarize(layers)) {
        stats.addRow({ s.metric, std::to_string(s.count), std::to_string(s.nanCount),
            formatValue(s.min, ""), formatValue(s.max, ""), s.maxAnchor });
    }
    fmt::print("\nlayer metrics\n{}", stats.render());
    if (!all) {
        return;
    }
    Table rows({ "ANCHOR", "LAYER", "SUBMODULE", "METRIC", "VALUE" },
        { Align::Left, Align::Right, Align::Left, Align::Left, Align::Right });
    for (std::size_t i = 0; i < layers.size(); ++i) {
        rows.addRow(
            { layers.anchor(i), layers.row(i).layer < 0 ? "-" : std::to_string(layers.row(i).layer),
                layers.subModule(i), layers.metric(i), formatValue(layers.row(i).value, "") });
    }
    fmt::print("\n{}", rows.render());
}

int runShow(const RunsArgs& args, const GlobalOptions& global)
{
    auto store = openExisting();
    if (!store) {
        return reportError(store.error());
    }
    auto id = store->resolve(args.run);
    if (!id) {
        return reportError(id.error());
    }
    // The layer rows are needed for their summary even when not listed one by one.
    auto run = store->load(*id, true);
    if (!run) {
        return reportError(run.error());
    }
    if (global.json) {
        nlohmann::json out = toJson(*run, args.layers);
        out["layer_summary"] = toJson(summarize(run->layers));
        fmt::print("{}\n", dumpJson(out, 2));
        return 0;
    }
    printHeader(*run);
    if (!run->metrics.empty()) {
        Table metrics({ "METRIC", "VALUE" }, { Align::Left, Align::Right });
        for (const Metric& m : run->metrics) {
            metrics.addRow({ m.name, formatValue(m.value, m.unit) });
        }
        fmt::print("\nmetrics\n{}", metrics.render());
    }
    if (!run->memory.empty()) {
        printMemory(run->memory);
    }
    if (!run->artifacts.empty()) {
        Table artifacts({ "ARTIFACT", "PATH", "SIZE", "SHA256" },
            { Align::Left, Align::Left, Align::Right, Align::Left });
        for (const Artifact& a : run->artifacts) {
            artifacts.addRow(
                { a.kind, a.path, a.size ? formatBytes(*a.size) : "-", a.sha256.substr(0, 16) });
        }
        fmt::print("\n{}", artifacts.render());
    }
    if (!run->layers.empty()) {
        printLayers(run->layers, args.layers);
    }
    if (!run->events.empty()) {
        Table events({ "TIME", "LEVEL", "EVENT" });
        for (const Event& e : run->events) {
            events.addRow({ formatLocal(e.time), std::string(levelName(e.level)), e.message });
        }
        fmt::print("\n{}", events.render());
    }
    return 0;
}

void printComparison(const RunComparison& c, const RunsArgs& args)
{
    const auto describe = [](const RunInfo& info) {
        return fmt::format("run {}  {}  {} {}  {}  {}", info.id.value(), formatLocal(info.created),
            kindLabel(info), toString(info.status), info.modelName, info.label);
    };
    fmt::print("A: {}\nB: {}\n", describe(c.a), describe(c.b));
    if (!c.fields.empty()) {
        Table fields({ "FIELD", "A", "B" });
        for (const FieldChange& f : c.fields) {
            fields.addRow({ f.field, f.a, f.b });
        }
        fmt::print("\n{}", fields.render());
    }

    Table metrics({ "METRIC", "A", "B", "DELTA", "CHANGE" },
        { Align::Left, Align::Right, Align::Right, Align::Right, Align::Right });
    const auto seconds = [](const std::optional<Seconds>& s) {
        return s ? std::optional<double>(s->value) : std::nullopt;
    };
    const MetricDelta duration { "duration", "s", seconds(c.durationA), seconds(c.durationB) };
    for (const MetricDelta* m : { &duration }) {
        if (m->a || m->b) {
            metrics.addRow({ m->name, optionalValue(m->a, m->unit), optionalValue(m->b, m->unit),
                m->delta() ? formatSigned(*m->delta(), m->unit) : "",
                formatRelative(m->relative()) });
        }
    }
    for (const MetricDelta& m : c.metrics) {
        metrics.addRow({ m.name, optionalValue(m.a, m.unit), optionalValue(m.b, m.unit),
            m.delta() ? formatSigned(*m.delta(), m.unit) : "", formatRelative(m.relative()) });
    }
    fmt::print("\n{}", metrics.render());

    if (!c.memory.empty()) {
        Table memory({ "RANK", "STAGE", "COMPONENT", "A", "B", "DELTA" },
            { Align::Right, Align::Right, Align::Left, Align::Right, Align::Right, Align::Right });
        const auto addRows = [&](const std::vector<MemoryDelta>& rows, bool changedOnly) {
            for (const MemoryDelta& d : rows) {
                if (changedOnly && d.a && d.b && d.delta().value == 0) {
                    continue;
                }
                memory.addRow({ d.rank < 0 ? "-" : std::to_string(d.rank),
                    d.stage < 0 ? "-" : std::to_string(d.stage), d.component,
                    d.a ? formatBytes(*d.a) : "-", d.b ? formatBytes(*d.b) : "-",
                    formatBytesDelta(d.delta()) });
            }
        };
        addRows(c.memory, !args.all);
        memory.addSeparator();
        addRows(c.memoryTotals, false);
        fmt::print("\nmemory{}\n{}",
            args.all ? "" : " (changed components and totals; --all for every one)",
            memory.render());
    }

    if (c.layers.empty()) {
        return;
    }
    Table summary(
        { "LAYER METRIC", "ALIGNED", "ONLY A", "ONLY B", "B > A", "B < A", "GEOMEAN B/A" },
        { Align::Left, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right,
            Align::Right });
    for (const LayerMetricSummary& s : c.layerSummary) {
        summary.addRow({ s.metric, std::to_string(s.aligned), std::to_string(s.onlyA),
            std::to_string(s.onlyB), std::to_string(s.increased), std::to_string(s.decreased),
            formatValue(s.geomeanRatio, "") });
    }
    fmt::print("\n{}", summary.render());
    Table changes({ "METRIC", "ANCHOR", "A", "B", "B/A" },
        { Align::Left, Align::Left, Align::Right, Align::Right, Align::Right });
    const auto addChange = [&](const LayerDelta& d) {
        const bool ratio = d.a && d.b && *d.a != 0.0;
        changes.addRow({ c.name(d.metric), c.name(d.anchor), optionalValue(d.a, ""),
            optionalValue(d.b, ""), ratio ? formatValue(*d.b / *d.a, "") : "" });
    };
    if (args.all) {
        for (const LayerDelta& d : c.layers) {
            addChange(d);
        }
    } else {
        for (const LayerMetricSummary& s : c.layerSummary) {
            for (const std::size_t i : largestLayerChanges(c, s.metric, args.top)) {
                addChange(c.layers[i]);
            }
        }
    }
    fmt::print("\n{}{}",
        args.all
            ? ""
            : fmt::format("largest changes (top {} per metric; --all for every row)\n", args.top),
        changes.render());
}

// {"not_comparable": why} or {"levels": [{level, label_a, label_b, quantities: [...]}]}.
nlohmann::json benchLevelsJson(const BenchComparison& bench)
{
    if (!bench.notComparable.empty()) {
        return { { "not_comparable", bench.notComparable } };
    }
    nlohmann::json levels = nlohmann::json::array();
    for (const BenchLevelPair& level : bench.levels) {
        nlohmann::json quantities = nlohmann::json::array();
        for (const MetricDelta& q : level.quantities) {
            const auto number = [](const std::optional<double>& v) {
                return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
            };
            quantities.push_back({ { "name", q.name }, { "unit", q.unit }, { "a", number(q.a) },
                { "b", number(q.b) }, { "delta", number(q.delta()) } });
        }
        levels.push_back({ { "level", level.level }, { "label_a", level.labelA },
            { "label_b", level.labelB }, { "quantities", std::move(quantities) } });
    }
    return { { "levels", std::move(levels) } };
}

void printBenchLevels(const BenchComparison& bench)
{
    if (!bench.notComparable.empty()) {
        fmt::print("\nload levels not compared: {}\n", bench.notComparable);
        return;
    }
    Table table({ "LEVEL", "QUANTITY", "A", "B", "DELTA", "CHANGE" },
        { Align::Right, Align::Left, Align::Right, Align::Right, Align::Right, Align::Right });
    for (const BenchLevelPair& level : bench.levels) {
        for (const MetricDelta& q : level.quantities) {
            table.addRow({ std::to_string(level.level), q.name, optionalValue(q.a, q.unit),
                optionalValue(q.b, q.unit), q.delta() ? formatSigned(*q.delta(), q.unit) : "",
                formatRelative(q.relative()) });
        }
        if (&level != &bench.levels.back()) {
            table.addSeparator();
        }
    }
    fmt::print("\nload levels (A | B):\n");
    for (const BenchLevelPair& level : bench.levels) {
        fmt::print("  {}: {} | {}\n", level.level, level.labelA.empty() ? "-" : level.labelA,
            level.labelB.empty() ? "-" : level.labelB);
    }
    fmt::print("{}", table.render());
}

int runCompare(const RunsArgs& args, const GlobalOptions& global)
{
    auto store = openExisting();
    if (!store) {
        return reportError(store.error());
    }
    std::optional<RunRecord> runs[2];
    const std::string* refs[2] = { &args.a, &args.b };
    for (int i = 0; i < 2; ++i) {
        auto id = store->resolve(*refs[i]);
        if (!id) {
            return reportError(id.error());
        }
        auto run = store->load(*id);
        if (!run) {
            return reportError(run.error());
        }
        runs[i] = std::move(run).value();
    }
    const RunComparison comparison = compareRuns(*runs[0], *runs[1]);
    // Benches are also compared load level by load level (what the runs panel shows).
    std::optional<BenchComparison> bench;
    if (isBenchRun(*runs[0]) || isBenchRun(*runs[1])) {
        bench = compareBenches(*runs[0], *runs[1]);
    }
    if (global.json) {
        nlohmann::json j = toJson(comparison, args.top, args.all);
        if (bench) {
            j["bench_levels"] = benchLevelsJson(*bench);
        }
        fmt::print("{}\n", dumpJson(j, 2));
        return 0;
    }
    printComparison(comparison, args);
    if (bench) {
        printBenchLevels(*bench);
    }
    return 0;
}

int runExport(const RunsArgs& args)
{
    auto store = openExisting();
    if (!store) {
        return reportError(store.error());
    }
    auto id = store->resolve(args.run);
    if (!id) {
        return reportError(id.error());
    }
    auto run = store->load(*id);
    if (!run) {
        return reportError(run.error());
    }
    const std::string text = dumpJson(toJson(*run), 2) + "\n";
    if (args.output.empty() || args.output == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    auto written = writeFileAtomic(args.output, text);
    if (!written) {
        return reportError(written.error());
    }
    fmt::print(stderr, "exported run {} to {}\n", id->value(), displayPath(args.output));
    return 0;
}

int runDelete(const RunsArgs& args, const GlobalOptions& global)
{
    auto store = openExisting();
    if (!store) {
        return reportError(store.error());
    }
    // Resolve every reference first, so a typo deletes nothing.
    std::vector<RunId> ids;
    for (const std::string& ref : args.victims) {
        auto id = store->resolve(ref);
        if (!id) {
            return reportError(id.error());
        }
        if (std::find(ids.begin(), ids.end(), *id) == ids.end()) {
            ids.push_back(*id);
        }
    }
    nlohmann::json deleted = nlohmann::json::array();
    for (const RunId id : ids) {
        auto removed = store->remove(id);
        if (!removed) {
            return reportError(removed.error());
        }
        if (*removed) {
            deleted.push_back(id.value());
            if (!global.json) {
                fmt::print(stderr, "deleted run {}\n", id.value());
            }
        }
    }
    if (global.json) {
        fmt::print("{}\n",
            dumpJson(
                nlohmann::json { { "store", store->file().string() }, { "deleted", deleted } }, 2));
    }
    return 0;
}

int runImport(const RunsArgs& args, const GlobalOptions& global)
{
    std::vector<RunRecord> records;
    for (const std::string& file : args.imports) {
        auto json = readJsonFile(file);
        if (!json) {
            return reportError(json.error());
        }
        const bool many = json->is_array();
        for (std::size_t i = 0; i < (many ? json->size() : 1); ++i) {
            const std::string origin
                = many ? fmt::format("{}: run [{}]", displayPath(file), i) : displayPath(file);
            auto run = runFromJson(many ? (*json)[i] : *json, origin);
            if (!run) {
                return reportError(run.error());
            }
            records.push_back(std::move(run).value());
        }
    }
    auto store = RunStore::open(storePath());
    if (!store) {
        return reportError(store.error());
    }
    // A run already in the store (same uuid) is skipped, so importing the same file twice is
    // harmless; the others are written in one transaction.
    std::vector<RunRecord> fresh;
    nlohmann::json skipped = nlohmann::json::array();
    for (RunRecord& record : records) {
        if (!record.info.uuid.empty() && store->resolve(record.info.uuid).ok()) {
            skipped.push_back(record.info.uuid);
            continue;
        }
        fresh.push_back(std::move(record));
    }
    auto ids = store->commitAll(fresh);
    if (!ids) {
        return reportError(ids.error());
    }
    nlohmann::json imported = nlohmann::json::array();
    for (const RunId id : *ids) {
        imported.push_back(id.value());
    }
    if (global.json) {
        fmt::print("{}\n",
            dumpJson(nlohmann::json { { "store", store->file().string() }, { "imported", imported },
                         { "skipped", skipped } },
                2));
    } else {
        fmt::print(stderr, "imported {} run{} into {}{}\n", ids->size(),
            ids->size() == 1 ? "" : "s", displayPath(store->file()),
            skipped.empty() ? "" : fmt::format("; skipped {} already there", skipped.size()));
    }
    return 0;
}

std::function<int()> setupRuns(CLI::App& app, const GlobalOptions& global)
{
    auto args = std::make_shared<RunsArgs>();
    app.require_subcommand(1);
    const auto sub = [&](const char* name, const char* description) {
        CLI::App* s = app.add_subcommand(name, description);
        // --json, --store and the other options of `runs` are accepted after the action too.
        s->fallthrough();
        return s;
    };

    CLI::App* list = sub("list", "list recorded runs, newest first");
    list->add_option("--model", args->model, "model name contains this (case-insensitive)");
    list->add_option("--kind", args->kind, "plan, verify, run, compare, trace or validate");
    list->add_option("--tool", args->tool,
        "the run's tool equals this: bench, train, eval, shrink, ... (shown in KIND's brackets)");
    list->add_option("--status", args->status, "ok, failed, error or cancelled");
    list->add_option(
        "--since", args->since, "created at or after: 2025-07-11, 2025-07-11T09:30, 7d, 12h");
    list->add_option("--until", args->until, "created before (same forms as --since)");
    list->add_option("--label", args->label, "label contains this (case-insensitive)");
    list->add_option("--precision", args->precision, "precision equals this (bf16, fp8, ...)");
    list->add_option("--limit", args->limit, "at most this many runs; 0 lists all")
        ->capture_default_str();

    const char* runHelp = "run id, uuid (prefix), 'last' or 'last~N'";
    CLI::App* show
        = sub("show", "show one run: header, metrics, memory, artifacts, layer metrics, log");
    show->add_option("run", args->run, runHelp)->required();
    show->add_flag("--layers", args->layers, "list every layer metric row");

    CLI::App* compare
        = sub("compare", "compare run B against run A: fields, metrics, memory, layer metrics");
    compare->add_option("a", args->a, "baseline run (" + std::string(runHelp) + ")")->required();
    compare->add_option("b", args->b, "run compared with the baseline")->required();
    compare->add_option("--top", args->top, "largest layer changes shown per metric")
        ->capture_default_str();
    compare->add_flag("--all", args->all, "every memory component and layer row, changed or not");

    CLI::App* exporter = sub("export", "write one run with everything it holds as JSON");
    exporter->add_option("run", args->run, runHelp)->required();
    exporter->add_option("-o,--output", args->output, "file to write (default: stdout)");

    CLI::App* remove = sub("delete", "delete runs and everything they hold");
    remove->add_option("runs", args->victims, runHelp)->required();

    CLI::App* importer = sub("import", "add runs from JSON files written by 'runs export'");
    importer->add_option("files", args->imports, "JSON files, each one run or an array of runs")
        ->required();

    return [args, &global, list, show, compare, exporter, remove, importer]() {
        if (list->parsed()) {
            return runList(*args, global);
        }
        if (show->parsed()) {
            return runShow(*args, global);
        }
        if (compare->parsed()) {
            return runCompare(*args, global);
        }
        if (exporter->parsed()) {
            return runExport(*args);
        }
        if (remove->parsed()) {
            return runDelete(*args, global);
        }
        if (importer->parsed()) {
            return runImport(*args, global);
        }
        return 2;
    };
}

const bool kRegistered = registerCommand(
    { "runs", "list, show, compare, export, delete or import recorded runs", 90, setupRuns });

} // namespace

} // namespace day0::cli
