// The tensor names, shapes and dtypes of the graph against real checkpoints: the weight_map of
// real model.safetensors.index.json files (tests/data/model/indexes, see SOURCES.md) must equal
// the graph's names exactly, and where the checkpoint is stored at its config dtype, the
// index's total_size must equal the graph's bytes. Families without an index here are checked
// against published tensor listings (cited at each test).

#include "base/json_util.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

struct IndexCase {
    const char* folder;
    bool checkTotalSize; ///< total_size is the sum of the tensors at the config dtype
};

// llama3-8b-lexi's total_size is 1.5 GiB above its tensors' size (see SOURCES.md), so only its
// names are compared.
const IndexCase kIndexes[] = {
    { "llama3-8b-lexi", false },
    { "llama3-70b-reflection", true },
    { "llama3.2-3b", true },
    { "mixtral-8x22b-wizardlm2", true },
    { "qwen2-vl-7b-olmocr", true },
    { "qwen2.5-14b-cogito", true },
    { "qwen3-1.7b-mlx-bf16", true },
};

class RealIndex : public ::testing::TestWithParam<IndexCase> { };

TEST_P(RealIndex, GraphNamesEqualWeightMap)
{
    const IndexCase c = GetParam();
    const auto folder = dataDir() / "indexes" / c.folder;
    const ModelSpec spec = fromData(std::string("indexes/") + c.folder + "/config.json");
    ASSERT_GT(spec.numLayers, 0);
    auto index = readJsonFile(folder / "model.safetensors.index.json");
    ASSERT_TRUE(index.ok()) << index.error().message;

    std::set<std::string> expected;
    for (const auto& [name, shard] : index->at("weight_map").items()) {
        expected.insert(name);
    }
    const LayerGraph graph = buildLayerGraph(spec);
    const auto actual = tensorNames(graph);

    std::vector<std::string> missing;
    std::vector<std::string> extra;
    std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(),
        std::back_inserter(missing));
    std::set_difference(
        actual.begin(), actual.end(), expected.begin(), expected.end(), std::back_inserter(extra));
    EXPECT_TRUE(missing.empty()) << c.folder << ": graph lacks " << missing.size()
                                 << " checkpoint tensors, first " << missing.front();
    EXPECT_TRUE(extra.empty()) << c.folder << ": graph has " << extra.size()
                               << " tensors the checkpoint lacks, first " << extra.front();
    EXPECT_EQ(graph.tensorCount(), expected.size());
    if (c.checkTotalSize) {
        EXPECT_EQ(totalBytes(graph), index->at("metadata").at("total_size").get<std::int64_t>())
            << c.folder;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, RealIndex, ::testing::ValuesIn(kIndexes), [](const auto& param) {
        std::string name = param.param.folder;
        for (auto& ch : name) {
            if (!std::isalnum(static_cast<unsigned char>(ch))) {
                ch = '_';
            }
        }
        return name;
    });


std::int64_t storedElements(const LayerGraph& graph)
{
    std::int64_t n = 0;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            n += t.numel();
        }
    }
    return n;
}

} // namespace

