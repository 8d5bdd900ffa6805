#include "checkpoint/checkpoint.h"
#include "checkpoint/sharding.h"
#include "checkpoint/shrink.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

namespace day0::checkpoint {
namespace {

TEST(Sharding, LayoutAndCoordinates)
{
    auto l = parseShardLayout("tp=4,pp=2,ep=4,zero=1,recompute=selective");
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->worldSize(), 8);
    EXPECT_EQ(l->etp(), 1);
    const auto c = rankCoord(*l, 6);
    EXPECT_EQ(c.stage, 1);
    EXPECT_EQ(c.tpRank, 2);
    EXPECT_EQ(c.epRank, 2);
    EXPECT_FALSE(parseShardLayout("tp=4,ep=3").ok());
    EXPECT_FALSE(parseShardLayout("tp=x").ok());
    EXPECT_FALSE(parseShardLayout("tp=4,bogus=1").ok())
        << "the plan module's parser rejects unknown keys";
    // Megatron-style: etp given, expert-DP replicas of each expert slice.
    auto megatron = parseShardLayout("tp=2,dp=4,ep=2,etp=2");
    ASSERT_TRUE(megatron.ok()) << megatron.error().message;
    EXPECT_EQ(megatron->edp(), 2);
    EXPECT_EQ(rankCoord(*megatron, 5).etpRank, 1);
    EXPECT_EQ(rankCoord(*megatron, 5).epRank, 0);
    EXPECT_EQ(rankCoord(*megatron, 5).edpRank, 1);
    EXPECT_FALSE(parseShardLayout("tp=2,ep=2,etp=2").ok());
    // etp not given: the planner's inference default (whole experts on each rank, etp = 1), so
    // that what is run is what the memory estimate assumed; 4 replicas of each expert here.
    auto wide = parseShardLayout("tp=8,ep=2");
    ASSERT_TRUE(wide.ok());
    EXPECT_EQ(wide->etp(), 1);
    EXPECT_EQ(wide->edp(), 4);
    EXPECT_EQ(rankCoord(*wide, 5).epRank, 1);
    EXPECT_EQ(rankCoord(*wide, 5).etpRank, 0);
    EXPECT_EQ(rankCoord(*wide, 5).edpRank, 2);
    // Every rank of the stage with its own expert slice, when asked for.
    auto split = parseShardLayout("tp=8,ep=2,etp=4");
    ASSERT_TRUE(split.ok());
    EXPECT_EQ(rankCoord(*split, 5).epRank, 1);
    EXPECT_EQ(rankCoord(*split, 5).etpRank, 1);
    ShardLayout two;
    two.pp = 2;
    const auto s0 = stageLayers(two, 7, 0);
    const auto s1 = stageLayers(two, 7, 1);
    EXPECT_EQ(s0.first, 0);
    EXPECT_EQ(s0.second, s1.first);
    EXPECT_EQ(s1.second, 7);
    two.stageLayerCounts = { 2, 5 };
    EXPECT_EQ(stageLayers(two, 7, 1), (std::pair<std::int64_t, std::int64_t> { 2, 7 }));
    EXPECT_EQ(expertRange(10, 4, 0), (std::pair<std::int64_t, std::int64_t> { 0, 3 }));
    EXPECT_EQ(expertRange(10, 4, 3), (std::pair<std::int64_t, std::int64_t> { 8, 10 }));
}

TEST(Sharding, ExtractAndScatterAreInverse)
{
    std::vector<std::int32_t> x(4 * 6);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = std::int32_t(i);
    }
    TensorSlice s { { { 1, { { 0, 2 }, { 4, 5 } } }, { 0, { { 1, 3 } } } } };
    const std::vector<std::int64_t> shape { 4, 6 };
    EXPECT_EQ(sliceShape(shape, s), (std::vector<std::int64_t> { 2, 3 }));
    std::vector<std::int32_t> piece(6);
    extractSlice(
        std::as_bytes(std::span(x)), shape, 4, s, std::as_writable_bytes(std::span(piece)));
    EXPECT_EQ(piece, (std::vector<std::int32_t> { 6, 7, 10, 12, 13, 16 }));
    std::vector<std::int32_t> back(x.size(), -1);
    scatterSlice(
        std::as_bytes(std::span(piece)), shape, 4, s, std::as_writable_bytes(std::span(back)));
    EXPECT_EQ(back[6], 6);
    EXPECT_EQ(back[16], 16);
    EXPECT_EQ(back[8], -1);
}

/// Shrinks `model`, shards it for `plan` and rebuilds every tensor from the ranks bit-exactly.
void reassembleAll(const std::string& model, const std::string& plan, const std::string& tag)
{
    const auto dir = test::scratch("shard_" + tag);
    Progress progress;
    ASSERT_TRUE(shrinkModel(model, dir / "small", {}, progress, {}).ok());
    auto layout = parseShardLayout(plan);
    ASSERT_TRUE(layout.ok());
    auto summary = shardCheckpoint(dir / "small", dir / "ranks", *layout, {}, false, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->ranks, layout->worldSize());
    auto source = Checkpoint::open(dir / "small");
    ASSERT_TRUE(source.ok());
    const auto planJson = readShardPlan(dir / "ranks");
    ASSERT_TRUE(planJson.ok());
    for (const auto& t : source->tensors()) {
        auto rebuilt = reassembleTensor(dir / "ranks", *planJson, t.name);
        ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().message;
        const auto original = source->data(t);
        ASSERT_TRUE(original.ok());
        ASSERT_EQ(rebuilt->size(), original->size()) << t.name;
        ASSERT_EQ(std::memcmp(rebuilt->data(), original->data(), original->size()), 0) << t.name;
    }
}

