// day0 runs list|show|compare|export|delete: the run history kept in the SQLite store.
#include "base/file_util.h"
#include "base/json_util.h"
#include "command.h"
#include "history/bench_comparison.h"
#include "history/recording.h"
#include "history/run_compare.h"
#include "history/run_json.h"
#include "history/run_store.h"
#include "runs_print.h"
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
    printComparison(comparison, args.top, args.all);
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
