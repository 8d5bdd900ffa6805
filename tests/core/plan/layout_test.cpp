#include "base/resources.h"
#include "hardware/cluster.h"
#include "plan/layout.h"
#include "plan/rank_layout.h"
#include "test_models.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::plan;

namespace {

class LayoutTest : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }

    static hardware::Cluster cluster(const std::string& text)
    {
        auto c = hardware::parseCluster(text);
        EXPECT_TRUE(c) << c.error().message;
        return *c;
    }

    static std::string error(
        const ModelSummary& m, const std::string& plan, const std::string& cl, Workload wl = {})
    {
        auto p = parsePlan(plan);
        EXPECT_TRUE(p);
        auto l = resolveLayout(*p, m, wl, cluster(cl));
        if (l) {
            return "";
        }
        EXPECT_EQ(l.error().code, ErrorCode::BadInput);
        return l.error().message;
    }
};

// 64 heads, 8 KV heads, 61 layers like Kimi-K2's trunk (dense first layer, 384 experts).
ModelSummary kimiLike()
{
    return summarizeModel(
        test::buildTestGraph(test::moeSpec(1024, 64, 8, 61, 1000, 2048, 384, 8, 256, 256, 1)));
}

TEST(StageSplit, BalancedPutsLeftoversInTheMiddle)
{
    EXPECT_EQ(splitStages(61, 4, StageSplit::Balanced), (std::vector<int> { 15, 16, 15, 15 }));
    EXPECT_EQ(splitStages(64, 4, StageSplit::Balanced), (std::vector<int> { 16, 16, 16, 16 }));
    EXPECT_EQ(splitStages(10, 4, StageSplit::Balanced), (std::vector<int> { 2, 3, 3, 2 }));
    EXPECT_EQ(splitStages(7, 1, StageSplit::Balanced), (std::vector<int> { 7 }));
    EXPECT_TRUE(splitStages(3, 4, StageSplit::Balanced).empty());
}

TEST(StageSplit, LightEndsCountsEmbeddingAndHeadAsLayers)
{
    // 61 + 2 slots over 4 stages: 15 each and 3 leftovers to stages 1, 2, 3 (middle first, then
    // the last) = 15,16,16,16; the ends then give their embedding/loss slot back.
    EXPECT_EQ(splitStages(61, 4, StageSplit::LightEnds), (std::vector<int> { 14, 16, 16, 15 }));
    // Megatron's case: 30 layers + 2 over 8 stages = 4 each; ends get 3.
    EXPECT_EQ(
        splitStages(30, 8, StageSplit::LightEnds), (std::vector<int> { 3, 4, 4, 4, 4, 4, 4, 3 }));
    EXPECT_TRUE(splitStages(2, 3, StageSplit::LightEnds).empty()); // 4 slots: 1,2,1 → 0,2,0
}

TEST_F(LayoutTest, ImpossiblePlansSayWhy)
{
    const auto m = kimiLike();
    EXPECT_NE(error(m, "tp=3", "h200:1x3").find("tp=3 does not divide 64 attention heads"),
        std::string::npos);
    EXPECT_NE(error(m, "tp=16", "h200:2x8").find("tp=16 > 8 GPUs per node"), std::string::npos);
    EXPECT_NE(error(m, "tp=1,ep=256", "h200:32x8").find("ep=256 does not divide 384 experts"),
        std::string::npos);
    EXPECT_NE(error(m, "tp=8,ep=16,dp=1", "h200:1x8").find("ep×etp=128 does not divide tp×cp×dp=8"),
        std::string::npos);
    EXPECT_NE(error(m, "pp=64", "h200:8x8").find("pp=64 > 61 layers"), std::string::npos);
    EXPECT_NE(error(m, "tp=2,sp=off", "h200:1x2").find("MoE with tp=2 needs sequence parallelism"),
        std::string::npos);
    EXPECT_NE(
        error(m, "tp=3", "h200:1x8").find("tp×pp×cp=3 does not divide 8 GPUs"), std::string::npos);
    EXPECT_NE(
        error(m, "tp=8,dp=4", "h200:2x8").find("tp×pp×cp×dp=32 > 16 GPUs"), std::string::npos);
    EXPECT_NE(
        error(m, "pp=2,layers=30/30", "h200:1x2").find("sum to 60 over 2 stages; the model has 61"),
        std::string::npos);
    EXPECT_NE(error(m, "pp=4,vpp=16", "h200:1x4").find("vpp=16 > 15 layers on the smallest stage"),
        std::string::npos);
    EXPECT_NE(error(m, "vpp=2", "h200:1x1").find("vpp=2 needs pp > 1"), std::string::npos);
    EXPECT_NE(error(m, "pp=4,vpp=2,m=6", "h200:1x4")
                  .find("interleaving needs micro-batches (6) divisible by pp=4"),
        std::string::npos);
    EXPECT_NE(error(m, "tp=1,dp=3,gbs=8", "h200:1x3")
                  .find("global batch 8 not divisible by dp×micro-batch=3"),
        std::string::npos);
    Workload wl;
    wl.seqLength = 4000;
    EXPECT_NE(error(m, "cp=32", "h200:4x8", wl).find("cp=32 does not split the sequence of 4000"),
        std::string::npos);
    wl.mode = Mode::Infer;
    EXPECT_NE(error(m, "zero=1", "h200:1x1", wl).find("zero=1 applies to training only"),
        std::string::npos);
}

