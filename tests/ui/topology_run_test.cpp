#include "checkpoint/sharding.h"
#include "panels/planner/layout_table_model.h"
#include "panels/planner/planner_panel.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "parallel/run.h"
#include "ui_test_support.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolButton>

using namespace day0;
using namespace day0::ui;

TEST(TopologyRun, RunsThePlanOnInProcessRanksWithProgressAndTraffic)
{
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x2", plan::Mode::Infer, "tp=2,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    auto* run = panel.findChild<QToolButton*>(QStringLiteral("runPlanButton"));
    auto* cancel = panel.findChild<QToolButton*>(QStringLiteral("cancelRunButton"));
    ASSERT_NE(run, nullptr);
    ASSERT_NE(cancel, nullptr);
    EXPECT_FALSE(cancel->isEnabled());
    EXPECT_LT(panel.scene()->rankProgress(0), 0.0); // no run yet: no bars
    run->click();
    EXPECT_TRUE(cancel->isEnabled());
    EXPECT_FALSE(run->isEnabled());
    EXPECT_GE(panel.scene()->rankProgress(3), 0.0); // bars appear at once
    test::settle(jobs);
    const QString status = panel.runStatus();
    EXPECT_TRUE(status.startsWith(QStringLiteral("ran tp=2,pp=2,ep=2,dp=1")))
        << status.toStdString();
    EXPECT_TRUE(status.contains(QStringLiteral("4 in-process ranks"))) << status.toStdString();
    EXPECT_TRUE(run->isEnabled());
    for (int r = 0; r < 4; ++r) {
        EXPECT_DOUBLE_EQ(panel.scene()->rankProgress(r), 1.0) << "rank " << r;
    }
    // Two GPUs per node: stage 0 on node 0, stage 1 on node 1; TP and expert traffic stays in
    // a node, pipeline hand-offs cross both uplinks.
    const auto& traffic = panel.scene()->linkTraffic();
    ASSERT_EQ(traffic.size(), 2U);
    EXPECT_GT(traffic[0].intraBytes, 0);
    EXPECT_GT(traffic[1].intraBytes, 0);
    EXPECT_GT(traffic[0].interBytes, 0);
    EXPECT_EQ(traffic[0].interBytes, traffic[1].interBytes);
    EXPECT_EQ(panel.scene()->trafficLabelCount(), 4);
}

