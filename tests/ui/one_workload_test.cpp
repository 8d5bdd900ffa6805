// One workload in the session: the planner, the memory panel and the topology show the same
// case (mode, batch, context), so they report the same bytes on the most loaded rank.
#include "panels/memory/memory_panel.h"
#include "panels/planner/layout_table_model.h"
#include "panels/planner/planner_panel.h"
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "ui_test_support.h"

#include <algorithm>
#include <cmath>

using namespace day0;
using namespace day0::ui;

TEST(OneWorkload, PlannerMemoryAndTopologyAgreeOnTheMostLoadedRankInInference)
{
    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    test::openModel(session, "deepseek-v3");
    test::configure(session, "h200:4x8", plan::Mode::Infer, "tp=8");
    auto workload = session.workload();
    workload.batch = 32;
    session.setWorkload(workload);
    PlannerPanel planner(session, jobs);
    MemoryPanel memory(session, jobs);
    TopologyPanel topology(session, jobs);
    test::settle(jobs);

    ASSERT_GT(planner.layoutModel()->rowCount(), 0);
    const auto& best = planner.layoutModel()->layouts().front();
    ASSERT_EQ(session.plan(), best.layout.toPlan()) << "the planner's choice is the session's plan";
    EXPECT_EQ(session.workload().batch, 32) << "the planner does not change the workload";
    EXPECT_EQ(best.layout.microBatch, 32) << "the planner serves the session's batch";

    ASSERT_TRUE(memory.report().has_value()) << memory.verdict().toStdString();
    const double memoryTotal = double(memory.report()->maxTotal.value);
    const auto& stages = topology.scene()->topology().stageMemory;
    ASSERT_FALSE(stages.empty());
    const double topologyTotal = *std::max_element(stages.begin(), stages.end());
    EXPECT_GT(best.maxMemory, 0.0);
    // The same bytes (the planner keeps fractions of a byte, the estimate whole bytes).
    EXPECT_EQ(std::llround(best.maxMemory), std::llround(memoryTotal));
    EXPECT_EQ(std::llround(topologyTotal), std::llround(memoryTotal));
}
