// The serving panel: a staged load test of the session's (shrunk) checkpoint served in-process,
// its per-level table and curves, the --check outcome, the bench run recorded in the store; an
// unreachable endpoint, a bad stage and a cancelled bench.
#include "panels/serving/bench_level_model.h"
#include "panels/serving/serving_panel.h"
#include "panels/serving/stage_table.h"
#include "serving_test_support.h"
#include "ui_test_support.h"
#include "widgets/colors.h"
#include "widgets/plot_widget.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>

using namespace day0;
using namespace day0::ui;

namespace {

QString cell(const BenchLevelModel& model, int row, int column)
{
    return model.index(row, column).data().toString();
}

} // namespace

TEST(ServingPanel, StagedRunOfTheSessionCheckpointFillsTheTableCurvesAndRecord)
{
    test::ScopedCache cache;
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2"); // runs its shrunk checkpoint, served in-process
    ServingPanel panel(session, jobs);
    QAbstractItemModelTester tester(
        panel.resultModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    EXPECT_TRUE(panel.paretoPlot()->showsEmptyState()) << "no run yet: the empty state";
    EXPECT_TRUE(panel.paretoPlot()->noteText().contains(QStringLiteral("press Run")));
    EXPECT_EQ(panel.targetBox()->currentIndex(), 0) << "the session's checkpoint by default";
    EXPECT_EQ(panel.stageTable()->rowCount(), 4) << "default stages";

    panel.stageTable()->setStages({ test::stage(1, 3), test::stage(3, 6) });
    panel.ttftSlo()->setValue(1e6); // every request is good
    ASSERT_TRUE(panel.checkBox()->isChecked());
    QSignalSpy finished(&panel, &ServingPanel::finished);
    QSignalSpy recorded(&session, &Session::runRecorded);
    panel.runButton()->click();
    EXPECT_TRUE(panel.cancelButton()->isEnabled());
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 120000)) << "bench did not end";
    ASSERT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());

    const auto& model = *panel.resultModel();
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_TRUE(cell(model, 1, BenchLevelModel::Level).startsWith(QStringLiteral("concurrency=3")))
        << fromQString(cell(model, 1, BenchLevelModel::Level));
    EXPECT_EQ(cell(model, 0, BenchLevelModel::Completed), QStringLiteral("3"));
    EXPECT_EQ(cell(model, 1, BenchLevelModel::Completed), QStringLiteral("6"));
    EXPECT_EQ(cell(model, 1, BenchLevelModel::Failed), QStringLiteral("0"));
    EXPECT_EQ(cell(model, 1, BenchLevelModel::Check), QStringLiteral("6 compared, none diverge"));
    for (int c = BenchLevelModel::RequestRate; c <= BenchLevelModel::E2elP99; ++c) {
        bool ok = false;
        const double v = cell(model, 1, c).toDouble(&ok);
        EXPECT_TRUE(ok && v >= 0) << "column " << c << ": " << fromQString(cell(model, 1, c));
    }
    // Every request met the SLO: goodput equals the request throughput.
    EXPECT_EQ(
        cell(model, 1, BenchLevelModel::Goodput), cell(model, 1, BenchLevelModel::RequestRate));
    EXPECT_LE(cell(model, 1, BenchLevelModel::TtftP50).toDouble(),
        cell(model, 1, BenchLevelModel::TtftP99).toDouble());
    EXPECT_TRUE(cell(model, 1, BenchLevelModel::Errors).isEmpty());
    EXPECT_FALSE(model.headerData(BenchLevelModel::TpotP50, Qt::Horizontal, Qt::ToolTipRole)
                     .toString()
                     .isEmpty());

    // One point per level on the throughput curve, at the table's figures.
    EXPECT_FALSE(panel.paretoPlot()->showsEmptyState());
    const auto points = panel.paretoPlot()->linePoints(0);
    ASSERT_EQ(points.size(), 2);
    EXPECT_EQ(panel.latencyPlot()->lineSeriesCount(), 4);

    // Recorded as the CLI's bench run, announced to the runs panel.
    ASSERT_EQ(recorded.count(), 1);
    EXPECT_EQ(recorded.front().front().toLongLong(), panel.recordedRun());
    auto runs = store.open();
    auto record = runs.load(RunId(panel.recordedRun()));
    ASSERT_TRUE(record.ok()) << record.error().message;
    ASSERT_NE(record->findProperty("tool"), nullptr);
    EXPECT_EQ(record->findProperty("tool")->value, "bench");
    ASSERT_NE(record->findProperty("bench_l2"), nullptr);
    EXPECT_NE(record->findProperty("bench_l2")->value.find("concurrency=3"), std::string::npos);
    ASSERT_NE(record->findMetric("bench_l2_completed"), nullptr);
    EXPECT_EQ(record->findMetric("bench_l2_completed")->value, 6.0);
    ASSERT_NE(record->findMetric("bench_l2_check_diverged"), nullptr);
    EXPECT_EQ(record->findMetric("bench_l2_check_diverged")->value, 0.0);
    ASSERT_NE(record->findMetric("bench_l1_request_goodput"), nullptr);
    EXPECT_EQ(record->info.status, history::RunStatus::Ok);
}

