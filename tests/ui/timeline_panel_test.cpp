#include "actions/records.h"
#include "history/recording.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "panels/timeline/kernel_stats_model.h"
#include "panels/timeline/slice_details.h"
#include "panels/timeline/timeline_panel.h"
#include "panels/timeline/timeline_view.h"
#include "panels/timeline/track_tree_model.h"
#include "profile/importer.h"
#include "profile/kernel_stats.h"
#include "profile/timeline_query.h"
#include "ui_test_support.h"

#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>

#include <set>

using namespace day0;
using namespace day0::ui;

namespace {

QString dataFile(const char* name)
{
    return QString::fromUtf8(DAY0_TEST_DATA_DIR) + QStringLiteral("/profile/")
        + QString::fromUtf8(name);
}

std::shared_ptr<const profile::Trace> importFiles(std::initializer_list<const char*> names)
{
    std::vector<std::filesystem::path> paths;
    for (const char* n : names) {
        paths.emplace_back(dataFile(n).toStdString());
    }
    Progress progress;
    auto trace = profile::importTraces(paths, {}, progress, {});
    EXPECT_TRUE(trace.ok()) << trace.error().message;
    return trace.ok() ? std::make_shared<const profile::Trace>(std::move(*trace)) : nullptr;
}

/// A panel with a trace opened the way the user does (a background import), shown offscreen.
struct OpenedPanel {
    Session session;
    JobRunner jobs;
    TimelinePanel panel { session, jobs };

    explicit OpenedPanel(const char* file)
    {
        panel.resize(1400, 860);
        panel.show();
        panel.openTraces({ dataFile(file) });
        test::settle(jobs);
        EXPECT_TRUE(panel.view()->waitForFrame());
    }
    [[nodiscard]] const profile::Trace& trace() const { return *session.trace(); }
    [[nodiscard]] std::string selectedTableName() const
    {
        const QModelIndex current = panel.statsView()->selectionModel()->currentIndex();
        return current.data(KernelStatsModel::NameRole).toString().toStdString();
    }
};

// The longest slice whose short name is `name` (a kernel that is wide enough to click).
profile::SliceIndex longestNamed(const profile::Trace& trace, std::string_view name)
{
    profile::SliceIndex best = profile::kNoSlice;
    for (profile::SliceIndex s = 0; s < trace.sliceCount(); ++s) {
        if (profile::shortSliceName(trace.sliceNameText(s)) == name
            && (best == profile::kNoSlice || trace.sliceDuration(s) > trace.sliceDuration(best))) {
            best = s;
        }
    }
    return best;
}

} // namespace

