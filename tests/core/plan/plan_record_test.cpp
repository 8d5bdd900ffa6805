#include "base/resources.h"
#include "hardware/cluster.h"
#include "history/run_json.h"
#include "plan/plan_record.h"
#include "plan/planner.h"
#include "test_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace day0;
using namespace day0::plan;

namespace {

class PlanRecord : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }
    static hardware::Cluster cluster(const std::string& text)
    {
        return *hardware::parseCluster(text);
    }
    static ModelSummary smallMoe()
    {
        return summarizeModel(
            test::buildTestGraph(test::moeSpec(2048, 16, 4, 8, 32000, 8192, 24, 4, 1024, 1024, 1)));
    }
    static double metric(const history::RunRecord& r, const std::string& name)
    {
        const auto* m = r.findMetric(name);
        EXPECT_NE(m, nullptr) << name;
        return m ? m->value : -1.0;
    }
    static std::string property(const history::RunRecord& r, const std::string& key)
    {
        const auto* p = r.findProperty(key);
        return p ? p->value : std::string("<missing>");
    }
};

} // namespace

TEST_F(PlanRecord, SweepRecordsTheBestLayoutAndItsStageMemory)
{
    const auto m = smallMoe();
    const auto cl = cluster("h200:2x8");
    PlannerOptions o;
    o.workload.seqLength = 4096;
    o.workload.globalBatch = 256;
    o.top = 5;
    Progress progress;
    const auto r = planLayouts(m, cl, o, progress);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_FALSE(r->layouts.empty());
    const PlannedLayout& best = r->layouts.front();

    const history::RunRecord record = planRunRecord(m, cl, o, *r);
    ASSERT_TRUE(record.validate().ok()) << record.validate().error().message;
    EXPECT_EQ(record.info.kind, history::RunKind::Plan);
    EXPECT_EQ(record.info.status, history::RunStatus::Ok);
    EXPECT_EQ(record.info.modelName, m.name);
    EXPECT_EQ(record.info.plan, formatPlan(best.layout.toPlan()));
    EXPECT_EQ(record.info.precision, "bf16");
    ASSERT_TRUE(record.info.duration.has_value());
    EXPECT_DOUBLE_EQ(record.info.duration->value, r->seconds);
    EXPECT_NE(record.info.message.find(record.info.plan), std::string::npos) << record.info.message;
    EXPECT_EQ(property(record, "cluster"), "h200:2x8");
    EXPECT_EQ(property(record, "mode"), "train");
    EXPECT_EQ(property(record, "seq_length"), "4096");
    EXPECT_EQ(property(record, "global_batch"), "256");
    EXPECT_EQ(property(record, "source"), "planner");
    EXPECT_EQ(metric(record, "evaluated"), double(r->evaluated));
    EXPECT_EQ(metric(record, "feasible"), double(r->feasible));
    EXPECT_EQ(metric(record, "step_time_s"), best.stepTime);
    EXPECT_EQ(metric(record, "tokens_per_s"), best.tokensPerSecond);
    EXPECT_EQ(metric(record, "peak_bytes"), best.maxMemory);
    EXPECT_EQ(metric(record, "mfu"), best.training.mfu);
    EXPECT_EQ(metric(record, "time_bubble_s"), best.training.breakdown.bubble);
    EXPECT_EQ(record.findMetric("ttft_s"), nullptr) << "training records no latencies";

    // Memory per stage: the estimator's figures for the best layout, one entry per component.
    const auto report = estimateMemory(m, best.layout, o.workload, cl, o.memory);
    ASSERT_EQ(report.perRank.size(), std::size_t(best.layout.pp));
    for (const RankMemory& stage : report.perRank) {
        Bytes sum;
        for (const auto& e : record.memory) {
            if (e.rank == stage.rank && e.stage == stage.ppStage) {
                EXPECT_GT(e.bytes.value, 0) << e.component;
                sum += e.bytes;
            }
        }
        EXPECT_EQ(sum, stage.total) << "stage " << stage.ppStage;
    }
    EXPECT_NEAR(double(report.maxTotal.value), best.maxMemory, 8.0);
    // The five layouts kept and the rejection reasons are in the log.
    EXPECT_EQ(record.events.size(), 5 + std::min<std::size_t>(r->rejected.size(), 12));
    EXPECT_EQ(record.events.front().message.rfind("#1 " + record.info.plan, 0), 0u);
    // It survives JSON (the runs export format).
    const auto back = history::runFromJson(history::toJson(record), "plan");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->memory.size(), record.memory.size());
}

