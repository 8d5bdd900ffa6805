// Memory and planning per layer kind on the bundled 2026 models: KV cache only where there is
// attention and capped at the window for sliding layers, MLA latents whole on every TP rank,
// DeepSeek-V4's compressed entries per ratio, fixed recurrent states independent of the context,
// weights at their real bytes with their scales, TP legality of the new head kinds, and the
// planner finding layouts for every one of them.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "model/cache_footprint.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/memory_estimator.h"
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <map>

using namespace day0;
using namespace day0::plan;

namespace {

const char* const kFrontier[] = { "deepseek-v4-pro", "deepseek-v4-flash", "kimi-k3", "glm-5",
    "qwen3.5-397b-a17b", "qwen3.5-27b", "qwen3-next-80b-a3b", "gemma-4-26b-a4b", "minimax-m2.5",
    "minimax-m3", "nemotron-3-super-120b-fp8", "nemotron-3-nano-30b", "gpt-oss-120b", "gpt-oss-20b",
    "hunyuan-a13b", "llama-3.3-nemotron-super-49b" };

struct Loaded {
    model::LayerGraph graph;
    ModelSummary summary;
};

const Loaded& load(const std::string& name)
{
    static std::map<std::string, Loaded> cache;
    auto it = cache.find(name);
    if (it == cache.end()) {
        setResourceDir(DAY0_RESOURCE_DIR);
        auto spec = model::loadModel(name);
        EXPECT_TRUE(spec.ok()) << name << ": " << spec.error().message;
        auto graph = model::buildLayerGraph(spec ? *spec : model::ModelSpec {});
        auto summary = summarizeModel(graph);
        it = cache.emplace(name, Loaded { std::move(graph), std::move(summary) }).first;
    }
    return it->second;
}

hardware::Cluster cluster(const std::string& text)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    return *hardware::parseCluster(text);
}

Workload serving(int context)
{
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 1;
    wl.context = context;
    wl.includeMtp = false;
    return wl;
}

// The KV / state bytes of one sequence on one rank of a single-GPU layout, by layer kind.
std::map<model::MixerKind, double> kvByKind(const std::string& name, int context, int tp = 1)
{
    const auto& m = load(name).summary;
    ParallelPlan plan;
    plan.tp = tp;
    plan.sp = tp > 1;
    plan.ep = 1;
    auto report = estimateMemory(m, plan, serving(context), cluster("h200:4x8"));
    EXPECT_TRUE(report.ok()) << name << ": " << report.error().message;
    std::map<model::MixerKind, double> out;
    if (!report) {
        return out;
    }
    double total = 0;
    for (const auto& r : report->perRank) {
        for (const auto& k : r.kvByKind) {
            out[k.kind] += double(k.bytes.value);
        }
        total += double(r.kvCache.value);
    }
    double sum = 0;
    for (const auto& [kind, bytes] : out) {
        sum += bytes;
    }
    EXPECT_NEAR(sum, total, 1.0 * double(out.size())) << name << ": the itemised KV adds up";
    return out;
}

} // namespace

TEST(FrontierModels, EveryOneIsSummarisedAndPlanned)
{
    for (const char* name : kFrontier) {
        SCOPED_TRACE(name);
        const auto& l = load(name);
        const auto counts = l.graph.countParameters();
        EXPECT_DOUBLE_EQ(l.summary.totalParams, double(counts.total));
        EXPECT_NEAR(l.summary.activeParams, double(counts.active), 1e-6 * double(counts.active));
        EXPECT_FALSE(l.summary.partial);
        // Inference on 8 nodes of 8 H200: the planner finds layouts that fit.
        PlannerOptions options;
        options.workload = serving(32768);
        Progress progress;
        auto r = planLayouts(l.summary, cluster("h200:8x8"), options, progress);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_GT(r->feasible, 0) << "no layout fits";
        ASSERT_FALSE(r->layouts.empty());
        EXPECT_GT(r->layouts.front().tokensPerSecond, 0.0);
    }
}

