// The proof that sharded execution of the recurrent hybrids computes what the single-rank engine
// computes: shrunk Qwen3.5 and Qwen3-Next (Gated DeltaNet and gated full attention),
// Nemotron-H (Mamba-2, attention, relu² MLP) and Kimi-Linear (KDA, MLA without RoPE) at tp=2,
// with sequence parallelism, at pp=2 with the stage boundary between a recurrent and a
// full-attention layer, and tp=2 × pp=2; logits of the prompt and of every decode step against
// one rank. A conv window or recurrent state split
// differently from the projections, or carried wrongly between steps, changes the logits.
#include "checkpoint/sharding.h"
#include "parallel_testkit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

using namespace day0;

namespace {

// The bound of the existing proof (parallel_test.cpp): the executor runs fp32, and a sharded
// run sums the same terms in another order.
constexpr double kTolerance = 1e-5;
// Gemma-4's shrunk models: one rank's own fp32 logits already differ from fp64 by up to 1.1e-5
// (max|Δ|/max on the two prompts of a pp=2 plan: the sandwich norms renormalise small branch
// outputs, the soft-capped logits are small), so two fp32 runs summing in another order differ
// by as much; prove() then also holds the error to 4× that floor, measured on the same
// sequences.
constexpr double kGemmaTolerance = 5e-5;

std::filesystem::path scratch() { return test::processScratch("parallel-hybrid-test"); }

const test::ShrunkModel& hybrid(const std::string& name)
{
    return test::cachedShrunkHybrid(name, scratch());
}

bool recurrent(model::MixerKind k)
{
    return k == model::MixerKind::GatedDeltaNet || k == model::MixerKind::Mamba2
        || k == model::MixerKind::KimiDelta;
}

test::MatrixPlan layoutOf(int tp, int pp, bool sp = false, int ep = 1, int dp = 1)
{
    return test::planOf(tp, pp, ep, dp, sp);
}

Result<std::vector<parallel::SequenceResult>> run(
    const test::ShrunkModel& m, const test::MatrixPlan& p)
{
    Progress progress;
    auto r = parallel::runParallelInProcess(
        m.spec, *m.weights, test::runOptions(m, p), progress, {}, nullptr, {}, { Seconds(60.0) });
    if (!r) {
        return r.error();
    }
    return r->sequences;
}

/// `boundary`: every pp=2 plan must cut between a recurrent layer and a full-attention one.
void prove(const std::string& name, const std::vector<test::MatrixPlan>& plans,
    bool boundary = true, double tolerance = kTolerance)
{
    const auto& m = hybrid(name);
    ASSERT_FALSE(m.spec.layers.empty());
    for (const auto& p : plans) {
        SCOPED_TRACE(p.label());
        if (p.layout.pp > 1 && boundary) {
            // The stage boundary lies between a recurrent layer and a full-attention one, so
            // each stage carries a different kind of state through the decode steps.
            const auto first = checkpoint::stageLayers(p.layout, m.spec.numLayers, 0);
            const auto& last = m.spec.layers[std::size_t(first.second - 1)];
            const auto& next = m.spec.layers[std::size_t(first.second)];
            ASSERT_TRUE(recurrent(last.mixer));
            ASSERT_EQ(next.mixer, model::MixerKind::Attention);
        }
        auto sequences = run(m, p);
        ASSERT_TRUE(sequences.ok()) << sequences.error().message;
        ASSERT_EQ(sequences->size(), std::size_t(p.layout.dp * p.microBatches));
        auto err = test::compareWithSingleRank(m, *sequences, test::kMatrixTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, tolerance);
        std::cout << fmt::format("[hybrid] {} {}: max rel error {:.2e}\n", name, p.label(), *err);
        if (tolerance > kTolerance) {
            // A looser bound holds only where one rank's own fp32 rounding is of its size.
            auto floor = test::singleRankFp32Floor(m, *sequences, test::kMatrixTokens);
            ASSERT_TRUE(floor.ok()) << floor.error().message;
            EXPECT_LE(*err, 4.0 * *floor);
            std::cout << fmt::format("[hybrid] {} one rank fp32 vs fp64: {:.2e}\n", name, *floor);
        }
    }
}

} // namespace

TEST(ParallelHybrid, Qwen35ShardedEqualsOneRank)
{
    prove("qwen3.5-27b", { layoutOf(2, 1), layoutOf(2, 1, true), layoutOf(1, 2), layoutOf(2, 2) });
}

