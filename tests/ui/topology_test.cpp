#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "ui_test_support.h"

#include <QComboBox>
#include <QGraphicsItem>

using namespace day0;
using namespace day0::ui;

TEST(TopologyScene, OneItemPerGpuAtSmallScale)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "mixtral-8x7b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=4,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    const auto* scene = panel.scene();
    auto* coloring = panel.findChild<QComboBox*>(QStringLiteral("coloringCombo"));
    ASSERT_NE(coloring, nullptr);
    EXPECT_EQ(scene->coloring(), TopologyColoring::PipelineStage);
    coloring->setCurrentIndex(coloring->findData(int(TopologyColoring::TensorGroup)));
    EXPECT_EQ(scene->coloring(), TopologyColoring::TensorGroup);
    EXPECT_TRUE(scene->detailed());
    EXPECT_EQ(scene->gpuItemCount(), 16);
    EXPECT_EQ(scene->nodeItemCount(), 2);
    ASSERT_TRUE(scene->topology().ranks.has_value());
    // tp=4: ranks 0-3 share a TP group, rank 4 starts the next.
    EXPECT_EQ(scene->colorIndex(0), scene->colorIndex(3));
    EXPECT_NE(scene->colorIndex(3), scene->colorIndex(4));
    EXPECT_EQ(scene->deviceColor(1), scene->deviceColor(2));
    const QString tip = scene->deviceTooltip(5);
    EXPECT_TRUE(tip.contains(QStringLiteral("rank 5"))) << tip.toStdString();
    EXPECT_TRUE(tip.contains(QStringLiteral("tp 1"))) << tip.toStdString();
    EXPECT_TRUE(tip.contains(QStringLiteral("memory"))) << tip.toStdString();

    // Colour by PP stage: with tp·dp = 8 per stage, rank 8 is stage 1.
    coloring->setCurrentIndex(coloring->findData(int(TopologyColoring::PipelineStage)));
    EXPECT_EQ(scene->colorIndex(7), 0);
    EXPECT_EQ(scene->colorIndex(8), 1);
    EXPECT_EQ(scene->colorGroupCount(), 2);

    session.selectRank(9);
    EXPECT_TRUE(scene->inSelectedGroup(15));
    EXPECT_FALSE(scene->inSelectedGroup(0));
}

TEST(TopologyScene, AggregatesNodesAt2048Gpus)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "deepseek-v3");
    test::configure(
        session, "h200:256x8", plan::Mode::Train, "tp=8,pp=16,ep=64,etp=1,zero=1,recompute=full");
    TopologyPanel panel(session, jobs);
    panel.resize(1200, 800);
    test::settle(jobs);
    const auto* scene = panel.scene();
    EXPECT_FALSE(scene->detailed());
    EXPECT_EQ(scene->gpuItemCount(), 0);
    EXPECT_EQ(scene->nodeItemCount(), 256);
    EXPECT_LT(scene->items().size(), 1000) << "2,048 GPUs must not become 2,048 items";
    EXPECT_EQ(scene->topology().world, 2048);
    // Tooltips still resolve individual GPUs.
    EXPECT_TRUE(scene->deviceTooltip(2047).contains(QStringLiteral("rank 2047")));
}

TEST(TopologyScene, IdleDevicesWhenThePlanUsesFewer)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-8b");
    test::configure(session, "h200:2x8", plan::Mode::Infer, "tp=2,dp=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    const auto* scene = panel.scene();
    EXPECT_EQ(scene->topology().world, 4);
    EXPECT_EQ(scene->colorIndex(10), -1);
    EXPECT_TRUE(scene->deviceTooltip(10).contains(QStringLiteral("idle")));
}
