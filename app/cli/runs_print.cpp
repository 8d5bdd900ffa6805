// day0 runs show / compare: the terminal's tables of a run and of a comparison.
#include "runs_print.h"

#include "base/file_util.h"
#include "table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace day0::cli {

using namespace day0::history;
using Align = Table::Align;

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

namespace {

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
} // namespace

std::string durationText(const std::optional<Seconds>& duration)
{
    return duration ? formatDuration(*duration) : "-";
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

void printComparison(const RunComparison& c, std::size_t top, bool all)
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
        addRows(c.memory, !all);
        memory.addSeparator();
        addRows(c.memoryTotals, false);
        fmt::print("\nmemory{}\n{}",
            all ? "" : " (changed components and totals; --all for every one)", memory.render());
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
    if (all) {
        for (const LayerDelta& d : c.layers) {
            addChange(d);
        }
    } else {
        for (const LayerMetricSummary& s : c.layerSummary) {
            for (const std::size_t i : largestLayerChanges(c, s.metric, top)) {
                addChange(c.layers[i]);
            }
        }
    }
    fmt::print("\n{}{}",
        all ? "" : fmt::format("largest changes (top {} per metric; --all for every row)\n", top),
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

} // namespace day0::cli