TEST(Sharding, KimiK2ReassemblesBitExactly) { reassembleAll("kimi-k2", "tp=4,pp=2,ep=4", "kimi"); }
TEST(Sharding, ExpertTensorParallelReassembles)
{
    reassembleAll("deepseek-v3", "tp=4,pp=2,ep=2", "dsv3");
}
TEST(Sharding, PackedExpertsAndVisionReassemble)
{
    reassembleAll("qwen3-vl-30b-a3b", "tp=2,pp=2,ep=2", "qwen3vl");
}
TEST(Sharding, Llama4PackedExpertsReassemble)
{
    reassembleAll("llama-4-scout", "tp=2,ep=1", "llama4");
}
TEST(Sharding, MegatronExpertDataParallelReassembles)
{
    reassembleAll("mixtral-8x7b", "tp=2,dp=2,ep=2,etp=1,pp=2,layers=1/3", "mixtral");
}

TEST(Sharding, GatedDeltaNetReassembles) { reassembleAll("qwen3.5-27b", "tp=2,pp=2", "qwen35"); }
TEST(Sharding, Mamba2Reassembles)
{
    reassembleAll("nemotron-3-nano-30b", "tp=2,pp=2,ep=2", "nemotronh");
}

/// The rank ranges of `tensor` along dim 0 in a plan.json.
std::vector<std::pair<std::int64_t, std::int64_t>> rowRanges(
    const nlohmann::json& plan, const std::string& tensor, int rank)
{
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (const auto& piece : plan["tensors"][tensor]["pieces"]) {
        if (piece["rank"] == rank) {
            for (const auto& r : piece["slice"][0]["ranges"]) {
                out.emplace_back(r[0].get<std::int64_t>(), r[1].get<std::int64_t>());
            }
        }
    }
    return out;
}

/// Shards `model` at tp=2 and checks that `tensor`'s rows split into `parts` parts, each halved:
/// rank 0 holds the first half of every part, rank 1 the second, and the parts follow each other.
void expectPerPartRows(const std::string& model, const std::string& tensor, std::size_t parts)
{
    SCOPED_TRACE(tensor);
    const auto dir = test::scratch("shard_parts_" + model);
    Progress progress;
    ASSERT_TRUE(shrinkModel(model, dir / "small", {}, progress, {}).ok());
    auto layout = parseShardLayout("tp=2");
    ASSERT_TRUE(layout.ok());
    ASSERT_TRUE(
        shardCheckpoint(dir / "small", dir / "ranks", *layout, {}, true, progress, {}).ok());
    std::ifstream in(dir / "ranks" / "plan.json");
    const auto plan = nlohmann::json::parse(in);
    const auto r0 = rowRanges(plan, tensor, 0);
    const auto r1 = rowRanges(plan, tensor, 1);
    ASSERT_EQ(r0.size(), parts);
    ASSERT_EQ(r1.size(), parts);
    EXPECT_EQ(r0[0].first, 0);
    for (std::size_t i = 0; i < parts; ++i) {
        EXPECT_EQ(r0[i].second, r1[i].first) << "part " << i;
        EXPECT_EQ(r0[i].second - r0[i].first, r1[i].second - r1[i].first) << "part " << i;
        if (i + 1 < parts) {
            EXPECT_EQ(r1[i].second, r0[i + 1].first) << "part " << i;
        }
    }
}

TEST(Sharding, RecurrentProjectionsSplitPerPart)
{
    // Qwen3.5: q | k | v (vLLM's Qwen3NextGatedDeltaNet splits each by head).
    expectPerPartRows(
        "qwen3.5-27b", "model.language_model.layers.0.linear_attn.in_proj_qkv.weight", 3);
    expectPerPartRows("qwen3.5-27b", "model.language_model.layers.0.linear_attn.conv1d.weight", 3);
    // Mamba-2: z | x | B | C | dt, and the conv over x | B | C (vLLM's MambaMixer2).
    expectPerPartRows("nemotron-3-nano-30b", "backbone.layers.0.mixer.in_proj.weight", 5);
    expectPerPartRows("nemotron-3-nano-30b", "backbone.layers.0.mixer.conv1d.weight", 3);
}

TEST(Sharding, RefusesTpThatSplitsLinearAttentionHeads)
{
    const auto dir = test::scratch("shard_gdn_tp4");
    Progress progress;
    ASSERT_TRUE(shrinkModel("qwen3.5-27b", dir / "small", {}, progress, {}).ok());
    auto layout = parseShardLayout("tp=4"); // the shrunk model has 2 key heads
    ASSERT_TRUE(layout.ok());
    auto r = shardCheckpoint(dir / "small", dir / "ranks", *layout, {}, false, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("linear_num_key_heads"), std::string::npos)
        << r.error().message;
}

