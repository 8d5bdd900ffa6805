#include "base/file_util.h"
#include "history/comparison_views.h"
#include "history/metric_labels.h"
#include "history/recording.h"
#include "history/run_json.h"
#include "history/run_store.h"
#include "panels/planner/layout_table_model.h"
#include "panels/planner/planner_panel.h"
#include "panels/runs/delta_table_model.h"
#include "panels/runs/run_comparison_view.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "plan/plan_record.h"
#include "ui_test_support.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDir>
#include <QLineEdit>
#include <QTableView>
#include <QTemporaryDir>

#include <cmath>
#include <fstream>

using namespace day0;
using namespace day0::ui;

namespace {

using test::ScratchStore;

history::RunRecord fixture(const std::string& name)
{
    const std::string file = std::string(DAY0_TEST_DATA_DIR) + "/history/" + name;
    std::ifstream in(file);
    auto json = nlohmann::json::parse(in);
    if (json.is_array()) {
        json = json.front();
    }
    auto run = history::runFromJson(json, file);
    EXPECT_TRUE(run.ok()) << run.error().message;
    return std::move(run).value();
}

/// A 32-layer run with errors growing with depth, generated here (not measured): `scale`
/// multiplies every error and `spike` adds one outlier in layer 20's MLP.
history::RunRecord deepRun(const std::string& label, const std::string& precision, double scale,
    bool spike, int minutesAgo)
{
    history::RunRecord r(history::RunKind::Run);
    r.info.label = label;
    r.info.modelName = "deepseek-v3-shrunk";
    r.info.precision = precision;
    r.info.plan = "tp=2,pp=2";
    r.info.backend = "cpu-reference";
    r.info.duration = Seconds(30.0 / scale);
    r.info.created = history::now() - std::chrono::minutes(minutesAgo);
    r.addMetric("tokens_per_s", 80.0 * std::sqrt(scale), "tok/s");
    r.addMetric("ttft_s", 0.5 / std::sqrt(scale), "s");
    const char* subs[] = { "self_attn.q_proj", "self_attn", "mlp.gate", "mlp", "" };
    for (int layer = 0; layer < 32; ++layer) {
        for (int s = 0; s < 5; ++s) {
            const std::string anchor = std::string("model.layers.") + std::to_string(layer)
                + (subs[s][0] ? std::string(".") + subs[s] : std::string());
            double e = scale * 1e-3 * (1.0 + 0.09 * layer) * (1.0 + 0.15 * s)
                * (1.0 + 0.2 * std::sin(layer * 1.7 + s));
            if (spike && layer == 20 && s == 3) {
                e *= 9.0;
            }
            r.layers.add(anchor, "rel_l2", e);
            r.layers.add(anchor, "max_abs", e * 40.0);
        }
    }
    for (int rank = 0; rank < 4; ++rank) {
        const int stage = rank / 2;
        r.addMemory(rank, stage, "weights", Bytes::fromGiB((stage == 0 ? 9.0 : 8.5) / scale));
        r.addMemory(rank, stage, "activations", Bytes::fromGiB(2.5 + stage));
        r.addMemory(rank, stage, "kv_cache", Bytes::fromGiB(1.0));
    }
    return r;
}

/// Waits, running the event loop, until `done` holds or `ms` pass.
std::vector<RunId> commitFixtures(history::RunStore& store)
{
    std::vector<RunId> ids;
    for (const char* name : { "run_bf16.json", "run_fp8.json" }) {
        auto id = store.commit(fixture(name));
        EXPECT_TRUE(id.ok()) << id.error().message;
        ids.push_back(*id);
    }
    return ids;
}

} // namespace