TEST(ParallelHybrid, Qwen3NextMoeShardedEqualsOneRank)
{
    auto pp = layoutOf(1, 2);
    pp.layout.stageLayerCounts = { 3, 1 }; // linear, linear, linear | full
    prove("qwen3-next-80b-a3b", { layoutOf(2, 1), pp, layoutOf(2, 1, false, 2) });
}

TEST(ParallelHybrid, Qwen35MoeFusedExpertsShardedEqualsOneRank)
{
    // The BF16 release's fused experts.gate_up_proj / down_proj, split per expert over EP / ETP.
    const auto& m = hybrid("qwen3.5-397b-a17b");
    ASSERT_TRUE(m.spec.moe && m.spec.moe->packedExperts);
    prove("qwen3.5-397b-a17b",
        { layoutOf(2, 1), layoutOf(2, 1, false, 2), layoutOf(1, 2), layoutOf(2, 2, false, 2) });
}

TEST(ParallelHybrid, NemotronHShardedEqualsOneRank)
{
    prove("nemotron-h", { layoutOf(2, 1), layoutOf(2, 1, true), layoutOf(1, 2), layoutOf(2, 2) });
}

TEST(ParallelHybrid, KimiLinearShardedEqualsOneRank)
{
    // KDA heads split over TP (q/k/v and their convs by channel, the decay's f_b_proj, dt_bias
    // and A_log by head, β by head, the sigmoid-gated o_norm per head, o_proj row-parallel),
    // the MLA without RoPE by heads, the sigmoid router's experts over EP; pp=2 cuts between
    // the last KDA layer and the MLA one.
    const auto& m = hybrid("kimi-linear-48b-a3b");
    ASSERT_EQ(m.spec.family, model::Family::KimiLinear);
    ASSERT_TRUE(m.spec.mla.noRope);
    ASSERT_TRUE(m.spec.moe.has_value());
    ASSERT_EQ(m.spec.linearAttention->valueHeads, 2);
    auto pp = layoutOf(1, 2);
    pp.layout.stageLayerCounts = { 3, 1 }; // KDA, KDA, KDA | MLA
    auto both = layoutOf(2, 2, false, 2);
    both.layout.stageLayerCounts = { 3, 1 };
    prove("kimi-linear-48b-a3b",
        { layoutOf(2, 1), layoutOf(2, 1, true), layoutOf(2, 1, false, 2), pp, both });
}

TEST(ParallelHybrid, KimiK3AdditionsShardedEqualOneRank)
{
    // Kimi-Linear with Kimi-K3's additions: the routed experts in the latent space between the
    // replicated routed_expert_down_proj / up_proj with routed_expert_norm on each token's sum,
    // the MLA output gate (g_proj by heads), the KDA safe gate and full-rank g_proj.
    const auto& m = hybrid("kimi-linear-k3-additions");
    ASSERT_TRUE(m.spec.moe && m.spec.moe->latentSize > 0 && m.spec.moe->latentNorm);
    ASSERT_TRUE(m.spec.mla.outputGate);
    ASSERT_TRUE(m.spec.linearAttention->fullRankGate);
    ASSERT_NE(m.spec.linearAttention->gateLowerBound, 0.0);
    auto both = layoutOf(2, 2, false, 2);
    both.layout.stageLayerCounts = { 3, 1 };
    prove("kimi-linear-k3-additions", { layoutOf(2, 1), layoutOf(2, 1, true, 2), both });
}

TEST(ParallelHybrid, Gemma4E2BShardedEqualsOneRank)
{
    // Sliding and full layers with their own RoPE and head widths, the KV-shared layers reading
    // their source's cache (on every TP rank its own KV head copy), double-wide MLPs, the
    // per-layer input embeddings (vocab-parallel table, carried to the second stage), the
    // sandwich norms, layer_scalar and the soft-capped logits. The prompts and decode steps run
    // past the window of 4.
    const auto& m = hybrid("gemma-4-e2b");
    ASSERT_EQ(m.spec.family, model::Family::Gemma4);
    ASSERT_EQ(m.spec.layers.size(), 6u);
    ASSERT_GT(m.spec.perLayerInputSize, 0);
    ASSERT_EQ(m.spec.kvSharedLayers, 2);
    ASSERT_EQ(m.spec.layers[0].slidingWindow, 4);
    ASSERT_GT(m.spec.finalLogitSoftcap, 0.0);
    auto pp = layoutOf(1, 2);
    pp.layout.stageLayerCounts = { 2, 4 }; // the KV-shared layers' sources in the second stage
    auto both = layoutOf(2, 2, true);
    both.layout.stageLayerCounts = { 2, 4 };
    prove(
        "gemma-4-e2b", { layoutOf(2, 1), layoutOf(2, 1, true), pp, both }, false, kGemmaTolerance);
}