TEST_F(PlanRecord, InferenceSweepRecordsLatencies)
{
    const auto m = smallMoe();
    const auto cl = cluster("h200:1x8");
    PlannerOptions o;
    o.workload.mode = Mode::Infer;
    o.workload.context = 4096;
    o.workload.outputLength = 512;
    Progress progress;
    const auto r = planLayouts(m, cl, o, progress);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_FALSE(r->layouts.empty());
    const auto record = planRunRecord(m, cl, o, *r);
    ASSERT_TRUE(record.validate().ok());
    EXPECT_EQ(property(record, "mode"), "infer");
    EXPECT_EQ(property(record, "context"), "4096");
    EXPECT_EQ(property(record, "prompt"), "3584");
    EXPECT_EQ(metric(record, "tpot_s"), r->layouts.front().inference.tpot);
    EXPECT_EQ(metric(record, "ttft_s"), r->layouts.front().inference.ttft);
    EXPECT_EQ(record.findMetric("mfu"), nullptr);
    bool kv = false;
    for (const auto& e : record.memory) {
        kv = kv || e.component == "kv_cache";
        EXPECT_NE(e.component, "gradients") << "inference keeps no gradients";
    }
    EXPECT_TRUE(kv);
}

TEST_F(PlanRecord, NothingFitsIsAFailedRunWithTheReason)
{
    // A 70B dense model cannot train on one GPU.
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(8192, 64, 8, 80, 128256, 28672)));
    const auto cl = cluster("h200:1x1");
    PlannerOptions o;
    o.workload.globalBatch = 8;
    Progress progress;
    const auto r = planLayouts(m, cl, o, progress);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_TRUE(r->layouts.empty());
    const auto record = planRunRecord(m, cl, o, *r);
    ASSERT_TRUE(record.validate().ok());
    EXPECT_EQ(record.info.status, history::RunStatus::Failed);
    EXPECT_TRUE(record.info.plan.empty());
    EXPECT_TRUE(record.memory.empty());
    EXPECT_EQ(metric(record, "feasible"), 0.0);
    EXPECT_NE(record.info.message.find(r->rejected.front().reason), std::string::npos)
        << record.info.message;
}

TEST_F(PlanRecord, MemoryEstimateRecordsEveryStage)
{
    const auto m = smallMoe();
    const auto cl = cluster("h200:1x8");
    Workload w;
    w.globalBatch = 64;
    auto plan = parsePlan("tp=2,pp=2,ep=2,zero=1");
    ASSERT_TRUE(plan);
    const auto report = estimateMemory(m, *plan, w, cl);
    ASSERT_TRUE(report) << report.error().message;
    const auto record = memoryRunRecord(m, cl, w, *report);
    ASSERT_TRUE(record.validate().ok());
    EXPECT_EQ(record.info.plan, formatPlan(report->layout.toPlan()));
    EXPECT_EQ(
        record.info.status, report->fits ? history::RunStatus::Ok : history::RunStatus::Failed);
    EXPECT_EQ(metric(record, "peak_bytes"), double(report->maxTotal.value));
    EXPECT_EQ(metric(record, "fits"), report->fits ? 1.0 : 0.0);
    EXPECT_EQ(property(record, "source"), "memory");
    std::set<int> stages;
    for (const auto& e : record.memory) {
        stages.insert(e.stage);
    }
    EXPECT_EQ(stages, (std::set<int> { 0, 1 }));
    const auto weights = std::find_if(record.memory.begin(), record.memory.end(),
        [&](const history::MemoryEntry& e) { return e.component == "weights"; });
    ASSERT_NE(weights, record.memory.end());
    EXPECT_EQ(weights->rank, report->perRank.front().rank);
    EXPECT_EQ(weights->bytes, report->perRank.front().weights);
}
