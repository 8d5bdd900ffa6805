// The embedded default's timeline: the CPU trace of a demo run, made when the panel is first shown.
#include "actions/demo.h"
#include "panels/timeline/timeline_panel.h"
#include "ui_test_support.h"

#include <QAbstractItemModel>
#include <QComboBox>
#include <QTreeView>

#include <set>
#include <string>

using namespace day0;
using namespace day0::ui;

TEST(TimelineDemo, FirstShowShrinksRunsAndShowsTheDemoRunsCpuTrace)
{
    const test::ScopedCache cache;
    EXPECT_EQ(actions::demoCheckpointPath().parent_path().parent_path().parent_path().string(),
        qgetenv("XDG_CACHE_HOME").toStdString());

    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    {
        TimelinePanel quiet(session, jobs);
        quiet.show(); // not the embedded default: nothing runs
        EXPECT_FALSE(quiet.importing());
    }
    session.setDemo(true);
    TimelinePanel panel(session, jobs);
    panel.resize(1200, 700);
    panel.show();
    EXPECT_TRUE(panel.importing()) << "the demo run starts when the panel is first shown";
    test::settle(jobs);
    ASSERT_TRUE(session.trace()) << "a CPU trace is shown";
    EXPECT_TRUE(std::filesystem::exists(actions::demoCheckpointPath() / "config.json"))
        << "the demo checkpoint is kept in the cache";
    const auto& trace = *session.trace();
    std::set<std::string> names;
    for (profile::SliceIndex s = 0; s < trace.sliceCount(); ++s) {
        names.insert(std::string(trace.sliceNameText(s)));
    }
    EXPECT_TRUE(names.count("shrink kimi-k2")) << "first start shrinks";
    EXPECT_TRUE(names.count("run fp32 reference + bf16 target"));
    EXPECT_TRUE(session.traceSource().contains(QStringLiteral("demo run")));
    // A CPU trace: the statistics show its CPU ops, not an empty "GPU work" table.
    auto* categories = panel.findChild<QComboBox*>(QStringLiteral("statsCategories"));
    ASSERT_NE(categories, nullptr);
    EXPECT_EQ(categories->currentText(), QStringLiteral("CPU ops and runtime"));
    test::settle(jobs);
    EXPECT_GT(panel.statsView()->model()->rowCount(), 0);

    // A second start finds the checkpoint and skips the shrink.
    Session again;
    again.setDemo(true);
    TimelinePanel second(again, jobs);
    second.show();
    test::settle(jobs);
    ASSERT_TRUE(again.trace());
    for (profile::SliceIndex s = 0; s < again.trace()->sliceCount(); ++s) {
        EXPECT_NE(again.trace()->sliceNameText(s), "shrink kimi-k2");
    }
    EXPECT_EQ(scratch.open().count().value(), 0)
        << "the demo trace is shown at every start, not recorded";
}
