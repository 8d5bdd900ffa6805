// libday0_figures: `day0 validate` draws its report figures with the GUI's plotting code on an
// offscreen QApplication created on first use (no display needed). Loaded by day0 at run time
// (app/cli/figure_renderer.cpp), so that day0 itself links no Qt.
#include "panels/pipeline/figure_renderer.h"
#include "pipeline/figure.h"

#include <QApplication>
#include <QtGlobal>

#include <memory>

namespace {

QtMessageHandler previousHandler = nullptr;

// Qt's offscreen platform asks for the runtime folder, which a CI job or root shell often lacks;
// its warning about that says nothing about the report, so the CLI leaves it out.
void dropRuntimeDirWarning(QtMsgType type, const QMessageLogContext& context, const QString& text)
{
    if (type == QtWarningMsg && text.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR"))) {
        return;
    }
    if (previousHandler != nullptr) {
        previousHandler(type, context, text);
    }
}

// The application lives until the process ends; the module is never unloaded.
std::unique_ptr<QApplication>& application()
{
    static auto* app = new std::unique_ptr<QApplication>();
    return *app;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int day0_render_figure_v1(
    const day0::pipeline::FigureSpec* spec, day0::pipeline::ReportFigure* out, std::string* error)
{
    if (!QApplication::instance()) {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
            qputenv("QT_QPA_PLATFORM", "offscreen");
        }
        static int argc = 1;
        static char name[] = "day0";
        static char* argv[] = { name, nullptr };
        if (previousHandler == nullptr) {
            previousHandler = qInstallMessageHandler(dropRuntimeDirWarning);
        }
        application() = std::make_unique<QApplication>(argc, argv);
    }
    auto figure = day0::ui::renderFigure(*spec);
    if (!figure) {
        *error = figure.error().message;
        return 1;
    }
    *out = std::move(*figure);
    return 0;
}
