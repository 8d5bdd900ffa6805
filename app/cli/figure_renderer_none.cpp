// Built without day0_ui (DAY0_BUILD_GUI=OFF): the CLI stays Qt-free and reports have no figures.
#include "figure_renderer.h"

namespace day0::cli {

pipeline::FigureRenderer makeFigureRenderer() { return {}; }

} // namespace day0::cli
