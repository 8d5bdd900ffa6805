#pragma once

#include "base/result.h"
#include "numerics/dump.h"
#include "numerics/dump_compare.h"
#include "numerics/metrics.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::numerics {

/// The per-capture numbers a precision heatmap or depth curve can show.
enum class GridMetric {
    RelL2, ///< accumulated relative L2 error
    MaxRel, ///< max relative error (small values judged against the tensor's scale)
    CosineDistance, ///< 1 - cosine similarity
    FloorRatio, ///< judged error / noise floor (the "2.1× floor" of the verdict)
    OwnRelL2, ///< own relative L2 error from the inject-mode run
    MaxAbs, ///< max absolute error
    SnrDb, ///< signal-to-noise ratio in dB (higher is better)
};

/// Every GridMetric, in menu order.
const std::vector<GridMetric>& gridMetrics();
/// "rel_l2", "max_rel", "cosine_distance", "floor_ratio", "own_rel_l2", "max_abs", "snr_db": the
/// names run records store layer metrics under.
std::string_view gridMetricName(GridMetric metric);
/// The value of `metric` for one compared capture; nullopt when the capture lacks it (a
/// statistics-only capture, no inject-mode run, no noise floor).
std::optional<double> gridMetricValue(const CaptureComparison& row, GridMetric metric);
/// The value of `metric` from plain error metrics (per-position cells); FloorRatio divides the
/// relative L2 by `floor` (nullopt when floor <= 0); OwnRelL2 is not available here.
std::optional<double> gridMetricValue(const ErrorMetrics& metrics, GridMetric metric, double floor);

/// Layers × sub-modules: which comparison row sits in each cell. Columns are the sub-module
/// paths inside a layer in order of first appearance ("input_layernorm", "self_attn", "mlp",
/// ...), the layer's own output ("") last. Router selections and captured inputs are left out;
/// recurrent state captures ("linear_attn#state", "mixer#conv_state") are columns.
struct ComparisonGrid {
    std::vector<int> layers; ///< decoder/vision layer indices, ascending
    std::vector<std::string> columns;
    std::vector<int> cells; ///< layers.size() × columns.size() row-major; index into rows, -1
    [[nodiscard]] int cell(std::size_t layer, std::size_t column) const
    {
        return cells[layer * columns.size() + column];
    }
};

/// Builds the layers × sub-modules layout of a comparison. Pure.
ComparisonGrid comparisonGrid(const DumpComparison& comparison);

/// Anchors × token positions: one metric per token position of every layer output, the
/// embedding, the final norm and the logits (captures stored in both dumps, [tokens, ...]).
struct PositionGrid {
    std::vector<std::size_t> anchors; ///< indices into the comparison's rows, execution order
    std::int64_t positions = 0;
    std::vector<double> values; ///< anchors.size() × positions, NaN where absent
};

/// Computes the anchors × positions grid of `metric` from the dumps the comparison was made of
/// (`local`: the inject-mode dump, needed for OwnRelL2). Error when the dumps hold no full
/// tensors for any such anchor.
Result<PositionGrid> positionGrid(const DumpComparison& comparison, const Dump& reference,
    const Dump& target, const Dump* local, GridMetric metric);

} // namespace day0::numerics
