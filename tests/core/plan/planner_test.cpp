#include "base/resources.h"
#include "hardware/cluster.h"
#include "plan/memory_estimator.h"
#include "plan/planner.h"
#include "test_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

using namespace day0;
using namespace day0::plan;

namespace {

class Planner : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }
    static hardware::Cluster cluster(const std::string& text)
    {
        return *hardware::parseCluster(text);
    }
    static PlanResult plan(const ModelSummary& m, const std::string& cl, const PlannerOptions& o)
    {
        Progress progress;
        auto r = planLayouts(m, cluster(cl), o, progress);
        EXPECT_TRUE(r) << r.error().message;
        EXPECT_EQ(progress.done(), progress.total());
        return r ? *r : PlanResult {};
    }
    static std::int64_t rejectedTotal(const PlanResult& r)
    {
        return std::accumulate(r.rejected.begin(), r.rejected.end(), std::int64_t(0),
            [](std::int64_t s, const RejectedGroup& g) { return s + g.count; });
    }
    static const RejectedGroup* reason(const PlanResult& r, const std::string& text)
    {
        for (const auto& g : r.rejected) {
            if (g.reason.find(text) != std::string::npos) {
                return &g;
            }
        }
        return nullptr;
    }
};

ModelSummary smallMoe()
{
    // 16 heads, 4 KV heads, 8 layers (first dense), 24 experts top-4.
    return summarizeModel(
        test::buildTestGraph(test::moeSpec(2048, 16, 4, 8, 32000, 8192, 24, 4, 1024, 1024, 1)));
}

TEST_F(Planner, EveryLayoutIsCountedOnce)
{
    PlannerOptions o;
    o.workload.seqLength = 4096;
    o.workload.globalBatch = 256;
    const auto r = plan(smallMoe(), "h200:2x8", o);
    EXPECT_GT(r.evaluated, 1000);
    EXPECT_GT(r.feasible, 0);
    EXPECT_EQ(r.evaluated, r.feasible + rejectedTotal(r));
    ASSERT_NE(reason(r, "tp=16 > 8 GPUs per node"), nullptr);
    EXPECT_NE(reason(r, "tp=16 > 8 GPUs per node")->count, 0);
    EXPECT_NE(reason(r, "ep=16 does not divide 24 experts"), nullptr);
}

TEST_F(Planner, TopLayoutsAreRankedAndAgreeWithTheEstimators)
{
    PlannerOptions o;
    o.workload.seqLength = 4096;
    o.workload.globalBatch = 256;
    o.top = 5;
    const auto m = smallMoe();
    const auto cl = cluster("h200:2x8");
    const auto r = plan(m, "h200:2x8", o);
    ASSERT_EQ(r.layouts.size(), 5u);
    for (std::size_t i = 0; i < r.layouts.size(); ++i) {
        const auto& p = r.layouts[i];
        if (i > 0) {
            EXPECT_LE(p.tokensPerSecond, r.layouts[i - 1].tokensPerSecond);
        }
        EXPECT_LE(p.maxMemory, cl.deviceMemory());
        // The sweep's fast path and the per-layout estimators give the same numbers.
        const auto mem = estimateMemory(m, p.layout, o.workload, cl, o.memory);
        EXPECT_NEAR(double(mem.maxTotal.value), p.maxMemory, 8.0) << formatPlan(p.layout.toPlan());
        EXPECT_EQ(mem.perRank.front().rank, p.mostLoadedRank);
        const auto cost = estimateTrainingCost(m, p.layout, o.workload, cl, o.cost);
        EXPECT_DOUBLE_EQ(cost.stepTime, p.stepTime);
        // The layout resolves again from its plan string.
        auto again = resolveLayout(*parsePlan(formatPlan(p.layout.toPlan())), m, o.workload, cl);
        ASSERT_TRUE(again) << again.error().message;
    }
}

TEST_F(Planner, SingleGpu)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(1024, 16, 4, 4, 32000, 2816)));
    PlannerOptions o;
    o.workload.seqLength = 2048;
    o.workload.globalBatch = 64;
    const auto r = plan(m, "h200:1x1", o);
    // One parallel layout × 4 micro-batch sizes × 4 ZeRO stages × 3 recompute modes.
    EXPECT_EQ(r.evaluated, 48);
    EXPECT_EQ(r.feasible, 48);
    ASSERT_FALSE(r.layouts.empty());
    EXPECT_EQ(r.layouts.front().layout.world, 1);
    // On one GPU nothing shards: every ZeRO stage costs the same, so recompute=none and the
    // biggest micro-batch win.
    EXPECT_EQ(r.layouts.front().layout.recompute, Recompute::None);
}

TEST_F(Planner, PrimeGpuCount)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(1024, 16, 4, 4, 32000, 2816)));
    PlannerOptions o;
    o.workload.seqLength = 4096;
    o.workload.globalBatch = 7 * 16;
    const auto r = plan(m, "h200:1x7", o);
    EXPECT_NE(reason(r, "tp=7 does not divide 16 attention heads"), nullptr);
    EXPECT_NE(reason(r, "pp=7 > 4 layers"), nullptr);
    EXPECT_NE(reason(r, "cp=7 does not split the sequence of 4096"), nullptr);
    EXPECT_GT(r.feasible, 0);
    for (const auto& p : r.layouts) {
        EXPECT_EQ(p.layout.dp, 7);
    }
    // A global batch 7 does not divide leaves nothing.
    o.workload.globalBatch = 1024;
    const auto none = plan(m, "h200:1x7", o);
    EXPECT_EQ(none.feasible, 0);
    EXPECT_NE(reason(none, "global batch 1024 not divisible by dp×micro-batch=7"), nullptr);
}

