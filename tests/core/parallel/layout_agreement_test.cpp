// One plan string, one layout (issue #16): the memory estimate and the planner (plan::Layout,
// plan::RankLayout) and what shard and the executor run (checkpoint::ShardLayout, rankCoord)
// agree on the defaults they fill in, on which plans they accept, and on where every rank sits;
// a field the executor cannot run is refused by name, never dropped.
#include "base/resources.h"
#include "checkpoint/sharding.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "parallel/run.h"
#include "plan/layout.h"
#include "plan/model_summary.h"
#include "plan/rank_layout.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace day0;

namespace {

plan::ModelSummary qwenMoe()
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto spec = model::loadModel("qwen3-30b-a3b"); // 48 layers, 32 heads, 128 experts
    EXPECT_TRUE(spec) << spec.error().message;
    return plan::summarizeModel(model::buildLayerGraph(*spec));
}

} // namespace

TEST(LayoutAgreement, EstimateAndExecutorFillInTheSameDefaultsAndRankOrder)
{
    const auto model = qwenMoe();
    const std::vector<std::string> plans = { "tp=2,ep=2", "tp=4,ep=2,dp=2", "tp=2,dp=2",
        "tp=2,pp=2,ep=4,dp=2", "tp=1,ep=4,dp=4", "tp=4,ep=2,etp=2", "tp=2,pp=2,dp=2", "tp=8,ep=8" };
    int compared = 0;
    for (const auto mode : { plan::Mode::Infer, plan::Mode::Train }) {
        for (const auto& text : plans) {
            const std::string what = fmt::format("{} ({})", text, plan::modeName(mode));
            auto p = plan::parsePlan(text);
            ASSERT_TRUE(p) << what;
            const int world = p->tp * p->pp * (p->dp > 0 ? p->dp : 1);
            auto cluster = hardware::parseCluster(fmt::format("h200:1x{}", world));
            ASSERT_TRUE(cluster) << cluster.error().message;
            plan::Workload workload;
            workload.mode = mode;
            const auto estimated = plan::resolveLayout(*p, model, workload, *cluster);
            const auto run = checkpoint::shardLayoutFromPlan(*p, mode);
            if (!estimated) {
                // What the estimate refuses for its expert groups, shard and run refuse too,
                // unless the estimate's reason is one of its own (memory, SP, TP over nodes).
                if (estimated.error().message.find("etp") != std::string::npos) {
                    EXPECT_FALSE(run) << what << ": estimate says " << estimated.error().message;
                }
                continue;
            }
            ASSERT_TRUE(run) << what << ": " << run.error().message;
            EXPECT_EQ(estimated->etp, run->etp()) << what;
            EXPECT_EQ(estimated->dp, run->dp) << what;
            EXPECT_EQ(estimated->world, run->worldSize()) << what;
            const plan::RankLayout ranks(*estimated);
            for (int r = 0; r < run->worldSize(); ++r) {
                const auto a = ranks.coordinates(r);
                const auto b = checkpoint::rankCoord(*run, r);
                EXPECT_EQ(a.tp, b.tpRank) << what << " rank " << r;
                EXPECT_EQ(a.dp, b.dpRank) << what << " rank " << r;
                EXPECT_EQ(a.pp, b.stage) << what << " rank " << r;
                EXPECT_EQ(a.etp, b.etpRank) << what << " rank " << r;
                EXPECT_EQ(a.ep, b.epRank) << what << " rank " << r;
                EXPECT_EQ(a.edp, b.edpRank) << what << " rank " << r;
            }
            ++compared;
        }
    }
    EXPECT_GE(compared, 12);
}

TEST(LayoutAgreement, TheDefaultExpertTpIsMegatronsInTrainingAndWholeExpertsInInference)
{
    EXPECT_EQ(plan::defaultExpertTp(plan::Mode::Train, 4, 8), 4);
    EXPECT_EQ(plan::defaultExpertTp(plan::Mode::Infer, 4, 8), 1);
    EXPECT_EQ(plan::defaultExpertTp(plan::Mode::Infer, 4, 1), 4);
    auto p = plan::parsePlan("tp=4,ep=2,dp=2");
    ASSERT_TRUE(p);
    EXPECT_EQ(checkpoint::shardLayoutFromPlan(*p, plan::Mode::Train)->etp(), 4);
    EXPECT_EQ(checkpoint::shardLayoutFromPlan(*p, plan::Mode::Infer)->etp(), 1);
    EXPECT_EQ(checkpoint::parseShardLayout("tp=4,ep=2,dp=2")->etp(), 1);
    EXPECT_EQ(checkpoint::parseShardLayout("tp=4,ep=2,dp=2,etp=2")->etp(), 2);
}

TEST(LayoutAgreement, ContextParallelismIsRefusedByTheExecutorNotDropped)
{
    auto layout = checkpoint::parseShardLayout("tp=2,cp=2");
    ASSERT_TRUE(layout) << layout.error().message;
    EXPECT_EQ(layout->cp, 2);
    const auto runnable = parallel::checkRunnable(*layout);
    ASSERT_FALSE(runnable);
    EXPECT_EQ(runnable.error().code, ErrorCode::Unsupported);
    EXPECT_NE(runnable.error().message.find("cp=2"), std::string::npos);
    EXPECT_NE(runnable.error().message.find("context parallelism"), std::string::npos);
    EXPECT_TRUE(parallel::checkRunnable(*checkpoint::parseShardLayout("tp=2")));
}
