#pragma once

#include "base/units.h"
#include "history/run_compare.h"
#include "history/run_record.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::history {

// Views of a RunComparison shaped for its plots (the runs panel, `day0 runs compare`, reports):
// error-versus-depth curves of both runs, a layers × sub-modules grid and its change, memory
// bars of both runs. All are computed from RunComparison alone, linear in its rows.

/// One layer of two overlaid error-versus-depth curves; a side is empty where that run has no
/// value at the layer.
struct DepthPair {
    int layer = -1;
    std::optional<double> a;
    std::optional<double> b;
};

/// The error-versus-depth curves of both runs: the values of `metric` at the anchors whose
/// sub-module is `subModule` ("" = each layer's output), ordered by layer, aligned by anchor.
std::vector<DepthPair> depthCurves(
    const RunComparison& comparison, std::string_view metric, std::string_view subModule = {});

/// The sub-modules with values of `metric` inside numbered layers, in order of first
/// appearance ("" stands for the layer's own output).
std::vector<std::string> layerSubModules(const RunComparison& comparison, std::string_view metric);

/// The values of one metric of both runs as a layers × sub-modules grid (row-major).
struct LayerGrid {
    std::string metric;
    std::vector<int> layers; ///< rows, ascending
    std::vector<std::string> subModules; ///< columns, as layerSubModules() orders them
    std::vector<std::optional<double>> a; ///< layers × subModules; empty where run A has none
    std::vector<std::optional<double>> b;

    [[nodiscard]] std::size_t rows() const { return layers.size(); }
    [[nodiscard]] std::size_t columns() const { return subModules.size(); }
    [[nodiscard]] std::size_t index(std::size_t row, std::size_t column) const
    {
        return row * subModules.size() + column;
    }
};

/// The grid of `metric` over the numbered layers of both runs (anchors outside the layers, such
/// as lm_head, are left out).
LayerGrid layerGrid(const RunComparison& comparison, std::string_view metric);

/// How a cell of the heatmap difference measures the change from A to B.
enum class LayerChange {
    Log10Ratio, ///< log10(b / a): +1 is ten times larger in B; for errors spanning decades
    Difference, ///< b − a in the metric's own unit
};

/// The change of one value; NaN when a side is missing or NaN, and for Log10Ratio when a side
/// is not positive.
double layerChange(LayerChange kind, std::optional<double> a, std::optional<double> b);

/// layerChange() of every cell of the grid, row-major.
std::vector<double> layerChanges(const LayerGrid& grid, LayerChange kind);

/// A rank and pipeline stage as the memory entries of a run name them.
struct MemorySlot {
    int rank = -1;
    int stage = -1;
    bool operator==(const MemorySlot&) const = default;
};

/// The memory components of one rank of each run, side by side.
struct MemoryBars {
    std::vector<std::string> components; ///< A's order, then components only B has
    std::vector<Bytes> a; ///< per component; 0 where run A lacks it
    std::vector<Bytes> b;
    std::optional<MemorySlot> slotA; ///< the entries shown for A; empty when A has no memory
    std::optional<MemorySlot> slotB;
    Bytes totalA;
    Bytes totalB;
};

/// Per component, the bytes of each run's most loaded rank and stage (the largest total; the
/// lowest rank and stage on ties), or, when `slot` is given, of that rank and stage in
/// both runs.
MemoryBars memoryBars(
    const RunComparison& comparison, std::optional<MemorySlot> slot = std::nullopt);

/// The ranks and stages with memory entries in either run, in comparison.memoryTotals order.
std::vector<MemorySlot> memorySlots(const RunComparison& comparison);

/// The run to compare runs[index] against in a newest-first listing: the next older run of the
/// same kind and model; nullopt when there is none (other runs are not comparable) or for a bad
/// index.
std::optional<std::size_t> baselineFor(const std::vector<RunInfo>& runs, std::size_t index);

} // namespace day0::history