// A plan larger than the in-process ranks runs scaled to a group of its shape, and says so.
TEST(TopologyRun, RunsA256RankPlanScaledToItsShape)
{
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    // The embedded default's starting plan: dp is the rest of the cluster, 256 / 64 = 4.
    test::configure(
        session, "h200:32x8", plan::Mode::Train, "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    panel.runPlan();
    test::settle(jobs);
    const QString status = panel.runStatus();
    EXPECT_TRUE(status.startsWith(QStringLiteral("ran "))) << status.toStdString();
    EXPECT_TRUE(status.contains(QStringLiteral("scaled tp=8,pp=8,ep=32,etp=1,dp=4")))
        << status.toStdString();
    EXPECT_TRUE(status.contains(QStringLiteral("(256 ranks)"))) << status.toStdString();
    EXPECT_FALSE(status.contains(QStringLiteral("take at most"))) << status.toStdString();
}

// What the planner ranks first for the embedded default runs as it is proposed.
TEST(TopologyRun, RunsThePlannersBestPlanForTheDemo)
{
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    test::configure(
        session, "h200:32x8", plan::Mode::Train, "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full");
    PlannerPanel planner(session, jobs);
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_GT(planner.layoutModel()->rowCount(), 0);
    const plan::ParallelPlan best = planner.layoutModel()->layouts().front().layout.toPlan();
    ASSERT_EQ(session.plan(), best) << "the planner's choice is the session's plan";
    panel.runPlan();
    test::settle(jobs);
    const QString status = panel.runStatus();
    EXPECT_TRUE(status.startsWith(QStringLiteral("ran "))) << status.toStdString();
    EXPECT_FALSE(status.contains(QStringLiteral("must divide"))) << status.toStdString();
}

TEST(TopologyRun, CancelStopsTheRun)
{
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-8b");
    test::configure(session, "h200:1x8", plan::Mode::Infer, "tp=2,pp=2,dp=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    panel.runPlan();
    panel.cancelRun();
    test::settle(jobs);
    EXPECT_EQ(panel.runStatus(), QStringLiteral("run cancelled"));
    EXPECT_TRUE(panel.findChild<QToolButton*>(QStringLiteral("runPlanButton"))->isEnabled());
    EXPECT_LT(panel.scene()->rankProgress(0), 0.0);
    EXPECT_EQ(scratch.open().count().value(), 0) << "a cancelled run is not recorded";
}

TEST(TopologyRun, RecordsEachRunAsDay0RunPlanDoes)
{
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x2", plan::Mode::Infer, "tp=2,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    RunsPanel runs(session, jobs);
    test::settle(jobs);
    QSignalSpy recorded(&session, &Session::runRecorded);
    EXPECT_EQ(runs.runModel()->rowCount(), 0) << "showing the plan records nothing";

    panel.runPlan();
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 1) << panel.runStatus().toStdString();
    auto store = scratch.open();
    EXPECT_EQ(store.count().value(), 1);
    const auto run = store.load(RunId(recorded.at(0).at(0).toLongLong())).value();
    const auto layout = checkpoint::shardLayoutFromPlan(session.plan()).value();
    EXPECT_EQ(run.info.kind, history::RunKind::Run);
    EXPECT_EQ(run.info.status, history::RunStatus::Ok);
    EXPECT_EQ(run.info.plan, parallel::layoutString(layout, 1));
    EXPECT_TRUE(panel.runStatus().startsWith(
        QStringLiteral("ran ") + QString::fromStdString(run.info.plan)));
    EXPECT_EQ(run.info.precision, "fp32");
    EXPECT_EQ(run.info.backend, "day0-cpu");
    EXPECT_FALSE(run.info.modelName.empty());
    EXPECT_NE(run.info.modelFingerprint.find("/l"), std::string::npos)
        << "the architecture fingerprint of exec::modelFingerprint: " << run.info.modelFingerprint;
    ASSERT_NE(run.findProperty("ranks"), nullptr);
    EXPECT_EQ(run.findProperty("ranks")->value, "in-process");
    ASSERT_NE(run.findProperty("communicator"), nullptr);
    EXPECT_EQ(run.findProperty("communicator")->value, "in-process");
    ASSERT_NE(run.findProperty("checkpoint"), nullptr);
    EXPECT_TRUE(panel.runStatus().contains(QString::fromStdString(
        std::filesystem::path(run.findProperty("checkpoint")->value).filename().string())));
    ASSERT_NE(run.findProperty("sequence0.generated"), nullptr);
    ASSERT_NE(run.findMetric("world_size"), nullptr);
    EXPECT_EQ(run.findMetric("world_size")->value, 4);
    for (int r = 0; r < 4; ++r) {
        const auto* bytes = run.findMetric("rank" + std::to_string(r) + ".weight_bytes");
        ASSERT_NE(bytes, nullptr) << "rank " << r;
        EXPECT_GT(bytes->value, 0);
    }
    ASSERT_NE(run.findMetric("comm.total.bytes"), nullptr);
    EXPECT_GT(run.findMetric("comm.total.bytes")->value, 0);
    ASSERT_EQ(runs.runModel()->rowCount(), 1);
    EXPECT_EQ(runs.runModel()->runs().front().plan, run.info.plan);

    // Running the plan again is a new run.
    panel.runPlan();
    test::settle(jobs);
    EXPECT_EQ(recorded.count(), 2);
    EXPECT_EQ(store.count().value(), 2);
    EXPECT_EQ(runs.runModel()->rowCount(), 2);

    // With recording off (--no-record), a run writes nothing.
    auto options = history::recordingOptions();
    options.enabled = false;
    history::setRecordingOptions(options);
    panel.runPlan();
    test::settle(jobs);
    EXPECT_TRUE(panel.runStatus().startsWith(QStringLiteral("ran "))) << "the run itself ran";
    EXPECT_EQ(recorded.count(), 2);
    EXPECT_EQ(store.count().value(), 2);
}

#ifdef DAY0_HOSTSIM_PLUGIN_DIR
TEST(TopologyRun, TheRanksComputeOnTheChosenBackend)
{
    // The host-simulated test backend (tests/plugins/hostsim_plugin.cpp) stands in for a GPU.
    qputenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR);
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x2", plan::Mode::Infer, "tp=2,ep=2");
    TopologyPanel panel(session, jobs);
    qunsetenv("DAY0_PLUGIN_PATH");
    test::settle(jobs);
    auto* backends = panel.findChild<QComboBox*>(QStringLiteral("targetBackend"));
    ASSERT_NE(backends, nullptr);
    const int hostsim = backends->findData(QStringLiteral("hostsim"));
    ASSERT_GE(hostsim, 0);
    backends->setCurrentIndex(hostsim);
    panel.findChild<QToolButton*>(QStringLiteral("runPlanButton"))->click();
    test::settle(jobs);
    const QString status = panel.runStatus();
    EXPECT_TRUE(status.startsWith(QStringLiteral("ran tp=2"))) << status.toStdString();
    EXPECT_TRUE(status.contains(QStringLiteral("; on hostsim: "))) << status.toStdString();
    EXPECT_FALSE(status.contains(QStringLiteral(": 0 operator calls native")))
        << status.toStdString();
}
#endif
