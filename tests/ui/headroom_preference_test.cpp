// The planner's memory headroom is a preference (10% by default, #24): the user's value
// reaches the planner panel of the main window and every layout it proposes leaves that share
// of device memory free.
#include "panels/builtin_panels.h"
#include "panels/planner/layout_table_model.h"
#include "panels/planner/planner_panel.h"
#include "settings/preferences.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "ui_test_support.h"

#include <QSettings>

using namespace day0;
using namespace day0::ui;

TEST(HeadroomPreference, TenPercentByDefaultAndMalformedValuesKeepIt)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("p.ini")), QSettings::IniFormat);
    EXPECT_EQ(Preferences::load(settings).planHeadroomPercent, 10);
    for (const QString& bad :
        { QStringLiteral("abc"), QStringLiteral("80"), QStringLiteral("-5") }) {
        settings.setValue(QStringLiteral("preferences/planHeadroomPercent"), bad);
        EXPECT_EQ(Preferences::load(settings).planHeadroomPercent, 10) << fromQString(bad);
    }
    Preferences p;
    p.planHeadroomPercent = 25;
    p.save(settings);
    EXPECT_EQ(Preferences::load(settings).planHeadroomPercent, 25);
}

TEST(HeadroomPreference, TheUsersHeadroomReachesThePlannerAndBoundsItsLayouts)
{
    test::ScratchStore store;
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    settings.setValue(QStringLiteral("preferences/planHeadroomPercent"), 30);
    PanelRegistry registry;
    registerBuiltinPanels(registry);
    Session session;
    JobRunner jobs;
    test::configure(session, "h200:4x8", plan::Mode::Infer, "tp=8");
    MainWindow window(registry, session, jobs, settings);
    auto* planner = qobject_cast<PlannerPanel*>(window.panel(QStringLiteral("planner")));
    ASSERT_NE(planner, nullptr);
    EXPECT_EQ(planner->headroomPercent(), 30);
    window.openModel(QStringLiteral("qwen3-30b-a3b"));
    test::settle(jobs);
    const auto& layouts = planner->layoutModel()->layouts();
    ASSERT_FALSE(layouts.empty()) << fromQString(planner->summaryText());
    const double device = session.cluster().deviceMemory();
    for (const auto& layout : layouts) {
        EXPECT_LE(layout.maxMemory, 0.70 * device + 1.0);
    }

    // A panel made without preferences starts at the default.
    PlannerPanel bare(session, jobs);
    EXPECT_EQ(bare.headroomPercent(), 10);
}
