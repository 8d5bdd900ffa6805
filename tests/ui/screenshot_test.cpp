#include "panels/builtin_panels.h"
#include "panels/memory/memory_panel.h"
#include "panels/model/model_panel.h"
#include "panels/planner/layout_table_model.h"
#include "panels/planner/planner_panel.h"
#include "panels/precision/precision_panel.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "panels/serving/bench_level_model.h"
#include "panels/serving/serving_panel.h"
#include "panels/timeline/timeline_panel.h"
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QLabel>
#include <QProcess>
#include <QSet>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTreeView>

using namespace day0;
using namespace day0::ui;

TEST(Workbench, ScreenshotsOfEveryPanelAreNotBlankAndShowTheirWidgets)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    PanelRegistry registry;
    registerBuiltinPanels(registry);
    // Every panel registered once, each with its own shortcut.
    QSet<QString> ids;
    QSet<QString> shortcuts;
    for (const auto& panel : registry.panels()) {
        ids.insert(panel.id);
        shortcuts.insert(panel.shortcut.toString());
    }
    ASSERT_EQ(ids.size(), qsizetype(registry.panels().size()));
    ASSERT_EQ(shortcuts.size(), qsizetype(registry.panels().size()));
    for (const char* id : { "model", "memory", "topology", "planner", "precision", "runs",
             "pipeline", "timeline", "serving", "training" }) {
        EXPECT_TRUE(ids.contains(QLatin1String(id))) << id;
    }
    Session session;
    JobRunner jobs;
    test::configure(
        session, "h200:32x8", plan::Mode::Train, "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full");
    MainWindow window(registry, session, jobs, settings);
    QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
    window.openModel(QStringLiteral("kimi-k2"));
    QString error;
    const QStringList files
        = renderScreenshots(window, registry, jobs, QStringLiteral("all"), dir.path(), &error);
    ASSERT_TRUE(error.isEmpty()) << error.toStdString();
    EXPECT_EQ(failed.count(), 0);
    // The window at 1920×1080 and at 1280×720, each panel, and the precision panel's End to
    // end view, all from the default docked layout.
    ASSERT_EQ(files.size(), qsizetype(registry.panels().size()) + 3);
    EXPECT_TRUE(files.contains(dir.filePath(QStringLiteral("precision-end-to-end.png"))));
    EXPECT_EQ(QImage(dir.filePath(QStringLiteral("workbench.png"))).size(), kScreenshotSize);
    EXPECT_EQ(QImage(dir.filePath(QStringLiteral("workbench-1280x720.png"))).size(),
        kSmallScreenshotSize);
    for (const auto& file : files) {
        const QImage image(file);
        ASSERT_FALSE(image.isNull()) << file.toStdString();
        EXPECT_GE(image.width(), 560) << file.toStdString();
        EXPECT_GT(test::pixelSpread(image), 12.0) << file.toStdString() << " looks blank";
    }
    // What the screenshots show.
    auto* model = qobject_cast<ModelPanel*>(window.panel(QStringLiteral("model")));
    ASSERT_NE(model, nullptr);
    EXPECT_GT(model->findChild<QTreeView*>()->model()->rowCount(), 60);
    auto* memory = qobject_cast<MemoryPanel*>(window.panel(QStringLiteral("memory")));
    ASSERT_NE(memory, nullptr);
    EXPECT_GE(memory->stageChart()->barLayerCount(), 4);
    EXPECT_EQ(memory->sweepChart()->lineSeriesCount(), 2);
    auto* topology = qobject_cast<TopologyPanel*>(window.panel(QStringLiteral("topology")));
    ASSERT_NE(topology, nullptr);
    EXPECT_EQ(topology->scene()->gpuItemCount(), 256);
    auto* planner = qobject_cast<PlannerPanel*>(window.panel(QStringLiteral("planner")));
    ASSERT_NE(planner, nullptr);
    EXPECT_GT(planner->layoutModel()->rowCount(), 10);
    EXPECT_EQ(session.plan(), planner->layoutModel()->layouts().front().layout.toPlan());
    auto* runs = qobject_cast<RunsPanel*>(window.panel(QStringLiteral("runs")));
    ASSERT_NE(runs, nullptr);
    EXPECT_GE(runs->runModel()->rowCount(), 1) << "the planner's sweep is recorded and listed";
    auto* precision = qobject_cast<PrecisionPanel*>(window.panel(QStringLiteral("precision")));
    ASSERT_NE(precision, nullptr);
    ASSERT_NE(precision->endToEndView()->current(), nullptr) << "the End to end view evaluated";
    EXPECT_EQ(precision->endToEndView()->histogramPlot()->barLayerCount(), 1);
    // The serving panel pictures a staged run: the default levels on the shrunk checkpoint.
    auto* serving = qobject_cast<ServingPanel*>(window.panel(QStringLiteral("serving")));
    ASSERT_NE(serving, nullptr);
    EXPECT_EQ(serving->resultModel()->rowCount(), 4)
        << serving->summaryLabel()->text().toStdString();
    EXPECT_FALSE(serving->paretoPlot()->showsEmptyState());
    auto* timeline = qobject_cast<TimelinePanel*>(window.panel(QStringLiteral("timeline")));
    ASSERT_NE(timeline, nullptr);
    EXPECT_TRUE(timeline->showsEmptyState()) << "no trace was opened";

    QString unknown;
    EXPECT_TRUE(
        renderScreenshots(window, registry, jobs, QStringLiteral("nope"), dir.path(), &unknown)
            .isEmpty());
    EXPECT_TRUE(unknown.contains(QStringLiteral("unknown panel 'nope'"))) << unknown.toStdString();
}

TEST(Workbench, OpeningAMissingModelReportsTheFile)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    PanelRegistry registry;
    Session session;
    JobRunner jobs;
    MainWindow window(registry, session, jobs, settings);
    QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
    window.openModel(dir.filePath(QStringLiteral("missing/config.json")));
    test::settle(jobs);
    ASSERT_EQ(failed.count(), 1);
    EXPECT_TRUE(failed.front().front().toString().contains(QStringLiteral("missing")))
        << failed.front().front().toString().toStdString();
    EXPECT_FALSE(session.hasModel());
}

TEST(Workbench, CommandLineScreenshotWritesPng)
{
    const QString exe = QStringLiteral(DAY0_WORKBENCH_PATH);
    if (exe.isEmpty()) {
        GTEST_SKIP() << "day0-workbench is not built";
    }
    QTemporaryDir dir;
    QProcess process;
    process.start(exe,
        { QStringLiteral("llama-3.1-8b"), QStringLiteral("--cluster"), QStringLiteral("h200:1x8"),
            QStringLiteral("--screenshot"), QStringLiteral("memory"), QStringLiteral("--out"),
            dir.path() });
    ASSERT_TRUE(process.waitForFinished(120000));
    EXPECT_EQ(process.exitCode(), 0) << process.readAllStandardError().toStdString();
    const QImage image(dir.filePath(QStringLiteral("memory.png")));
    ASSERT_FALSE(image.isNull());
    EXPECT_GT(test::pixelSpread(image), 12.0);

    QProcess bad;
    bad.start(exe,
        { QStringLiteral("no-such-model"), QStringLiteral("--screenshot"), QStringLiteral("model"),
            QStringLiteral("--out"), dir.path() });
    ASSERT_TRUE(bad.waitForFinished(120000));
    EXPECT_EQ(bad.exitCode(), 2);
    EXPECT_TRUE(bad.readAllStandardError().contains("no-such-model"));
}