TEST(RunsPanel, ListsTheStoreAndModelsPassTheTester)
{
    ScratchStore scratch;
    auto store = scratch.open();
    commitFixtures(store);
    ASSERT_TRUE(store.commit(deepRun("bf16 reference", "bf16", 1.0, false, 20)).ok());
    ASSERT_TRUE(store.commit(deepRun("fp8 kernels v3", "fp8", 4.0, true, 10)).ok());

    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    QAbstractItemModelTester runTester(
        panel.runModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    QAbstractItemModelTester deltaTester(panel.comparisonView()->deltaModel(),
        QAbstractItemModelTester::FailureReportingMode::Fatal);
    test::settle(jobs);
    ASSERT_EQ(panel.runModel()->rowCount(), 4) << panel.statusText().toStdString();
    EXPECT_TRUE(panel.statusText().contains(QStringLiteral("4 runs")))
        << panel.statusText().toStdString();
    // Newest first, as the store lists them.
    EXPECT_EQ(panel.runModel()->runs().front().label, "fp8 kernels v3");
    // The newest run is compared at once with the one before it of the same kind and model.
    const auto selected = panel.selectedRuns();
    ASSERT_EQ(selected.size(), 2u);
    const auto* comparison = panel.comparisonView()->comparison();
    ASSERT_NE(comparison, nullptr) << panel.comparisonView()->headerText().toStdString();
    EXPECT_EQ(comparison->a.label, "bf16 reference");
    EXPECT_EQ(comparison->b.label, "fp8 kernels v3");
    EXPECT_GT(panel.comparisonView()->deltaModel()->rowCount(), 3);

    // Filters: the model chooser lists the models, each control narrows the list.
    auto* model = panel.modelBox();
    ASSERT_EQ(model->count(), 3) << "all models + two names";
    model->setCurrentIndex(model->findData(QStringLiteral("kimi-k2-shrunk")));
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 2);
    panel.periodBox()->setCurrentIndex(panel.periodBox()->findData(86400));
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 0) << "the fixtures are from 2025";
    model->setCurrentIndex(0);
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 2) << "the two generated runs are minutes old";
    panel.periodBox()->setCurrentIndex(0);
    panel.searchEdit()->setText(QStringLiteral("FP8")); // read after a short pause in typing
    EXPECT_TRUE(test::waitFor([&] { return panel.runModel()->rowCount() == 2; }, 5000))
        << "search matches label and precision";
    panel.searchEdit()->clear();
    EXPECT_TRUE(test::waitFor([&] { return panel.runModel()->rowCount() == 4; }, 5000));
    panel.statusBox()->setCurrentIndex(panel.statusBox()->findData(QStringLiteral("failed")));
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 0);
    panel.statusBox()->setCurrentIndex(0);
    panel.kindBox()->setCurrentIndex(panel.kindBox()->findData(QStringLiteral("run")));
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 4);
}