TEST_F(LayoutTest, KvHeadsMustDivideOrBeDividedByTp)
{
    const auto m = summarizeModel(test::buildTestGraph(test::llamaSpec(768, 12, 6, 2, 100, 1536)));
    EXPECT_NE(error(m, "tp=4", "h200:1x4").find("tp=4 and 6 KV heads: neither divides the other"),
        std::string::npos);
    EXPECT_EQ(error(m, "tp=12,dp=1", "gb200:3x4"), ""); // 12 > 6 KV heads: replicated, fine
}

TEST_F(LayoutTest, DenseModelRejectsExpertParallelism)
{
    const auto m = summarizeModel(test::buildTestGraph(test::llamaSpec(768, 12, 4, 2, 100, 1024)));
    EXPECT_NE(
        error(m, "ep=2", "h200:1x2").find("ep=2 on a model without experts"), std::string::npos);
}

TEST_F(LayoutTest, ResolveDerivesTheRest)
{
    const auto m = kimiLike();
    Workload wl;
    wl.globalBatch = 1024;
    auto p = parsePlan("tp=8,pp=4,ep=16,etp=1,zero=1");
    ASSERT_TRUE(p);
    auto l = resolveLayout(*p, m, wl, cluster("h200:32x8"));
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->world, 256);
    EXPECT_EQ(l->dp, 8); // 256 / (8 × 4)
    EXPECT_EQ(l->etp, 1);
    EXPECT_EQ(l->expertDp(), 4); // 256 / (1 × 16 × 4)
    EXPECT_TRUE(l->sp); // on by default with tp > 1 in training
    EXPECT_EQ(l->numMicroBatches, 128); // 1024 / (8 × 1)
    EXPECT_EQ(l->stageStart, (std::vector<int> { 0, 15, 31, 46, 61 }));
    EXPECT_EQ(l->weights, DType::BF16);
    EXPECT_EQ(l->grads, DType::F32);

    // Megatron's default ETP = TP needs ep·tp | tp·dp: ep=16 with tp=8 does not fit dp=8.
    auto megatronDefault = parsePlan("tp=8,pp=4,ep=16");
    auto bad = resolveLayout(*megatronDefault, m, wl, cluster("h200:32x8"));
    ASSERT_FALSE(bad);
    EXPECT_NE(
        bad.error().message.find("ep×etp=128 does not divide tp×cp×dp=64"), std::string::npos);

    // Inference: experts stay whole on each rank when EP is on; micro-batch is the serving batch.
    wl.mode = Mode::Infer;
    wl.batch = 32;
    auto infer = resolveLayout(*parsePlan("tp=8,ep=8"), m, wl, cluster("h200:1x8"));
    ASSERT_TRUE(infer) << infer.error().message;
    EXPECT_EQ(infer->etp, 1);
    EXPECT_FALSE(infer->sp);
    EXPECT_EQ(infer->microBatch, 32);
    EXPECT_TRUE(infer->checkpointWeights);
}

TEST_F(LayoutTest, ExplicitDpMayUseFewerGpusThanTheCluster)
{
    const auto m = kimiLike();
    auto l = resolveLayout(*parsePlan("tp=8,dp=2"), m, {}, cluster("h200:4x8"));
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->world, 16);
}

