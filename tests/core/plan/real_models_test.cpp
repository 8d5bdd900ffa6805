// The estimator and planner on the bundled configs, through core/model's layer graphs.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/megatron_memory.h"
#include "plan/memory_estimator.h"
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace day0;
using namespace day0::plan;

namespace {

class RealModels : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }
    static model::LayerGraph graphOf(const std::string& name)
    {
        auto spec = model::loadModel(name);
        EXPECT_TRUE(spec) << name << ": " << spec.error().message;
        return model::buildLayerGraph(*spec);
    }
    static hardware::Cluster cluster(const std::string& text)
    {
        return *hardware::parseCluster(text);
    }
};

TEST_F(RealModels, SummariesAgreeWithTheGraphsParameterCounts)
{
    const auto models = model::bundledModels();
    ASSERT_GE(models.size(), 10u);
    for (const auto& b : models) {
        const auto graph = graphOf(b.name);
        const auto counts = graph.countParameters();
        const auto m = summarizeModel(graph);
        EXPECT_DOUBLE_EQ(m.totalParams, double(counts.total)) << b.name;
        EXPECT_NEAR(m.activeParams, double(counts.active), 1e-6 * double(counts.active)) << b.name;
        EXPECT_EQ(m.numLayers, graph.spec.numLayers) << b.name;
        int layers = 0;
        for (const auto& c : m.classes) {
            layers += c.count;
        }
        EXPECT_EQ(layers, m.numLayers) << b.name;
    }
}

TEST_F(RealModels, OneRankHoldsTheWholeCheckpointAtTp1Pp1)
{
    // Inference at the checkpoint's dtypes, no splitting: one rank's weights are every stored
    // byte of the checkpoint, FP8 scales and MTP copies included.
    for (const char* name : { "kimi-k2", "deepseek-v3", "llama-3.1-8b", "qwen3-235b-a22b-fp8" }) {
        const auto graph = graphOf(name);
        const auto m = summarizeModel(graph);
        Workload wl;
        wl.mode = Mode::Infer;
        auto r = estimateMemory(m, *parsePlan("tp=1"), wl, cluster("b200:1x1"));
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->perRank.front().weights.value, graph.countParameters().bytes) << name;
    }
}

TEST_F(RealModels, DeepseekV3WeightsAndOptimizerAgreeWithMegatron)
{
    const auto m = summarizeModel(graphOf("deepseek-v3"));
    Workload wl;
    wl.globalBatch = 64;
    auto l = resolveLayout(*parsePlan("tp=1,pp=1,ep=64,zero=1"), m, wl, cluster("h200:8x8"));
    ASSERT_TRUE(l) << l.error().message;
    MemoryOptions o;
    o.cudaContext = o.ncclPerGroup = o.fragmentation = 0;
    const auto r = estimateMemory(m, *l, wl, cluster("h200:8x8"), o);
    const auto meg = megatronTheoreticalMemory(megatronArgsFor(m, *l, wl));
    const auto& s = r.perRank.front();
    const double ours = double((s.weights + s.gradients + s.optimizer).value);
    // Differences: the e_score_correction_bias and the MTP eh_proj/norms we count, the vocabulary
    // padding Megatron adds. All well under 1%.
    EXPECT_LT(std::fabs(ours - meg.weightAndOptimizer) / meg.weightAndOptimizer, 0.01)
        << ours << " vs " << meg.weightAndOptimizer;
}

TEST_F(RealModels, KimiK2PlansOn256H200)
{
    const auto m = summarizeModel(graphOf("kimi-k2"));
    PlannerOptions o;
    Progress progress;
    auto r = planLayouts(m, cluster("h200:32x8"), o, progress);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GT(r->feasible, 1000);
    ASSERT_EQ(r->layouts.size(), 10u);
    const auto rejected = std::accumulate(r->rejected.begin(), r->rejected.end(), std::int64_t(0),
        [](std::int64_t s, const RejectedGroup& g) { return s + g.count; });
    EXPECT_EQ(r->evaluated, r->feasible + rejected);
    bool tpReason = false;
    bool memoryReason = false;
    for (const auto& g : r->rejected) {
        tpReason = tpReason || g.reason == "tp=16 > 8 GPUs per node";
        memoryReason = memoryReason || g.example.find("over by") != std::string::npos;
    }
    EXPECT_TRUE(tpReason);
    EXPECT_TRUE(memoryReason);
    const auto& best = r->layouts.front();
    EXPECT_LE(best.maxMemory, 141.0 * 1073741824.0);
    EXPECT_GT(best.training.mfu, 0.1);
    EXPECT_LT(best.training.mfu, CostOptions {}.computeEfficiency);
    // 1T parameters with FP32 Adam need ~16 TB of model states: at least 128 GPUs' worth of
    // sharding, so every layout that fits splits the experts.
    for (const auto& p : r->layouts) {
        EXPECT_GT(p.layout.ep * p.layout.pp, 8) << formatPlan(p.layout.toPlan());
    }
}

TEST_F(RealModels, KimiK2ServesOnOneH200NodeOnlyWithFp8)
{
    const auto m = summarizeModel(graphOf("kimi-k2"));
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 8;
    wl.context = 8192;
    // 1.03T parameters in block FP8 ≈ 959 GiB: 8 × 141 GiB holds it, BF16 (~1.9 TiB) does not.
    auto fp8 = estimateMemory(m, *parsePlan("tp=8"), wl, cluster("h200:1x8"));
    ASSERT_TRUE(fp8) << fp8.error().message;
    EXPECT_TRUE(fp8->fits);
    auto bf16 = estimateMemory(m, *parsePlan("tp=8,weights=bf16"), wl, cluster("h200:1x8"));
    ASSERT_TRUE(bf16);
    EXPECT_FALSE(bf16->fits);
}

} // namespace