TEST(TimelineModels, TrackTreeHasARowPerTrackUnderItsRankAndPassesTheTester)
{
    const auto trace = importFiles({ "synthetic_rank0.json", "synthetic_rank1.json" });
    ASSERT_TRUE(trace);
    TrackTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setTraces(trace, nullptr, QStringLiteral("synthetic"), {});
    ASSERT_EQ(model.rowCount(), 1);
    const QModelIndex root = model.index(0, 0);
    EXPECT_EQ(model.rowCount(root), 2) << "two ranks";

    // Every track with slices or instants has exactly one row, under its own rank.
    std::set<profile::TrackId> seen;
    std::size_t slicesInRows = 0;
    for (int r = 0; r < model.rowCount(root); ++r) {
        const QModelIndex rank = model.index(r, 0, root);
        for (int g = 0; g < model.rowCount(rank); ++g) {
            const QModelIndex group = model.index(g, 0, rank);
            for (int t = 0; t < model.rowCount(group); ++t) {
                const QModelIndex leaf = model.index(t, 0, group);
                const auto id = profile::TrackId(leaf.data(TrackTreeModel::TrackRole).toLongLong());
                EXPECT_TRUE(seen.insert(id).second);
                EXPECT_EQ(model.data(rank, Qt::DisplayRole).toString(),
                    QStringLiteral("Rank %1").arg(trace->tracks()[id].rank));
                const auto [a, b] = trace->trackSlices(id);
                EXPECT_EQ(leaf.data(TrackTreeModel::SliceCountRole).toULongLong(), b - a);
                slicesInRows += b - a;
            }
        }
    }
    std::size_t tracksWithEvents = 0;
    std::size_t instantOnly = 0;
    for (profile::TrackId t = 0; t < trace->tracks().size(); ++t) {
        const auto [a, b] = trace->trackSlices(t);
        const auto [i0, i1] = profile::trackInstants(*trace, t);
        tracksWithEvents += b > a || i1 > i0 ? 1 : 0;
        instantOnly += b == a && i1 > i0 ? 1 : 0;
    }
    EXPECT_EQ(seen.size(), tracksWithEvents);
    EXPECT_GT(instantOnly, 0u) << "tracks holding only instants get a row for their markers";
    EXPECT_EQ(slicesInRows, trace->sliceCount());
    EXPECT_EQ(root.data(TrackTreeModel::SliceCountRole).toULongLong(), trace->sliceCount());

    // Collapsing a rank hides its rows; expanding shows them again.
    const std::size_t all = model.visibleRows().size();
    const QModelIndex rank0 = model.index(0, 0, root);
    EXPECT_TRUE(model.setData(rank0, false, TrackTreeModel::ExpandedRole));
    EXPECT_LT(model.visibleRows().size(), all);
    EXPECT_TRUE(model.setData(rank0, true, TrackTreeModel::ExpandedRole));
    EXPECT_EQ(model.visibleRows().size(), all);

    // A second trace stacks below the first, collapse state kept.
    model.setData(rank0, false, TrackTreeModel::ExpandedRole);
    model.setTraces(trace, trace, QStringLiteral("a"), QStringLiteral("b"));
    EXPECT_EQ(model.rowCount(), 2);
    EXPECT_FALSE(model.index(0, 0, model.index(0, 0)).data(TrackTreeModel::ExpandedRole).toBool());
    EXPECT_EQ(model.visibleRows().back().slot, 1);
}

TEST(TimelineModels, StatisticsAndArgumentModelsPassTheTester)
{
    const auto trace = importFiles({ "kineto_2021_resnet50_cut.json.gz" });
    ASSERT_TRUE(trace);
    KernelStatsModel stats;
    QAbstractItemModelTester statsTester(
        &stats, QAbstractItemModelTester::FailureReportingMode::Fatal);
    stats.setStats(profile::kernelStatistics(*trace));
    ASSERT_EQ(stats.rowCount(), 10);
    // Three kernels share the short name vectorized_elementwise_kernel: the table tells them apart.
    std::set<QString> shown;
    for (int r = 0; r < stats.rowCount(); ++r) {
        shown.insert(stats.index(r, KernelStatsModel::NameColumn).data().toString());
    }
    EXPECT_EQ(shown.size(), 10u);
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&stats);
    proxy.setSortRole(KernelStatsModel::SortRole);
    QAbstractItemModelTester proxyTester(
        &proxy, QAbstractItemModelTester::FailureReportingMode::Fatal);
    proxy.sort(KernelStatsModel::CountColumn, Qt::DescendingOrder);
    EXPECT_EQ(proxy.index(0, KernelStatsModel::CountColumn).data(KernelStatsModel::SortRole), 5);

    SliceDetails details;
    QAbstractItemModelTester argsTester(
        details.argsModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    TimelineTraces traces;
    traces.set(0, trace);
    const auto kernel = longestNamed(*trace, "bn_fw_tr_1C11_kernel_NCHW");
    ASSERT_NE(kernel, profile::kNoSlice);
    details.showSlice(traces, { 0, kernel });
    EXPECT_EQ(details.argsModel()->value(QStringLiteral("Category")), QStringLiteral("kernel"));
    EXPECT_FALSE(details.argsModel()->value(QStringLiteral("correlation")).isEmpty());
    details.showSlice(traces, {});
    EXPECT_EQ(details.argsModel()->rowCount(), 0);
}

