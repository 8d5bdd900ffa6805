#pragma once

#include "base/result.h"
#include "numerics/dump_compare.h"
#include "numerics/metrics.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::numerics {

/// Counts of element-wise relative errors in log-spaced bins (what the precision panel shows when
/// a heatmap cell is clicked).
struct ErrorHistogram {
    std::vector<double> edges; ///< bins + 1 ascending edges of the relative error
    std::vector<std::int64_t> counts; ///< per bin
    std::int64_t exact = 0; ///< elements with no error at all
    std::int64_t below = 0; ///< errors under edges.front()
    std::int64_t above = 0; ///< errors at or over edges.back()
    std::int64_t nonFinite = 0; ///< pairs where either side is NaN/Inf
};

/// Histogram of |t - r| / max(|r|, smallValue) (the relative error of compareTensors) over
/// `bins` log-spaced bins between `low` and `high`. BadInput on a shape mismatch.
Result<ErrorHistogram> relativeErrorHistogram(const Tensor& reference, const Tensor& target,
    int bins = 48, double low = 1e-8, double high = 1.0, const MetricOptions& options = {});

/// One point of a value-against-error scatter.
struct ScatterPoint {
    double value = 0.0; ///< reference value
    double error = 0.0; ///< target - reference
};

/// Up to `maxPoints` (value, error) pairs, taken at an even stride so the same call gives the same
/// points, plus the largest-error element (saturation and small-value problems show here).
Result<std::vector<ScatterPoint>> valueErrorScatter(
    const Tensor& reference, const Tensor& target, std::int64_t maxPoints = 4096);

/// Relative L2 error of every leading index of two [positions, ...] tensors: the anchors × token
/// positions view.
Result<std::vector<double>> relL2PerPosition(const Tensor& reference, const Tensor& target);

/// A layers × sub-modules grid of one metric from a comparison (rows: decoder layer indices;
/// columns: sub-module suffixes such as "input_layernorm", "self_attn", "mlp", "" for the layer
/// output). Missing cells are NaN.
struct LayerHeatmap {
    std::vector<int> layers;
    std::vector<std::string> columns;
    std::vector<double> values; ///< layers.size() × columns.size(), row-major
    std::vector<std::string> verdicts; ///< the verdict reason of each cell ("" when missing)
};

/// Which number a heatmap shows.
enum class HeatmapMetric {
    RelL2, ///< accumulated relative L2 error
    OwnRelL2, ///< own (inject-mode) relative L2 error, NaN without it
    FloorRatio, ///< judged error / noise floor
    SnrDb,
};

/// Builds the layers × sub-modules grid of a comparison.
LayerHeatmap layerHeatmap(const DumpComparison& comparison, HeatmapMetric metric);

} // namespace day0::numerics
