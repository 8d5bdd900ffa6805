#include "base/resources.h"
#include "hardware/cluster.h"
#include "plan/cost_kernel.h"
#include "plan/cost_model.h"
#include "test_models.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::plan;

namespace {

class Cost : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }
    static hardware::Cluster cluster(const std::string& text)
    {
        return *hardware::parseCluster(text);
    }
    static Layout layout(
        const ModelSummary& m, const std::string& plan, const std::string& cl, const Workload& wl)
    {
        auto l = resolveLayout(*parsePlan(plan), m, wl, cluster(cl));
        EXPECT_TRUE(l) << l.error().message;
        return *l;
    }
};

TEST_F(Cost, ModelFlopsMatchMegatronForGpt)
{
    // GPT (MHA, GeLU 4h MLP): Megatron's count per step is B·s·(72·L·h² + 6·h·V) + B·s²·6·L·h
    // (the causal mask halves Narayanan et al.'s 12·B·s²·L·h attention term).
    const double h = 2048, L = 24, V = 50304, s = 2048, B = 512;
    const auto m = summarizeModel(test::buildTestGraph(test::gptSpec(2048, 16, 24, 50304, 8192)));
    const double expected = B * s * (72 * L * h * h + 6 * h * V) + B * s * s * 6 * L * h;
    EXPECT_DOUBLE_EQ(megatronModelFlops(m, s, B), expected);
}

TEST_F(Cost, ModelFlopsCountTopKExpertsAndMtp)
{
    const auto m = summarizeModel(test::buildTestGraph(
        test::mlaSpec(1024, 8, 4, 1000, 4096, 16, 2, 512, 512, 1, 256, 128, 64, 32, 64, 1)));
    const auto noMtp = megatronModelFlops(m, 1024, 1, false);
    const auto withMtp = megatronModelFlops(m, 1024, 1, true);
    // One MTP layer: a MoE layer + 6·(3h + 2h²) per token + one more logits GEMM 6·h·V per token.
    const auto& moe = m.classes[std::size_t(m.mtpClass)].shape;
    EXPECT_TRUE(moe.moe);
    const double mla
        = 256 * (1024 + 8 * 96 + 1) + 128 * (1024 + 8 * (64 + 64) + 1) + 1024 * 32 + 8 * 64 * 1024;
    const double layer = 1024 * 6 * (mla + 1024 * (512 * 2 + 512) * 3)
        + 1024.0 * 1024 * 6 * (8 * 96 / 2.0 + 8 * 64 / 2.0);
    EXPECT_NEAR(withMtp - noMtp,
        layer + 1024 * 6 * (3 * 1024 + 2 * 1024.0 * 1024) + 1024 * 6 * 1024.0 * 1000, 1.0);
}

TEST_F(Cost, CollectivesFollowTheAlphaBetaModel)
{
    const auto net = detail::networkOf(cluster("h200:32x8"));
    const double bw = 450e9 * 0.8;
    const double ib = 50e9 * 0.85;
    // All-reduce of 1 GB over 8 GPUs of one node: 2 × (7/8 × S / B + α·log2 8).
    EXPECT_DOUBLE_EQ(
        detail::collectiveTime(1e9, 1, 8, net, 2), 2 * (7.0 / 8 * 1e9 / bw + 3e-6 * 3));
    // Reduce-scatter over 32 ranks one per node (DP with tp·cp = 8): (31/32 · S / B_ib + α·5).
    EXPECT_DOUBLE_EQ(detail::collectiveTime(1e9, 8, 32, net, 1), 31.0 / 32 * 1e9 / ib + 8e-6 * 5);
    // Hierarchical: 16 ranks, 8 per node: (7/8 · S / B) + (1/2 · S/8 / B_ib) + latencies.
    EXPECT_DOUBLE_EQ(detail::collectiveTime(1e9, 1, 16, net, 1),
        7.0 / 8 * 1e9 / bw + 3e-6 * 3 + 0.5 * 1e9 / 8 / ib + 8e-6 * 1);
    // All-to-all over 16 ranks, 8 per node: 7/16 of the bytes over NVLink, 8/16 over IB.
    EXPECT_DOUBLE_EQ(detail::allToAllTime(1e9, 1, 16, net),
        std::max(1e9 * 7 / 16 / bw, 1e9 * 8 / 16 / ib) + 8e-6);
    EXPECT_EQ(detail::collectiveTime(1e9, 1, 1, net, 2), 0.0);
}

