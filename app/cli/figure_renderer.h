#pragma once

#include "pipeline/figure.h"

namespace day0::cli {

/// The renderer for `day0 validate`'s HTML figures: the workbench's PlotWidget drawn offscreen
/// when the GUI library is built, else an empty function (the report then has tables only).
pipeline::FigureRenderer makeFigureRenderer();

} // namespace day0::cli
