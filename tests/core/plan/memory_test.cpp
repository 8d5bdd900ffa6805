// Memory cases worked by hand: the arithmetic is written next to each expectation.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "plan/activation_model.h"
#include "plan/memory_estimator.h"
#include "plan/memory_kernel.h"
#include "test_models.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::plan;

namespace {

class Memory : public ::testing::Test {
protected:
    void SetUp() override
    {
        setResourceDir(DAY0_RESOURCE_DIR);
        m_noOverheads.cudaContext = 0;
        m_noOverheads.ncclPerGroup = 0;
        m_noOverheads.fragmentation = 0;
    }
    static hardware::Cluster cluster(const std::string& text)
    {
        return *hardware::parseCluster(text);
    }
    MemoryReport estimate(
        const ModelSummary& m, const std::string& plan, const std::string& cl, const Workload& wl)
    {
        auto r = estimateMemory(m, *parsePlan(plan), wl, cluster(cl), m_noOverheads);
        EXPECT_TRUE(r) << r.error().message;
        return r ? *r : MemoryReport {};
    }
    static const RankMemory& stage(const MemoryReport& r, int s)
    {
        for (const auto& e : r.perRank) {
            if (e.ppStage == s) {
                return e;
            }
        }
        throw std::runtime_error("no such stage");
    }
    MemoryOptions m_noOverheads;
};

// h=1024, 16 heads of 64, 4 KV heads, SwiGLU 2816, 4 layers, vocabulary 32000, untied.
// Per layer: q 1024·1024 = 1,048,576; k, v 256·1024 = 262,144 each; o 1,048,576 → 2,621,440;
// gate, up, down 2816·1024 = 2,883,584 each → 8,650,752. TP-split 11,272,192; norms 2·1024.
// Embedding and head 32000·1024 = 32,768,000 each; final norm 1024.
ModelSummary smallLlama()
{
    return summarizeModel(test::buildTestGraph(test::llamaSpec(1024, 16, 4, 4, 32000, 2816)));
}

TEST_F(Memory, SummaryBucketsByRole)
{
    const auto m = smallLlama();
    ASSERT_EQ(m.classes.size(), 1u);
    EXPECT_EQ(m.classes[0].count, 4);
    EXPECT_DOUBLE_EQ(m.classes[0].weights.params.tp, 11272192.0);
    EXPECT_DOUBLE_EQ(m.classes[0].weights.params.replicated, 2048.0);
    EXPECT_DOUBLE_EQ(m.classes[0].weights.checkpointBytes.total(), 2.0 * 11274240.0);
    EXPECT_DOUBLE_EQ(m.embedding.params.tp, 32768000.0);
    EXPECT_DOUBLE_EQ(m.lmHead.params.tp, 32768000.0);
    EXPECT_DOUBLE_EQ(m.totalParams, 4 * 11274240.0 + 2 * 32768000.0 + 1024.0);
    // Block-FP8: 1 byte per linear weight + one FP32 scale per 128×128 block; norms stay BF16.
    // q: 1,048,576 + 8·8·4; k, v: 262,144 + 2·8·4 each; o like q; gate/up: 2,883,584 + 22·8·4
    // each; down: 2,883,584 + 8·22·4.
    const double fp8
        = 1048576 + 256 + 2 * (262144 + 64) + 1048576 + 256 + 3 * (2883584 + 704) + 2 * 1024 * 2;
    EXPECT_DOUBLE_EQ(m.classes[0].weights.fp8Bytes.total(), fp8);
}

TEST_F(Memory, TrainingTp2Pp2Dp2ByHand)
{
    const auto m = smallLlama();
    Workload wl;
    wl.seqLength = 2048;
    wl.globalBatch = 8; // m = 8 / (dp 2 × mb 1) = 4 micro-batches
    const auto r = estimate(m, "tp=2,pp=2,dp=2,zero=1", "h200:1x8", wl);
    ASSERT_EQ(r.perRank.size(), 2u);

    // Stage 0, per rank: 2 layers × (11,272,192/2 + 2048) + embedding 32,768,000/2
    //   = 11,276,288 + 16,384,000 = 27,660,288 parameters.
    const double p0 = 27660288.0;
    const auto& s0 = stage(r, 0);
    EXPECT_EQ(s0.rank, 0);
    EXPECT_EQ(s0.layers, 2);
    EXPECT_EQ(s0.ranks, 4);
    EXPECT_EQ(s0.weights.value, std::int64_t(2 * p0)); // BF16
    EXPECT_EQ(s0.gradients.value, std::int64_t(4 * p0)); // FP32 main grads
    EXPECT_EQ(s0.optimizer.value, std::int64_t(12 * p0 / 2)); // master + m + v over dp×cp = 2
    // Activations per token (T = 2048, t = u = 2 with SP, fused attention, no dropout):
    //   attention 2h/u + 2h/u + 2(q+k)/t + 2v/t + 2o/t + 4a/t
    //     = 1024 + 1024 + 1280 + 256 + 1024 + 32 = 4640
    //   MLP 2h/u + 2h/u + 2·2F/t + 2F/t = 1024 + 1024 + 5632 + 2816 = 10496
    //   layer: 15136 B/token × 2048 = 30,998,528; stage 0 has 2 layers + token ids 8 × 2048
    //   = 62,013,440 per micro-batch, × min(pp − 0, m) = 2 in flight = 124,026,880.
    EXPECT_EQ(s0.activations.value, 124026880);
    EXPECT_DOUBLE_EQ(s0.inFlightMicroBatches, 2.0);
    // Pipeline send + receive buffers: 2 × 2 bytes × h × T / u = 4,194,304.
    EXPECT_EQ(s0.commBuffers.value, 4194304);
    EXPECT_EQ(s0.total.value, std::int64_t(2 * p0 + 4 * p0 + 6 * p0) + 124026880 + 4194304);

    // Stage 1: 2 layers + final norm 1024 + head 16,384,000 = 27,661,312 parameters.
    const double p1 = 27661312.0;
    const auto& s1 = stage(r, 1);
    EXPECT_EQ(s1.rank, 4);
    EXPECT_EQ(s1.weights.value, std::int64_t(2 * p1));
    // Activations: 2 layers × 30,998,528 × 1 in flight + head: T × (2h/u + 2h/u + 4V/t)
    //   = 2048 × (1024 + 1024 + 64000) = 135,266,304 → 197,263,360.
    EXPECT_EQ(s1.activations.value, 197263360);
    EXPECT_EQ(s1.total.value, std::int64_t(12 * p1) + 197263360 + 4194304);
    // Most loaded first: stage 1 (head and FP32 logits) outweighs stage 0.
    EXPECT_EQ(r.perRank.front().ppStage, 1);
    EXPECT_EQ(r.maxTotal, s1.total);
    EXPECT_TRUE(r.fits);
}

TEST_F(Memory, ZeroStagesShardMoreStates)
{
    const auto m = smallLlama();
    Workload wl;
    wl.seqLength = 2048;
    wl.globalBatch = 8;
    const double p = 4 * (11272192.0 / 2 + 2048) + 2 * 16384000.0 + 1024; // pp = 1, tp = 2
    const double d = 4; // dp = 4 on 8 GPUs
    const auto z0 = stage(estimate(m, "tp=2,zero=0", "h200:1x8", wl), 0);
    const auto z1 = stage(estimate(m, "tp=2,zero=1", "h200:1x8", wl), 0);
    const auto z2 = stage(estimate(m, "tp=2,zero=2", "h200:1x8", wl), 0);
    const auto z3 = stage(estimate(m, "tp=2,zero=3", "h200:1x8", wl), 0);
    EXPECT_EQ(z0.weights.value + z0.gradients.value + z0.optimizer.value,
        std::int64_t(18 * p)); // Megatron's 18
    EXPECT_EQ(z1.optimizer.value, std::int64_t(12 * p / d));
    EXPECT_EQ(z1.gradients.value, std::int64_t(4 * p));
    EXPECT_EQ(z2.gradients.value, std::int64_t(4 * p / d));
    EXPECT_EQ(z2.weights.value, std::int64_t(2 * p));
    EXPECT_EQ(z3.weights.value, std::int64_t(2 * p / d));
    // ZeRO-3 prefetches two whole layers (after TP): 2 × 2 × (11,272,192/2 + 2048) bytes, plus a
    // reduce-scatter bucket of min(55,321,600 params, 40M) × 4 bytes.
    EXPECT_EQ(z3.zeroBuffers.value, std::int64_t(2 * 2 * (11272192.0 / 2 + 2048) + 40e6 * 4));
}

TEST_F(Memory, ExpertStatesShardOverExpertDataParallel)
{
    // 8 experts of width 512, top-2, no shared expert, 2 layers, h = 512 (8 heads of 64, 2 KV).
    const auto m = summarizeModel(
        test::buildTestGraph(test::moeSpec(512, 8, 2, 2, 1000, 1024, 8, 2, 512, 0, 0)));
    // Per layer experts: 8 × 3 × 512 × 512 = 6,291,456 parameters.
    ASSERT_DOUBLE_EQ(m.classes[0].weights.params.expert, 6291456.0);
    Workload wl;
    wl.seqLength = 1024;
    wl.globalBatch = 16;
    // 16 GPUs, tp=2, ep=4, etp=1: dp = 8, edp = 16 / (1·4·1) = 4. Each rank holds 2 experts per
    // layer.
    const auto r = estimate(m, "tp=2,ep=4,etp=1,zero=1", "h200:2x8", wl);
    const auto& s = stage(r, 0);
    const double experts = 2 * 6291456.0 / 4;
    // Attention per layer: q 512·512, k, v 128·512, o 512·512 = 655,360 (TP); norms 1024 and
    // router 8·512 = 4096 replicated. Embedding and head 1000·512 each (TP); final norm 512.
    const double dense = 2 * (655360.0 / 2 + 1024 + 4096) + 2 * 512000.0 / 2 + 512;
    EXPECT_EQ(s.weights.value, std::int64_t(2 * (dense + experts)));
    EXPECT_EQ(s.optimizer.value, std::int64_t(12 * dense / 8 + 12 * experts / 4));
}

TEST_F(Memory, InferenceByHand)
{
    const auto m = smallLlama();
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 4;
    wl.context = 4096; // prompt = 4096 - 1024 = 3072 tokens
    const auto r = estimate(m, "tp=2", "h200:1x2", wl);
    const auto& s = stage(r, 0);
    // Weights, BF16 as stored: 4 × (5,636,096 + 2048) + 1024 + 2 × 16,384,000 = 55,321,600 params.
    EXPECT_EQ(s.weights.value, 2 * 55321600);
    EXPECT_EQ(s.gradients.value, 0);
    // KV: 4 KV heads / tp 2 = 2 per rank × (64 + 64) × 2 bytes = 512 B per token per layer;
    //   × 4 sequences × 4096 tokens × 4 layers = 33,554,432.
    EXPECT_EQ(s.kvCache.value, 33554432);
    // Prefill workspace: chunk min(8192, 4 × 3072) = 8192 tokens × (4h + max(attention, MLP))
    //   attention 2(1024 + 256 + 256)/2 + 2·1024/2 + 4·16/2 = 2592; MLP 2·3·2816/2 = 8448
    //   → 8192 × (4096 + 8448) = 102,760,448; + FP32 logits 4 × 16000 × 4 = 256,000.
    EXPECT_EQ(s.activations.value, 103016448);
    EXPECT_EQ(s.total.value, 2 * 55321600 + 33554432 + 103016448);
}

TEST_F(Memory, KvCacheGqaReplicatesHeadsBeyondTp)
{
    const auto m = smallLlama(); // 4 KV heads
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 1;
    wl.context = 1000;
    // tp=8 > 4 KV heads: every rank keeps one head: 1 × 128 × 2 B × 1000 × 4 layers.
    EXPECT_EQ(stage(estimate(m, "tp=8", "h200:1x8", wl), 0).kvCache.value, 1 * 128 * 2 * 1000 * 4);
    // FP8 KV halves it at tp=4: 1 head × 128 × 1 B.
    EXPECT_EQ(
        stage(estimate(m, "tp=4,kv=fp8", "h200:1x4", wl), 0).kvCache.value, 1 * 128 * 1 * 1000 * 4);
}

TEST_F(Memory, KvCacheMlaKeepsTheLatentOnEveryTpRank)
{
    // DeepSeek-V3 attention dims: kv_lora 512 + rope 64 = 576 values per token per layer.
    const auto m = summarizeModel(test::buildTestGraph(
        test::mlaSpec(1024, 16, 3, 1000, 2048, 8, 2, 256, 256, 1, 384, 512, 128, 64, 128, 0)));
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 2;
    wl.context = 1000;
    const double perToken = 576 * 2; // BF16
    for (const char* plan : { "tp=1", "tp=8" }) {
        EXPECT_EQ(stage(estimate(m, plan, "h200:1x8", wl), 0).kvCache.value,
            std::int64_t(2 * 1000 * 3 * perToken))
            << plan;
    }
}

TEST_F(Memory, SlidingWindowLayersHoldOnlyTheWindow)
{
    auto spec = test::llamaSpec(1024, 16, 4, 4, 32000, 2816);
    for (const int i : { 1, 3 }) {
        spec.layers[i].mixer = model::MixerKind::Sliding;
        spec.layers[i].slidingWindow = 128;
    }
    const auto m = summarizeModel(test::buildTestGraph(spec));
    EXPECT_EQ(m.classes.size(), 2u);
    Workload wl;
    wl.mode = Mode::Infer;
    wl.context = 1000;
    // Per token per layer at tp=1: 4 heads × 128 × 2 B = 1024 B. Two full layers × 1000 tokens
    // and two windowed layers × 128 tokens.
    EXPECT_EQ(
        stage(estimate(m, "tp=1", "h200:1x1", wl), 0).kvCache.value, 1024 * (2 * 1000 + 2 * 128));
}

TEST_F(Memory, Fp8WeightsUseTheBlockScaledBytes)
{
    const auto m = smallLlama();
    Workload wl;
    wl.mode = Mode::Infer;
    const auto r = estimate(m, "tp=1,weights=fp8", "h200:1x1", wl);
    const double expected
        = 4 * m.classes[0].weights.fp8Bytes.total() + 2 * 32768000.0 * 2 + 1024 * 2;
    EXPECT_EQ(stage(r, 0).weights.value, std::int64_t(expected));
    bool noted = false;
    for (const auto& n : r.notes) {
        noted = noted || n.find("weights at fp8") != std::string::npos;
    }
    EXPECT_TRUE(noted);
}

TEST_F(Memory, OverheadsAreNamedAndConfigurable)
{
    const auto m = smallLlama();
    Workload wl;
    wl.seqLength = 2048;
    wl.globalBatch = 8;
    MemoryOptions o;
    o.cudaContext = 1e9;
    o.ncclPerGroup = 1e8;
    o.fragmentation = 0.10;
    auto r = estimateMemory(m, *parsePlan("tp=2,pp=2,dp=2,zero=1"), wl, cluster("h200:1x8"), o);
    ASSERT_TRUE(r);
    const auto& s = r->perRank.front();
    // Communicators with > 1 rank: tp, dp×cp, pp (a dense model joins no expert groups) → 3.
    EXPECT_EQ(s.runtimeReserve.value, std::int64_t(1e9 + 3 * 1e8));
    const auto allocated = s.weights + s.gradients + s.optimizer + s.activations + s.kvCache
        + s.commBuffers + s.moeDispatch + s.zeroBuffers;
    EXPECT_NEAR(double(s.fragmentation.value), 0.10 * double(allocated.value), 2.0);
    EXPECT_EQ(s.buffers,
        s.runtimeReserve + s.commBuffers + s.moeDispatch + s.zeroBuffers + s.fragmentation);
    EXPECT_EQ(
        s.total, s.weights + s.gradients + s.optimizer + s.activations + s.kvCache + s.buffers);
}

TEST_F(Memory, DoesNotFitIsReported)
{
    const auto m
        = summarizeModel(test::buildTestGraph(test::llamaSpec(8192, 64, 8, 80, 128256, 28672)));
    Workload wl;
    const auto r = estimate(m, "tp=1", "l40s:1x1", wl);
    EXPECT_FALSE(r.fits);
    EXPECT_GT(r.maxTotal, r.deviceMemory);
}

// Korthikanti et al. 2022, Table 2, for GPT: s = 2048, b = 1, h = 12288, a = 96, t = 8, 16-bit
// activations and 1-byte dropout masks, unfused attention.
struct Table2 : ::testing::Test {
    LayerShape gpt()
    {
        LayerShape s;
        s.hidden = 12288;
        s.heads = 96;
        s.kvHeads = 96;
        s.qkHeadDim = 128;
        s.vHeadDim = 128;
        s.gated = false;
        s.ffn = 4 * 12288;
        return s;
    }
    ActivationContext ctx(int t, bool sp, Recompute r)
    {
        ActivationContext c;
        c.tokens = 2048;
        c.keys = 2048;
        c.tp = t;
        c.sp = sp;
        c.recompute = r;
        c.flash = false;
        c.dropout = true;
        return c;
    }
    const double sbh = 2048.0 * 12288.0;
    const double asOverH = 96.0 * 2048.0 / 12288.0;
};

TEST_F(Table2, ReproducesEveryRowExactly)
{
    const auto s = gpt();
    EXPECT_DOUBLE_EQ(
        layerActivationBytes(s, ctx(1, false, Recompute::None)), sbh * (34 + 5 * asOverH));
    EXPECT_DOUBLE_EQ(layerActivationBytes(s, ctx(8, false, Recompute::None)),
        sbh * (10 + 24.0 / 8 + 5 * asOverH / 8));
    EXPECT_DOUBLE_EQ(
        layerActivationBytes(s, ctx(8, true, Recompute::None)), sbh / 8 * (34 + 5 * asOverH));
    EXPECT_DOUBLE_EQ(
        layerActivationBytes(s, ctx(8, false, Recompute::Selective)), sbh * (10 + 24.0 / 8));
    EXPECT_DOUBLE_EQ(layerActivationBytes(s, ctx(8, true, Recompute::Selective)), sbh * 34 / 8);
    EXPECT_DOUBLE_EQ(layerActivationBytes(s, ctx(8, false, Recompute::Full)), 2 * sbh);
}

TEST_F(Table2, ExtensionsWidenTheRightTerms)
{
    auto s = gpt();
    auto c = ctx(8, true, Recompute::Selective);
    const double base = layerActivationBytes(s, c);
    // SwiGLU with the same F adds the up projection output: 2·F/t per token.
    s.gated = true;
    EXPECT_DOUBLE_EQ(layerActivationBytes(s, c) - base, 2048.0 * 2 * s.ffn / 8);
    // GQA with 8 KV heads shrinks K and V: (96 − 8) × 128 × (2 + 2) / t per token.
    auto g = gpt();
    g.kvHeads = 8;
    EXPECT_DOUBLE_EQ(base - layerActivationBytes(g, c), 2048.0 * 88 * 128 * 4 / 8);
    // Fused attention keeps only the FP32 log-sum-exp per head instead of the s×s scores.
    auto f = ctx(8, true, Recompute::None);
    f.flash = true;
    EXPECT_DOUBLE_EQ(layerActivationBytes(gpt(), f), base + 2048.0 * 96 * 4 / 8);
}

TEST(MoeActivations, RoutedRowsScaleWithTopKAndEtp)
{
    LayerShape s;
    s.hidden = 1024;
    s.heads = 8;
    s.kvHeads = 8;
    s.qkHeadDim = 128;
    s.vHeadDim = 128;
    s.moe = true;
    s.experts = 64;
    s.topK = 8;
    s.expertFfn = 512;
    ActivationContext c;
    c.tokens = 1000;
    c.keys = 1000;
    c.tp = 2;
    c.sp = true;
    c.etp = 1;
    // Routed part: T/t·k rows = 4000 × (2h + 2·2F/e + 2F/e + 2h + 4) = 4000 × (2048 + 2048 + 1024 +
    // 2048 + 4).
    const double dense = layerActivationBytes(s, c);
    c.etp = 2;
    // ETP gathers the rows of both TP ranks (8000) but splits F: 8000 × (2048 + 1024 + 512 + 2048 +
    // 4).
    EXPECT_DOUBLE_EQ(layerActivationBytes(s, c) - dense,
        8000.0 * (2048 + 1024 + 512 + 2048 + 4) - 4000.0 * (2048 + 2048 + 1024 + 2048 + 4));
}

TEST(InFlight, OneFOneBAndInterleaved)
{
    Layout l;
    l.pp = 4;
    l.numMicroBatches = 8;
    l.stageStart = { 0, 4, 8, 12, 16 };
    EXPECT_DOUBLE_EQ(detail::inFlightMicroBatches(l, 0), 4);
    EXPECT_DOUBLE_EQ(detail::inFlightMicroBatches(l, 3), 1);
    l.numMicroBatches = 2;
    EXPECT_DOUBLE_EQ(detail::inFlightMicroBatches(l, 0), 2);
    // Interleaved, vpp = 2: warm-up 2·(pp−1) + (vpp−1)·pp + 1 = 11 chunks of half a stage:
    // 5.5 = pp · (1 + (pp−1)/(pp·vpp)), Megatron's interleaving penalty.
    l.numMicroBatches = 8;
    l.vpp = 2;
    EXPECT_DOUBLE_EQ(detail::inFlightMicroBatches(l, 0), 5.5);
    EXPECT_DOUBLE_EQ(detail::inFlightMicroBatches(l, 3), 2.5);
}

} // namespace
