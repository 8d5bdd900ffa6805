#pragma once

#include "base/units.h"
#include "history/run_record.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::history {

/// A header field whose value differs between the two runs.
struct FieldChange {
    std::string field; ///< "plan", "precision", "model_fingerprint", ...
    std::string a;
    std::string b;
};

/// One scalar metric of both runs, matched by name; a side is empty when that run lacks it.
struct MetricDelta {
    std::string name;
    std::string unit;
    std::optional<double> a;
    std::optional<double> b;

    /// b − a, when both runs have the metric.
    [[nodiscard]] std::optional<double> delta() const;
    /// (b − a) / |a|, when both have it and a ≠ 0.
    [[nodiscard]] std::optional<double> relative() const;
};

/// One memory component of both runs, matched by rank, stage and component.
struct MemoryDelta {
    int rank = -1;
    int stage = -1;
    std::string component; ///< "total" for the per-rank/stage sums in RunComparison::memoryTotals
    std::optional<Bytes> a;
    std::optional<Bytes> b;

    /// b − a, a missing side counting as 0.
    [[nodiscard]] Bytes delta() const;
};

/// One per-anchor value of both runs, matched by anchor and metric. Names index
/// RunComparison::names.
struct LayerDelta {
    std::uint32_t anchor = 0;
    std::uint32_t subModule = 0;
    std::uint32_t metric = 0;
    std::int32_t layer = -1;
    std::optional<double> a;
    std::optional<double> b;
};

/// How the values of one layer metric moved from run A to run B.
struct LayerMetricSummary {
    std::string metric;
    std::size_t aligned = 0; ///< anchors present in both runs
    std::size_t onlyA = 0;
    std::size_t onlyB = 0;
    std::size_t increased = 0; ///< aligned anchors where b > a
    std::size_t decreased = 0; ///< aligned anchors where b < a
    /// Geometric mean of b / a over aligned anchors where both are positive (1 = unchanged);
    /// NaN when there are none.
    double geomeanRatio = 0.0;
    std::optional<std::size_t> largestChange; ///< index into RunComparison::layers
};

/// Two runs side by side: what differs in their headers, metrics, memory and per-anchor
/// values. Plain data for the CLI table, the JSON output and the GUI's comparison views.
struct RunComparison {
    RunInfo a;
    RunInfo b;
    std::vector<FieldChange> fields;
    std::optional<Seconds> durationA;
    std::optional<Seconds> durationB;
    std::vector<MetricDelta> metrics; ///< A's order, then metrics only B has
    std::vector<MemoryDelta> memory; ///< A's order, then entries only B has
    std::vector<MemoryDelta> memoryTotals; ///< sums per rank and stage
    std::vector<std::string> names; ///< names used by `layers`
    std::vector<LayerDelta> layers; ///< A's order, then anchors only B has
    std::vector<LayerMetricSummary> layerSummary; ///< one per layer metric name

    [[nodiscard]] const std::string& name(std::uint32_t index) const { return names[index]; }
};

/// Compares run B against run A (A is the baseline). Linear in the number of rows.
RunComparison compareRuns(const RunRecord& a, const RunRecord& b);

/// How much a value changed, comparable among the values of one metric: |ln(b/a)| when both
/// have the same sign and are non-zero, +inf when one side is missing, NaN or zero while the
/// other is not, or the sign flips; 0 when equal.
double changeScore(std::optional<double> a, std::optional<double> b);

/// Indices into comparison.layers of the `count` rows of `metric` that changed most
/// (by changeScore), largest first; unchanged rows are left out.
std::vector<std::size_t> largestLayerChanges(
    const RunComparison& comparison, const std::string& metric, std::size_t count);

} // namespace day0::history
