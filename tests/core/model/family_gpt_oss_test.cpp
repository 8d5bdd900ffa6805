// gpt_oss: openai/gpt-oss-120b (tests/data/model/configs/frontier) and gpt-oss-20b
// (configs/frontier-sizes) — reading, layer pattern, parameter counts by hand and against the
// model card, the MXFP4 expert layout, the real 20b index's names and bytes, KV cache, errors.

#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

constexpr const char* k120b = "configs/frontier/openai--gpt-oss-120b.json";
constexpr const char* k20b = "configs/frontier-sizes/openai--gpt-oss-20b.json";




nlohmann::json config(const char* relative)
{
    auto json = readJsonFile(dataDir() / relative);
    EXPECT_TRUE(json.ok());
    return json.ok() ? *json : nlohmann::json::object();
}

Result<ModelSpec> readEdited(const nlohmann::json& json)
{
    return readConfig(json, "gpt-oss-120b/config.json");
}

// Per-layer figures, from the config numbers (research/gptoss_minimax.md A.5).
constexpr std::int64_t H = 2880, I = 2880, nH = 64, nKV = 8, D = 64, V = 201088;
constexpr std::int64_t kAttention = (nH * D) * H + nH * D + 2 * ((nKV * D) * H + nKV * D)
    + H * (nH * D) + H + nH; // q/k/v/o with biases, sinks
constexpr std::int64_t kNorms = 2 * H;
constexpr std::int64_t kExpert = 2 * I * H + H * I; // gate_up [2I, H] + down [H, I]
constexpr std::int64_t kExpertBias = 2 * I + H;
constexpr std::int64_t router(std::int64_t e) { return e * H + e; }
constexpr std::int64_t layer(std::int64_t e)
{
    return kAttention + kNorms + router(e) + e * (kExpert + kExpertBias);
}
constexpr std::int64_t activeLayer(std::int64_t k, std::int64_t e)
{
    return kAttention + kNorms + router(e) + k * (kExpert + kExpertBias);
}
static_assert(kAttention == 26'550'144);

} // namespace

TEST(GptOss, ReadsThe120bConfig)
{
    const ModelSpec s = fromData(k120b);
    EXPECT_EQ(s.family, Family::GptOss);
    EXPECT_EQ(s.hiddenSize, 2880);
    EXPECT_EQ(s.numLayers, 36);
    EXPECT_EQ(s.numHeads, 64);
    EXPECT_EQ(s.numKvHeads, 8);
    EXPECT_EQ(s.headDim, 64);
    EXPECT_EQ(s.attention, AttentionKind::GQA);
    EXPECT_TRUE(s.attentionBias);
    EXPECT_TRUE(s.attentionOutputBias);
    EXPECT_TRUE(s.attentionSinks);
    EXPECT_DOUBLE_EQ(s.swigluLimit, 7.0);
    EXPECT_DOUBLE_EQ(s.swigluAlpha, 1.702); // the class default: the config omits it
    EXPECT_DOUBLE_EQ(s.normEps, 1e-5);
    EXPECT_FALSE(s.tieEmbeddings);
    EXPECT_DOUBLE_EQ(s.ropeTheta, 150000.0);
    EXPECT_EQ(s.ropeScaling.type, "yarn");
    EXPECT_DOUBLE_EQ(s.ropeScaling.factor, 32.0);
    EXPECT_EQ(s.ropeScaling.originalMaxPositions, 4096);
    EXPECT_FALSE(s.ropeScaling.truncate);
    ASSERT_TRUE(s.moe.has_value());
    EXPECT_EQ(s.moe->numExperts, 128);
    EXPECT_EQ(s.moe->topK, 4);
    EXPECT_EQ(s.moe->expertIntermediate, 2880);
    EXPECT_TRUE(s.moe->packedExperts);
    EXPECT_TRUE(s.moe->expertBias);
    EXPECT_TRUE(s.moe->routerBias);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Mxfp4);
    EXPECT_EQ(s.quantization->excludePatterns.size(), 4u);
    EXPECT_EQ(s.layout.textPrefix, "model");
    EXPECT_EQ(s.layout.lmHead, "lm_head");
    EXPECT_FALSE(s.partial);
}

