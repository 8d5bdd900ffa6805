#pragma once

#include "history/run_compare.h"
#include "history/run_record.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::history {

// Two `day0 bench serve` runs load level by load level (the runs panel's bench comparison and
// `day0 runs compare`): what each level measured in both runs, with the change, and the
// latency-against-load curves of both. Plain data computed from the two run records.

/// True when `run` was recorded by `day0 bench serve` (property tool=bench).
bool isBenchRun(const RunRecord& run);

/// Why the load levels of `a` and `b` cannot be compared, or "" when they can: both must be
/// bench runs of the same model (the comparable-pairs rule of the runs panel: same kind, same
/// model).
std::string benchComparability(const RunRecord& a, const RunRecord& b);

/// One load level of both runs, matched by its number (levels run in order).
struct BenchLevelPair {
    int level = 0; ///< from 1
    std::string labelA; ///< the level as run A recorded it ("concurrency=4: rate inf ..."); ""
                        ///< when A has no such level
    std::string labelB;
    /// The level's quantities, named without the level prefix ("p99_ttft_ms",
    /// "request_throughput", "errors_http_5xx"), in A's order, then those only B has.
    std::vector<MetricDelta> quantities;
};

/// Both runs' levels; empty when the runs are not comparable (benchComparability()).
struct BenchComparison {
    std::vector<BenchLevelPair> levels;
    std::string notComparable; ///< benchComparability(a, b)
};

/// Compares the load levels of bench run `b` against bench run `a` (A is the baseline). With
/// a == b (one run shown alone) every B value equals A's.
BenchComparison compareBenches(const RunRecord& a, const RunRecord& b);

/// One point of a latency-against-load curve.
struct LoadPoint {
    int level = 0;
    double value = 0.0;
};

/// The values of `quantity` (e.g. "p99_ttft_ms") per level of run A (`sideB` false) or B, in
/// level order; levels without it are left out.
std::vector<LoadPoint> loadCurve(
    const BenchComparison& comparison, std::string_view quantity, bool sideB);

/// The latency metrics the levels hold ("ttft", "tpot", "itl", "e2el" in that order, those
/// present), and the percentiles recorded for `metric` (50 stands for the median).
std::vector<std::string> benchLatencyMetrics(const BenchComparison& comparison);
std::vector<double> benchPercentiles(const BenchComparison& comparison, std::string_view metric);

} // namespace day0::history
