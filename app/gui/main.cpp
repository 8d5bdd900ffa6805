// day0-workbench: parses the command line, wires the session, jobs and panels, and shows the
// main window (or renders screenshots of the panels offscreen).
#include "base/resources.h"
#include "hardware/cluster.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/builtin_panels.h"
#include "session/session.h"
#include "settings/preferences.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "shell/screenshot.h"
#include "shell/theme.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QSettings>
#include <QTemporaryDir>

#include <cstdio>
#include <cstring>
#include <memory>

using namespace day0::ui;

int main(int argc, char** argv)
{
    // Screenshots need no display: render offscreen unless a platform was chosen.
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--screenshot") == 0
            && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
            qputenv("QT_QPA_PLATFORM", "offscreen");
        }
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("day0-workbench"));
    QApplication::setOrganizationName(QStringLiteral("day0"));
    QApplication::setApplicationVersion(QStringLiteral(DAY0_VERSION));
    QApplication::setApplicationDisplayName(QStringLiteral("Day0 Workbench"));
    QApplication::setDesktopFileName(QStringLiteral("day0-workbench"));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Day0 Workbench: plan, verify, run and profile newly released open LLMs.\n"
                       "With no model, opens Kimi-K2 on 32 × 8 H200 with a training workload."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("model"),
        QStringLiteral(
            "A model folder, a config.json or a bundled name (kimi-k2, deepseek-v3, ...)."),
        QStringLiteral("[model]"));
    const QCommandLineOption screenshotOption(QStringLiteral("screenshot"),
        QStringLiteral("Render panel <panel> (or all) to PNG offscreen and exit."),
        QStringLiteral("panel"));
    const QCommandLineOption outOption(QStringLiteral("out"),
        QStringLiteral("Folder for --screenshot files (default: current folder)."),
        QStringLiteral("dir"), QStringLiteral("."));
    const QCommandLineOption themeOption(QStringLiteral("theme"),
        QStringLiteral(
            "light, dark or system (default: the saved preference; light for screenshots)."),
        QStringLiteral("theme"));
    const QCommandLineOption clusterOption(QStringLiteral("cluster"),
        QStringLiteral("Cluster: profile:nodes x GPUs (h200:32x8) or a JSON file."),
        QStringLiteral("cluster"));
    const QCommandLineOption modeOption(QStringLiteral("mode"),
        QStringLiteral("train or infer (default: train)."), QStringLiteral("mode"));
    const QCommandLineOption planOption(QStringLiteral("plan"),
        QStringLiteral("Starting plan, e.g. tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full."),
        QStringLiteral("plan"));
    const QCommandLineOption storeOption(QStringLiteral("store"),
        QStringLiteral("Run store file (default: $DAY0_STORE, else "
                       "$XDG_DATA_HOME/day0/runs.sqlite)."),
        QStringLiteral("file"));
    const QCommandLineOption noRecordOption(QStringLiteral("no-record"),
        QStringLiteral("Do not record plans and other results as runs (--screenshot never does)."));
    const QCommandLineOption traceOption(QStringLiteral("trace"),
        QStringLiteral("Open a trace (Kineto/Chrome JSON, .json.gz, Nsight Systems .sqlite) in the "
                       "timeline; repeat for one file per rank."),
        QStringLiteral("file"));
    const QCommandLineOption compareOption(QStringLiteral("compare-trace"),
        QStringLiteral("Stack a second trace below the first for comparison; repeatable."),
        QStringLiteral("file"));
    const QCommandLineOption checkpointOption(QStringLiteral("checkpoint"),
        QStringLiteral("Open a checkpoint (folder, .safetensors or .gguf) in the model panel."),
        QStringLiteral("path"));
    const QCommandLineOption partialOption(QStringLiteral("partial"),
        QStringLiteral("Read a model whose config has structure Day0 does not model: every panel "
                       "leaves it out and says so."));
    parser.addOptions({ screenshotOption, outOption, themeOption, clusterOption, modeOption,
        planOption, storeOption, noRecordOption, traceOption, compareOption, checkpointOption,
        partialOption });
    parser.process(app);

    const bool screenshot = parser.isSet(screenshotOption);
    // Screenshots show the store but never add to it.
    day0::history::setRecordingOptions({ parser.value(storeOption).toStdString(),
        !screenshot && !parser.isSet(noRecordOption), DAY0_VERSION, {} });
    // Screenshots must not depend on (or change) the user's saved layout and preferences.
    QTemporaryDir scratch;
    auto settings = screenshot ? std::make_unique<QSettings>(
                        scratch.filePath(QStringLiteral("s.ini")), QSettings::IniFormat)
                               : std::make_unique<QSettings>();
    Preferences preferences = Preferences::load(*settings);
    const QString theme = parser.value(themeOption);
    if (theme == QStringLiteral("dark")) {
        preferences.theme = ThemeChoice::Dark;
    } else if (theme == QStringLiteral("light") || (screenshot && theme.isEmpty())) {
        preferences.theme = ThemeChoice::Light;
    } else if (theme == QStringLiteral("system")) {
        preferences.theme = ThemeChoice::System;
    }
    applyTheme(preferences.theme);
    QApplication::setWindowIcon(QIcon(
        QString::fromStdString((day0::resourceDir() / "icons" / "day0-workbench.svg").string())));

    // The embedded default: Kimi-K2 training on 32 nodes × 8 H200.
    Session session;
    const QString clusterArg
        = parser.isSet(clusterOption) ? parser.value(clusterOption) : preferences.defaultCluster;
    auto cluster = day0::hardware::parseCluster(clusterArg.toStdString());
    auto plan = day0::plan::parsePlan(parser.isSet(planOption)
            ? parser.value(planOption).toStdString()
            : std::string("tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full"));
    const auto mode = parser.isSet(modeOption)
        ? day0::plan::parseMode(parser.value(modeOption).toStdString())
        : std::optional(
            preferences.defaultTraining ? day0::plan::Mode::Train : day0::plan::Mode::Infer);
    if (!cluster || !plan || !mode) {
        std::fprintf(stderr, "day0-workbench: %s\n",
            !cluster    ? cluster.error().message.c_str()
                : !plan ? plan.error().message.c_str()
                        : "--mode: expected train or infer");
        return 2;
    }
    session.setCluster(*cluster, clusterArg);
    auto workload = session.workload();
    workload.mode = *mode;
    session.setWorkload(workload);
    session.setPlan(*plan);
    if (parser.isSet(planOption)) {
        session.pinPlan();
    }

    PanelRegistry registry;
    registerBuiltinPanels(registry);
    JobRunner jobs;
    MainWindow window(registry, session, jobs, *settings);
    QString openError;
    QObject::connect(&window, &MainWindow::modelOpenFailed,
        [&openError](const QString& message) { openError = message; });
    QObject::connect(&session, &Session::traceOpenFailed,
        [&openError](const QString& message) { openError = message; });
    const QStringList positional = parser.positionalArguments();
    window.openModel(positional.isEmpty() ? preferences.defaultModel : positional.first(),
        parser.isSet(partialOption));
    if (parser.isSet(traceOption)) {
        session.requestTraceOpen(parser.values(traceOption), Session::TraceSlot::Primary);
    }
    if (parser.isSet(compareOption)) {
        session.requestTraceOpen(parser.values(compareOption), Session::TraceSlot::Comparison);
    }
    if (parser.isSet(checkpointOption)) {
        session.requestCheckpointOpen(parser.value(checkpointOption));
    }
    // The embedded default fills the timeline with a demo run's CPU trace when it is first
    // shown; screenshots stay deterministic without it.
    session.setDemo(!screenshot && positional.isEmpty() && !parser.isSet(traceOption)
        && !parser.isSet(checkpointOption));

    if (screenshot) {
        QString error;
        const QStringList files = renderScreenshots(window, registry, jobs,
            parser.value(screenshotOption), parser.value(outOption), &error);
        if (error.isEmpty() && !openError.isEmpty()) {
            error = openError;
        }
        if (!error.isEmpty()) {
            std::fprintf(stderr, "day0-workbench: %s\n", qPrintable(error));
            return 2;
        }
        for (const auto& file : files) {
            std::printf("%s\n", qPrintable(file));
        }
        return 0;
    }
    window.show();
    return QApplication::exec();
}