TEST(ParallelHybrid, Gemma4MoeShardedEqualsOneRank)
{
    // gemma-4-26b-a4b: the MoE block beside the dense MLP (the router's weightless norm, scale
    // and per_expert_scale replicated, the fused experts unpacked and spread over EP, fed
    // pre_feedforward_layernorm_2 of the residual stream), the full layer's global_head_dim and
    // attention_k_eq_v (its keys double as values).
    // Its full layer has 1 KV head of its own (num_global_key_value_heads), replicated over the
    // TP ranks, where the sliding layers' 2 split one per rank.
    const auto& m = hybrid("gemma-4-26b-a4b");
    ASSERT_EQ(m.spec.family, model::Family::Gemma4);
    ASSERT_TRUE(m.spec.moe && m.spec.moe->packedExperts);
    ASSERT_TRUE(m.spec.layers[5].sharedKv);
    ASSERT_EQ(m.spec.kvHeadsOf(m.spec.layers[0]), 2);
    ASSERT_EQ(m.spec.kvHeadsOf(m.spec.layers[5]), 1);
    prove("gemma-4-26b-a4b",
        { layoutOf(2, 1), layoutOf(2, 1, true, 2), layoutOf(1, 2), layoutOf(2, 2, false, 2) },
        false, kGemmaTolerance);
}

TEST(ParallelHybrid, MiniMaxM3ShardedEqualsOneRank)
{
    // MSA layers (the replicated index branch selects key blocks per KV group; each rank's
    // groups attend over their own), the (1 + w) norms, partial RoPE, the clamped SwiGLU and
    // the sigmoid router with its correction bias over EP; the prompts and decode steps span
    // more key blocks than the top-k keeps.
    const auto& m = hybrid("minimax-m3");
    ASSERT_EQ(m.spec.family, model::Family::MiniMaxM3);
    ASSERT_TRUE(m.spec.blockSparse.has_value());
    bool sparse = false;
    for (const auto& layer : m.spec.layers) {
        sparse = sparse || layer.mixer == model::MixerKind::BlockSparse;
    }
    ASSERT_TRUE(sparse);
    prove("minimax-m3",
        { layoutOf(2, 1), layoutOf(2, 1, true), layoutOf(2, 1, false, 2), layoutOf(1, 2),
            layoutOf(2, 2, false, 2) },
        false);
    // Two KV groups, one per TP rank: each rank keeps its own index head's blocks.
    const auto& kv2 = hybrid("minimax-m3-kv2");
    ASSERT_EQ(kv2.spec.numKvHeads, 2);
    ASSERT_EQ(kv2.spec.blockSparse->indexHeads, 2);
    prove("minimax-m3-kv2", { layoutOf(2, 1), layoutOf(2, 2, false, 2) }, false);
}

TEST(ParallelHybrid, Gemma4RefusesKvSharingAcrossStagesByName)
{
    // Balanced pp=2 puts layer 4 in the second stage and layer 2, whose cache it reads, in the
    // first.
    auto r = run(hybrid("gemma-4-e2b"), layoutOf(1, 2));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("num_kv_shared_layers"), std::string::npos)
        << r.error().message;
}

TEST(ParallelHybrid, RefusesSplitsThatBreakHeadsOrGroups)
{
    // Two linear-attention key heads and two Mamba-2 groups: tp=4 would cut through them.
    auto qwen = run(hybrid("qwen3.5-27b"), layoutOf(4, 1));
    ASSERT_FALSE(qwen.ok());
    EXPECT_NE(qwen.error().message.find("linear_num_key_heads"), std::string::npos)
        << qwen.error().message;
    auto nemotron = run(hybrid("nemotron-h"), layoutOf(4, 1));
    ASSERT_FALSE(nemotron.ok());
    EXPECT_NE(nemotron.error().message.find("(n_groups)"), std::string::npos)
        << nemotron.error().message;
    // Two KDA heads of 16 channels: tp=4 would split the channels evenly but cut the heads.
    auto kimi = run(hybrid("kimi-linear-48b-a3b"), layoutOf(4, 1));
    ASSERT_FALSE(kimi.ok());
    EXPECT_NE(kimi.error().message.find("linear_attn_config.num_heads"), std::string::npos)
        << kimi.error().message;
}

