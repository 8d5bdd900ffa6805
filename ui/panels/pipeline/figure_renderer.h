#pragma once

#include "pipeline/figure.h"

#include <QSize>

#include <stop_token>

namespace day0::ui {

/// Draws a report figure with the workbench's PlotWidget and returns it as PNG bytes, so the
/// HTML report shows the same plots as the panels. Must run on the GUI thread (needs a
/// QApplication; the CLI makes an offscreen one).
Result<pipeline::ReportFigure> renderFigure(
    const pipeline::FigureSpec& spec, QSize size = QSize(960, 540));

/// A pipeline::FigureRenderer around renderFigure that may be called from any thread: off the
/// GUI thread it queues the drawing there and waits for it, giving up when `stop` is requested
/// (so a cancelled job never holds up a GUI thread that waits for it).
pipeline::FigureRenderer figureRenderer(std::stop_token stop = {});

} // namespace day0::ui