TEST(TimelinePanel, EmptyStateUntilATraceIsOpened)
{
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    panel.resize(1000, 700);
    EXPECT_TRUE(panel.showsEmptyState());
    QSignalSpy requested(&session, &Session::traceOpenRequested);
    QSignalSpy failed(&session, &Session::traceOpenFailed);
    panel.openTraces({ dataFile("no_such_trace.json") });
    test::settle(jobs);
    ASSERT_EQ(failed.count(), 1);
    EXPECT_TRUE(failed.front().front().toString().contains(QStringLiteral("no_such_trace.json")));
    EXPECT_TRUE(panel.showsEmptyState());
    const QImage shot = panel.grab().toImage();
    EXPECT_GT(test::pixelSpread(shot), 8.0);

    session.requestTraceOpen({ dataFile("synthetic_rank0.json") });
    test::settle(jobs);
    EXPECT_EQ(requested.count(), 1);
    EXPECT_FALSE(panel.showsEmptyState());
    EXPECT_EQ(session.traceSource(), QStringLiteral("synthetic_rank0.json"));
}

TEST(TimelinePanel, AnImportCancelledFromTheStatusBarLeavesTheBusyState)
{
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    panel.openTraces({ dataFile("hta_sampled_rank-0.json.gz") });
    EXPECT_TRUE(panel.importing());
    jobs.cancelAll(); // what the status bar's Cancel button does
    test::settle(jobs);
    EXPECT_FALSE(panel.importing());
    EXPECT_TRUE(panel.showsEmptyState());
    EXPECT_FALSE(session.trace());
    // The panel's own Cancel works too, and a later import still succeeds.
    panel.openTraces({ dataFile("synthetic_rank0.json") });
    test::settle(jobs);
    EXPECT_FALSE(panel.importing());
    EXPECT_TRUE(session.trace());
}

TEST(TimelinePanel, RecordsAnOpenedTraceOnceAsDay0TraceImportDoes)
{
    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    RunsPanel runs(session, jobs);
    test::settle(jobs);
    QSignalSpy recorded(&session, &Session::runRecorded);
    const QStringList ranks { dataFile("synthetic_rank0.json"), dataFile("synthetic_rank1.json") };
    panel.openTraces(ranks);
    test::settle(jobs);
    ASSERT_TRUE(session.trace());
    ASSERT_EQ(recorded.count(), 1);
    auto store = scratch.open();
    EXPECT_EQ(store.count().value(), 1);
    const auto run = store.load(RunId(recorded.at(0).at(0).toLongLong())).value();
    // The record `day0 trace import` makes of the same files.
    std::vector<std::string> files;
    for (const auto& f : ranks) {
        files.push_back(QFileInfo(f).absoluteFilePath().toStdString());
    }
    const auto expected = actions::traceRunRecord(*session.trace(), files, "import", 0.0);
    EXPECT_TRUE(history::sameResult(run, expected));
    EXPECT_EQ(run.info.kind, history::RunKind::Trace);
    EXPECT_EQ(run.info.modelName, "synthetic_rank0.json");
    ASSERT_NE(run.findProperty("action"), nullptr);
    EXPECT_EQ(run.findProperty("action")->value, "import");
    ASSERT_NE(run.findMetric("ranks"), nullptr);
    EXPECT_EQ(run.findMetric("ranks")->value, 2);
    ASSERT_NE(run.findMetric("slices"), nullptr);
    EXPECT_EQ(run.findMetric("slices")->value, double(session.trace()->counts().slices));
    EXPECT_GT(run.findMetric("slices")->value, 0);
    ASSERT_EQ(run.artifacts.size(), 2U);
    EXPECT_EQ(run.artifacts[0].kind, "trace");
    EXPECT_EQ(run.artifacts[0].path, files[0]);
    ASSERT_EQ(runs.runModel()->rowCount(), 1);
    EXPECT_EQ(runs.runModel()->runs().front().kind, history::RunKind::Trace);

    // Opening the same files again shows them again and records nothing.
    session.setTrace(Session::TraceSlot::Primary, nullptr, {});
    panel.openTraces(ranks);
    test::settle(jobs);
    ASSERT_TRUE(session.trace());
    EXPECT_EQ(recorded.count(), 1);
    EXPECT_EQ(store.count().value(), 1);

    // Another trace, here for comparison, is recorded once.
    const QString other = dataFile("hta_simple_add_rank0.json.gz");
    panel.openTraces({ other }, Session::TraceSlot::Comparison);
    test::settle(jobs);
    ASSERT_TRUE(session.trace(Session::TraceSlot::Comparison));
    EXPECT_EQ(recorded.count(), 2);
    panel.openTraces({ other }, Session::TraceSlot::Comparison);
    test::settle(jobs);
    EXPECT_EQ(recorded.count(), 2);
    EXPECT_EQ(store.count().value(), 2);
    EXPECT_EQ(runs.runModel()->rowCount(), 2);

    // A file that cannot be imported is not recorded.
    panel.openTraces({ dataFile("no_such_trace.json") });
    test::settle(jobs);
    EXPECT_EQ(store.count().value(), 2);

    // With recording off (--no-record), a new trace writes nothing.
    auto options = history::recordingOptions();
    options.enabled = false;
    history::setRecordingOptions(options);
    panel.openTraces({ dataFile("hta_sampled_rank-1.json.gz") });
    test::settle(jobs);
    EXPECT_EQ(session.traceSource(), QStringLiteral("hta_sampled_rank-1.json.gz"));
    EXPECT_EQ(recorded.count(), 2);
    EXPECT_EQ(store.count().value(), 2);
}