TEST(GptOss, LayerPatternAlternatesSlidingAndFull)
{
    for (const char* file : { k120b, k20b }) {
        const ModelSpec s = fromData(file);
        for (std::int64_t i = 0; i < s.numLayers; ++i) {
            const LayerSpec& l = s.layers[std::size_t(i)];
            EXPECT_EQ(l.ffn, FfnKind::Moe) << file << " layer " << i;
            if (i % 2 == 0) {
                EXPECT_EQ(l.mixer, MixerKind::Sliding) << file << " layer " << i;
                EXPECT_EQ(l.slidingWindow, 128) << file << " layer " << i;
            } else {
                EXPECT_EQ(l.mixer, MixerKind::Attention) << file << " layer " << i;
                EXPECT_EQ(l.slidingWindow, 0) << file << " layer " << i;
            }
        }
    }
}

// 120b. OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv:2508.10925), Table 1: 116.83B
// total, 5.13B active per token, where active counts the unembedding but not the embedding.
// Checkpoint bytes 65,248,815,744 in 15 files (third-party test on the real files, search
// index id 59724567210; = 60.77 GiB, the card's 60.8 GiB).
TEST(GptOss, Counts120b)
{
    constexpr std::int64_t E = 128, k = 4, L = 36;
    constexpr std::int64_t total = L * layer(E) + 2 * V * H + H;
    constexpr std::int64_t activeNoEmbedding = L * activeLayer(k, E) + V * H + H;
    static_assert(total == 116'829'156'672);
    static_assert(activeNoEmbedding == 5'132'849'472);

    const LayerGraph g = buildLayerGraph(fromData(k120b));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.mainModel, total);
    EXPECT_EQ(c.activeWithoutEmbedding, activeNoEmbedding);
    EXPECT_EQ(c.active, activeNoEmbedding + V * H);
    EXPECT_EQ(c.embedding, V * H);
    EXPECT_EQ(c.lmHead, V * H);
    EXPECT_EQ(c.mtp, 0);
    expectNear(c.total, 116.83e9, 0.005, "120b total");
    expectNear(c.activeWithoutEmbedding, 5.13e9, 0.005, "120b active");
    EXPECT_EQ(totalBytes(g), 65'248'815'744);
    EXPECT_EQ(c.bytes, 65'248'815'744);
    EXPECT_EQ(g.tensorCount(), std::size_t(19 * L + 3));
}

// 20b. Model card: 20.91B total, 3.61B active; index total_size 13,761,264,768 (the real
// openai/gpt-oss-20b model.safetensors.index.json, tests/data/model/indexes/gpt-oss-20b).
TEST(GptOss, Counts20b)
{
    constexpr std::int64_t E = 32, k = 4, L = 24;
    constexpr std::int64_t total = L * layer(E) + 2 * V * H + H;
    constexpr std::int64_t activeNoEmbedding = L * activeLayer(k, E) + V * H + H;
    static_assert(total == 20'914'757'184);
    static_assert(activeNoEmbedding == 3'608'307'264);

    const LayerGraph g = buildLayerGraph(fromData(k20b));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.activeWithoutEmbedding, activeNoEmbedding);
    expectNear(c.total, 20.91e9, 0.005, "20b total");
    expectNear(c.activeWithoutEmbedding, 3.61e9, 0.005, "20b active");
    EXPECT_EQ(totalBytes(g), 13'761'264'768);
}

TEST(GptOss, TensorNamesEqualThe20bIndex)
{
    std::ifstream in(dataDir() / "indexes/gpt-oss-20b/weight_map_keys.txt");
    ASSERT_TRUE(in.good());
    std::set<std::string> expected;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] != '#') {
            expected.insert(line);
        }
    }
    ASSERT_EQ(expected.size(), 459u);
    const LayerGraph g = buildLayerGraph(fromData(k20b));
    EXPECT_EQ(tensorNames(g), expected);
    EXPECT_EQ(g.tensorCount(), expected.size());
}

TEST(GptOss, Mxfp4ExpertsAndUnquantisedModules)
{
    const LayerGraph g = buildLayerGraph(fromData(k120b));
    const std::string p = "model.layers.7.";
    expectTensor(g, "model.embed_tokens.weight", { V, H }, DType::BF16);
    expectTensor(g, p + "input_layernorm.weight", { H }, DType::BF16);
    expectTensor(g, p + "self_attn.q_proj.weight", { 4096, H }, DType::BF16);
    expectTensor(g, p + "self_attn.q_proj.bias", { 4096 }, DType::BF16, TensorKind::Bias);
    expectTensor(g, p + "self_attn.k_proj.weight", { 512, H }, DType::BF16);
    expectTensor(g, p + "self_attn.v_proj.bias", { 512 }, DType::BF16, TensorKind::Bias);
    expectTensor(g, p + "self_attn.o_proj.weight", { H, 4096 }, DType::BF16);
    expectTensor(g, p + "self_attn.o_proj.bias", { H }, DType::BF16, TensorKind::Bias);
    expectTensor(g, p + "self_attn.sinks", { 64 }, DType::BF16);
    expectTensor(g, p + "mlp.router.weight", { 128, H }, DType::BF16);
    expectTensor(g, p + "mlp.router.bias", { 128 }, DType::BF16, TensorKind::Bias);
    expectTensor(g, p + "mlp.experts.gate_up_proj_blocks", { 128, 5760, 90, 16 }, DType::U8);
    expectTensor(
        g, p + "mlp.experts.gate_up_proj_scales", { 128, 5760, 90 }, DType::U8, TensorKind::Scale);
    expectTensor(
        g, p + "mlp.experts.gate_up_proj_bias", { 128, 5760 }, DType::BF16, TensorKind::Bias);
    expectTensor(g, p + "mlp.experts.down_proj_blocks", { 128, 2880, 90, 16 }, DType::U8);
    expectTensor(
        g, p + "mlp.experts.down_proj_scales", { 128, 2880, 90 }, DType::U8, TensorKind::Scale);
    expectTensor(g, p + "mlp.experts.down_proj_bias", { 128, 2880 }, DType::BF16, TensorKind::Bias);
    expectTensor(g, "model.norm.weight", { H }, DType::BF16);
    expectTensor(g, "lm_head.weight", { V, H }, DType::BF16);

    const TensorSpec* blocks = g.findTensor(p + "mlp.experts.gate_up_proj_blocks");
    ASSERT_NE(blocks, nullptr);
    EXPECT_EQ(blocks->packFactor, 2);
    EXPECT_EQ(blocks->packedExperts, 128);
    EXPECT_EQ(blocks->params(), 128 * 5760 * 2880); // logical elements
    EXPECT_EQ(blocks->component, Component::RoutedExperts);
    EXPECT_EQ(g.findTensor(p + "mlp.experts.gate_up_proj_scales")->params(), 0);
    EXPECT_EQ(g.findTensor(p + "self_attn.sinks")->component, Component::Attention);
    EXPECT_EQ(g.findTensor(p + "mlp.router.weight")->component, Component::Router);
    // No HF runtime (dequantised) names in the checkpoint.
    EXPECT_EQ(g.findTensor(p + "mlp.experts.gate_up_proj"), nullptr);
}

// Without quantization_config the experts are GptOssExperts' plain parameters: gate_up_proj
// [E, H, 2I] and down_proj [E, I, H] in BF16 (transposed against the MXFP4 blocks).
TEST(GptOss, UnquantisedExpertsAreFusedBf16)
{
    nlohmann::json json = config(k20b);
    json.erase("quantization_config");
    auto spec = readEdited(json);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_FALSE(spec->quantization.has_value());
    const LayerGraph g = buildLayerGraph(*spec);
    expectTensor(g, "model.layers.0.mlp.experts.gate_up_proj", { 32, H, 2 * I }, DType::BF16);
    expectTensor(g, "model.layers.0.mlp.experts.down_proj", { 32, I, H }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.0.mlp.experts.gate_up_proj_blocks"), nullptr);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, 20'914'757'184); // the same parameters as the MXFP4 release
    EXPECT_EQ(totalBytes(g), 2 * 20'914'757'184);
    EXPECT_EQ(g.tensorCount(), std::size_t(17 * 24 + 3));
}

// KV per token and layer: 2·8·64 = 1,024 elements on every layer; sliding layers keep at most
// 128 positions (A.6): 120b 18 full + 18 sliding → 18,432 elements per token (36,864 B BF16)
// plus at most 18·1,024·128 = 2,359,296 elements (4,718,592 B) per sequence.
TEST(GptOss, KvCacheCapsSlidingLayersAt128)
{
    const ModelSpec s = fromData(k120b);
    const auto sliding = layerCache(s, s.layers[0], 0);
    ASSERT_EQ(sliding.size(), 1u);
    EXPECT_DOUBLE_EQ(sliding[0].elementsPerToken, 1024.0);
    EXPECT_EQ(sliding[0].window, 128);
    const auto full = layerCache(s, s.layers[1], 1);
    ASSERT_EQ(full.size(), 1u);
    EXPECT_DOUBLE_EQ(full[0].elementsPerToken, 1024.0);
    EXPECT_EQ(full[0].window, 0);
    EXPECT_DOUBLE_EQ(cacheBytes(sliding, 100000.0, 1, 2.0), 1024.0 * 128 * 2);
    EXPECT_DOUBLE_EQ(cacheBytes(full, 100000.0, 1, 2.0), 1024.0 * 100000 * 2);

    double perToken = 0.0;
    double fixed = 0.0;
    for (const auto& kind : cacheByKind(s, 131072.0, 2.0)) {
        perToken += kind.bytesPerToken;
        fixed += kind.fixedBytes;
    }
    EXPECT_DOUBLE_EQ(perToken, 36'864.0);
    EXPECT_DOUBLE_EQ(fixed, 4'718'592.0);
}

TEST(GptOssErrors, LayerTypesOfWrongLengthOrUnknownValue)
{
    nlohmann::json json = config(k120b);
    json["layer_types"].erase(json["layer_types"].size() - 1);
    auto shorter = readEdited(json);
    ASSERT_FALSE(shorter.ok());
    EXPECT_TRUE(contains(shorter.error().message,
        "gpt-oss-120b/config.json: 'layer_types' has 35 entries but the model has 36 layers"))
        << shorter.error().message;

    json = config(k120b);
    json["layer_types"][7] = "chunked_attention";
    auto unknown = readEdited(json);
    ASSERT_FALSE(unknown.ok());
    EXPECT_TRUE(contains(unknown.error().message, "'layer_types' entry 7 is \"chunked_attention\""))
        << unknown.error().message;
}

TEST(GptOssErrors, LegacyTopKMustAgree)
{
    nlohmann::json json = config(k120b);
    json["experts_per_token"] = 2;
    auto r = readEdited(json);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(
        contains(r.error().message, "'experts_per_token' is 2 but 'num_experts_per_tok' is 4"))
        << r.error().message;
}

TEST(GptOssErrors, OtherQuantisationIsNotModelled)
{
    nlohmann::json json = config(k120b);
    json["quantization_config"]
        = { { "quant_method", "fp8" }, { "fmt", "e4m3" }, { "weight_block_size", { 128, 128 } } };
    auto r = readEdited(json);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_TRUE(contains(r.error().message, "quantization_config")) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, "block_fp8")) << r.error().message;
}

TEST(GptOssErrors, UnknownKeyIsNamed)
{
    nlohmann::json json = config(k120b);
    json["sliding_window_pattern"] = 3;
    auto r = readEdited(json);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message, "sliding_window_pattern")) << r.error().message;
}