TEST(Sharding, KvHeadsAreReplicatedWhenTpExceedsThem)
{
    const auto dir = test::scratch("shard_kv");
    Progress progress;
    ASSERT_TRUE(shrinkModel("llama-3.1-8b", dir / "small", {}, progress, {}).ok());
    auto layout = parseShardLayout("tp=4");
    ASSERT_TRUE(layout.ok());
    ASSERT_TRUE(
        shardCheckpoint(dir / "small", dir / "ranks", *layout, {}, false, progress, {}).ok());
    std::ifstream in(dir / "ranks" / "plan.json");
    const auto plan = nlohmann::json::parse(in);
    // Two KV heads over four ranks: ranks 0, 1 hold head 0 and ranks 2, 3 head 1.
    const auto& pieces = plan["tensors"]["model.layers.0.self_attn.k_proj.weight"]["pieces"];
    ASSERT_EQ(pieces.size(), 4u);
    const auto range = [&](int r) { return pieces[std::size_t(r)]["slice"][0]["ranges"][0]; };
    EXPECT_EQ(range(0), range(1));
    EXPECT_EQ(range(2), range(3));
    EXPECT_NE(range(0), range(2));
    // The query heads are split, not replicated.
    const auto& q = plan["tensors"]["model.layers.0.self_attn.q_proj.weight"]["pieces"];
    EXPECT_NE(q[0]["slice"][0]["ranges"][0], q[1]["slice"][0]["ranges"][0]);
}

TEST(Sharding, DeepseekV4ReleasedScalesSliceOnTheirBlocks)
{
    // DeepSeek-V4-Flash as released (E8M0 `.scale` per 128 × 128 block of an FP8 weight, per 32
    // inputs of an FP4 expert packed [out, in/2]): at tp=2 with ETP 2 each rank's scale holds
    // the blocks of its weight slice.
    const auto spec = model::readConfigFile(
        std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto graph = model::buildLayerGraph(*spec);
    auto layout = parseShardLayout("tp=2,dp=2,ep=2,etp=2");
    ASSERT_TRUE(layout.ok()) << layout.error().message;
    int rank = -1;
    for (int r = 0; r < layout->worldSize(); ++r) {
        const auto c = rankCoord(*layout, r);
        if (c.tpRank == 1 && c.etpRank == 1 && c.epRank == 0) {
            rank = r;
        }
    }
    ASSERT_GE(rank, 0);
    const auto rc = rankCoord(*layout, rank);
    const auto sliceOf = [&](const std::string& name) {
        const auto* t = graph.findTensor(name);
        EXPECT_NE(t, nullptr) << name;
        auto s = sliceFor(graph, *t, *layout, rc);
        EXPECT_TRUE(s.ok()) << s.error().message;
        EXPECT_TRUE(s->has_value()) << name;
        return **s;
    };
    using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
    // wq_b [64 heads · 512, 1024]: rows [16384, 32768), scale blocks [128, 256).
    const auto* wqb = graph.findTensor("layers.0.attn.wq_b.weight");
    ASSERT_NE(wqb, nullptr);
    ASSERT_EQ(wqb->dtype, DType::F8E4M3);
    EXPECT_EQ(sliceOf("layers.0.attn.wq_b.weight").dims[0].ranges, (Ranges { { 16384, 32768 } }));
    const auto wqbScale = sliceOf("layers.0.attn.wq_b.scale");
    ASSERT_EQ(wqbScale.dims.size(), 1u);
    EXPECT_EQ(wqbScale.dims[0].ranges, (Ranges { { 128, 256 } }));
    // An FP4 expert's w2 [4096, 2048 / 2 bytes]: packed columns [512, 1024), scales [32, 64).
    const auto* w2 = graph.findTensor("layers.3.ffn.experts.0.w2.weight");
    ASSERT_NE(w2, nullptr);
    ASSERT_EQ(w2->dtype, DType::I8);
    EXPECT_EQ(
        sliceOf("layers.3.ffn.experts.0.w2.weight").dims[0].ranges, (Ranges { { 512, 1024 } }));
    const auto w2Scale = sliceOf("layers.3.ffn.experts.0.w2.scale");
    ASSERT_EQ(w2Scale.dims.size(), 1u);
    EXPECT_EQ(w2Scale.dims[0].dim, 1);
    EXPECT_EQ(w2Scale.dims[0].ranges, (Ranges { { 32, 64 } }));
    // w1 [2048, 4096 / 2]: rows [1024, 2048), its scale's rows likewise.
    const auto w1Scale = sliceOf("layers.3.ffn.experts.0.w1.scale");
    ASSERT_EQ(w1Scale.dims.size(), 1u);
    EXPECT_EQ(w1Scale.dims[0].dim, 0);
    EXPECT_EQ(w1Scale.dims[0].ranges, (Ranges { { 1024, 2048 } }));
}

} // namespace
} // namespace day0::checkpoint
