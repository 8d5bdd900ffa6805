// The timeline's comparison diff (A → B kernels) and its instant-event markers.
#include "panels/timeline/timeline_panel.h"
#include "panels/timeline/timeline_view.h"
#include "panels/timeline/trace_diff_model.h"
#include "panels/timeline/trace_diff_pane.h"
#include "panels/timeline/track_tree_model.h"
#include "profile/timeline_query.h"
#include "profile/trace_diff.h"
#include "ui_test_support.h"

#include <QAbstractItemModelTester>
#include <QTabWidget>
#include <QTreeView>

#include <map>

using namespace day0;
using namespace day0::ui;

namespace {

QString dataFile(const char* name)
{
    return QString::fromUtf8(DAY0_TEST_DATA_DIR) + QStringLiteral("/profile/")
        + QString::fromUtf8(name);
}

} // namespace

TEST(TraceDiffPane, ListsTheCoreDiffOfTheStackedTracesAndClearsWithTheComparison)
{
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    panel.resize(1400, 860);
    auto* tabs = panel.findChild<QTabWidget*>(QStringLiteral("timelineTables"));
    ASSERT_NE(tabs, nullptr);
    EXPECT_FALSE(tabs->isTabEnabled(1)) << "no diff without a comparison";
    QAbstractItemModelTester tester(
        panel.diffPane()->model(), QAbstractItemModelTester::FailureReportingMode::Fatal);

    panel.openTraces({ dataFile("synthetic_rank0.json") });
    test::settle(jobs);
    panel.openTraces({ dataFile("synthetic_rank1.json") }, Session::TraceSlot::Comparison);
    test::settle(jobs);
    const auto a = session.trace(Session::TraceSlot::Primary);
    const auto b = session.trace(Session::TraceSlot::Comparison);
    ASSERT_TRUE(a && b);
    const auto expected = profile::diffTraces(*a, *b, {});
    const auto* model = panel.diffPane()->model();
    ASSERT_EQ(model->rowCount(), int(expected.size()));
    ASSERT_GT(model->rowCount(), 0);
    std::map<profile::DiffStatus, int> counts;
    for (int r = 0; r < model->rowCount(); ++r) {
        const auto& row = expected[std::size_t(r)];
        EXPECT_EQ(
            model->index(r, 0).data(TraceDiffModel::NameRole).toString().toStdString(), row.name);
        EXPECT_EQ(model->index(r, TraceDiffModel::StatusColumn).data().toString().toStdString(),
            std::string(profile::diffStatusName(row.status)));
        ++counts[row.status];
    }
    EXPECT_GT(counts[profile::DiffStatus::Slower] + counts[profile::DiffStatus::Faster]
            + counts[profile::DiffStatus::Added] + counts[profile::DiffStatus::Removed],
        0)
        << "the two ranks' kernels differ";
    const QString summary = panel.diffPane()->summaryText();
    EXPECT_TRUE(
        summary.contains(QStringLiteral("%1 slower").arg(counts[profile::DiffStatus::Slower])))
        << summary.toStdString();
    EXPECT_TRUE(
        summary.contains(QStringLiteral("%1 added").arg(counts[profile::DiffStatus::Added])));
    EXPECT_TRUE(tabs->isTabEnabled(1));
    EXPECT_EQ(tabs->currentIndex(), 1) << "opening a comparison shows its diff";

    session.setTrace(Session::TraceSlot::Comparison, nullptr, {});
    test::settle(jobs);
    EXPECT_EQ(model->rowCount(), 0);
    EXPECT_FALSE(tabs->isTabEnabled(1));
    EXPECT_EQ(tabs->currentIndex(), 0);
}

TEST(TimelineInstants, EveryInstantInViewIsMarkedOnItsTrack)
{
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    panel.resize(1400, 860);
    panel.show();
    panel.openTraces({ dataFile("synthetic_rank0.json") });
    test::settle(jobs);
    const auto trace = session.trace();
    ASSERT_TRUE(trace);
    ASSERT_GT(trace->instantCount(), 0u) << "the fixture has instant events";
    auto* view = panel.view();
    view->zoomToFit();
    ASSERT_TRUE(view->waitForFrame());
    const auto frame = view->frame();
    ASSERT_TRUE(frame);
    // Per track: instants in the window, as counted from the trace, equal the marks' counts.
    const std::int64_t origin = view->traces().origins[0];
    const std::int64_t t0 = origin + view->windowStart();
    const std::int64_t t1 = origin + view->windowEnd();
    std::size_t marked = 0;
    std::size_t inView = 0;
    for (const auto& tf : frame->tracks) {
        if (tf.slot != 0) {
            continue;
        }
        const auto [first, last] = profile::trackInstants(*trace, tf.track);
        std::size_t expected = 0;
        for (std::size_t i = first; i < last; ++i) {
            expected += trace->instantTime(i) >= t0 && trace->instantTime(i) < t1;
        }
        std::size_t got = 0;
        for (const auto& m : tf.instants) {
            got += m.count;
        }
        EXPECT_EQ(got, expected) << "track " << tf.track;
        marked += got;
        inView += expected;
    }
    EXPECT_GT(marked, 0u);
    EXPECT_EQ(marked, inView);
    EXPECT_GT(test::pixelSpread(view->grab().toImage()), 5.0);
}
