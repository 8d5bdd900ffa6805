#pragma once

#include "pipeline/figure.h"

#include <QSize>

namespace day0::ui {

/// Draws a report figure with the workbench's PlotWidget and returns it as PNG bytes, so the
/// HTML report shows the same plots as the panels. Must run on the GUI thread (needs a
/// QApplication; the CLI makes an offscreen one).
Result<pipeline::ReportFigure> renderFigure(
    const pipeline::FigureSpec& spec, QSize size = QSize(960, 540));

/// A pipeline::FigureRenderer around renderFigure that may be called from any thread: off the
/// GUI thread it runs the drawing there and waits (a background validation job).
pipeline::FigureRenderer figureRenderer();

} // namespace day0::ui
