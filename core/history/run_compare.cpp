#include "history/run_compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

namespace day0::history {

namespace {

void compareFields(const RunInfo& a, const RunInfo& b, std::vector<FieldChange>& out)
{
    const auto field = [&](const char* name, std::string_view x, std::string_view y) {
        if (x != y) {
            out.push_back({ name, std::string(x), std::string(y) });
        }
    };
    field("kind", toString(a.kind), toString(b.kind));
    field("status", toString(a.status), toString(b.status));
    field("label", a.label, b.label);
    field("model", a.modelName, b.modelName);
    field("model_fingerprint", a.modelFingerprint, b.modelFingerprint);
    field("plan", a.plan, b.plan);
    field("precision", a.precision, b.precision);
    field("backend", a.backend, b.backend);
    field("host", a.host, b.host);
    field("software_version", a.softwareVersion, b.softwareVersion);
}

void compareMetrics(const RunRecord& a, const RunRecord& b, std::vector<MetricDelta>& out)
{
    for (const Metric& m : a.metrics) {
        MetricDelta d { m.name, m.unit, m.value, std::nullopt };
        if (const Metric* other = b.findMetric(m.name)) {
            d.b = other->value;
        }
        out.push_back(std::move(d));
    }
    for (const Metric& m : b.metrics) {
        if (!a.findMetric(m.name)) {
            out.push_back({ m.name, m.unit, std::nullopt, m.value });
        }
    }
}

void compareMemory(const RunRecord& a, const RunRecord& b, RunComparison& out)
{
    using Key = std::tuple<int, int, std::string>;
    std::map<Key, std::size_t> index;
    for (const MemoryEntry& e : a.memory) {
        index.emplace(Key { e.rank, e.stage, e.component }, out.memory.size());
        out.memory.push_back({ e.rank, e.stage, e.component, e.bytes, std::nullopt });
    }
    for (const MemoryEntry& e : b.memory) {
        const auto it = index.find(Key { e.rank, e.stage, e.component });
        if (it != index.end()) {
            out.memory[it->second].b = e.bytes;
        } else {
            out.memory.push_back({ e.rank, e.stage, e.component, std::nullopt, e.bytes });
        }
    }
    std::map<std::pair<int, int>, MemoryDelta> totals;
    for (const MemoryDelta& d : out.memory) {
        auto& total = totals[{ d.rank, d.stage }];
        total.rank = d.rank;
        total.stage = d.stage;
        total.component = "total";
        if (d.a) {
            total.a = total.a.value_or(Bytes(0)) + *d.a;
        }
        if (d.b) {
            total.b = total.b.value_or(Bytes(0)) + *d.b;
        }
    }
    for (auto& [key, total] : totals) {
        out.memoryTotals.push_back(std::move(total));
    }
}

void compareLayers(const RunRecord& a, const RunRecord& b, RunComparison& out)
{
    LayerMetrics names; // used only to intern the names of both runs into one table
    const auto remap = [&](const LayerMetrics& source) {
        std::vector<std::uint32_t> map(source.names().size());
        for (std::size_t i = 0; i < map.size(); ++i) {
            map[i] = names.intern(source.names()[i]);
        }
        return map;
    };
    const auto mapA = remap(a.layers);
    const auto mapB = remap(b.layers);
    const auto key = [](std::uint32_t anchor, std::uint32_t metric) {
        return (std::uint64_t(anchor) << 32) | metric;
    };

    std::unordered_map<std::uint64_t, std::size_t> index;
    index.reserve(a.layers.size());
    out.layers.reserve(std::max(a.layers.size(), b.layers.size()));
    for (const auto& row : a.layers.rows()) {
        LayerDelta d { mapA[row.anchor], mapA[row.subModule], mapA[row.metric], row.layer,
            row.value, std::nullopt };
        index.emplace(key(d.anchor, d.metric), out.layers.size());
        out.layers.push_back(d);
    }
    for (const auto& row : b.layers.rows()) {
        const std::uint32_t anchor = mapB[row.anchor];
        const std::uint32_t metric = mapB[row.metric];
        const auto it = index.find(key(anchor, metric));
        if (it != index.end()) {
            out.layers[it->second].b = row.value;
        } else {
            out.layers.push_back(
                { anchor, mapB[row.subModule], metric, row.layer, std::nullopt, row.value });
        }
    }
    out.names = names.names();

    // One summary per metric name, in order of first appearance.
    std::unordered_map<std::uint32_t, std::size_t> summaryOf;
    std::vector<double> logSum;
    std::vector<std::size_t> logCount;
    std::vector<double> bestScore;
    for (std::size_t i = 0; i < out.layers.size(); ++i) {
        const LayerDelta& d = out.layers[i];
        auto [it, added] = summaryOf.emplace(d.metric, out.layerSummary.size());
        if (added) {
            out.layerSummary.push_back({});
            out.layerSummary.back().metric = out.names[d.metric];
            logSum.push_back(0.0);
            logCount.push_back(0);
            bestScore.push_back(0.0);
        }
        LayerMetricSummary& s = out.layerSummary[it->second];
        if (!d.b) {
            ++s.onlyA;
            continue;
        }
        if (!d.a) {
            ++s.onlyB;
            continue;
        }
        ++s.aligned;
        s.increased += *d.b > *d.a ? 1 : 0;
        s.decreased += *d.b < *d.a ? 1 : 0;
        if (*d.a > 0.0 && *d.b > 0.0) {
            logSum[it->second] += std::log(*d.b / *d.a);
            ++logCount[it->second];
        }
        const double score = changeScore(d.a, d.b);
        if (score > bestScore[it->second]) {
            bestScore[it->second] = score;
            s.largestChange = i;
        }
    }
    for (std::size_t k = 0; k < out.layerSummary.size(); ++k) {
        out.layerSummary[k].geomeanRatio = logCount[k] > 0
            ? std::exp(logSum[k] / double(logCount[k]))
            : std::numeric_limits<double>::quiet_NaN();
    }
}

} // namespace

std::optional<double> MetricDelta::delta() const
{
    if (!a || !b) {
        return std::nullopt;
    }
    return *b - *a;
}

std::optional<double> MetricDelta::relative() const
{
    if (!a || !b || *a == 0.0) {
        return std::nullopt;
    }
    return (*b - *a) / std::abs(*a);
}

Bytes MemoryDelta::delta() const { return b.value_or(Bytes(0)) - a.value_or(Bytes(0)); }

double changeScore(std::optional<double> a, std::optional<double> b)
{
    constexpr double kInf = std::numeric_limits<double>::infinity();
    if (!a || !b) {
        return kInf;
    }
    const double x = *a;
    const double y = *b;
    if (std::isnan(x) || std::isnan(y)) {
        return std::isnan(x) && std::isnan(y) ? 0.0 : kInf;
    }
    if (x == y) {
        return 0.0;
    }
    if (x == 0.0 || y == 0.0 || (x < 0.0) != (y < 0.0) || std::isinf(x) || std::isinf(y)) {
        return kInf;
    }
    return std::abs(std::log(y / x));
}

RunComparison compareRuns(const RunRecord& a, const RunRecord& b)
{
    RunComparison out;
    out.a = a.info;
    out.b = b.info;
    out.durationA = a.info.duration;
    out.durationB = b.info.duration;
    compareFields(a.info, b.info, out.fields);
    compareMetrics(a, b, out.metrics);
    compareMemory(a, b, out);
    compareLayers(a, b, out);
    return out;
}

std::vector<std::size_t> largestLayerChanges(
    const RunComparison& comparison, const std::string& metric, std::size_t count)
{
    std::vector<std::pair<double, std::size_t>> scored;
    for (std::size_t i = 0; i < comparison.layers.size(); ++i) {
        const LayerDelta& d = comparison.layers[i];
        if (comparison.names[d.metric] != metric) {
            continue;
        }
        const double score = changeScore(d.a, d.b);
        if (score > 0.0) {
            scored.emplace_back(score, i);
        }
    }
    const std::size_t n = std::min(count, scored.size());
    std::partial_sort(scored.begin(), scored.begin() + std::ptrdiff_t(n), scored.end(),
        [](const auto& x, const auto& y) {
            return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
    std::vector<std::size_t> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(scored[i].second);
    }
    return out;
}

} // namespace day0::history
