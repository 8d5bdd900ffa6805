// Two `bench serve` runs compared in the runs panel (#23): the per-level table shows both runs'
// percentiles, throughputs, goodput and errors with the change, the latency-against-load curves
// of both are overlaid with legends naming run and time, and runs that are not two benches of
// the same model are said so instead of compared.
#include "actions/bench_record.h"
#include "history/bench_comparison.h"
#include "history/timestamp.h"
#include "panels/runs/bench_comparison_view.h"
#include "panels/runs/run_comparison_view.h"
#include "panels/runs/runs_panel.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QTableView>

using namespace day0;
using namespace day0::ui;

namespace {

// A level as `bench serve` measures it, with latencies scaled by `slower`.
actions::BenchLevelOutcome level(const std::string& model, int concurrency, double slower)
{
    actions::BenchLevelOutcome out;
    out.label = "concurrency=" + std::to_string(concurrency);
    auto& r = out.result;
    r.options.url = "http://127.0.0.1:8000";
    r.options.model = model;
    r.options.maxConcurrency = concurrency;
    r.options.slos.ttftMs = 200;
    r.durationSeconds = 10;
    r.completed = 20 * concurrency;
    r.failed = concurrency == 8 ? 2 : 0;
    if (r.failed > 0) {
        r.errorsByKind = { { "http_429", r.failed } };
    }
    r.requestThroughput = r.completed / r.durationSeconds;
    r.outputThroughput = 32 * r.requestThroughput;
    r.totalTokenThroughput = 64 * r.requestThroughput;
    r.goodput = 0.9 * r.requestThroughput / slower;
    r.perUser.mean = 50 / slower;
    for (const auto& [name, base] :
        { std::pair { "ttft", 40.0 }, std::pair { "tpot", 8.0 }, std::pair { "itl", 7.5 } }) {
        serve::MetricSummary s;
        s.count = std::size_t(r.completed);
        s.mean = base * concurrency * slower;
        s.median = 0.9 * s.mean;
        s.percentiles = { { 50, s.median }, { 90, 1.5 * s.mean }, { 99, 2 * s.mean } };
        r.metrics[name] = s;
    }
    return out;
}

RunId commitBench(history::RunStore& store, const std::string& model, double slower,
    const std::string& label, int minutesAgo)
{
    auto record = actions::benchRunRecord(
        { level(model, 1, slower), level(model, 4, slower), level(model, 8, slower) }, "", "");
    record.info.label = label;
    record.info.created = history::now() - std::chrono::minutes(minutesAgo);
    auto id = store.commit(record);
    EXPECT_TRUE(id.ok()) << id.error().message;
    return id.ok() ? *id : RunId(0);
}

QString cell(const QAbstractItemModel& model, int row, int column)
{
    return model.index(row, column).data().toString();
}

double value(const QAbstractItemModel& model, int row, int column)
{
    return model.index(row, column).data(BenchLevelTableModel::ValueRole).toDouble();
}

} // namespace

TEST(BenchComparison, TwoBenchesSideBySideByLevelWithOverlaidCurves)
{
    test::ScratchStore scratch;
    auto store = scratch.open();
    const RunId before = commitBench(store, "qwen3-0.6b", 1.0, "before", 30);
    const RunId after = commitBench(store, "qwen3-0.6b", 1.25, "batching v2", 10);

    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    auto* view = panel.comparisonView()->benchView();
    QAbstractItemModelTester tester(
        view->levelModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    panel.resize(1600, 1000);
    panel.show();
    test::settle(jobs);
    // The newest bench is proposed against the one before it (same kind, same model).
    ASSERT_EQ(panel.selectedRuns(), (std::vector<RunId> { before, after }));
    ASSERT_TRUE(view->isVisible());
    EXPECT_FALSE(panel.comparisonView()->memoryPlot()->isVisible()) << "benches hold no memory";

    // The table: every level's quantities of both runs, with the change.
    const auto& model = *view->levelModel();
    const int p99 = view->levelModel()->rowOf(2, "p99_ttft_ms");
    ASSERT_GE(p99, 0);
    EXPECT_EQ(cell(model, p99, BenchLevelTableModel::Level), QStringLiteral("2"));
    EXPECT_DOUBLE_EQ(value(model, p99, BenchLevelTableModel::A), 2 * 40.0 * 4);
    EXPECT_DOUBLE_EQ(value(model, p99, BenchLevelTableModel::B), 2 * 40.0 * 4 * 1.25);
    EXPECT_DOUBLE_EQ(value(model, p99, BenchLevelTableModel::Change), 2 * 40.0 * 4 * 0.25);
    EXPECT_EQ(cell(model, p99, BenchLevelTableModel::Relative), QStringLiteral("+25.0 %"));
    for (const char* quantity : { "median_tpot_ms", "p90_itl_ms", "request_throughput",
             "output_throughput", "request_goodput", "failed" }) {
        EXPECT_GE(view->levelModel()->rowOf(1, quantity), 0) << quantity;
    }
    const int errors = view->levelModel()->rowOf(3, "errors_http_429");
    ASSERT_GE(errors, 0) << "errors by kind, per level";
    EXPECT_DOUBLE_EQ(value(model, errors, BenchLevelTableModel::A), 2);
    EXPECT_EQ(view->levelModel()->rowOf(1, "errors_http_429"), -1) << "level 1 had none";
    EXPECT_TRUE(model.index(p99, BenchLevelTableModel::Level)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("concurrency=4")));

    // The curves: A and B, the median and the tail, over the three levels, named by run and
    // time.
    auto* plot = view->curvePlot();
    const auto& series = view->curves();
    ASSERT_EQ(series.size(), 4);
    ASSERT_EQ(plot->lineSeriesCount(), 4);
    const QString timeA = QString::fromStdString(
        history::formatLocal(panel.comparisonView()->comparison()->a.created));
    EXPECT_TRUE(series[0].name.contains(QStringLiteral("#%1").arg(before.value())))
        << fromQString(series[0].name);
    EXPECT_TRUE(series[0].name.contains(timeA)) << fromQString(series[0].name);
    EXPECT_TRUE(series[0].name.contains(QStringLiteral("TTFT p50"))) << fromQString(series[0].name);
    EXPECT_TRUE(series[3].name.contains(QStringLiteral("#%1").arg(after.value())));
    EXPECT_TRUE(series[3].name.contains(QStringLiteral("TTFT p99")));
    EXPECT_NE(series[0].color, series[2].color) << "one colour per run";
    // As drawn: x the level, y the percentile of each level.
    EXPECT_EQ(plot->linePoints(1), (QVector<QPointF> { { 1, 80 }, { 2, 320 }, { 3, 640 } }));
    EXPECT_EQ(plot->linePoints(3), (QVector<QPointF> { { 1, 100 }, { 2, 400 }, { 3, 800 } }));
    // Another latency.
    view->latencyBox()->setCurrentIndex(view->latencyBox()->findData(QStringLiteral("tpot")));
    EXPECT_TRUE(view->curves()[0].name.contains(QStringLiteral("TPOT p50")));
}

