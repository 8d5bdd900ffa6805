// day0 inspect <model>: architecture and parameter counts of a folder, a config.json or a
// bundled model.

#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "inspect_tensors.h"
#include "model/cache_footprint.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "model/model_summary.h"
#include "table.h"

#include <fmt/format.h>

#include <cstdio>

namespace day0::cli {

namespace {

using namespace day0::model;

std::string percent(std::int64_t part, std::int64_t whole)
{
    return whole > 0 ? fmt::format("{:.1f}%", 100.0 * double(part) / double(whole)) : "-";
}

std::string count(std::int64_t n) { return n == 0 ? "0" : formatCount(double(n)); }

std::string parameterTable(const ParameterCounts& c)
{
    Table table({ "parameters", "count", "exact", "of total" },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    auto row = [&](const std::string& label, std::int64_t n) {
        table.addRow({ label, count(n), formatExact(n), percent(n, c.total) });
    };
    row("total", c.total);
    row("main model (no MTP, no vision)", c.mainModel);
    row("active per token", c.active);
    row("active without input embedding", c.activeWithoutEmbedding);
    row("input embedding", c.embedding);
    row("lm_head", c.lmHead);
    row("MTP layers", c.mtp);
    row("vision tower", c.vision);
    return table.render();
}

std::string componentTable(const ParameterCounts& c)
{
    Table table({ "component", "total", "active per token", "of total" },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    for (const auto& entry : c.byComponent) {
        table.addRow({ componentName(entry.component), count(entry.total), count(entry.active),
            percent(entry.total, c.total) });
    }
    return table.render();
}

std::string formatTable(const LayerGraph& graph)
{
    Table table({ "part", "stored as", "parameters", "bytes" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Right, Table::Align::Right });
    for (const auto& f : weightFormats(graph)) {
        table.addRow(
            { componentName(f.component), f.format, count(f.params), formatBytes(Bytes(f.bytes)) });
    }
    return table.render();
}

std::string cacheTable(const ModelSpec& spec)
{
    const double context = double(std::max<std::int64_t>(spec.maxPositions, 1));
    Table table({ "layer kind", "layers", "KV per token", "fixed per sequence",
                    fmt::format("one {}-token sequence", formatCount(context)) },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right });
    for (const auto& k : cacheByKind(spec, context, 2.0)) {
        table.addRow({ mixerKindName(k.kind), std::to_string(k.layers),
            k.bytesPerToken > 0 ? formatBytes(Bytes(std::int64_t(k.bytesPerToken))) : "-",
            k.fixedBytes > 0 ? formatBytes(Bytes(std::int64_t(k.fixedBytes))) : "-",
            formatBytes(Bytes(std::int64_t(k.bytes))) });
    }
    return table.render();
}

int runInspect(const std::string& modelArg, const GlobalOptions& global)
{
    auto spec = loadModel(modelArg, readOptions(global));
    if (!spec) {
        return reportError(spec.error());
    }
    for (const auto& warning : spec->warnings) {
        printWarning(warning);
    }
    const LayerGraph graph = buildLayerGraph(*spec);
    const ParameterCounts counts = graph.countParameters();

    if (global.json) {
        fmt::print("{}\n", dumpJson(inspectJson(graph, counts), 2));
        return 0;
    }
    fmt::print("{}", partialBanner(*spec));
    fmt::print("{}  ({})\n\n", spec->name, spec->origin);
    Table arch({ "", "" });
    for (const auto& line : describeArchitecture(*spec)) {
        arch.addRow({ line.label, line.value });
    }
    arch.addRow({ "checkpoint",
        fmt::format(
            "{} tensors, {}", formatExact(counts.tensors), formatBytes(Bytes(counts.bytes))) });
    // The architecture lines read better without the table's header rule.
    const std::string rendered = arch.render();
    fmt::print("{}\n", rendered.substr(rendered.find('\n', rendered.find('\n') + 1) + 1));
    fmt::print("{}\n{}", parameterTable(counts), componentTable(counts));
    fmt::print("\nweights as stored\n{}", formatTable(graph));
    fmt::print("\nKV cache and state per layer kind (BF16 KV, one sequence at the full context)\n"
               "{}",
        cacheTable(*spec));
    for (const auto& note : spec->notes) {
        fmt::print("note: {}\n", note);
    }
    if (!spec->warnings.empty()) {
        fmt::print("\n{} warning(s), see above\n", spec->warnings.size());
    }
    return 0;
}

const bool kRegistered = registerCommand({
    "inspect",
    "architecture and parameter counts of a model (folder, config.json or bundled name); with "
    "--tensors, the tensors of a checkpoint, a .safetensors or a .gguf file",
    10,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto model = std::make_shared<std::string>();
        auto tensors = std::make_shared<bool>(false);
        app.add_option("model", *model,
               "a folder with config.json, a config.json file, or a bundled name (kimi-k2, "
               "deepseek-v3, llama-3.1-405b, ...); with --tensors a checkpoint folder or file")
            ->required();
        app.add_flag("--tensors", *tensors,
            "list the tensors of a checkpoint folder, .safetensors or .gguf file, checked against "
            "the architecture when a config.json lies beside them");
        return [model, tensors, &global] {
            return *tensors ? runInspectTensors(*model, global) : runInspect(*model, global);
        };
    },
});

} // namespace

} // namespace day0::cli