TEST(RunsPanel, ComparingTwoRunsDrawsExactlyTheCoresNumbers)
{
    ScratchStore scratch;
    auto store = scratch.open();
    const auto ids = commitFixtures(store);
    const auto a = store.load(ids[0]).value();
    const auto b = store.load(ids[1]).value();
    const auto core = history::compareRuns(a, b);

    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    panel.resize(1400, 860);
    test::settle(jobs);
    panel.selectRuns({ ids[1], ids[0] });
    test::settle(jobs);
    auto* view = panel.comparisonView();
    ASSERT_NE(view->comparison(), nullptr) << view->headerText().toStdString();
    EXPECT_EQ(view->comparison()->a.id, ids[0]) << "the older run is A";
    EXPECT_FALSE(view->single());
    ASSERT_EQ(view->metric(), "rel_l2");
    ASSERT_EQ(view->subModule(), "");

    // Error against depth: both curves, point for point.
    const auto curve = history::depthCurves(core, "rel_l2", "");
    ASSERT_EQ(curve.size(), 4u);
    const auto pa = view->depthPlot()->linePoints(0);
    const auto pb = view->depthPlot()->linePoints(1);
    ASSERT_EQ(pa.size(), 4);
    ASSERT_EQ(pb.size(), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(pa[i].x(), curve[std::size_t(i)].layer);
        EXPECT_EQ(pa[i].y(), *curve[std::size_t(i)].a);
        EXPECT_EQ(pb[i].y(), *curve[std::size_t(i)].b);
    }
    // Another sub-module.
    view->subModuleBox()->setCurrentIndex(view->subModuleBox()->findData(QStringLiteral("mlp")));
    const auto mlp = history::depthCurves(core, "rel_l2", "mlp");
    ASSERT_EQ(view->depthPlot()->linePoints(1).size(), int(mlp.size()));
    EXPECT_EQ(view->depthPlot()->linePoints(1)[2].y(), *mlp[2].b);

    // Heatmap difference: every cell is the core's change.
    const auto grid = history::layerGrid(core, "rel_l2");
    for (const auto kind : { history::LayerChange::Log10Ratio, history::LayerChange::Difference }) {
        view->changeBox()->setCurrentIndex(view->changeBox()->findData(int(kind)));
        const auto changes = history::layerChanges(grid, kind);
        ASSERT_EQ(view->heatmapPlot()->heatmapSize(), QSize(int(grid.columns()), int(grid.rows())));
        for (std::size_t r = 0; r < grid.rows(); ++r) {
            for (std::size_t c = 0; c < grid.columns(); ++c) {
                EXPECT_EQ(
                    view->heatmapPlot()->heatmapCell(int(r), int(c)), changes[grid.index(r, c)])
                    << r << "," << c;
            }
        }
    }
    // The other metric.
    view->metricBox()->setCurrentIndex(view->metricBox()->findData(QStringLiteral("max_abs")));
    EXPECT_EQ(view->heatmapPlot()->heatmapCell(0, 0),
        history::layerChanges(history::layerGrid(core, "max_abs"), history::LayerChange::Difference)
            .front());

    // Memory bars: each run's busiest rank, component by component; then one chosen rank.
    for (int choice = 0; choice < view->slotBox()->count(); ++choice) {
        view->slotBox()->setCurrentIndex(choice);
        const auto bars = history::memoryBars(core, view->memorySlot());
        ASSERT_EQ(view->memoryPlot()->barLayerCount(), int(bars.components.size()));
        for (std::size_t i = 0; i < bars.components.size(); ++i) {
            EXPECT_EQ(view->memoryPlot()->barValue(int(i), 0), double(bars.a[i].value));
            EXPECT_EQ(view->memoryPlot()->barValue(int(i), 1), double(bars.b[i].value));
        }
    }
    EXPECT_GT(view->slotBox()->count(), 2);

    // Deltas: the duration, then the core's metric deltas in its order.
    const auto* deltas = view->deltaModel();
    const auto value = [&](int row, int column) {
        return deltas->index(row, column).data(DeltaTableModel::ValueRole).toDouble();
    };
    EXPECT_EQ(
        deltas->index(0, DeltaTableModel::Quantity).data().toString(), QStringLiteral("Duration"));
    EXPECT_EQ(value(0, DeltaTableModel::A), core.durationA->value);
    EXPECT_EQ(value(0, DeltaTableModel::B), core.durationB->value);
    for (std::size_t i = 0; i < core.metrics.size(); ++i) {
        const int row = int(i) + 1;
        // A readable name; the stored key in the tooltip.
        EXPECT_EQ(deltas->index(row, 0).data().toString(),
            toQString(history::metricLabel(core.metrics[i].name)));
        EXPECT_EQ(deltas->index(row, 0).data(Qt::ToolTipRole).toString(),
            toQString(core.metrics[i].name));
        EXPECT_EQ(value(row, DeltaTableModel::Change), *core.metrics[i].delta());
        EXPECT_EQ(value(row, DeltaTableModel::Relative), *core.metrics[i].relative());
    }
    EXPECT_TRUE(view->headerText().contains(QStringLiteral("precision: bf16 → fp8")))
        << view->headerText().toStdString();
}

