#include "numerics/comparison_grid.h"

#include "numerics/gradient_anchor.h"
#include "numerics/state_anchor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace day0::numerics {

namespace {

// The sub-module path of a layer anchor: "model.layers.3.self_attn" -> "self_attn",
// "model.layers.3" -> "".
std::string subModuleOf(const std::string& name, int layer)
{
    const std::string marker = "." + std::to_string(layer);
    for (std::size_t at = name.find(marker); at != std::string::npos;
         at = name.find(marker, at + 1)) {
        const std::size_t end = at + marker.size();
        if (end == name.size()) {
            return {};
        }
        if (name[end] == '.') {
            return name.substr(end + 1);
        }
    }
    return name;
}

// Anchors of the positions view: what a user follows through depth.
bool isPositionAnchor(const CaptureComparison& row)
{
    switch (row.kind) {
    case OpKind::DecoderLayer:
    case OpKind::Embedding:
    case OpKind::Logits:
        return true;
    case OpKind::Norm:
        return row.layer < 0;
    default:
        return false;
    }
}

} // namespace

const std::vector<GridMetric>& gridMetrics()
{
    static const std::vector<GridMetric> all { GridMetric::RelL2, GridMetric::MaxRel,
        GridMetric::CosineDistance, GridMetric::FloorRatio, GridMetric::OwnRelL2,
        GridMetric::MaxAbs, GridMetric::SnrDb };
    return all;
}

std::string_view gridMetricName(GridMetric metric)
{
    switch (metric) {
    case GridMetric::RelL2:
        return "rel_l2";
    case GridMetric::MaxRel:
        return "max_rel";
    case GridMetric::CosineDistance:
        return "cosine_distance";
    case GridMetric::FloorRatio:
        return "floor_ratio";
    case GridMetric::OwnRelL2:
        return "own_rel_l2";
    case GridMetric::MaxAbs:
        return "max_abs";
    case GridMetric::SnrDb:
        return "snr_db";
    }
    return "rel_l2";
}

std::optional<double> gridMetricValue(const ErrorMetrics& m, GridMetric metric, double floor)
{
    switch (metric) {
    case GridMetric::RelL2:
        return m.relL2;
    case GridMetric::MaxRel:
        return m.maxRel;
    case GridMetric::CosineDistance:
        // Rounding can push the cosine a hair above 1; a distance is never negative.
        return std::max(0.0, 1.0 - m.cosine);
    case GridMetric::FloorRatio:
        return floor > 0.0 ? std::optional(m.relL2 / floor) : std::nullopt;
    case GridMetric::OwnRelL2:
        return std::nullopt;
    case GridMetric::MaxAbs:
        return m.maxAbs;
    case GridMetric::SnrDb:
        return m.snrDb;
    }
    return std::nullopt;
}

std::optional<double> gridMetricValue(const CaptureComparison& row, GridMetric metric)
{
    if (metric == GridMetric::OwnRelL2) {
        return row.own ? std::optional(row.own->relL2) : std::nullopt;
    }
    if (metric == GridMetric::FloorRatio) {
        return row.verdict.floor > 0.0 ? std::optional(row.verdict.floorRatio) : std::nullopt;
    }
    if (!row.metrics) {
        return std::nullopt;
    }
    return gridMetricValue(*row.metrics, metric, row.verdict.floor);
}

ComparisonGrid comparisonGrid(const DumpComparison& comparison)
{
    ComparisonGrid grid;
    std::map<int, std::map<std::string, int>> byLayer;
    bool hasOutput = false;
    for (std::size_t i = 0; i < comparison.rows.size(); ++i) {
        const auto& row = comparison.rows[i];
        // A recurrent layer's state after each step is a column of its own ("linear_attn#state"):
        // its error is where a state dtype or a recurrence shows first.
        // Gradient dumps (exec/backward.h): each module's output gradient is a column
        // "<sub-module>#grad" ("#grad" for the layer's own output).
        const bool gradient = isActivationGradient(row.name);
        if (row.layer < 0 || row.kind == OpKind::RouterSelection
            || (row.name.find('#') != std::string::npos && !isStateCapture(row.name)
                && !gradient)) {
            continue;
        }
        std::string column = gradient
            ? subModuleOf(gradientAnchor(row.name), row.layer) + std::string(kGradientSuffix)
            : subModuleOf(row.name, row.layer);
        if (column.empty()) {
            hasOutput = true;
        } else if (std::find(grid.columns.begin(), grid.columns.end(), column)
            == grid.columns.end()) {
            grid.columns.push_back(column);
        }
        byLayer[row.layer][column] = int(i);
    }
    if (hasOutput) {
        grid.columns.emplace_back();
    }
    for (const auto& [layer, columns] : byLayer) {
        grid.layers.push_back(layer);
        for (const auto& column : grid.columns) {
            const auto it = columns.find(column);
            grid.cells.push_back(it == columns.end() ? -1 : it->second);
        }
    }
    return grid;
}

Result<PositionGrid> positionGrid(const DumpComparison& comparison, const Dump& reference,
    const Dump& target, const Dump* local, GridMetric metric)
{
    PositionGrid grid;
    std::vector<std::vector<double>> rows;
    for (std::size_t i = 0; i < comparison.rows.size(); ++i) {
        const auto& row = comparison.rows[i];
        if (!isPositionAnchor(row) || row.shapeMismatch) {
            continue;
        }
        const Tensor* r = reference.tensor(row.name);
        const Tensor* t = metric == GridMetric::OwnRelL2
            ? (local != nullptr ? local->tensor(row.name) : nullptr)
            : target.tensor(row.name);
        if (r == nullptr || t == nullptr || r->rank() < 1 || r->shape() != t->shape()) {
            continue;
        }
        std::vector<double> values;
        for (std::int64_t p = 0; p < r->dim(0); ++p) {
            auto m = compareTensors(r->select(0, p), t->select(0, p));
            if (!m) {
                return m.error().withContext(row.name);
            }
            const auto v = metric == GridMetric::OwnRelL2
                ? std::optional(m->relL2)
                : gridMetricValue(*m, metric, row.verdict.floor);
            values.push_back(v.value_or(std::numeric_limits<double>::quiet_NaN()));
        }
        grid.positions = std::max<std::int64_t>(grid.positions, r->dim(0));
        grid.anchors.push_back(i);
        rows.push_back(std::move(values));
    }
    if (grid.anchors.empty()) {
        return Error::badInput(metric == GridMetric::OwnRelL2
                ? "no inject-mode tensors to show own error per token position"
                : "the dumps hold no full tensors of layer outputs to show per token position");
    }
    for (auto& values : rows) {
        values.resize(std::size_t(grid.positions), std::numeric_limits<double>::quiet_NaN());
        grid.values.insert(grid.values.end(), values.begin(), values.end());
    }
    return grid;
}

} // namespace day0::numerics
