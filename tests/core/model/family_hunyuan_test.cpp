// Hunyuan-A13B-Instruct (tests/data/model/configs/frontier/tencent--Hunyuan-A13B-Instruct.json):
// layer pattern, tensors, parameter counts and KV cache against hand derivations from the
// config numbers and Tencent's published figures; the per-layer lists and unmodelled switches.

#include "base/json_util.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

const char* const kA13B = "configs/frontier/tencent--Hunyuan-A13B-Instruct.json";



nlohmann::json a13b()
{
    auto json = readJsonFile(dataDir() / kA13B);
    EXPECT_TRUE(json.ok());
    return json.ok() ? *json : nlohmann::json::object();
}

// By hand: H 4096, 32 layers, 32 heads of 128, 8 KV heads, QK-norm, 64 experts and one shared
// MLP all 3072 wide, top 8, V 128167 tied.
constexpr std::int64_t kH = 4096, kL = 32, kI = 3072, kE = 64, kV = 128167;
constexpr std::int64_t kAttention = 2 * kH * kH + 2 * kH * 1024 + 2 * 128;
constexpr std::int64_t kMlp = 3 * kH * kI;
constexpr std::int64_t kRest = kAttention + kMlp + kE * kH + 2 * kH; // + shared, router, norms
constexpr std::int64_t kTotal = kL * (kRest + kE * kMlp) + kH + kV * kH;
constexpr std::int64_t kActive = kL * (kRest + 8 * kMlp) + kH + kV * kH;
static_assert(kTotal == 80'393'183'232);
static_assert(kActive == 12'747'448'320);

} // namespace

TEST(Hunyuan, ReadsA13BLayerPattern)
{
    const ModelSpec s = fromData(kA13B);
    EXPECT_EQ(s.family, Family::Hunyuan);
    ASSERT_EQ(s.numLayers, kL);
    EXPECT_EQ(s.headDim, 128);
    EXPECT_EQ(s.attention, AttentionKind::GQA);
    EXPECT_TRUE(s.qkNorm);
    EXPECT_TRUE(s.tieEmbeddings);
    EXPECT_FALSE(s.mlpBias);
    ASSERT_TRUE(s.moe.has_value());
    EXPECT_EQ(s.moe->numExperts, kE);
    EXPECT_EQ(s.moe->topK, 8);
    EXPECT_EQ(s.moe->expertIntermediate, kI);
    EXPECT_EQ(s.moe->numSharedExperts, 1);
    EXPECT_EQ(s.moe->sharedIntermediate, kI);
    EXPECT_FALSE(s.moe->denseBeside);
    for (const auto& layer : s.layers) {
        EXPECT_EQ(layer.mixer, MixerKind::Attention);
        EXPECT_EQ(layer.ffn, FfnKind::Moe);
        EXPECT_EQ(s.topKOf(layer), 8);
        EXPECT_TRUE(layer.rope);
    }
    // Dynamic NTK-alpha RoPE: no tensors, the alpha kept for the engine.
    EXPECT_EQ(s.ropeScaling.type, "dynamic");
    EXPECT_DOUBLE_EQ(s.ropeScaling.alpha, 1000.0);
    EXPECT_DOUBLE_EQ(s.ropeTheta, 10000.0);
    EXPECT_FALSE(s.partial);
}

// Tencent's README (Tencent-Hunyuan/Hunyuan-A13B): "a total of 80 billion parameters with 13
// billion active parameters". The total is the checkpoint's (the tied head counted once); the
// active 12.75B counts the embedding once, the router, 8 routed experts and the shared MLP,
// which the README rounds to 13B.
TEST(Hunyuan, CountsA13BAgainstHandDerivationAndReadme)
{
    const LayerGraph g = buildLayerGraph(fromData(kA13B));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, kTotal);
    EXPECT_EQ(c.active, kActive);
    EXPECT_EQ(c.embedding, kV * kH);
    EXPECT_EQ(c.lmHead, 0);
    EXPECT_EQ(c.vision, 0);
    EXPECT_EQ(c.activeWithoutEmbedding, 12'222'476'288);
    expectNear(c.total, 80e9, 0.03, "A13B total");
    expectNear(c.active, 13e9, 0.03, "A13B active");
    // 2 + 32·(2 norms + 4 projections + 2 QK norms + router + 3 shared + 64·3 experts).
    EXPECT_EQ(g.tensorCount(), 6530u);
    EXPECT_EQ(totalBytes(g), 2 * kTotal);
}

TEST(Hunyuan, TensorsA13B)
{
    const LayerGraph g = buildLayerGraph(fromData(kA13B));
    const std::string l0 = "model.layers.0.";
    expectTensor(g, "model.embed_tokens.weight", { kV, kH });
    expectTensor(g, "model.norm.weight", { kH });
    EXPECT_EQ(g.findTensor("lm_head.weight"), nullptr);
    expectTensor(g, l0 + "input_layernorm.weight", { kH });
    expectTensor(g, l0 + "self_attn.q_proj.weight", { kH, kH });
    expectTensor(g, l0 + "self_attn.k_proj.weight", { 1024, kH });
    expectTensor(g, l0 + "self_attn.v_proj.weight", { 1024, kH });
    expectTensor(g, l0 + "self_attn.o_proj.weight", { kH, kH });
    expectTensor(g, l0 + "self_attn.query_layernorm.weight", { 128 });
    expectTensor(g, l0 + "self_attn.key_layernorm.weight", { 128 });
    expectTensor(g, l0 + "post_attention_layernorm.weight", { kH });
    expectTensor(g, l0 + "mlp.gate.wg.weight", { kE, kH });
    expectTensor(g, l0 + "mlp.shared_mlp.gate_proj.weight", { kI, kH });
    expectTensor(g, l0 + "mlp.shared_mlp.down_proj.weight", { kH, kI });
    expectTensor(g, l0 + "mlp.experts.0.gate_proj.weight", { kI, kH });
    expectTensor(g, "model.layers.31.mlp.experts.63.down_proj.weight", { kH, kI });
    EXPECT_EQ(g.findTensor(l0 + "self_attn.q_proj.bias"), nullptr);
    EXPECT_EQ(g.findTensor(l0 + "mlp.experts.0.gate_proj.bias"), nullptr);
    // The router is an FP32 nn.Linear in the modeling code; the checkpoint's dtype is not
    // verified, so both are allowed.
    const TensorSpec* router = g.findTensor(l0 + "mlp.gate.wg.weight");
    EXPECT_EQ(router->component, Component::Router);
    EXPECT_EQ(router->altDtype, DType::F32);
    EXPECT_EQ(
        g.findTensor(l0 + "mlp.shared_mlp.up_proj.weight")->component, Component::SharedExperts);
    EXPECT_EQ(g.findTensor(l0 + "mlp.experts.5.up_proj.weight")->expert, 5);
}

// Every layer caches K and V: 2·8·128 elements per token, 32 layers, 131,072 B per token BF16.
TEST(Hunyuan, KvCacheA13B)
{
    const ModelSpec s = fromData(kA13B);
    double perToken = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const auto terms = layerCache(s, s.layers[i], std::int64_t(i));
        ASSERT_EQ(terms.size(), 1u);
        EXPECT_DOUBLE_EQ(terms[0].elementsPerToken, 2048.0);
        EXPECT_EQ(terms[0].window, 0);
        perToken += cacheBytes(terms, 1.0, 1, 2.0);
    }
    EXPECT_DOUBLE_EQ(perToken, 131'072.0);
}

TEST(Hunyuan, PerLayerListsAndUnmodelledSwitches)
{
    const auto expectError = [](const nlohmann::json& doc, const std::vector<std::string>& parts) {
        auto spec = readConfig(doc, "hunyuan.json");
        ASSERT_FALSE(spec.ok());
        for (const auto& part : parts) {
            EXPECT_NE(spec.error().message.find(part), std::string::npos)
                << spec.error().message << " lacks " << part;
        }
    };
    auto shortList = a13b();
    shortList["moe_topk"].erase(0);
    expectError(shortList, { "hunyuan.json", "moe_topk", "31 entries", "32 layers" });

    auto mixedTopK = a13b();
    mixedTopK["moe_topk"][3] = 4;
    expectError(mixedTopK, { "moe_topk", "entry 3 is 4", "entry 0 is 8" });

    auto shared = a13b();
    shared["num_shared_expert"][31] = 2;
    expectError(shared, { "num_shared_expert", "entry 31 is 2" });

    auto width = a13b();
    width["moe_intermediate_size"][7] = 1536;
    expectError(width, { "moe_intermediate_size", "entry 7 is 1536", "3072" });

    auto cla = a13b();
    cla["use_cla"] = true;
    expectError(cla, { "use_cla", "true" });

    auto mla = a13b();
    mla["use_mla"] = true;
    expectError(mla, { "use_mla" });

    auto headDim = a13b();
    headDim["attention_head_dim"] = 96;
    expectError(headDim, { "attention_head_dim", "96", "128" });

    auto vit = a13b();
    vit["vit_type"] = "siglip";
    expectError(vit, { "vit_type" });

    auto port = a13b();
    port["model_type"] = "hunyuan_v1_moe";
    expectError(port, { "hunyuan_v1_moe" });

    // Scalars mean every layer; top-1 with two shared experts as Tencent sizes them
    // (intermediate_size · num_shared_expert[0]); no mixed MLP, no shared_mlp.
    auto scalars = a13b();
    scalars["moe_topk"] = 1;
    scalars["num_shared_expert"] = 2;
    scalars["moe_intermediate_size"] = 3072;
    auto spec = readConfig(scalars, "hunyuan.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->moe->topK, 1);
    EXPECT_EQ(spec->moe->sharedIntermediate, 2 * kI);
    scalars["use_mixed_mlp_moe"] = false;
    auto plain = readConfig(scalars, "hunyuan.json");
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    const LayerGraph g = buildLayerGraph(*plain);
    EXPECT_EQ(g.findTensor("model.layers.0.mlp.shared_mlp.gate_proj.weight"), nullptr);

    // num_experts 1: HunYuanMLP in every layer (mlp.{gate,up,down}_proj of intermediate_size).
    auto dense = a13b();
    dense["num_experts"] = 1;
    auto denseSpec = readConfig(dense, "hunyuan.json");
    ASSERT_TRUE(denseSpec.ok()) << denseSpec.error().message;
    EXPECT_FALSE(denseSpec->moe.has_value());
    const LayerGraph dg = buildLayerGraph(*denseSpec);
    expectTensor(dg, "model.layers.0.mlp.gate_proj.weight", { kI, kH });
    EXPECT_EQ(dg.findTensor("model.layers.0.mlp.gate.wg.weight"), nullptr);
}