TEST(FrontierModels, KvOnlyWhereThereIsAttentionAndCappedAtTheWindow)
{
    // gpt-oss: 18 full + 18 sliding(128) layers of 8 KV heads × 64 (doc: 1,024 elements/token).
    const auto a = kvByKind("gpt-oss-120b", 4096);
    const auto b = kvByKind("gpt-oss-120b", 16384);
    using K = model::MixerKind;
    EXPECT_DOUBLE_EQ(a.at(K::Sliding), 18.0 * 1024 * 128 * 2);
    EXPECT_DOUBLE_EQ(b.at(K::Sliding), a.at(K::Sliding)) << "sliding layers keep 128 tokens";
    EXPECT_DOUBLE_EQ(a.at(K::Attention), 18.0 * 1024 * 4096 * 2);
    EXPECT_DOUBLE_EQ(b.at(K::Attention), 4.0 * a.at(K::Attention));

    // Nemotron-3 Super: KV on its 8 attention layers only (2 KV heads × 128), Mamba-2 states of
    // (conv_kernel − 1)·(heads·head_dim + 2·groups·state) BF16 plus heads·head_dim·state F32
    // per layer, whatever the context; MoE and MLP layers keep nothing.
    const auto n1 = kvByKind("nemotron-3-super-120b-fp8", 8192);
    const auto n2 = kvByKind("nemotron-3-super-120b-fp8", 65536);
    EXPECT_DOUBLE_EQ(n1.at(K::Attention), 8.0 * 2 * 2 * 128 * 8192 * 2);
    EXPECT_DOUBLE_EQ(n2.at(K::Mamba2), n1.at(K::Mamba2)) << "a fixed per-sequence state";
    EXPECT_DOUBLE_EQ(
        n1.at(K::Mamba2), 40.0 * (3.0 * (128 * 64 + 2 * 8 * 128) * 2 + 128.0 * 64 * 128 * 4));
    EXPECT_EQ(n1.count(K::None), 0u);

    // Qwen3.5-397B: 15 full-attention layers (2 KV heads × 256) and 45 Gated DeltaNet layers of
    // F32 state 64·128·128 and BF16 conv state 12,288·3.
    const auto q = kvByKind("qwen3.5-397b-a17b", 8192);
    EXPECT_DOUBLE_EQ(q.at(K::Attention), 15.0 * 2 * 2 * 256 * 8192 * 2);
    EXPECT_DOUBLE_EQ(q.at(K::GatedDeltaNet), 45.0 * (64.0 * 128 * 128 * 4 + 12288.0 * 3 * 2));
}

TEST(FrontierModels, LatentsAreWholeOnEveryTpRankAndCompressedKvGrowsByRatio)
{
    using K = model::MixerKind;
    // GLM-5: the MLA latent 512 + 64 and the DSA indexer key 128 per token on each of 78 layers,
    // the same on every TP rank (not split by heads).
    const auto one = kvByKind("glm-5", 8192, 1);
    const auto eight = kvByKind("glm-5", 8192, 8);
    EXPECT_DOUBLE_EQ(one.at(K::SparseMla), 78.0 * (576 + 128) * 8192 * 2);
    EXPECT_DOUBLE_EQ(eight.at(K::SparseMla), one.at(K::SparseMla));

    // DeepSeek-V4-Pro at 1,048,576 tokens: the model card's 9.62 GiB per sequence in BF16 is
    // the cached entries, 10,334,371,840 B; the reference compressors' small F32 states add
    // 18,710,528 B.
    const auto v4 = kvByKind("deepseek-v4-pro", 1048576);
    EXPECT_NEAR(v4.at(K::Compressed), 10'334'371'840.0 + 18'710'528.0, 64.0);
}

TEST(FrontierModels, WeightsAtTheirStoredBytesAndNewHeadsInTpLegality)
{
    // gpt-oss-120b at tp=1: one rank holds every stored byte, MXFP4 blocks and scales included
    // (65,248,815,744 B).
    const auto& oss = load("gpt-oss-120b");
    ParallelPlan plan;
    plan.tp = 1;
    auto report = estimateMemory(oss.summary, plan, serving(1024), cluster("b200:1x8"));
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_NEAR(double(report->perRank.front().weights.value), 65'248'815'744.0, 1.0);

    // Qwen3.5-397B's linear-attention layers split their 64 value and 16 key heads by TP
    // (tp=8 divides both); tp=3 divides nothing.
    const auto& qwen = load("qwen3.5-397b-a17b").summary;
    EXPECT_TRUE(checkTensorParallel(qwen, 8, 8, true) == std::nullopt);
    const auto three = checkTensorParallel(qwen, 3, 8, true);
    ASSERT_TRUE(three.has_value());
    EXPECT_TRUE(three->kind == RejectKind::TpMixerHeads || three->kind == RejectKind::TpHeads)
        << describeRejection(*three);

    // Nemotron-3 Super: 128 Mamba heads in 8 groups; tp=16 splits the heads and replicates the
    // groups; tp=12 does not divide the 128 heads.
    const auto& nemotron = load("nemotron-3-super-120b-fp8").summary;
    const auto sixteen = checkTensorParallel(nemotron, 16, 64, false);
    EXPECT_FALSE(sixteen.has_value()) << describeRejection(*sixteen);
    const auto twelve = checkTensorParallel(nemotron, 12, 64, false);
    ASSERT_TRUE(twelve.has_value());
    EXPECT_EQ(twelve->kind, RejectKind::TpMixerHeads) << describeRejection(*twelve);
}