TEST(RunsPanel, OneRunAloneAndPlanRunsWithoutLayers)
{
    ScratchStore scratch;
    auto store = scratch.open();
    const auto ids = commitFixtures(store);
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=1");
    plan::PlannerOptions options;
    options.workload = session.workload();
    Progress progress;
    const auto sweep = plan::planLayouts(*session.summary(), session.cluster(), options, progress);
    ASSERT_TRUE(sweep.ok());
    const auto planId
        = store.commit(plan::planRunRecord(*session.summary(), session.cluster(), options, *sweep));
    ASSERT_TRUE(planId.ok());

    RunsPanel panel(session, jobs);
    test::settle(jobs);
    panel.selectRuns({ ids[0] });
    test::settle(jobs);
    auto* view = panel.comparisonView();
    ASSERT_NE(view->comparison(), nullptr) << view->headerText().toStdString();
    EXPECT_TRUE(view->single());
    EXPECT_EQ(view->depthPlot()->lineSeriesCount(), 1);
    const auto grid = history::layerGrid(*view->comparison(), "rel_l2");
    EXPECT_EQ(view->heatmapPlot()->heatmapCell(1, 0), *grid.a[grid.index(1, 0)]);
    EXPECT_TRUE(view->deltaView()->isColumnHidden(DeltaTableModel::B));

    // A plan run: memory per stage and the planner's figures, no layer metrics.
    panel.selectRuns({ *planId });
    test::settle(jobs);
    ASSERT_NE(view->comparison(), nullptr) << view->headerText().toStdString();
    EXPECT_EQ(view->depthPlot()->lineSeriesCount(), 0);
    EXPECT_FALSE(view->depthPlot()->isVisibleTo(view)) << "no layer views for a plan run";
    EXPECT_FALSE(view->heatmapPlot()->heatmapSize().isValid());
    const auto& best = sweep->layouts.front();
    const auto bars = history::memoryBars(*view->comparison());
    EXPECT_NEAR(double(bars.totalA.value), best.maxMemory, 16.0);
    EXPECT_GE(view->memoryPlot()->barLayerCount(), 4);

    // Applying it makes its layout the session's plan.
    session.setPlan(*plan::parsePlan("tp=1"));
    EXPECT_TRUE(panel.applySelectedPlan().isEmpty());
    EXPECT_EQ(session.plan(), best.layout.toPlan());
    // A run of another model or cluster is refused with the reason.
    panel.selectRuns({ ids[0] });
    test::settle(jobs);
    EXPECT_TRUE(panel.applySelectedPlan().contains(QStringLiteral("plan run")));
    test::configure(session, "h200:4x8", plan::Mode::Train, "tp=1");
    panel.selectRuns({ *planId });
    test::settle(jobs);
    EXPECT_TRUE(panel.applySelectedPlan().contains(QStringLiteral("h200:2x8")));
}