TEST_F(Cost, TrainingStepAddsUp)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(4096, 32, 8, 32, 32000, 14336)));
    Workload wl;
    wl.seqLength = 4096;
    wl.globalBatch = 256;
    const auto l = layout(m, "tp=8,pp=4,zero=1", "h200:8x8", wl);
    const auto c = estimateTrainingCost(m, l, wl, cluster("h200:8x8"));
    const auto& b = c.breakdown;
    EXPECT_NEAR(
        c.stepTime, b.compute + b.tp + b.ep + b.cp + b.pp + b.dp + b.bubble + b.optimizer, 1e-12);
    EXPECT_DOUBLE_EQ(c.tokensPerSecond, 256.0 * 4096 / c.stepTime);
    EXPECT_GT(b.tp, 0);
    EXPECT_EQ(b.ep, 0);
    EXPECT_GT(b.bubble, 0);
    EXPECT_GT(c.mfu, 0.2);
    EXPECT_LT(c.mfu, CostOptions {}.computeEfficiency); // never above the GEMM efficiency
    // The bubble of 1F1B is about (pp − 1) stage times: (pp−1)/m of the steady state.
    EXPECT_NEAR(
        b.bubble / (b.compute + b.tp + b.pp), 3.0 / l.numMicroBatches, 0.5 / l.numMicroBatches);
}

TEST_F(Cost, InterleavingShrinksTheBubble)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(4096, 32, 8, 32, 32000, 14336)));
    Workload wl;
    wl.seqLength = 4096;
    wl.globalBatch = 64;
    const auto plain
        = estimateTrainingCost(m, layout(m, "tp=8,pp=4", "h200:4x8", wl), wl, cluster("h200:4x8"));
    const auto inter = estimateTrainingCost(
        m, layout(m, "tp=8,pp=4,vpp=2", "h200:4x8", wl), wl, cluster("h200:4x8"));
    EXPECT_NEAR(inter.breakdown.bubble / plain.breakdown.bubble, 0.5, 0.05);
    EXPECT_GT(inter.breakdown.pp, plain.breakdown.pp); // twice the stage hand-offs
}

TEST_F(Cost, RecomputeCostsCompute)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(4096, 32, 8, 8, 32000, 14336)));
    Workload wl;
    wl.seqLength = 8192;
    wl.globalBatch = 16;
    auto step = [&](const char* plan) {
        return estimateTrainingCost(m, layout(m, plan, "h200:1x8", wl), wl, cluster("h200:1x8"))
            .breakdown.compute;
    };
    const double none = step("tp=8");
    const double selective = step("tp=8,recompute=selective");
    const double full = step("tp=8,recompute=full");
    EXPECT_GT(selective, none);
    EXPECT_NEAR(full / none, 4.0 / 3.0, 0.01); // one more forward on top of fwd + 2×bwd
    EXPECT_LT(selective, full);
}

TEST_F(Cost, ExpertParallelismCostsAllToAll)
{
    const auto m = summarizeModel(
        test::buildTestGraph(test::moeSpec(2048, 16, 4, 8, 32000, 4096, 64, 8, 1024, 0, 0)));
    Workload wl;
    wl.seqLength = 4096;
    wl.globalBatch = 64;
    const auto inNode
        = estimateTrainingCost(m, layout(m, "tp=1,ep=8", "h200:4x8", wl), wl, cluster("h200:4x8"));
    const auto acrossNodes
        = estimateTrainingCost(m, layout(m, "tp=1,ep=32", "h200:4x8", wl), wl, cluster("h200:4x8"));
    EXPECT_GT(inNode.breakdown.ep, 0);
    EXPECT_GT(acrossNodes.breakdown.ep, inNode.breakdown.ep * 2); // IB is 9× slower than NVLink
}

