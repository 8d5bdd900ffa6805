// Built when day0_ui exists: `day0 validate` draws its report figures with the GUI's plotting
// code on an offscreen QApplication created on first use (no display needed).
#include "figure_renderer.h"
#include "panels/pipeline/figure_renderer.h"

#include <QApplication>
#include <QtGlobal>

#include <memory>

namespace day0::cli {

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

} // namespace

pipeline::FigureRenderer makeFigureRenderer()
{
    // The application lives as long as the renderer (the validation), not until static
    // destruction, where Qt's own globals may already be gone.
    auto app = std::make_shared<std::unique_ptr<QApplication>>();
    return [app](const pipeline::FigureSpec& spec) -> Result<pipeline::ReportFigure> {
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
            *app = std::make_unique<QApplication>(argc, argv);
        }
        return ui::renderFigure(spec);
    };
}

} // namespace day0::cli