TEST(ParallelHybrid, NemotronHMoeShardedEqualsOneRank)
{
    // Nemotron 3 Nano's pattern shrunk to M, E, M, *: relu² experts over EP, the shared relu²
    // MLP TP-sliced, the sigmoid router with its correction bias replicated.
    const auto& m = hybrid("nemotron-3-nano-30b");
    ASSERT_TRUE(m.spec.moe.has_value());
    prove("nemotron-3-nano-30b",
        { layoutOf(2, 1), layoutOf(2, 1, false, 2), layoutOf(1, 2), layoutOf(2, 2, false, 2) },
        false);
}

TEST(ParallelHybrid, NemotronSuperLatentMoeShardedEqualsOneRank)
{
    // The experts work in moe_latent_size lanes between the replicated fc1/fc2 latent
    // projections; each TP rank's fc2 output covers only the tokens it owns.
    const auto& m = hybrid("nemotron-3-super");
    ASSERT_TRUE(m.spec.moe.has_value());
    ASSERT_GT(m.spec.moe->latentSize, 0);
    prove("nemotron-3-super",
        { layoutOf(2, 1), layoutOf(2, 1, false, 2), layoutOf(2, 2, false, 2) }, false);
}

TEST(ParallelHybrid, RunsFromDay0ShardRankFiles)
{
    // `day0 shard` writes each rank's per-part slices of the fused recurrent projections; a run
    // from those rank files equals one rank and loads what an in-memory run slices.
    for (const std::string name :
        { "qwen3.5-27b", "nemotron-h", "kimi-linear-48b-a3b", "gemma-4-e2b", "minimax-m3" }) {
        SCOPED_TRACE(name);
        const auto& m = hybrid(name);
        auto p = layoutOf(2, 2);
        if (name.starts_with("kimi")) {
            // The KDA A_log [1, 1, heads, 1] split along its heads, the experts over EP.
            p.layout.ep = 2;
            p.layout.stageLayerCounts = { 3, 1 };
        } else if (name.starts_with("gemma")) {
            // The vocab-parallel per-layer input table; the KV-shared layers' sources in stage 1.
            p.layout.stageLayerCounts = { 2, 4 };
        } else if (name.starts_with("minimax")) {
            p.layout.ep = 2;
        }
        const auto out = scratch() / (name + "-shards");
        Progress progress;
        auto written = checkpoint::shardCheckpoint(
            m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
        ASSERT_TRUE(written.ok()) << written.error().message;
        auto folder = parallel::openShardFolder(out, p.layout);
        ASSERT_TRUE(folder.ok()) << folder.error().message;
        parallel::ParallelRunOptions o;
        o.layout = p.layout;
        o.microBatches = p.microBatches;
        o.prompts = test::matrixPrompts(p.microBatches, m.spec.vocabSize);
        o.newTokens = test::kMatrixTokens;
        o.checkpointId = m.checkpointId;
        o.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
        auto r = parallel::runParallelInProcess(m.spec, *folder->ranks[0], o, progress, {});
        ASSERT_TRUE(r.ok()) << r.error().message;
        auto err = test::compareWithSingleRank(m, r->sequences, test::kMatrixTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, name.starts_with("gemma") ? kGemmaTolerance : kTolerance);
        std::cout << fmt::format(
            "[hybrid shards] {} {}: max rel error {:.2e}\n", name, p.label(), *err);
    }
}

TEST(ParallelHybrid, RefusesFusedExpertsFromRankFilesByName)
{
    // A rank file holds the fused experts' EP range; the per-expert reads are refused, not
    // misindexed.
    const auto& m = hybrid("qwen3.5-397b-a17b");
    const auto p = layoutOf(2, 1, false, 2);
    const auto out = scratch() / "qwen35-moe-shards";
    Progress progress;
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto folder = parallel::openShardFolder(out, p.layout);
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    parallel::ParallelRunOptions o;
    o.layout = p.layout;
    o.prompts = test::matrixPrompts(1, m.spec.vocabSize);
    o.checkpointId = m.checkpointId;
    o.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
    auto r = parallel::runParallelInProcess(m.spec, *folder->ranks[0], o, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("fused 3-D experts"), std::string::npos) << r.error().message;
}
