#include "history/run_json.h"

#include "base/json_util.h"
#include "history/comparison_views.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace day0::history {

namespace {

using nlohmann::json;

json number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json optionalNumber(const std::optional<double>& value)
{
    return value ? number(*value) : json(nullptr);
}

json optionalBytes(const std::optional<Bytes>& value)
{
    return value ? json(value->value) : json(nullptr);
}

json layerRow(const RunComparison& c, const LayerDelta& d)
{
    return { { "anchor", c.name(d.anchor) }, { "layer", d.layer },
        { "submodule", c.name(d.subModule) }, { "metric", c.name(d.metric) },
        { "a", optionalNumber(d.a) }, { "b", optionalNumber(d.b) } };
}

json memoryRows(const std::vector<MemoryDelta>& rows)
{
    json out = json::array();
    for (const MemoryDelta& d : rows) {
        out.push_back({ { "rank", d.rank }, { "stage", d.stage }, { "component", d.component },
            { "a", optionalBytes(d.a) }, { "b", optionalBytes(d.b) },
            { "delta", d.delta().value } });
    }
    return out;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Calls `read(reader)` for every element of the array at `key`; the first problem wins.
template <typename Read>
Result<void> forEachElement(
    const json& object, const char* key, const std::string& origin, Read&& read)
{
    if (!object.contains(key) || object.at(key).is_null()) {
        return success();
    }
    const json& array = object.at(key);
    if (!array.is_array()) {
        return Error::badInput(fmt::format("{}: '{}' must be an array", origin, key));
    }
    for (std::size_t i = 0; i < array.size(); ++i) {
        JsonReader reader(array[i], fmt::format("{}: {}[{}]", origin, key, i));
        read(reader);
        if (!reader.ok()) {
            return reader.error();
        }
    }
    return success();
}

Result<Timestamp> readTime(JsonReader& reader, const std::string& key)
{
    const std::string text = reader.stringOr(key, "");
    if (!reader.ok()) {
        return reader.error();
    }
    if (text.empty()) {
        return Timestamp {};
    }
    auto time = parseTime(text, now());
    if (!time || text.find('-') == std::string::npos) {
        reader.fail(key, fmt::format("must be an ISO 8601 time, found '{}'", text));
        return reader.error();
    }
    return *time;
}

Result<void> readHeader(const json& object, const std::string& origin, RunInfo& info)
{
    JsonReader r(object, origin);
    info.uuid = r.stringOr("uuid", "");
    const std::string kind = r.stringOr("kind", "");
    const std::string status = r.stringOr("status", "ok");
    info.label = r.stringOr("label", "");
    info.modelName = r.stringOr("model", "");
    info.modelFingerprint = r.stringOr("model_fingerprint", "");
    info.plan = r.stringOr("plan", "");
    info.precision = r.stringOr("precision", "");
    info.backend = r.stringOr("backend", "");
    info.host = r.stringOr("host", "");
    info.softwareVersion = r.stringOr("software_version", "");
    info.command = r.stringOr("command", "");
    info.message = r.stringOr("message", "");
    if (r.has("duration_s")) {
        info.duration = Seconds(r.numberOr("duration_s", 0.0));
    }
    if (!r.ok()) {
        return r.error();
    }
    if (kind.empty()) {
        r.fail("kind", "is missing");
        return r.error();
    }
    auto parsedKind = parseRunKind(kind);
    auto parsedStatus = parseRunStatus(status);
    if (!parsedKind || !parsedStatus) {
        return (parsedKind ? parsedStatus.error() : parsedKind.error()).withContext(origin);
    }
    info.kind = *parsedKind;
    info.status = *parsedStatus;
    auto created = readTime(r, "created");
    DAY0_TRY(created);
    info.created = *created;
    return success();
}

} // namespace

json toJson(const RunInfo& info)
{
    return {
        { "id", info.id.value() },
        { "uuid", info.uuid },
        { "kind", toString(info.kind) },
        { "tool", info.tool },
        { "created", formatIso(info.created) },
        { "label", info.label },
        { "status", toString(info.status) },
        { "model", info.modelName },
        { "model_fingerprint", info.modelFingerprint },
        { "plan", info.plan },
        { "precision", info.precision },
        { "backend", info.backend },
        { "host", info.host },
        { "software_version", info.softwareVersion },
        { "command", info.command },
        { "message", info.message },
        { "duration_s", info.duration ? number(info.duration->value) : json(nullptr) },
    };
}

json toJson(const RunRecord& run, bool withLayers)
{
    json out = toJson(run.info);
    json properties = json::object();
    for (const Property& p : run.properties) {
        properties[p.key] = p.value;
    }
    out["properties"] = std::move(properties);
    json metrics = json::array();
    for (const Metric& m : run.metrics) {
        metrics.push_back({ { "name", m.name }, { "value", number(m.value) }, { "unit", m.unit } });
    }
    out["metrics"] = std::move(metrics);
    json memory = json::array();
    for (const MemoryEntry& e : run.memory) {
        memory.push_back({ { "rank", e.rank }, { "stage", e.stage }, { "component", e.component },
            { "bytes", e.bytes.value } });
    }
    out["memory"] = std::move(memory);
    json artifacts = json::array();
    for (const Artifact& a : run.artifacts) {
        artifacts.push_back(
            { { "kind", a.kind }, { "path", a.path }, { "size", optionalBytes(a.size) },
                { "sha256", a.sha256.empty() ? json(nullptr) : json(a.sha256) } });
    }
    out["artifacts"] = std::move(artifacts);
    json events = json::array();
    for (const Event& e : run.events) {
        events.push_back({ { "time", formatIso(e.time) }, { "level", levelName(e.level) },
            { "message", e.message } });
    }
    out["events"] = std::move(events);
    if (withLayers) {
        json layers = json::array();
        const LayerMetrics& l = run.layers;
        for (std::size_t i = 0; i < l.size(); ++i) {
            layers.push_back({ { "anchor", l.anchor(i) }, { "layer", l.row(i).layer },
                { "submodule", l.subModule(i) }, { "metric", l.metric(i) },
                { "value", number(l.row(i).value) } });
        }
        out["layer_metrics"] = std::move(layers);
    }
    return out;
}

json toJson(const std::vector<LayerMetricStats>& stats)
{
    json out = json::array();
    for (const LayerMetricStats& s : stats) {
        out.push_back({ { "metric", s.metric }, { "rows", s.count }, { "nan", s.nanCount },
            { "min", number(s.min) }, { "max", number(s.max) }, { "max_anchor", s.maxAnchor } });
    }
    return out;
}

json toJson(const RunComparison& c, std::size_t topLayers, bool allLayers)
{
    json out;
    out["a"] = toJson(c.a);
    out["b"] = toJson(c.b);
    json fields = json::array();
    for (const FieldChange& f : c.fields) {
        fields.push_back({ { "field", f.field }, { "a", f.a }, { "b", f.b } });
    }
    out["fields"] = std::move(fields);
    const auto seconds = [](const std::optional<Seconds>& s) {
        return s ? std::optional<double>(s->value) : std::optional<double>();
    };
    const MetricDelta duration { "duration", "s", seconds(c.durationA), seconds(c.durationB) };
    out["duration_s"] = { { "a", optionalNumber(duration.a) }, { "b", optionalNumber(duration.b) },
        { "delta", optionalNumber(duration.delta()) } };
    json metrics = json::array();
    for (const MetricDelta& m : c.metrics) {
        metrics.push_back({ { "name", m.name }, { "unit", m.unit }, { "a", optionalNumber(m.a) },
            { "b", optionalNumber(m.b) }, { "delta", optionalNumber(m.delta()) },
            { "relative", optionalNumber(m.relative()) } });
    }
    out["metrics"] = std::move(metrics);
    out["memory"] = memoryRows(c.memory);
    out["memory_totals"] = memoryRows(c.memoryTotals);
    json summary = json::array();
    json largest = json::array();
    for (const LayerMetricSummary& s : c.layerSummary) {
        summary.push_back({ { "metric", s.metric }, { "aligned", s.aligned }, { "only_a", s.onlyA },
            { "only_b", s.onlyB }, { "increased", s.increased }, { "decreased", s.decreased },
            { "geomean_ratio", number(s.geomeanRatio) } });
        for (const std::size_t i : largestLayerChanges(c, s.metric, topLayers)) {
            largest.push_back(layerRow(c, c.layers[i]));
        }
    }
    out["layer_summary"] = std::move(summary);
    out["largest_layer_changes"] = std::move(largest);
    // What the runs panel plots: each metric's curve over the layer outputs, and the busiest
    // rank of each run by component.
    json depth = json::object();
    for (const LayerMetricSummary& s : c.layerSummary) {
        json curve = json::array();
        for (const DepthPair& p : depthCurves(c, s.metric)) {
            curve.push_back({ { "layer", p.layer }, { "a", optionalNumber(p.a) },
                { "b", optionalNumber(p.b) } });
        }
        depth[s.metric] = std::move(curve);
    }
    out["depth_curves"] = std::move(depth);
    const MemoryBars bars = memoryBars(c);
    const auto slot = [](const std::optional<MemorySlot>& at, Bytes total) {
        return at ? json { { "rank", at->rank }, { "stage", at->stage }, { "total", total.value } }
                  : json(nullptr);
    };
    json components = json::array();
    for (std::size_t i = 0; i < bars.components.size(); ++i) {
        components.push_back({ { "component", bars.components[i] }, { "a", bars.a[i].value },
            { "b", bars.b[i].value } });
    }
    out["memory_busiest"] = { { "a", slot(bars.slotA, bars.totalA) },
        { "b", slot(bars.slotB, bars.totalB) }, { "components", std::move(components) } };
    if (allLayers) {
        json layers = json::array();
        for (const LayerDelta& d : c.layers) {
            layers.push_back(layerRow(c, d));
        }
        out["layers"] = std::move(layers);
    }
    return out;
}

Result<RunRecord> runFromJson(const json& object, const std::string& origin)
{
    if (!object.is_object()) {
        return Error::badInput(fmt::format("{}: expected a run (a JSON object)", origin));
    }
    RunRecord run;
    DAY0_TRY(readHeader(object, origin, run.info));
    if (object.contains("properties") && !object.at("properties").is_null()) {
        const json& properties = object.at("properties");
        if (!properties.is_object()) {
            return Error::badInput(fmt::format("{}: 'properties' must be an object", origin));
        }
        for (const auto& [key, value] : properties.items()) {
            if (!value.is_string()) {
                return Error::badInput(
                    fmt::format("{}: properties: '{}' must be a string", origin, key));
            }
            run.setProperty(key, value.get<std::string>());
        }
    }
    DAY0_TRY(forEachElement(object, "metrics", origin, [&](JsonReader& r) {
        run.addMetric(r.stringOr("name", ""), r.numberOr("value", kNaN), r.stringOr("unit", ""));
    }));
    DAY0_TRY(forEachElement(object, "memory", origin, [&](JsonReader& r) {
        run.addMemory(int(r.intOr("rank", -1)), int(r.intOr("stage", -1)),
            r.stringOr("component", ""), Bytes(r.requireInt("bytes")));
    }));
    DAY0_TRY(forEachElement(object, "artifacts", origin, [&](JsonReader& r) {
        Artifact a { r.stringOr("kind", ""), r.stringOr("path", ""), std::nullopt,
            r.stringOr("sha256", "") };
        if (auto size = r.optionalInt("size")) {
            a.size = Bytes(*size);
        }
        run.addArtifact(std::move(a));
    }));
    DAY0_TRY(forEachElement(object, "events", origin, [&](JsonReader& r) {
        Event e { {}, parseLevel(r.stringOr("level", "info")), r.stringOr("message", "") };
        auto time = readTime(r, "time");
        if (time) {
            e.time = *time;
        }
        run.events.push_back(std::move(e));
    }));
    DAY0_TRY(forEachElement(object, "layer_metrics", origin, [&](JsonReader& r) {
        const std::string anchor = r.stringOr("anchor", "");
        const std::string metric = r.stringOr("metric", "");
        const double value = r.numberOr("value", kNaN);
        if (r.has("layer") || r.has("submodule")) {
            run.layers.add(
                anchor, int(r.intOr("layer", -1)), r.stringOr("submodule", ""), metric, value);
        } else {
            run.layers.add(anchor, metric, value);
        }
    }));
    auto valid = run.validate();
    if (!valid) {
        return valid.error().withContext(origin);
    }
    return run;
}

} // namespace day0::history
