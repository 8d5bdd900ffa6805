// `day0 validate`'s report figures: drawn by libday0_figures (plugins/figures, the workbench's
// PlotWidget offscreen), loaded at run time so that day0 links no Qt. Without the module (a
// build without the GUI) the report has tables only and says so.
#include "figure_renderer.h"

#include "base/file_util.h"
#include "base/resources.h"
#include "command.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace day0::cli {

namespace fs = std::filesystem;

namespace {

using RenderFigure = int (*)(const pipeline::FigureSpec*, pipeline::ReportFigure*, std::string*);

constexpr const char* kLibrary = "libday0_figures.so";
constexpr const char* kEntry = "day0_render_figure_v1";

// Where the module is: $DAY0_FIGURES_LIBRARY, else in the installed library folders
// (<prefix>/<libdir>/day0/), else in the build tree (<build>/app/cli/day0 →
// <build>/plugins/figures/).
std::vector<fs::path> candidates()
{
    std::vector<fs::path> out;
    if (const char* env = std::getenv("DAY0_FIGURES_LIBRARY"); env != nullptr && *env != '\0') {
        out.emplace_back(env);
        return out;
    }
    for (const auto& dir : installedLibraryDirs()) {
        out.push_back(dir / kLibrary);
    }
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        out.push_back(exe.parent_path() / "../../plugins/figures" / kLibrary);
    }
    return out;
}

// The module's entry point, loaded once; nullptr (with the reason) when there is none.
RenderFigure entryPoint(std::string& why)
{
    static std::once_flag once;
    static RenderFigure entry = nullptr;
    static std::string reason;
    std::call_once(once, [] {
        for (const auto& path : candidates()) {
            std::error_code ec;
            if (!fs::exists(path, ec)) {
                continue;
            }
            void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (handle == nullptr) {
                reason = fmt::format("{}: cannot load: {}", displayPath(path), ::dlerror());
                return;
            }
            entry = reinterpret_cast<RenderFigure>(::dlsym(handle, kEntry));
            if (entry == nullptr) {
                reason = fmt::format("{}: has no {}", displayPath(path), kEntry);
            }
            return; // never unloaded: Qt's globals live until the process ends
        }
        reason = fmt::format("{} not found (a build without the GUI)", kLibrary);
    });
    why = reason;
    return entry;
}

} // namespace

pipeline::FigureRenderer makeFigureRenderer()
{
    std::string why;
    const RenderFigure entry = entryPoint(why);
    if (entry == nullptr) {
        if (why.find("not found") == std::string::npos) {
            printWarning(why + "; the report has tables only");
        }
        return {};
    }
    return [entry](const pipeline::FigureSpec& spec) -> Result<pipeline::ReportFigure> {
        pipeline::ReportFigure figure;
        std::string error;
        if (entry(&spec, &figure, &error) != 0) {
            return Error::internal(fmt::format("drawing figure '{}': {}", spec.title, error));
        }
        return figure;
    };
}

} // namespace day0::cli
