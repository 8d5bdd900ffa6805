#include "history/bench_comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace day0::history {

namespace {

std::string property(const RunRecord& run, std::string_view key)
{
    for (const auto& p : run.properties) {
        if (p.key == key) {
            return p.value;
        }
    }
    return {};
}

// "bench_l12_p99_ttft_ms" → {12, "p99_ttft_ms"}; level 0 for other names.
std::pair<int, std::string_view> splitLevel(std::string_view name)
{
    constexpr std::string_view kPrefix = "bench_l";
    if (name.substr(0, kPrefix.size()) != kPrefix) {
        return { 0, {} };
    }
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    int level = 0;
    const auto [end, ec] = std::from_chars(first, last, level);
    if (ec != std::errc() || end == first || end == last || *end != '_' || level <= 0) {
        return { 0, {} };
    }
    return { level, name.substr(std::size_t(end - name.data()) + 1) };
}

} // namespace

bool isBenchRun(const RunRecord& run) { return property(run, "tool") == "bench"; }

std::string benchComparability(const RunRecord& a, const RunRecord& b)
{
    const bool benchA = isBenchRun(a);
    const bool benchB = isBenchRun(b);
    if (!benchA || !benchB) {
        return fmt::format("{} not a `bench serve` run: load levels are compared only between "
                           "two benches",
            !benchA && !benchB ? "A and B are" : (!benchA ? "A is" : "B is"));
    }
    if (a.info.kind != b.info.kind || a.info.modelName != b.info.modelName) {
        return fmt::format("A benches {} and B benches {}: load levels are compared only "
                           "between benches of the same model",
            a.info.modelName.empty() ? "an unnamed model" : a.info.modelName,
            b.info.modelName.empty() ? "an unnamed model" : b.info.modelName);
    }
    return {};
}

BenchComparison compareBenches(const RunRecord& a, const RunRecord& b)
{
    BenchComparison out;
    out.notComparable = benchComparability(a, b);
    if (!out.notComparable.empty()) {
        return out;
    }
    std::map<int, BenchLevelPair> levels;
    std::map<std::pair<int, std::string>, std::size_t> where;
    const auto add = [&](const RunRecord& run, bool sideB) {
        for (const auto& m : run.metrics) {
            const auto [level, quantity] = splitLevel(m.name);
            if (level == 0) {
                continue;
            }
            auto& pair = levels[level];
            pair.level = level;
            const auto key = std::make_pair(level, std::string(quantity));
            auto it = where.find(key);
            if (it == where.end()) {
                it = where.emplace(key, pair.quantities.size()).first;
                pair.quantities.push_back({ std::string(quantity), m.unit, {}, {} });
            }
            auto& delta = pair.quantities[it->second];
            (sideB ? delta.b : delta.a) = m.value;
        }
        for (auto& [level, pair] : levels) {
            (sideB ? pair.labelB : pair.labelA) = property(run, fmt::format("bench_l{}", level));
        }
    };
    add(a, false);
    add(b, true);
    for (auto& [level, pair] : levels) {
        out.levels.push_back(std::move(pair));
    }
    return out;
}

std::vector<LoadPoint> loadCurve(
    const BenchComparison& comparison, std::string_view quantity, bool sideB)
{
    std::vector<LoadPoint> curve;
    for (const auto& level : comparison.levels) {
        for (const auto& q : level.quantities) {
            const auto& value = sideB ? q.b : q.a;
            if (q.name == quantity && value) {
                curve.push_back({ level.level, *value });
            }
        }
    }
    return curve;
}

std::vector<std::string> benchLatencyMetrics(const BenchComparison& comparison)
{
    std::vector<std::string> found;
    for (const char* metric : { "ttft", "tpot", "itl", "e2el" }) {
        const std::string median = fmt::format("median_{}_ms", metric);
        for (const auto& level : comparison.levels) {
            const bool has = std::any_of(level.quantities.begin(), level.quantities.end(),
                [&](const MetricDelta& q) { return q.name == median; });
            if (has) {
                found.emplace_back(metric);
                break;
            }
        }
    }
    return found;
}

std::vector<double> benchPercentiles(const BenchComparison& comparison, std::string_view metric)
{
    std::vector<double> found;
    const std::string suffix = fmt::format("_{}_ms", metric);
    for (const auto& level : comparison.levels) {
        for (const auto& q : level.quantities) {
            if (q.name.size() <= suffix.size()
                || q.name.compare(q.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
                continue;
            }
            const std::string_view head(q.name.data(), q.name.size() - suffix.size());
            double p = 0.0;
            if (head == "median") {
                p = 50.0;
            } else if (head.size() > 1 && head[0] == 'p') {
                const auto [end, ec]
                    = std::from_chars(head.data() + 1, head.data() + head.size(), p);
                if (ec != std::errc() || end != head.data() + head.size()) {
                    continue;
                }
            } else {
                continue;
            }
            if (std::find(found.begin(), found.end(), p) == found.end()) {
                found.push_back(p);
            }
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

} // namespace day0::history