// A published tensor listing of the DeepSeek-R1 checkpoint (163 shards) gives 91,991 tensors
// holding 684,531,386,000 elements, and these shapes and dtypes (R1 shares config and layout
// with DeepSeek-V3).
TEST(DeepseekV3Checkpoint, MatchesPublishedR1Listing)
{
    const LayerGraph g = buildLayerGraph(bundled("deepseek-r1"));
    EXPECT_EQ(g.tensorCount(), 91991u);
    EXPECT_EQ(storedElements(g), 684531386000);

    const DType f8 = DType::F8E4M3;
    expectTensor(g, "model.embed_tokens.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "model.norm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "model.layers.0.mlp.down_proj.weight", { 7168, 18432 }, f8);
    expectTensor(g, "model.layers.0.mlp.down_proj.weight_scale_inv", { 56, 144 }, DType::F32);
    expectTensor(g, "model.layers.2.mlp.gate_proj.weight_scale_inv", { 144, 56 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.kv_a_proj_with_mqa.weight", { 576, 7168 }, f8);
    expectTensor(
        g, "model.layers.5.self_attn.kv_a_proj_with_mqa.weight_scale_inv", { 5, 56 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.kv_b_proj.weight_scale_inv", { 256, 4 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.o_proj.weight", { 7168, 16384 }, f8);
    expectTensor(g, "model.layers.5.self_attn.o_proj.weight_scale_inv", { 56, 128 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.q_a_proj.weight_scale_inv", { 12, 56 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.q_b_proj.weight", { 24576, 1536 }, f8);
    expectTensor(g, "model.layers.5.self_attn.q_b_proj.weight_scale_inv", { 192, 12 }, DType::F32);
    expectTensor(g, "model.layers.5.self_attn.q_a_layernorm.weight", { 1536 }, DType::BF16);
    expectTensor(g, "model.layers.5.self_attn.kv_a_layernorm.weight", { 512 }, DType::BF16);
    expectTensor(g, "model.layers.3.mlp.experts.255.down_proj.weight", { 7168, 2048 }, f8);
    expectTensor(
        g, "model.layers.3.mlp.experts.255.down_proj.weight_scale_inv", { 56, 16 }, DType::F32);
    expectTensor(
        g, "model.layers.60.mlp.experts.0.up_proj.weight_scale_inv", { 16, 56 }, DType::F32);
    expectTensor(g, "model.layers.3.mlp.gate.weight", { 256, 7168 }, DType::BF16);
    expectTensor(g, "model.layers.3.mlp.gate.e_score_correction_bias", { 256 }, DType::F32);
    expectTensor(
        g, "model.layers.3.mlp.shared_experts.gate_proj.weight_scale_inv", { 16, 56 }, DType::F32);
    // The MTP layer: its own embedding/head copies, norms and eh_proj in BF16, then a full
    // (FP8) MoE decoder layer.
    expectTensor(g, "model.layers.61.eh_proj.weight", { 7168, 14336 }, DType::BF16);
    expectTensor(g, "model.layers.61.embed_tokens.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "model.layers.61.enorm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "model.layers.61.hnorm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "model.layers.61.shared_head.head.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "model.layers.61.shared_head.norm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "model.layers.61.mlp.experts.17.gate_proj.weight", { 2048, 7168 }, f8);
    expectTensor(g, "model.layers.61.self_attn.o_proj.weight_scale_inv", { 56, 128 }, DType::F32);
    EXPECT_EQ(g.findTensor("model.layers.61.eh_proj.weight_scale_inv"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.3.mlp.gate.weight_scale_inv"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.2.mlp.gate.weight"), nullptr) << "layers 0-2 are dense";
    EXPECT_EQ(g.findTensor("model.layers.62.input_layernorm.weight"), nullptr);
}

TEST(DeepseekV3Checkpoint, RolesFollowTheReferenceSharding)
{
    // DeepSeek-V3 inference/convert.py: column (dim 0) for q_b/kv_b/gate/up, row (dim 1) for
    // o/down, replicated for the latent projections, norms and the router; vocab for embed/head.
    const LayerGraph g = buildLayerGraph(bundled("deepseek-v3"));
    auto role = [&](const std::string& name) { return g.findTensor(name)->role; };
    EXPECT_EQ(role("model.layers.4.self_attn.q_b_proj.weight"), ParallelRole::ColumnParallel);
    EXPECT_EQ(role("model.layers.4.self_attn.kv_b_proj.weight"), ParallelRole::ColumnParallel);
    EXPECT_EQ(role("model.layers.4.self_attn.o_proj.weight"), ParallelRole::RowParallel);
    EXPECT_EQ(role("model.layers.4.self_attn.o_proj.weight_scale_inv"), ParallelRole::RowParallel);
    EXPECT_EQ(role("model.layers.4.self_attn.q_a_proj.weight"), ParallelRole::Replicated);
    EXPECT_EQ(role("model.layers.4.self_attn.kv_a_proj_with_mqa.weight"), ParallelRole::Replicated);
    EXPECT_EQ(role("model.layers.4.mlp.gate.weight"), ParallelRole::Replicated);
    EXPECT_EQ(role("model.layers.0.mlp.down_proj.weight"), ParallelRole::RowParallel);
    EXPECT_EQ(role("model.embed_tokens.weight"), ParallelRole::VocabParallel);
    EXPECT_EQ(role("lm_head.weight"), ParallelRole::VocabParallel);

    const TensorSpec* expert = g.findTensor("model.layers.9.mlp.experts.200.up_proj.weight");
    ASSERT_NE(expert, nullptr);
    EXPECT_EQ(expert->expert, 200);
    EXPECT_EQ(expert->layer, 9);
    EXPECT_EQ(expert->component, Component::RoutedExperts);
    EXPECT_TRUE(expert->isExpert());
    const TensorSpec* shared = g.findTensor("model.layers.9.mlp.shared_experts.up_proj.weight");
    EXPECT_EQ(shared->component, Component::SharedExperts);
    EXPECT_FALSE(shared->isExpert());
    EXPECT_EQ(
        g.findTensor("model.layers.61.mlp.experts.3.up_proj.weight")->component, Component::Mtp);
}

TEST(DeepseekV3Checkpoint, KimiK2HasNoMtpAnd384Experts)
{
    const LayerGraph g = buildLayerGraph(bundled("kimi-k2"));
    // 61 layers: 1 dense (12 attention tensors with scales, 2 norms, 6 MLP), 60 MoE (384 × 6
    // expert tensors + 12 attention + 2 norms + router weight and bias + 6 shared-expert
    // tensors), embed, norm, lm_head.
    EXPECT_EQ(g.tensorCount(), 20u + 60u * (384u * 6u + 12u + 2u + 2u + 6u) + 3u);
    expectTensor(g, "model.layers.1.self_attn.q_b_proj.weight", { 64 * 192, 1536 }, DType::F8E4M3);
    expectTensor(
        g, "model.layers.60.mlp.experts.383.down_proj.weight", { 7168, 2048 }, DType::F8E4M3);
    EXPECT_EQ(g.findTensor("model.layers.61.eh_proj.weight"), nullptr);
}

// DeepSeek-V3.2 adds the lightning indexer to every layer (MTP included): wq_b and wk in FP8
// with scales, k_norm as a LayerNorm, weights_proj in BF16.
TEST(DeepseekV3Checkpoint, V32IndexerTensors)
{
    const LayerGraph g = buildLayerGraph(bundled("deepseek-v3.2"));
    expectTensor(
        g, "model.layers.0.self_attn.indexer.wq_b.weight", { 64 * 128, 1536 }, DType::F8E4M3);
    expectTensor(
        g, "model.layers.0.self_attn.indexer.wq_b.weight_scale_inv", { 64, 12 }, DType::F32);
    expectTensor(g, "model.layers.0.self_attn.indexer.wk.weight", { 128, 7168 }, DType::F8E4M3);
    expectTensor(g, "model.layers.0.self_attn.indexer.k_norm.weight", { 128 }, DType::BF16);
    expectTensor(g, "model.layers.0.self_attn.indexer.k_norm.bias", { 128 }, DType::BF16);
    expectTensor(
        g, "model.layers.61.self_attn.indexer.weights_proj.weight", { 64, 7168 }, DType::BF16);
    EXPECT_EQ(
        g.findTensor("model.layers.0.self_attn.indexer.weights_proj.weight_scale_inv"), nullptr);
    EXPECT_EQ(g.tensorCount(), 91991u + 62u * 7u);
}

// A published tensor listing of the Kimi-K2.5 checkpoint (64 shards): 208,550 tensors holding
// 170,738,182,128 stored elements; INT4 routed experts, BF16 elsewhere, MoonViT tower.
TEST(KimiK25Checkpoint, MatchesPublishedListing)
{
    const ModelSpec spec = bundled("kimi-k2.5");
    ASSERT_TRUE(spec.quantization.has_value());
    EXPECT_EQ(spec.quantization->scheme, QuantScheme::PackedInt);
    const LayerGraph g = buildLayerGraph(spec);
    EXPECT_EQ(g.tensorCount(), 208550u);
    EXPECT_EQ(storedElements(g), 170738182128);

    const std::string p = "language_model.model.layers.";
    expectTensor(g, "language_model.lm_head.weight", { 163840, 7168 }, DType::BF16);
    expectTensor(g, "language_model.model.embed_tokens.weight", { 163840, 7168 }, DType::BF16);
    expectTensor(g, p + "0.mlp.down_proj.weight", { 7168, 18432 }, DType::BF16);
    expectTensor(g, p + "7.self_attn.kv_b_proj.weight", { 16384, 512 }, DType::BF16);
    expectTensor(g, p + "7.self_attn.o_proj.weight", { 7168, 8192 }, DType::BF16);
    expectTensor(g, p + "1.mlp.experts.0.down_proj.weight_packed", { 7168, 256 }, DType::I32);
    expectTensor(g, p + "1.mlp.experts.0.down_proj.weight_scale", { 7168, 64 }, DType::BF16);
    expectTensor(g, p + "1.mlp.experts.0.down_proj.weight_shape", { 2 }, DType::I32);
    expectTensor(g, p + "60.mlp.experts.383.gate_proj.weight_packed", { 2048, 896 }, DType::I32);
    expectTensor(g, p + "60.mlp.experts.383.up_proj.weight_scale", { 2048, 224 }, DType::BF16);
    expectTensor(g, p + "60.mlp.shared_experts.down_proj.weight", { 7168, 2048 }, DType::BF16);
    expectTensor(g, p + "60.mlp.gate.e_score_correction_bias", { 384 }, DType::F32);
    expectTensor(g, "mm_projector.proj.0.weight", { 4608, 4608 }, DType::BF16);
    expectTensor(g, "mm_projector.proj.2.weight", { 7168, 4608 }, DType::BF16);
    expectTensor(g, "mm_projector.pre_norm.bias", { 1152 }, DType::BF16);
    expectTensor(g, "vision_tower.patch_embed.proj.weight", { 1152, 3, 14, 14 }, DType::BF16);
    expectTensor(g, "vision_tower.patch_embed.pos_emb.weight", { 64, 64, 1152 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.blocks.26.wqkv.weight", { 3456, 1152 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.blocks.0.mlp.fc0.weight", { 4304, 1152 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.final_layernorm.bias", { 1152 }, DType::BF16);

    // An INT4 weight holds 8 parameters per stored I32.
    const TensorSpec* packed = g.findTensor(p + "1.mlp.experts.0.down_proj.weight_packed");
    EXPECT_EQ(packed->params(), 7168 * 2048);
    EXPECT_EQ(g.findTensor(p + "1.mlp.experts.0.down_proj.weight_scale")->params(), 0);
}

// Llama-4: fused expert parameters (no ".weight"), router, shared expert, dense layers in between
// for Maverick (interleave_moe_layer_step 2), under language_model.* of the multimodal wrapper.
TEST(Llama4Checkpoint, FusedExpertsAndInterleavedLayers)
{
    const LayerGraph g = buildLayerGraph(bundled("llama-4-maverick"));
    const std::string p = "language_model.model.layers.";
    expectTensor(g, p + "1.feed_forward.experts.gate_up_proj", { 128, 5120, 16384 }, DType::BF16);
    expectTensor(g, p + "1.feed_forward.experts.down_proj", { 128, 8192, 5120 }, DType::BF16);
    expectTensor(g, p + "1.feed_forward.router.weight", { 128, 5120 }, DType::BF16);
    expectTensor(
        g, p + "1.feed_forward.shared_expert.gate_proj.weight", { 8192, 5120 }, DType::BF16);
    expectTensor(g, p + "0.feed_forward.gate_proj.weight", { 16384, 5120 }, DType::BF16);
    expectTensor(g, p + "0.self_attn.q_proj.weight", { 40 * 128, 5120 }, DType::BF16);
    expectTensor(g, "language_model.lm_head.weight", { 202048, 5120 }, DType::BF16);
    expectTensor(g, "language_model.model.norm.weight", { 5120 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "0.feed_forward.router.weight"), nullptr);
    // No q/k norm weights: Llama-4's QK norm is a weightless L2 norm.
    EXPECT_EQ(g.findTensor(p + "0.self_attn.q_norm.weight"), nullptr);
    const TensorSpec* fused = g.findTensor(p + "1.feed_forward.experts.gate_up_proj");
    EXPECT_EQ(fused->packedExperts, 128);
    EXPECT_TRUE(fused->isExpert());
    // 48 layers × (4 attention + 2 norms) + 24 dense × 3 + 24 MoE × (router + 2 fused + 3
    // shared) + embed, norm, lm_head.
    EXPECT_EQ(g.tensorCount(), 48u * 6u + 24u * 3u + 24u * 6u + 3u);
}

TEST(Qwen3MoeCheckpoint, PerExpertNamesAndFp8Scales)
{
    const LayerGraph g = buildLayerGraph(bundled("qwen3-30b-a3b"));
    expectTensor(g, "model.layers.0.mlp.gate.weight", { 128, 2048 }, DType::BF16);
    expectTensor(g, "model.layers.47.mlp.experts.127.down_proj.weight", { 2048, 768 }, DType::BF16);
    expectTensor(g, "model.layers.0.self_attn.q_norm.weight", { 128 }, DType::BF16);
    expectTensor(g, "model.layers.0.self_attn.q_proj.weight", { 32 * 128, 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.0.mlp.shared_expert.up_proj.weight"), nullptr);

    // Qwen3-235B-A22B-FP8: 128×128 block scales; modules_to_not_convert keeps the routers,
    // norms and lm_head in BF16 (the embedding is not a Linear and is never converted).
    const LayerGraph fp8 = buildLayerGraph(bundled("qwen3-235b-a22b-fp8"));
    expectTensor(fp8, "model.layers.0.self_attn.q_proj.weight", { 8192, 4096 }, DType::F8E4M3);
    expectTensor(fp8, "model.layers.0.self_attn.q_proj.weight_scale_inv", { 64, 32 }, DType::F32);
    expectTensor(
        fp8, "model.layers.93.mlp.experts.5.down_proj.weight_scale_inv", { 32, 12 }, DType::F32);
    expectTensor(fp8, "model.layers.93.mlp.gate.weight", { 128, 4096 }, DType::BF16);
    expectTensor(fp8, "lm_head.weight", { 151936, 4096 }, DType::BF16);
    expectTensor(fp8, "model.embed_tokens.weight", { 151936, 4096 }, DType::BF16);
    EXPECT_EQ(fp8.findTensor("lm_head.weight_scale_inv"), nullptr);
}

// Qwen3-VL-MoE: text under model.language_model, fused experts, vision under model.visual with
// three deepstack mergers.
TEST(Qwen3VlCheckpoint, TextAndVisionNames)
{
    const LayerGraph g = buildLayerGraph(bundled("qwen3-vl-30b-a3b"));
    const std::string t = "model.language_model.";
    expectTensor(g, t + "embed_tokens.weight", { 151936, 2048 }, DType::BF16);
    expectTensor(g, t + "layers.0.mlp.experts.gate_up_proj", { 128, 2048, 1536 }, DType::BF16);
    expectTensor(g, t + "layers.0.mlp.experts.down_proj", { 128, 768, 2048 }, DType::BF16);
    expectTensor(g, t + "layers.0.mlp.gate.weight", { 128, 2048 }, DType::BF16);
    expectTensor(g, t + "layers.0.self_attn.k_norm.weight", { 128 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 151936, 2048 }, DType::BF16);
    const std::string v = "model.visual.";
    expectTensor(g, v + "patch_embed.proj.weight", { 1152, 3, 2, 16, 16 }, DType::BF16);
    expectTensor(g, v + "patch_embed.proj.bias", { 1152 }, DType::BF16);
    expectTensor(g, v + "pos_embed.weight", { 2304, 1152 }, DType::BF16);
    expectTensor(g, v + "blocks.26.attn.qkv.weight", { 3456, 1152 }, DType::BF16);
    expectTensor(g, v + "blocks.26.mlp.linear_fc1.weight", { 4304, 1152 }, DType::BF16);
    expectTensor(g, v + "blocks.0.norm1.bias", { 1152 }, DType::BF16);
    expectTensor(g, v + "merger.norm.weight", { 1152 }, DType::BF16);
    expectTensor(g, v + "merger.linear_fc1.weight", { 4608, 4608 }, DType::BF16);
    expectTensor(g, v + "merger.linear_fc2.weight", { 2048, 4608 }, DType::BF16);
    expectTensor(g, v + "deepstack_merger_list.2.norm.weight", { 4608 }, DType::BF16);
    expectTensor(g, v + "deepstack_merger_list.2.linear_fc2.bias", { 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor(v + "deepstack_merger_list.3.norm.weight"), nullptr);
    EXPECT_EQ(g.findTensor(v + "blocks.0.attn.qkv.weight")->component, Component::Vision);
}

TEST(Glm4MoeCheckpoint, BiasesQkNormAndMtp)
{
    const LayerGraph g = buildLayerGraph(fromData("configs/glm-4.5.json"));
    expectTensor(g, "model.layers.0.self_attn.q_proj.bias", { 96 * 128 }, DType::BF16);
    expectTensor(g, "model.layers.0.self_attn.k_proj.bias", { 8 * 128 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.0.self_attn.o_proj.bias"), nullptr);
    expectTensor(g, "model.layers.0.self_attn.q_norm.weight", { 128 }, DType::BF16);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight", { 12288, 5120 }, DType::BF16);
    expectTensor(g, "model.layers.3.mlp.gate.e_score_correction_bias", { 160 }, DType::F32);
    expectTensor(g, "model.layers.3.mlp.experts.159.down_proj.weight", { 5120, 1536 }, DType::BF16);
    expectTensor(
        g, "model.layers.3.mlp.shared_experts.up_proj.weight", { 1536, 5120 }, DType::BF16);
    expectTensor(g, "model.layers.92.eh_proj.weight", { 5120, 10240 }, DType::BF16);
    expectTensor(g, "model.layers.92.mlp.experts.0.up_proj.weight", { 1536, 5120 }, DType::BF16);
    EXPECT_TRUE(g.findTensor("model.layers.92.shared_head.head.weight")->optional);
    EXPECT_TRUE(g.findTensor("model.layers.92.embed_tokens.weight")->optional);
    EXPECT_FALSE(g.findTensor("model.layers.92.enorm.weight")->optional);
}

TEST(Qwen2FamilyCheckpoint, MoeSharedExpertGateAndVl25Tower)
{
    const LayerGraph moe = buildLayerGraph(fromData("configs/qwen1.5-moe-a2.7b.json"));
    expectTensor(
        moe, "model.layers.0.mlp.shared_expert.gate_proj.weight", { 5632, 2048 }, DType::BF16);
    expectTensor(moe, "model.layers.0.mlp.shared_expert_gate.weight", { 1, 2048 }, DType::BF16);
    expectTensor(moe, "model.layers.0.mlp.experts.59.up_proj.weight", { 1408, 2048 }, DType::BF16);
    expectTensor(moe, "model.layers.0.self_attn.v_proj.bias", { 2048 }, DType::BF16);
    EXPECT_EQ(moe.findTensor("model.layers.0.self_attn.o_proj.bias"), nullptr);

    const LayerGraph vl = buildLayerGraph(fromData("configs/qwen2.5-vl-7b.json"));
    expectTensor(vl, "visual.patch_embed.proj.weight", { 1280, 3, 2, 14, 14 }, DType::BF16);
    expectTensor(vl, "visual.blocks.31.norm1.weight", { 1280 }, DType::BF16);
    EXPECT_EQ(vl.findTensor("visual.blocks.31.norm1.bias"), nullptr) << "RMSNorm in 2.5-VL";
    expectTensor(vl, "visual.blocks.31.mlp.gate_proj.bias", { 3420 }, DType::BF16);
    expectTensor(vl, "visual.blocks.31.mlp.down_proj.weight", { 1280, 3420 }, DType::BF16);
    expectTensor(vl, "visual.merger.ln_q.weight", { 1280 }, DType::BF16);
    expectTensor(vl, "visual.merger.mlp.2.weight", { 3584, 5120 }, DType::BF16);
    expectTensor(vl, "model.layers.27.self_attn.q_proj.bias", { 3584 }, DType::BF16);
    // 32 blocks × (2 norms + 4 attention + 6 MLP) + patch embed + merger 5.
    std::size_t vision = 0;
    for (const auto& block : vl.blocks) {
        if (block.kind == BlockKind::VisionBlock || block.kind == BlockKind::VisionMerger
            || block.kind == BlockKind::VisionPatchEmbed) {
            vision += block.tensors.size();
        }
    }
    EXPECT_EQ(vision, 32u * 12u + 1u + 5u);
}

TEST(DeepseekV2Checkpoint, LiteHasDirectQProjectionAndNoScoreBias)
{
    const LayerGraph g = buildLayerGraph(fromData("configs/deepseek-v2-lite.json"));
    expectTensor(g, "model.layers.0.self_attn.q_proj.weight", { 16 * 192, 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.0.self_attn.q_a_proj.weight"), nullptr);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight", { 10944, 2048 }, DType::BF16);
    expectTensor(g, "model.layers.1.mlp.gate.weight", { 64, 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.1.mlp.gate.e_score_correction_bias"), nullptr);
    expectTensor(
        g, "model.layers.1.mlp.shared_experts.gate_proj.weight", { 2 * 1408, 2048 }, DType::BF16);
}

TEST(LayerGraphLookup, BlocksAnchorsAndFind)
{
    const LayerGraph g = buildLayerGraph(bundled("qwen3-vl-30b-a3b"));
    // Data-flow order: vision first, then the text tower.
    EXPECT_EQ(g.blocks.front().anchor, "model.visual.patch_embed");
    EXPECT_EQ(g.blocks.back().anchor, "lm_head");
    EXPECT_NE(g.findBlock("model.language_model.layers.47"), nullptr);
    EXPECT_EQ(g.findBlock("model.language_model.layers.48"), nullptr);
    EXPECT_EQ(g.decoderBlocks().size(), 48u);
    // pos_embed sits in the patch-embedding block though its name does not start with it.
    EXPECT_NE(g.findTensor("model.visual.pos_embed.weight"), nullptr);
    EXPECT_EQ(g.findTensor("model.visual.pos_embed"), nullptr);
    EXPECT_EQ(g.summaries.size(), g.blocks.size());
}

// Qwen3-VL dense (qwen3_vl): the Qwen3 decoder under model.language_model with a dense MLP.
TEST(Qwen3VlCheckpoint, DenseVariant)
{
    auto json
        = readJsonFile(std::filesystem::path(DAY0_RESOURCE_DIR) / "configs/qwen3-vl-30b-a3b.json");
    ASSERT_TRUE(json.ok());
    (*json)["model_type"] = "qwen3_vl";
    (*json)["architectures"] = { "Qwen3VLForConditionalGeneration" };
    auto& text = (*json)["text_config"];
    for (const char* key : { "num_experts", "num_experts_per_tok", "moe_intermediate_size",
             "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob" }) {
        text.erase(key);
    }
    text["model_type"] = "qwen3_vl_text";
    auto spec = readConfig(*json, "qwen3-vl-dense.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->family, Family::Qwen3Vl);
    EXPECT_FALSE(spec->moe.has_value());
    const LayerGraph g = buildLayerGraph(*spec);
    expectTensor(
        g, "model.language_model.layers.5.mlp.gate_proj.weight", { 6144, 2048 }, DType::BF16);
    expectTensor(g, "model.language_model.layers.5.self_attn.q_norm.weight", { 128 }, DType::BF16);
    expectTensor(g, "model.visual.blocks.3.attn.proj.bias", { 1152 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.language_model.layers.5.mlp.gate.weight"), nullptr);
}
