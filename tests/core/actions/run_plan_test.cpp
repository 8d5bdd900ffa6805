// The plan-run action (actions::runPlanInProcess, checkpointForPlan) on its own, as `day0 run
// --plan` and the topology panel's "Run with this plan" call it.
#include "actions/run_plan.h"
#include "checkpoint/sharding.h"
#include "shrunk.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace day0::actions {
namespace {

namespace fs = std::filesystem;

fs::path shrunkMoe() { return test::shrunk("qwen3-30b-a3b", "qwen3-moe"); }

PlanRunRequest request(const std::string& plan)
{
    PlanRunRequest r;
    r.checkpoint = shrunkMoe().string();
    auto layout = checkpoint::parseShardLayout(plan);
    EXPECT_TRUE(layout.ok()) << layout.error().message;
    r.layout = *layout;
    r.newTokens = 3;
    r.prompts = { { 1, 2, 3, 5, 8 }, { 13, 21, 34 } };
    return r;
}

TEST(RunPlanAction, EverySplitGeneratesWhatOneRankGeneratesAndIsRecordedWithItsCollectives)
{
    Progress progress;
    auto one = runPlanInProcess(request("tp=1"), progress, {});
    ASSERT_TRUE(one.ok()) << one.error().message;
    auto split = runPlanInProcess(request("tp=2,ep=2,dp=2"), progress, {});
    ASSERT_TRUE(split.ok()) << split.error().message;
    ASSERT_EQ(split->result.ranks.size(), 4U);
    ASSERT_EQ(split->result.sequences.size(), 2U); // dp × micro-batches, prompts cycled
    EXPECT_EQ(split->result.sequences[0].generated, one->result.sequences[0].generated);
    EXPECT_EQ(split->result.sequences[1].prompt, (std::vector<std::int64_t> { 13, 21, 34 }));
    EXPECT_EQ(split->plan, parallel::layoutString(request("tp=2,ep=2,dp=2").layout, 1));
    ASSERT_FALSE(split->communication.empty());
    EXPECT_EQ(split->communication.back().kind, "total");
    EXPECT_GT(split->communication.back().calls, 0);
    EXPECT_EQ(split->record.info.kind, history::RunKind::Run);
    EXPECT_EQ(split->record.info.plan, split->plan);
    EXPECT_GT(split->seconds, 0.0);
}

TEST(RunPlanAction, ContextParallelismIsRefusedBeforeAnyRankStarts)
{
    Progress progress;
    auto r = runPlanInProcess(request("tp=2,cp=2"), progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("cp"), std::string::npos) << r.error().message;
}

TEST(RunPlanAction, ABadRequestIsRefusedWithItsReason)
{
    Progress progress;
    auto noPrompt = request("tp=2");
    noPrompt.prompts.clear();
    auto r = runPlanInProcess(noPrompt, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("prompt"), std::string::npos);
    auto missing = request("tp=2");
    missing.checkpoint = (fs::path(::testing::TempDir()) / "no-such-checkpoint").string();
    r = runPlanInProcess(missing, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no-such-checkpoint"), std::string::npos);
}

TEST(RunPlanAction, ASourceWithWeightsIsRunAsItIs)
{
    Progress progress;
    auto layout = checkpoint::parseShardLayout("tp=2");
    ASSERT_TRUE(layout.ok());
    auto dir = checkpointForPlan(shrunkMoe().string(), *layout, progress, {});
    ASSERT_TRUE(dir.ok()) << dir.error().message;
    EXPECT_EQ(*dir, shrunkMoe());
}

TEST(RunPlanAction, ACancelledRunIsAnError)
{
    std::stop_source source;
    source.request_stop();
    Progress progress;
    auto r = runPlanInProcess(request("tp=2"), progress, source.get_token());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
}

} // namespace
} // namespace day0::actions