TEST(TimelinePanel, ClickingAKernelSelectsItInTheTableAndFollowsItsLaunch)
{
    OpenedPanel f("kineto_2021_resnet50_cut.json.gz");
    const profile::Trace& trace = f.trace();
    TimelineView* view = f.panel.view();
    const auto kernel = longestNamed(trace, "bn_fw_tr_1C11_kernel_NCHW");
    ASSERT_NE(kernel, profile::kNoSlice);
    const std::int64_t origin = view->traces().origins[0];
    view->zoomTo(
        trace.sliceStart(kernel) - origin - 20000, trace.sliceEnd(kernel) - origin + 20000);
    ASSERT_TRUE(view->waitForFrame());
    const auto pos = view->slicePosition({ 0, kernel });
    ASSERT_TRUE(pos.has_value());
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, *pos);
    EXPECT_EQ(view->selectedSlice(), (SliceRef { 0, kernel }));
    EXPECT_EQ(f.selectedTableName(), trace.sliceNameText(kernel));
    EXPECT_EQ(f.panel.details()->argsModel()->value(QStringLiteral("Name")).toStdString(),
        trace.sliceNameText(kernel));

    // Its flow leads to the runtime call that launched it, and following it selects that call.
    const auto targets = f.panel.details()->flowTargets();
    ASSERT_FALSE(targets.empty());
    const SliceRef launch = targets.front();
    EXPECT_EQ(trace.sliceCategory(launch.slice), profile::Category::Runtime);
    emit f.panel.details()->followRequested(launch);
    EXPECT_EQ(view->selectedSlice(), launch);
    EXPECT_TRUE(view->slicePosition(launch).has_value()) << "scrolled into view";
    // And back: the launch's flow leads to the kernel.
    const auto back = f.panel.details()->flowTargets();
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back.front(), (SliceRef { 0, kernel }));

    // Clicking empty canvas clears the selection.
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
        QPoint(view->viewport()->width() - 5, view->viewport()->height() - 5));
    EXPECT_FALSE(view->selectedSlice().valid());
}

TEST(TimelinePanel, SelectingATableRowSelectsAndHighlightsThatKernel)
{
    OpenedPanel f("kineto_2021_resnet50_cut.json.gz");
    const profile::Trace& trace = f.trace();
    QTreeView* table = f.panel.statsView();
    ASSERT_GT(table->model()->rowCount(), 3);
    for (const int row : { 2, 0 }) {
        const QModelIndex index = table->model()->index(row, KernelStatsModel::NameColumn);
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(index).center());
        const std::string name = index.data(KernelStatsModel::NameRole).toString().toStdString();
        const SliceRef selected = f.panel.view()->selectedSlice();
        ASSERT_TRUE(selected.valid()) << name;
        EXPECT_EQ(trace.sliceNameText(selected.slice), name);
        ASSERT_TRUE(f.panel.view()->waitForFrame());
        // Every column showing an instance is marked in the frame.
        const auto frame = f.panel.view()->frame();
        EXPECT_EQ(frame->highlight[0], trace.strings().find(name));
        std::size_t highlighted = 0;
        for (const auto& track : frame->tracks) {
            for (const auto& runs : track.depths) {
                for (const auto& run : runs) {
                    highlighted += (run.flags & SliceRun::Highlight) != 0 ? 1 : 0;
                }
            }
        }
        EXPECT_GT(highlighted, 0u) << name;
    }
}