TEST_F(LayoutTest, ToPlanReproducesTheLayout)
{
    const auto m = kimiLike();
    auto l = resolveLayout(
        *parsePlan("tp=4,pp=2,ep=8,etp=1,zero=2,recompute=full,mb=2"), m, {}, cluster("h200:4x8"));
    ASSERT_TRUE(l) << l.error().message;
    auto again = resolveLayout(l->toPlan(), m, {}, cluster("h200:4x8"));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->stageStart, l->stageStart);
    EXPECT_EQ(again->numMicroBatches, l->numMicroBatches);
    EXPECT_EQ(again->etp, l->etp);
    EXPECT_EQ(again->recompute, l->recompute);
    EXPECT_EQ(again->zero, 2);
}

TEST(RankLayout, MegatronOrderTpFastestPpSlowest)
{
    // tp=2, cp=2, dp=2, pp=2 on 16 ranks.
    const RankLayout r(2, 2, 2, 2, 1, 2);
    EXPECT_EQ(r.worldSize(), 16);
    const auto c = r.coordinates(13); // 13 = 1 + 2·(0 + 2·(1 + 2·1))
    EXPECT_EQ(c.tp, 1);
    EXPECT_EQ(c.cp, 0);
    EXPECT_EQ(c.dp, 1);
    EXPECT_EQ(c.pp, 1);
    EXPECT_EQ(r.rankOf(1, 0, 1, 1), 13);
    EXPECT_EQ(r.group(GroupKind::Tensor, 13), (std::vector<int> { 12, 13 }));
    EXPECT_EQ(r.group(GroupKind::Context, 13), (std::vector<int> { 13, 15 }));
    EXPECT_EQ(r.group(GroupKind::Data, 13), (std::vector<int> { 9, 13 }));
    EXPECT_EQ(r.group(GroupKind::Pipeline, 13), (std::vector<int> { 5, 13 }));
    EXPECT_EQ(r.numGroups(GroupKind::Tensor), 8);
    EXPECT_EQ(r.firstRankOfStage(1), 8);
}

TEST(RankLayout, ExpertGroupsFollowEtpThenEp)
{
    // 8 ranks per stage: tp=4, dp=2; experts ep=4 × etp=2 → edp = 8 / 8 = 1.
    const RankLayout r(4, 1, 2, 1, 4, 2);
    EXPECT_EQ(r.group(GroupKind::ExpertTensor, 5), (std::vector<int> { 4, 5 }));
    EXPECT_EQ(r.group(GroupKind::Expert, 5), (std::vector<int> { 1, 3, 5, 7 }));
    EXPECT_EQ(r.group(GroupKind::ExpertData, 5), (std::vector<int> { 5 }));
    const auto c = r.coordinates(5);
    EXPECT_EQ(c.etp, 1);
    EXPECT_EQ(c.ep, 2);
}

TEST(RankLayout, GroupsPartitionTheRanks)
{
    const RankLayout r(2, 1, 4, 3, 2, 1);
    for (const auto kind :
        { GroupKind::Tensor, GroupKind::Context, GroupKind::Data, GroupKind::Pipeline,
            GroupKind::ExpertTensor, GroupKind::Expert, GroupKind::ExpertData }) {
        std::vector<int> seen(std::size_t(r.worldSize()), 0);
        const auto groups = r.groups(kind);
        ASSERT_EQ(int(groups.size()), r.numGroups(kind)) << groupKindName(kind);
        for (std::size_t g = 0; g < groups.size(); ++g) {
            ASSERT_EQ(int(groups[g].size()), r.groupSize(kind)) << groupKindName(kind);
            for (const int rank : groups[g]) {
                ++seen[std::size_t(rank)];
                EXPECT_EQ(r.groupIndex(kind, rank), int(g));
                EXPECT_EQ(r.group(kind, rank), groups[g]);
            }
        }
        for (const int s : seen) {
            EXPECT_EQ(s, 1) << groupKindName(kind);
        }
    }
}

TEST(RankLayout, GroupSpanOnDomains)
{
    EXPECT_EQ(groupSpan(1, 8, 8).perDomain, 8); // TP inside a node
    EXPECT_EQ(groupSpan(1, 8, 8).domains, 1);
    EXPECT_EQ(groupSpan(8, 32, 8).perDomain, 1); // DP across nodes, one GPU per node
    EXPECT_EQ(groupSpan(8, 32, 8).domains, 32);
    EXPECT_EQ(groupSpan(2, 16, 8).perDomain, 4); // EP over etp=2: 4 per node, 4 nodes
    EXPECT_EQ(groupSpan(2, 16, 8).domains, 4);
    EXPECT_EQ(groupSpan(1, 16, 72).domains, 1); // NVL72
}

} // namespace