TEST(BenchComparison, RunsThatAreNotTwoBenchesOfOneModelAreSaidSo)
{
    test::ScratchStore scratch;
    auto store = scratch.open();
    const RunId qwen = commitBench(store, "qwen3-0.6b", 1.0, "", 30);
    const RunId llama = commitBench(store, "llama-3.1-8b", 1.0, "", 20);
    history::RunRecord plain(history::RunKind::Run);
    plain.info.modelName = "qwen3-0.6b";
    plain.addMetric("tokens_per_s", 10, "tok/s");
    const RunId run = store.commit(plain).value();

    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    panel.resize(1600, 1000);
    panel.show();
    test::settle(jobs);
    auto* view = panel.comparisonView()->benchView();
    panel.selectRuns({ qwen, llama });
    test::settle(jobs);
    ASSERT_TRUE(view->isVisible());
    EXPECT_EQ(view->levelModel()->rowCount(), 0);
    EXPECT_TRUE(view->noteText().contains(QStringLiteral("same model")))
        << fromQString(view->noteText());
    EXPECT_TRUE(view->curvePlot()->showsEmptyState());

    panel.selectRuns({ qwen, run });
    test::settle(jobs);
    EXPECT_EQ(view->levelModel()->rowCount(), 0);
    EXPECT_TRUE(view->noteText().contains(QStringLiteral("B is not a `bench serve` run")))
        << fromQString(view->noteText());
    EXPECT_TRUE(panel.comparisonView()->memoryPlot()->isVisible())
        << "the other run's memory stays in view";

    // One bench alone: its levels, without B.
    panel.selectRuns({ llama });
    test::settle(jobs);
    EXPECT_GT(view->levelModel()->rowCount(), 20);
    EXPECT_TRUE(view->levelView()->isColumnHidden(BenchLevelTableModel::B));
    EXPECT_EQ(view->curvePlot()->lineSeriesCount(), 2);
}

TEST(BenchComparison, CoreMatchesLevelsByNumber)
{
    auto a = actions::benchRunRecord({ level("m", 1, 1.0), level("m", 4, 1.0) }, "", "");
    auto b = actions::benchRunRecord({ level("m", 1, 2.0) }, "", "");
    const auto c = history::compareBenches(a, b);
    ASSERT_TRUE(c.notComparable.empty()) << c.notComparable;
    ASSERT_EQ(c.levels.size(), 2u);
    EXPECT_EQ(c.levels[1].labelB, "") << "B ran one level";
    const auto curveB = history::loadCurve(c, "mean_ttft_ms", true);
    ASSERT_EQ(curveB.size(), 1u);
    EXPECT_DOUBLE_EQ(curveB[0].value, 80.0);
    EXPECT_EQ(
        history::benchLatencyMetrics(c), (std::vector<std::string> { "ttft", "tpot", "itl" }));
    EXPECT_EQ(history::benchPercentiles(c, "ttft"), (std::vector<double> { 50, 90, 99 }));
}