TEST(RunsPanel, FollowsTheStoreAndRecordsFromThePlanner)
{
    ScratchStore scratch;
    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    test::settle(jobs);
    EXPECT_EQ(panel.runModel()->rowCount(), 0);
    EXPECT_TRUE(panel.statusText().contains(QStringLiteral("does not exist")))
        << panel.statusText().toStdString();

    // Another process (the CLI) writes a run: the two-second check notices it.
    {
        auto store = scratch.open();
        ASSERT_TRUE(store.commit(fixture("run_bf16.json")).ok());
    }
    ASSERT_TRUE(test::waitFor([&] { return panel.runModel()->rowCount() == 1; }, 8000));

    // The planner records each sweep (planRunRecord, as `day0 plan`) and the list follows.
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=1");
    PlannerPanel planner(session, jobs);
    test::settle(jobs);
    ASSERT_EQ(panel.runModel()->rowCount(), 2);
    const auto& newest = panel.runModel()->runs().front();
    EXPECT_EQ(newest.kind, history::RunKind::Plan);
    EXPECT_EQ(newest.modelName, session.summary()->name);
    const auto& best = planner.layoutModel()->layouts().front();
    EXPECT_EQ(newest.plan, plan::formatPlan(best.layout.toPlan()));
    auto store = scratch.open();
    const auto record = store.load(newest.id).value();
    ASSERT_NE(record.findMetric("tokens_per_s"), nullptr);
    EXPECT_EQ(record.findMetric("tokens_per_s")->value, best.tokensPerSecond);

    // The same sweep again (a restart, say) adds nothing; a new workload adds a run.
    planner.runPlanner();
    test::settle(jobs);
    EXPECT_EQ(store.count().value(), 2);
    auto workload = session.workload();
    workload.globalBatch = 512;
    session.setWorkload(workload);
    test::settle(jobs);
    EXPECT_EQ(store.count().value(), 3);
    EXPECT_EQ(panel.runModel()->rowCount(), 3);

    // With recording off, a new result writes nothing.
    auto options = history::recordingOptions();
    options.enabled = false;
    history::setRecordingOptions(options);
    workload.globalBatch = 256;
    session.setWorkload(workload);
    test::settle(jobs);
    EXPECT_EQ(store.count().value(), 3);
}

TEST(RunsPanel, ExportsAndDeletes)
{
    ScratchStore scratch;
    auto store = scratch.open();
    const auto ids = commitFixtures(store);
    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    test::settle(jobs);

    const QString path = QDir(scratch.dir()).filePath(QStringLiteral("fp8.json"));
    QString exportError = QStringLiteral("not delivered");
    QObject::connect(&panel, &RunsPanel::exported,
        [&](const QString&, const QString& error) { exportError = error; });
    panel.exportRun(ids[1], path);
    test::settle(jobs);
    ASSERT_TRUE(exportError.isEmpty()) << exportError.toStdString();
    const auto text = readFile(fromQString(path));
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, history::toJson(store.load(ids[1]).value()).dump(2) + "\n")
        << "the same document as `day0 runs export`";
    panel.exportRun(ids[1], QDir(scratch.dir()).filePath(QStringLiteral("no/such/dir/x.json")));
    test::settle(jobs);
    EXPECT_TRUE(exportError.contains(QStringLiteral("no/such/dir"))) << exportError.toStdString();

    int deletedCount = -1;
    QObject::connect(
        &panel, &RunsPanel::deleted, [&](int count, const QString&) { deletedCount = count; });
    panel.deleteRuns({ ids[0] });
    test::settle(jobs);
    EXPECT_EQ(deletedCount, 1);
    EXPECT_EQ(store.count().value(), 1);
    ASSERT_EQ(panel.runModel()->rowCount(), 1);
    EXPECT_EQ(panel.runModel()->runs().front().id, ids[1]);
}

TEST(RunsPanel, ScreenshotIsNotBlank)
{
    ScratchStore scratch;
    auto store = scratch.open();
    commitFixtures(store);
    ASSERT_TRUE(store.commit(deepRun("bf16 reference", "bf16", 1.0, false, 20)).ok());
    ASSERT_TRUE(store.commit(deepRun("fp8 kernels v3", "fp8", 4.0, true, 10)).ok());
    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    panel.resize(1400, 860);
    panel.show();
    test::settle(jobs);
    ASSERT_NE(panel.comparisonView()->comparison(), nullptr);
    const QImage image = panel.grab().toImage();
    EXPECT_GT(test::pixelSpread(image), 12.0);
    if (const QString out = qEnvironmentVariable("DAY0_UI_SCREENSHOT_DIR"); !out.isEmpty()) {
        image.save(QDir(out).filePath(QStringLiteral("runs_panel.png")));
    }
    EXPECT_GT(
        test::pixelSpread(panel.comparisonView()->heatmapPlot()->toImage(QSize(600, 400))), 12.0);
}