TEST_F(Planner, NothingFits)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(8192, 64, 8, 80, 128256, 28672)));
    PlannerOptions o;
    const auto r = plan(m, "l40s:1x2", o);
    EXPECT_EQ(r.feasible, 0);
    EXPECT_TRUE(r.layouts.empty());
    const auto* g = reason(r, "weights, gradients and optimizer states alone exceed device memory");
    ASSERT_NE(g, nullptr);
    EXPECT_NE(g->example.find("over by"), std::string::npos) << g->example;
    EXPECT_NE(g->example.find("rank "), std::string::npos) << g->example;
}

TEST_F(Planner, HeadroomRejectsTightFits)
{
    const auto m = smallMoe();
    PlannerOptions o;
    o.workload.globalBatch = 256;
    const auto loose = plan(m, "h200:1x8", o);
    o.headroom = 0.95;
    const auto tight = plan(m, "h200:1x8", o);
    EXPECT_LT(tight.feasible, loose.feasible);
    EXPECT_GT(tight.feasible, 0);
    for (const auto& p : tight.layouts) {
        EXPECT_LE(p.maxMemory, 0.05 * cluster("h200:1x8").deviceMemory());
    }
}

TEST_F(Planner, InferencePicksBatchUnderTheLatencyBound)
{
    const auto m = smallMoe();
    PlannerOptions o;
    o.workload.mode = Mode::Infer;
    o.workload.context = 4096;
    o.workload.tpotBound = 0.02;
    const auto r = plan(m, "h200:1x8", o);
    ASSERT_GT(r.feasible, 0);
    EXPECT_EQ(r.evaluated, r.feasible + rejectedTotal(r));
    for (const auto& p : r.layouts) {
        EXPECT_LE(p.inference.tpot, 0.02);
        EXPECT_DOUBLE_EQ(p.stepTime, p.inference.tpot);
        EXPECT_GE(p.layout.microBatch, 1);
        EXPECT_EQ(p.layout.zero, 0);
    }
    o.workload.tpotBound = 1e-6;
    const auto impossible = plan(m, "h200:1x8", o);
    EXPECT_EQ(impossible.feasible, 0);
    EXPECT_NE(reason(impossible, "time-per-output-token bound"), nullptr);
}

TEST_F(Planner, InferenceWithARequiredBatchRejectsLayoutsThatServeFewer)
{
    // The workbench's one workload: every layout must serve the session's batch; one whose KV
    // pool holds fewer is rejected (counted over memory), not ranked at a smaller batch.
    const auto m = smallMoe();
    PlannerOptions o;
    o.workload.mode = Mode::Infer;
    o.workload.context = 32768;
    o.workload.tpotBound = 10.0;
    o.distinct = false;
    o.top = 1000;
    const auto free = plan(m, "h200:1x8", o);
    ASSERT_GT(free.feasible, 1);
    int most = 0;
    int least = std::numeric_limits<int>::max();
    for (const auto& p : free.layouts) {
        most = std::max(most, p.layout.microBatch);
        least = std::min(least, p.layout.microBatch);
    }
    ASSERT_GT(most, least) << "the layouts must differ in what they hold for this test to bite";
    o.serving.maxBatch = most;
    o.requiredBatch = most;
    const auto required = plan(m, "h200:1x8", o);
    ASSERT_GT(required.feasible, 0);
    EXPECT_LT(required.feasible, free.feasible);
    EXPECT_EQ(required.evaluated, required.feasible + rejectedTotal(required));
    for (const auto& p : required.layouts) {
        EXPECT_EQ(p.layout.microBatch, most);
    }
}

TEST_F(Planner, Cancels)
{
    std::stop_source source;
    source.request_stop();
    Progress progress;
    auto r = planLayouts(smallMoe(), cluster("h200:2x8"), {}, progress, source.get_token());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
}

TEST_F(Planner, SearchSpaceCanBeNarrowed)
{
    PlannerOptions o;
    o.tp = { 8 };
    o.pp = { 1 };
    o.cp = { 1 };
    o.ep = { 2 };
    o.microBatches = { 1 };
    o.zero = { 1 };
    o.recompute = { Recompute::Selective };
    o.searchEtp = false;
    const auto r = plan(smallMoe(), "h200:2x8", o);
    EXPECT_EQ(r.evaluated, 1);
    ASSERT_EQ(r.feasible, 1);
    EXPECT_EQ(r.layouts.front().layout.etp, 8);
}

} // namespace

TEST(ParetoFront, KeepsOnlyLayoutsNothingCheaperBeats)
{
    // (memory, tokens/s): B dominates A (less memory, faster); D ties C on memory but is slower;
    // E is the fastest but needs the most memory.
    const std::vector<std::pair<double, double>> points { { 80, 100 }, { 70, 120 }, { 90, 150 },
        { 90, 140 }, { 120, 200 }, { 100, 130 } };
    std::vector<PlannedLayout> layouts;
    for (const auto& [memory, speed] : points) {
        PlannedLayout p;
        p.maxMemory = memory;
        p.tokensPerSecond = speed;
        layouts.push_back(p);
    }
    EXPECT_EQ(paretoFront(layouts), (std::vector<std::size_t> { 1, 2, 4 }));
    EXPECT_TRUE(paretoFront({}).empty());
}