TEST(TimelinePanel, ARangeSelectionGivesTheCoreStatisticsOfThatRange)
{
    OpenedPanel f("kineto_2021_resnet50_cut.json.gz");
    const profile::Trace& trace = f.trace();
    TimelineView* view = f.panel.view();
    const std::int64_t origin = view->traces().origins[0];
    // Drag in the ruler from 20 % to 55 % of the canvas.
    const int x0 = TimelineView::kLabelWidth + view->canvasWidth() * 20 / 100;
    const int x1 = TimelineView::kLabelWidth + view->canvasWidth() * 55 / 100;
    QTest::mousePress(view->viewport(), Qt::LeftButton, {}, QPoint(x0, 10));
    QTest::mouseMove(view->viewport(), QPoint((x0 + x1) / 2, 10));
    QTest::mouseMove(view->viewport(), QPoint(x1, 10));
    QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, QPoint(x1, 10));
    const auto range = view->range();
    ASSERT_TRUE(range.has_value());
    EXPECT_EQ(range->first, view->timeAt(x0));
    EXPECT_EQ(range->second, view->timeAt(x1));
    EXPECT_EQ(f.session.selectedTimeRange().start, origin + range->first);
    test::settle(f.jobs);

    profile::KernelStatsOptions options;
    options.rangeStart = origin + range->first;
    options.rangeEnd = origin + range->second;
    const auto expected = profile::kernelStatistics(trace, options);
    ASSERT_FALSE(expected.empty());
    EXPECT_LT(expected.size(), profile::kernelStatistics(trace).size());
    const auto& shown = f.panel.statsModel()->stats();
    ASSERT_EQ(shown.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(shown[i].name, expected[i].name);
        EXPECT_EQ(shown[i].count, expected[i].count);
        EXPECT_EQ(shown[i].total, expected[i].total);
        EXPECT_EQ(shown[i].max, expected[i].max);
        EXPECT_DOUBLE_EQ(shown[i].p95, expected[i].p95);
    }
    // Clearing the range restores the whole trace.
    QTest::keyClick(view, Qt::Key_Escape);
    test::settle(f.jobs);
    EXPECT_EQ(f.panel.statsModel()->stats().size(), profile::kernelStatistics(trace).size());
    EXPECT_TRUE(f.session.selectedTimeRange().empty());
}

