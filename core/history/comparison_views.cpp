#include "history/comparison_views.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace day0::history {

namespace {

constexpr std::uint32_t kNoName = std::numeric_limits<std::uint32_t>::max();

std::uint32_t nameIndex(const RunComparison& comparison, std::string_view name)
{
    const auto it = std::find(comparison.names.begin(), comparison.names.end(), name);
    return it == comparison.names.end() ? kNoName : std::uint32_t(it - comparison.names.begin());
}

} // namespace

std::vector<DepthPair> depthCurves(
    const RunComparison& comparison, std::string_view metric, std::string_view subModule)
{
    std::vector<DepthPair> curve;
    const std::uint32_t m = nameIndex(comparison, metric);
    const std::uint32_t s = nameIndex(comparison, subModule);
    if (m == kNoName || s == kNoName) {
        return curve;
    }
    for (const LayerDelta& d : comparison.layers) {
        if (d.metric == m && d.subModule == s && d.layer >= 0) {
            curve.push_back({ d.layer, d.a, d.b });
        }
    }
    std::stable_sort(curve.begin(), curve.end(),
        [](const DepthPair& x, const DepthPair& y) { return x.layer < y.layer; });
    return curve;
}

std::vector<std::string> layerSubModules(const RunComparison& comparison, std::string_view metric)
{
    std::vector<std::string> out;
    const std::uint32_t m = nameIndex(comparison, metric);
    if (m == kNoName) {
        return out;
    }
    std::vector<bool> seen(comparison.names.size(), false);
    for (const LayerDelta& d : comparison.layers) {
        if (d.metric == m && d.layer >= 0 && !seen[d.subModule]) {
            seen[d.subModule] = true;
            out.push_back(comparison.names[d.subModule]);
        }
    }
    // The layer's own output leads: it is what the error-versus-depth curve shows.
    const auto output = std::find(out.begin(), out.end(), std::string());
    if (output != out.end()) {
        std::rotate(out.begin(), output, output + 1);
    }
    return out;
}

LayerGrid layerGrid(const RunComparison& comparison, std::string_view metric)
{
    LayerGrid grid;
    grid.metric = std::string(metric);
    grid.subModules = layerSubModules(comparison, metric);
    const std::uint32_t m = nameIndex(comparison, metric);
    if (m == kNoName || grid.subModules.empty()) {
        return grid;
    }
    std::unordered_map<std::uint32_t, std::size_t> column;
    for (std::size_t c = 0; c < grid.subModules.size(); ++c) {
        column.emplace(nameIndex(comparison, grid.subModules[c]), c);
    }
    for (const LayerDelta& d : comparison.layers) {
        if (d.metric == m && d.layer >= 0) {
            grid.layers.push_back(d.layer);
        }
    }
    std::sort(grid.layers.begin(), grid.layers.end());
    grid.layers.erase(std::unique(grid.layers.begin(), grid.layers.end()), grid.layers.end());
    std::unordered_map<int, std::size_t> row;
    for (std::size_t r = 0; r < grid.layers.size(); ++r) {
        row.emplace(grid.layers[r], r);
    }
    grid.a.assign(grid.rows() * grid.columns(), std::nullopt);
    grid.b.assign(grid.rows() * grid.columns(), std::nullopt);
    for (const LayerDelta& d : comparison.layers) {
        if (d.metric == m && d.layer >= 0) {
            const std::size_t i = grid.index(row.at(d.layer), column.at(d.subModule));
            grid.a[i] = d.a;
            grid.b[i] = d.b;
        }
    }
    return grid;
}

double layerChange(LayerChange kind, std::optional<double> a, std::optional<double> b)
{
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    if (!a || !b || std::isnan(*a) || std::isnan(*b)) {
        return kNaN;
    }
    if (kind == LayerChange::Difference) {
        return *b - *a;
    }
    if (*a <= 0.0 || *b <= 0.0) {
        return kNaN;
    }
    return std::log10(*b / *a);
}

std::vector<double> layerChanges(const LayerGrid& grid, LayerChange kind)
{
    std::vector<double> out(grid.a.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = layerChange(kind, grid.a[i], grid.b[i]);
    }
    return out;
}

std::vector<MemorySlot> memorySlots(const RunComparison& comparison)
{
    std::vector<MemorySlot> out;
    out.reserve(comparison.memoryTotals.size());
    for (const MemoryDelta& t : comparison.memoryTotals) {
        out.push_back({ t.rank, t.stage });
    }
    return out;
}

MemoryBars memoryBars(const RunComparison& comparison, std::optional<MemorySlot> slot)
{
    MemoryBars bars;
    if (slot) {
        for (const MemoryDelta& t : comparison.memoryTotals) {
            if (MemorySlot { t.rank, t.stage } == *slot) {
                bars.slotA = t.a ? slot : std::nullopt;
                bars.slotB = t.b ? slot : std::nullopt;
            }
        }
    } else {
        // memoryTotals is ordered by rank and stage, so the first maximum is the lowest slot.
        for (const MemoryDelta& t : comparison.memoryTotals) {
            if (t.a && (!bars.slotA || *t.a > bars.totalA)) {
                bars.slotA = MemorySlot { t.rank, t.stage };
                bars.totalA = *t.a;
            }
            if (t.b && (!bars.slotB || *t.b > bars.totalB)) {
                bars.slotB = MemorySlot { t.rank, t.stage };
                bars.totalB = *t.b;
            }
        }
    }
    bars.totalA = Bytes(0);
    bars.totalB = Bytes(0);
    const auto componentIndex = [&](const std::string& component) {
        const auto it = std::find(bars.components.begin(), bars.components.end(), component);
        if (it != bars.components.end()) {
            return std::size_t(it - bars.components.begin());
        }
        bars.components.push_back(component);
        bars.a.emplace_back(0);
        bars.b.emplace_back(0);
        return bars.components.size() - 1;
    };
    for (const MemoryDelta& d : comparison.memory) {
        const MemorySlot at { d.rank, d.stage };
        const bool inA = d.a && bars.slotA == at;
        const bool inB = d.b && bars.slotB == at;
        if (!inA && !inB) {
            continue;
        }
        const std::size_t i = componentIndex(d.component);
        if (inA) {
            bars.a[i] += *d.a;
            bars.totalA += *d.a;
        }
        if (inB) {
            bars.b[i] += *d.b;
            bars.totalB += *d.b;
        }
    }
    return bars;
}

std::optional<std::size_t> baselineFor(const std::vector<RunInfo>& runs, std::size_t index)
{
    if (index + 1 >= runs.size()) {
        return std::nullopt;
    }
    const RunInfo& run = runs[index];
    for (std::size_t i = index + 1; i < runs.size(); ++i) {
        if (runs[i].kind == run.kind && runs[i].modelName == run.modelName) {
            return i;
        }
    }
    return std::nullopt;
}

} // namespace day0::history