TEST_F(Cost, NodeDedupSendsATokenOncePerNodeItReaches)
{
    // DeepSeek-V3's routing (top-8 of 256 experts, at most 4 of 8 groups) over EP 64 = 8 nodes
    // of 8 H200s, one group per node; 4096 tokens of 7168 BF16 values.
    const auto net = detail::networkOf(cluster("h200:8x8"));
    const double bw = 450e9 * 0.8;
    const double ib = 50e9 * 0.85;
    LayerShape s;
    s.moe = true;
    s.experts = 256;
    s.topK = 8;
    const double tokens = 4096;
    const double bytes = 7168 * 2.0;
    const double copies = tokens * 8 * bytes;
    // Without dedup every routed copy travels: 7/64 over NVLink, 56/64 over IB.
    EXPECT_DOUBLE_EQ(detail::expertExchangeTime(tokens, s, bytes, 1, 64, net, false),
        detail::allToAllTime(copies, 1, 64, net));
    // With it: distinct nodes among 8 uniform picks of 8 nodes, 8·(1 − (7/8)^8) = 5.25, 7/8 of
    // them remote; the copies for the other 7 GPUs of a node go over NVLink.
    const double intra = copies * 7.0 / 8.0 / bw;
    const double anyNode = 8.0 * (1.0 - std::pow(7.0 / 8.0, 8.0)) * 7.0 / 8.0;
    EXPECT_DOUBLE_EQ(detail::expertExchangeTime(tokens, s, bytes, 1, 64, net, true),
        std::max(intra, tokens * anyNode * bytes / ib) + 8e-6);
    // Group-limited: 4 of 8 one-group nodes, 8 · (1 − C(7,4)/C(8,4)) = 4 reachable, of which
    // 4 · (1 − (3/4)^8) = 3.60 are reached: 3.15 IB copies per token instead of 7.
    s.expertGroups = 8;
    s.groupsPerToken = 4;
    const double limited = 4.0 * (1.0 - std::pow(3.0 / 4.0, 8.0)) * 7.0 / 8.0;
    EXPECT_NEAR(limited, 3.15, 0.005);
    EXPECT_DOUBLE_EQ(detail::expertExchangeTime(tokens, s, bytes, 1, 64, net, true),
        std::max(intra, tokens * limited * bytes / ib) + 8e-6);
    // Within one node nothing is deduplicated.
    EXPECT_DOUBLE_EQ(detail::expertExchangeTime(tokens, s, bytes, 1, 8, net, true),
        detail::allToAllTime(copies, 1, 8, net));
}

TEST_F(Cost, DecodeIsMemoryBoundAtBatchOne)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(4096, 32, 8, 32, 32000, 14336)));
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 1;
    wl.context = 2048;
    const auto l = layout(m, "tp=1", "h200:1x1", wl);
    const auto c = estimateInferenceCost(m, l, wl, cluster("h200:1x1"));
    // Weights as stored (BF16): 32 × (4096·(4096 + 1024 + 1024 + 4096) + 3·4096·14336 + 8192)
    // + 2 × 32000·4096 + 4096; KV: 2048 tokens × 32 layers × 8 heads × 256 × 2 B.
    const double weights
        = 2.0 * (32 * (4096.0 * 10240 + 3 * 4096.0 * 14336 + 8192) + 2 * 32000.0 * 4096 + 4096);
    const double kv = 2048.0 * 32 * 8 * 256 * 2;
    // HBM bound: the FLOPs hide behind the reads but for the roofline's overlap loss of their
    // time at the full GEMM rate (one row runs at 1/(1 + 64) of it); the runtime adds its cost
    // per decode step and per sequence.
    const CostOptions o;
    const double fullRate = c.breakdown.decodeCompute / (1.0 + o.gemmHalfRows);
    EXPECT_NEAR(c.breakdown.decodeMemory, (weights + kv) / (4.8e12 * 0.8), 1e-9);
    EXPECT_NEAR(c.tpot,
        c.breakdown.decodeMemory + o.rooflineOverlapLoss * fullRate + o.decodeStepOverhead
            + o.decodeSequenceOverhead,
        1e-9);
    EXPECT_NEAR(c.breakdown.runtime, o.decodeStepOverhead + o.decodeSequenceOverhead, 1e-12);
    EXPECT_GT(c.ttft, 0);
    EXPECT_NEAR(c.tokensPerSecond, 1024.0 / (c.breakdown.prefill + 1024 * c.tpot), 1e-6);
}

TEST_F(Cost, BiggerBatchesRaiseThroughputAndLatency)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(4096, 32, 8, 32, 32000, 14336)));
    Workload wl;
    wl.mode = Mode::Infer;
    wl.context = 2048;
    wl.batch = 1;
    const auto small
        = estimateInferenceCost(m, layout(m, "tp=2", "h200:1x2", wl), wl, cluster("h200:1x2"));
    wl.batch = 64;
    const auto big
        = estimateInferenceCost(m, layout(m, "tp=2", "h200:1x2", wl), wl, cluster("h200:1x2"));
    EXPECT_GT(big.tpot, small.tpot);
    EXPECT_GT(big.tokensPerSecond, 10 * small.tokensPerSecond);
    EXPECT_GT(small.breakdown.tp, 0);
}

} // namespace