TEST(ServingPanel, AnUnreachableEndpointIsReportedAndNothingRecorded)
{
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    ServingPanel panel(session, jobs);
    panel.targetBox()->setCurrentIndex(1);
    panel.checkBox()->setChecked(false);
    panel.urlEdit()->setText(QStringLiteral("http://127.0.0.1:1"));
    panel.stageTable()->setStages({ test::stage(1, 2) });
    QSignalSpy finished(&panel, &ServingPanel::finished);
    panel.run();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 60000));
    EXPECT_EQ(finished.front().front().toInt(), 2);
    EXPECT_TRUE(panel.summaryLabel()->text().contains(QStringLiteral("127.0.0.1:1")))
        << fromQString(panel.summaryLabel()->text());
    EXPECT_EQ(panel.recordedRun(), 0);
    EXPECT_EQ(panel.resultModel()->rowCount(), 0);
    EXPECT_TRUE(panel.runButton()->isEnabled());
}

TEST(ServingPanel, ABadStageIsNamedAndNothingRuns)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ServingPanel panel(session, jobs);
    panel.stageTable()->item(1, StageTable::Rate)->setText(QStringLiteral("fast"));
    panel.run();
    EXPECT_FALSE(panel.running());
    EXPECT_TRUE(panel.summaryLabel()->text().contains(QStringLiteral("Stage 2")))
        << fromQString(panel.summaryLabel()->text());
    EXPECT_TRUE(panel.summaryLabel()->text().contains(QStringLiteral("fast")));
    QString error;
    panel.stageTable()->item(1, StageTable::Rate)->setText(QStringLiteral("2.5"));
    auto stages = panel.stageTable()->stages(&error);
    ASSERT_TRUE(stages.has_value()) << fromQString(error);
    EXPECT_EQ((*stages)[1].rate, 2.5);
    EXPECT_EQ((*stages)[1].label().substr(0, 18), "concurrency=2 rate");
}

TEST(ServingPanel, CancelStopsTheBenchWithoutARecord)
{
    test::ScopedCache cache;
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ServingPanel panel(session, jobs);
    auto slow = test::stage(1, 400);
    slow.rate = 5; // 80 s of requests: cancelled long before
    panel.stageTable()->setStages({ slow });
    panel.checkBox()->setChecked(false);
    QSignalSpy finished(&panel, &ServingPanel::finished);
    QSignalSpy recorded(&session, &Session::runRecorded);
    panel.run();
    ASSERT_TRUE(panel.running());
    QTest::qWait(1500);
    panel.cancelButton()->click();
    ASSERT_EQ(finished.count(), 1);
    EXPECT_EQ(finished.front().front().toInt(), 3);
    EXPECT_FALSE(panel.running());
    EXPECT_TRUE(panel.runButton()->isEnabled());
    test::settle(jobs);
    EXPECT_EQ(recorded.count(), 0);
    EXPECT_EQ(panel.resultModel()->rowCount(), 0);
}

TEST(BenchLevelModel, ShowsTheFirstDivergenceAndErrorsByKind)
{
    BenchLevelModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    actions::BenchLevelOutcome level;
    level.label = "concurrency=8 32→16 tok";
    level.result.completed = 4;
    level.result.failed = 1;
    level.result.errorsByKind = { { "http_429", 1 } };
    serve::LevelCheck check;
    check.checked = 4;
    check.divergences.push_back({ 2, 5, "token", 42, 17, 0.0 });
    level.check = check;
    model.append(level);
    ASSERT_EQ(model.rowCount(), 1);
    EXPECT_EQ(cell(model, 0, BenchLevelModel::Errors), QStringLiteral("http_429: 1"));
    const QString text = cell(model, 0, BenchLevelModel::Check);
    EXPECT_TRUE(text.startsWith(QStringLiteral("1 of 4 diverge; first: request 2")))
        << fromQString(text);
    EXPECT_TRUE(cell(model, 0, BenchLevelModel::TtftP50).isEmpty()) << "no data, no number";
    EXPECT_TRUE(cell(model, 0, BenchLevelModel::Goodput).isEmpty()) << "no SLOs, no goodput";
    EXPECT_EQ(model.index(0, BenchLevelModel::Check).data(Qt::ForegroundRole).value<QColor>(),
        errorColor());
    model.clear();
    EXPECT_EQ(model.rowCount(), 0);
}