TEST(TimelinePanel, ZoomAndPanKeepTheTimeUnderTheCursor)
{
    OpenedPanel f("hta_sampled_rank-0.json.gz");
    TimelineView* view = f.panel.view();
    const double x = TimelineView::kLabelWidth + view->canvasWidth() * 0.3;
    const std::int64_t before = view->timeAt(x);
    const double scale = view->nsPerPixel();
    view->zoomAround(x, 4.0);
    EXPECT_NEAR(view->nsPerPixel(), scale / 4.0, scale * 1e-9);
    EXPECT_NEAR(double(view->timeAt(x)), double(before), view->nsPerPixel());
    const std::int64_t start = view->windowStart();
    view->panBy(100);
    EXPECT_NEAR(double(view->windowStart() - start), 100 * view->nsPerPixel(), 1.0);
    // Wheel zoom goes through the same path.
    QWheelEvent wheel(QPointF(x, 200), view->viewport()->mapToGlobal(QPointF(x, 200)), QPoint(),
        QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    const std::int64_t underCursor = view->timeAt(x);
    QCoreApplication::sendEvent(view->viewport(), &wheel);
    EXPECT_LT(view->nsPerPixel(), scale / 4.0);
    EXPECT_NEAR(double(view->timeAt(x)), double(underCursor), view->nsPerPixel());
    ASSERT_TRUE(view->waitForFrame());
    EXPECT_EQ(view->frame()->start, view->windowStart());
}

TEST(TimelinePanel, TwoTracesStackForComparison)
{
    OpenedPanel f("hta_trace_compare_base.json.gz");
    f.panel.openTraces(
        { dataFile("hta_trace_compare_test.json.gz") }, Session::TraceSlot::Comparison);
    test::settle(f.jobs);
    ASSERT_TRUE(f.session.trace(Session::TraceSlot::Comparison));
    EXPECT_EQ(f.panel.trackModel()->rowCount(), 2);
    ASSERT_TRUE(f.panel.view()->waitForFrame());
    std::set<int> drawn;
    for (const auto& t : f.panel.view()->frame()->tracks) {
        drawn.insert(t.slot);
    }
    EXPECT_EQ(drawn, (std::set<int> { 0, 1 })) << "both traces are drawn";
    // Each starts at its own zero: its first slice.
    const auto& b = *f.session.trace(Session::TraceSlot::Comparison);
    std::int64_t first = INT64_MAX;
    for (profile::SliceIndex s = 0; s < b.sliceCount(); ++s) {
        first = std::min(first, b.sliceStart(s));
    }
    EXPECT_EQ(f.panel.view()->traces().origins[1], first);
    f.session.setTrace(Session::TraceSlot::Comparison, nullptr, {});
    EXPECT_EQ(f.panel.trackModel()->rowCount(), 1);
}

TEST(TimelinePanel, ScreenshotWithARealTraceShowsSlices)
{
    OpenedPanel f("hta_sampled_rank-0.json.gz");
    const QImage image = f.panel.grab().toImage();
    ASSERT_FALSE(image.isNull());
    EXPECT_GT(test::pixelSpread(image), 12.0);
    // The timeline area holds many pixels in the category colours (saturated, not grey UI).
    const QRect area = f.panel.view()->geometry();
    int coloured = 0;
    for (int y = area.top(); y < area.bottom(); y += 2) {
        for (int x = area.left() + TimelineView::kLabelWidth; x < area.right(); x += 2) {
            const QColor c = image.pixelColor(x, y);
            coloured += c.hsvSaturation() > 90 && c.value() > 80 ? 1 : 0;
        }
    }
    EXPECT_GT(coloured, 1000) << "slices are painted";
    const auto frame = f.panel.view()->frame();
    ASSERT_TRUE(frame);
    std::size_t runs = 0;
    for (const auto& t : frame->tracks) {
        for (const auto& d : t.depths) {
            runs += d.size();
        }
    }
    EXPECT_GT(runs, 100u);
}

TEST(TimelinePanel, CommandLineTraceOptionOpensItForScreenshots)
{
    const QString exe = QStringLiteral(DAY0_WORKBENCH_PATH);
    if (exe.isEmpty()) {
        GTEST_SKIP() << "day0-workbench is not built";
    }
    QTemporaryDir dir;
    QProcess process;
    process.start(exe,
        { QStringLiteral("llama-3.1-8b"), QStringLiteral("--cluster"), QStringLiteral("h200:1x8"),
            QStringLiteral("--trace"), dataFile("kineto_2021_resnet50_cut.json.gz"),
            QStringLiteral("--screenshot"), QStringLiteral("timeline"), QStringLiteral("--out"),
            dir.path() });
    ASSERT_TRUE(process.waitForFinished(120000));
    EXPECT_EQ(process.exitCode(), 0) << process.readAllStandardError().toStdString();
    const QImage image(dir.filePath(QStringLiteral("timeline.png")));
    ASSERT_FALSE(image.isNull());
    int coloured = 0;
    for (int y = 0; y < image.height() / 2; y += 2) {
        for (int x = TimelineView::kLabelWidth; x < image.width(); x += 2) {
            const QColor c = image.pixelColor(x, y);
            coloured += c.hsvSaturation() > 90 && c.value() > 80 ? 1 : 0;
        }
    }
    EXPECT_GT(coloured, 1000) << "the trace's slices are in the screenshot";

    QProcess bad;
    bad.start(exe,
        { QStringLiteral("llama-3.1-8b"), QStringLiteral("--trace"),
            dir.filePath(QStringLiteral("missing.json")), QStringLiteral("--screenshot"),
            QStringLiteral("timeline"), QStringLiteral("--out"), dir.path() });
    ASSERT_TRUE(bad.waitForFinished(120000));
    EXPECT_EQ(bad.exitCode(), 2);
    EXPECT_TRUE(bad.readAllStandardError().contains("missing.json"));
}
