#pragma once

#include "numerics/comparison_grid.h"
#include "panels/precision/precision_work.h"
#include "widgets/plot_widget.h"

#include <QString>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// How the precision panel draws a comparison: heatmaps, the error-versus-depth chart and a
// cell's detail charts, on PlotWidget.

namespace day0::ui {

/// A heatmap ready to draw, with the comparison row behind every cell.
struct PrecisionHeatmap {
    HeatmapData data;
    std::vector<int> cellRows; ///< per cell (row-major): index into the comparison rows, -1: none
    std::vector<int> rowLayers; ///< per heatmap row: the decoder layer, -1 outside layers
    bool positions = false; ///< columns are token positions
    [[nodiscard]] int rowAt(int row, int column) const
    {
        const int i = row * data.columns + column;
        return row < 0 || column < 0 || column >= data.columns || i >= int(cellRows.size())
            ? -1
            : cellRows[std::size_t(i)];
    }
};

/// "max relative error", "cosine distance (1 − cos)", ...: the metric as menus and axes say it.
QString metricTitle(numerics::GridMetric metric);

/// Layers × sub-modules of `run`, coloured by `metric` on a log scale.
PrecisionHeatmap layerHeatmap(
    const std::shared_ptr<const PrecisionRun>& run, numerics::GridMetric metric);
/// Anchors × token positions of `run` from a computed grid.
PrecisionHeatmap positionHeatmap(const std::shared_ptr<const PrecisionRun>& run,
    const numerics::PositionGrid& grid, numerics::GridMetric metric);

/// The hover text of a cell: the capture, its numbers, the verdict and the rule that decided
/// (which table, which rule, its limits).
QString cellHoverText(const PrecisionRun& run, std::size_t row, numerics::GridMetric metric,
    double value, std::int64_t position);

/// The depth chart's legend names of the current run and the overlay: label and finish time,
/// marked "(current)" and "(previous)" when that alone would read the same.
std::pair<QString, QString> depthLegendNames(
    const PrecisionRun& primary, const PrecisionRun& overlay);

/// Error against depth of one sub-module in every layer ("self_attn"; "" = the layer outputs)
/// for `metric`, with the tolerance band and noise floor (relative-L2 metrics and the floor
/// ratio), the first divergence marked, and `overlay` (may be null) drawn dashed.
void showDepth(PlotWidget& plot, const PrecisionRun& primary, const PrecisionRun* overlay,
    numerics::GridMetric metric, const std::string& subModule = {});

/// Fills the three detail charts of a clicked cell (null: clears them).
void showDetail(
    PlotWidget& histogram, PlotWidget& scatter, PlotWidget& ownChart, const CellDetail* detail);

} // namespace day0::ui
