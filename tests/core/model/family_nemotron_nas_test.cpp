// Nemotron-NAS (`nemotron-nas`, DeciLM): Llama-3.3-Nemotron-Super-49B-v1's real config,
// per-layer block_configs, the ffn_mult widths, counts by hand (research document
// research note nemotron_modelopt.md (not in the repository), Part C), KV cache, linear
// replacements and bad input.

#include "base/python_json.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

const char* const kSuper49B = "configs/frontier/nvidia--Llama-3_3-Nemotron-Super-49B-v1.json";

void expectAbsent(const LayerGraph& graph, const std::string& name)
{
    EXPECT_EQ(graph.findTensor(name), nullptr) << name << " should not exist";
}

nlohmann::json rawConfig()
{
    auto parsed = readPythonJsonFile(dataDir() / kSuper49B);
    if (!parsed) {
        ADD_FAILURE() << parsed.error().message;
        return nlohmann::json::object();
    }
    return parsed->value;
}

// The 49B config with one change; the reading (or its error).
Result<ModelSpec> changed(const std::function<void(nlohmann::json&)>& change, bool partial = false)
{
    nlohmann::json config = rawConfig();
    change(config);
    ReadOptions options;
    options.partial = partial;
    return readConfig(config, "decilm.json", options);
}

void expectRefusal(const Result<ModelSpec>& spec, std::initializer_list<const char*> parts)
{
    ASSERT_FALSE(spec);
    for (const char* part : parts) {
        EXPECT_NE(spec.error().message.find(part), std::string::npos)
            << spec.error().message << "\nlacks: " << part;
    }
}

// Research doc C4: 49 GQA attention layers (8 KV heads of 128) and 31 no-op attention; every
// FFN present, 49 × 28672 (ffn_mult 5.25), 10 × 7168 (1.3125), 8 × 5632 (1.0), 6 × 14336
// (2.625), 6 × 2816 (0.5), 1 × 17920 (3.28125).
constexpr std::int64_t kH = 8192, kV = 128256;
constexpr std::int64_t kAttention = kH + 2 * kH * kH + 2 * 1024 * kH;
constexpr std::int64_t ffn(std::int64_t width) { return kH + 3 * kH * width; }
constexpr std::int64_t kTotal = 2 * kV * kH + kH + 49 * kAttention + 49 * ffn(28672)
    + 10 * ffn(7168) + 8 * ffn(5632) + 6 * ffn(14336) + 6 * ffn(2816) + ffn(17920);
static_assert(kAttention == 151'003'136);
static_assert(ffn(28672) == 704'651'264 && ffn(2816) == 69'214'208);
static_assert(kTotal == 49'867'145'216);

} // namespace

TEST(NemotronNas, Super49BLayers)
{
    const ModelSpec spec = fromData(kSuper49B);
    EXPECT_EQ(spec.family, Family::NemotronNas);
    EXPECT_EQ(spec.numLayers, 80);
    EXPECT_EQ(spec.headDim, 128);
    std::int64_t attention = 0;
    std::int64_t noOp = 0;
    std::map<std::int64_t, int> widths;
    for (const auto& layer : spec.layers) {
        if (layer.mixer == MixerKind::Attention) {
            ++attention;
            EXPECT_EQ(spec.kvHeadsOf(layer), 8); // 64 heads / n_heads_in_group 8
        } else {
            EXPECT_EQ(layer.mixer, MixerKind::None);
            ++noOp;
        }
        ASSERT_EQ(layer.ffn, FfnKind::Dense);
        ++widths[layer.ffnWidth];
    }
    EXPECT_EQ(attention, 49);
    EXPECT_EQ(noOp, 31);
    EXPECT_EQ(spec.layers[6].mixer, MixerKind::None);
    EXPECT_EQ(spec.layers[11].mixer, MixerKind::None);
    // DeciLM's _ffn_mult_to_intermediate_size: int(2·m·H/3) rounded up to a multiple of 256.
    EXPECT_EQ(spec.layers[0].ffnWidth, 14336); // 2.625
    EXPECT_EQ(spec.layers[1].ffnWidth, 28672); // 5.25
    EXPECT_EQ(spec.layers[11].ffnWidth, 17920); // 3.28125
    EXPECT_EQ(widths,
        (std::map<std::int64_t, int> {
            { 2816, 6 }, { 5632, 8 }, { 7168, 10 }, { 14336, 6 }, { 17920, 1 }, { 28672, 49 } }));
    EXPECT_FALSE(spec.partial);
}

// Publisher: "49B" (model card, NeMo docs: rounded) and "49.9B params" (whatmodel.sh, matching
// the Hub's safetensors count).
TEST(NemotronNas, Super49BCountsAndTensors)
{
    const LayerGraph g = buildLayerGraph(fromData(kSuper49B));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, kTotal);
    EXPECT_EQ(c.active, kTotal);
    EXPECT_EQ(c.activeWithoutEmbedding, 48'816'472'064);
    expectNear(c.total, 49.9e9, 0.005, "Super-49B (49.9B)");
    expectNear(c.total, 49e9, 0.03, "Super-49B (49B)");
    EXPECT_EQ(totalBytes(g), 2 * kTotal);
    // embed, norm, lm_head; 49 × (input_layernorm + q/k/v/o); 80 × (post norm + gate/up/down).
    EXPECT_EQ(g.tensorCount(), 3u + 49 * 5 + 80 * 4);

    const DType bf = DType::BF16;
    expectTensor(g, "model.embed_tokens.weight", { 128256, 8192 }, bf);
    expectTensor(g, "model.layers.0.input_layernorm.weight", { 8192 }, bf);
    expectTensor(g, "model.layers.0.self_attn.q_proj.weight", { 8192, 8192 }, bf);
    expectTensor(g, "model.layers.0.self_attn.k_proj.weight", { 1024, 8192 }, bf);
    expectTensor(g, "model.layers.0.self_attn.v_proj.weight", { 1024, 8192 }, bf);
    expectTensor(g, "model.layers.0.self_attn.o_proj.weight", { 8192, 8192 }, bf);
    expectTensor(g, "model.layers.0.post_attention_layernorm.weight", { 8192 }, bf);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight", { 14336, 8192 }, bf);
    expectTensor(g, "model.layers.1.mlp.down_proj.weight", { 8192, 28672 }, bf);
    // A no-op attention layer: no attention and no input_layernorm, the MLP stays.
    expectAbsent(g, "model.layers.6.input_layernorm.weight");
    expectAbsent(g, "model.layers.6.self_attn.q_proj.weight");
    expectTensor(g, "model.layers.6.post_attention_layernorm.weight", { 8192 }, bf);
    expectTensor(g, "model.layers.6.mlp.up_proj.weight", { 14336, 8192 }, bf);
    expectTensor(g, "model.norm.weight", { 8192 }, bf);
    expectTensor(g, "lm_head.weight", { 128256, 8192 }, bf);
}

// Research doc C5: 49 × 2·8·128 = 100,352 KV elements per token; no-op layers keep nothing.
TEST(NemotronNas, KvCache)
{
    const ModelSpec spec = fromData(kSuper49B);
    double perToken = 0;
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        const auto terms = layerCache(spec, spec.layers[i], std::int64_t(i));
        if (spec.layers[i].mixer == MixerKind::None) {
            EXPECT_TRUE(terms.empty());
        }
        for (const auto& t : terms) {
            perToken += t.elementsPerToken;
        }
    }
    EXPECT_EQ(perToken, 100'352);
    double bytes = 0;
    for (const auto& kind : cacheByKind(spec, 1, 2.0)) {
        bytes += kind.bytesPerToken;
    }
    EXPECT_EQ(bytes, 200'704);
}

// replace_with_linear keeps the layer's norm and puts one Linear(H, H) in place of attention
// (`self_attn.linear_attn`) or of the MLP (`mlp.linear_mlp`); ffn no_op drops the MLP and its
// norm.
TEST(NemotronNas, LinearAndNoOpBlocks)
{
    const auto spec = changed([](auto& c) {
        c["block_configs"][0]["attention"]["replace_with_linear"] = true;
        c["block_configs"][0]["attention"]["n_heads_in_group"] = nullptr;
        c["block_configs"][1]["ffn"]["replace_with_linear"] = true;
        c["block_configs"][2]["ffn"]["no_op"] = true;
    });
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->layers[0].mixer, MixerKind::Linear);
    EXPECT_EQ(spec->layers[1].ffn, FfnKind::Linear);
    EXPECT_EQ(spec->layers[2].ffn, FfnKind::None);
    const LayerGraph g = buildLayerGraph(*spec);
    expectTensor(g, "model.layers.0.input_layernorm.weight", { 8192 }, DType::BF16);
    expectTensor(g, "model.layers.0.self_attn.linear_attn.weight", { 8192, 8192 }, DType::BF16);
    expectAbsent(g, "model.layers.0.self_attn.q_proj.weight");
    expectTensor(g, "model.layers.1.post_attention_layernorm.weight", { 8192 }, DType::BF16);
    expectTensor(g, "model.layers.1.mlp.linear_mlp.weight", { 8192, 8192 }, DType::BF16);
    expectAbsent(g, "model.layers.1.mlp.gate_proj.weight");
    expectAbsent(g, "model.layers.2.post_attention_layernorm.weight");
    expectAbsent(g, "model.layers.2.mlp.up_proj.weight");
    EXPECT_TRUE(layerCache(*spec, spec->layers[0], 0).empty());
    const std::int64_t linear = 8192 * 8192;
    EXPECT_EQ(g.countParameters().total,
        kTotal - (2 * 8192 * 8192 + 2 * 1024 * 8192) + linear // layer 0 attention → linear
            - 3 * 8192 * 28672 + linear // layer 1 MLP → linear
            - ffn(28672)); // layer 2 MLP and its norm gone
}

TEST(NemotronNas, BadInput)
{
    expectRefusal(changed([](auto& c) { c["block_configs"].erase(79); }),
        { "decilm.json", "block_configs", "has 79 entries but the model has 80 layers" });
    expectRefusal(
        changed([](auto& c) { c["block_configs"][3]["attention"]["window_length"] = 4096; }),
        { "block_configs[3].attention.window_length", "not modelled" });
    expectRefusal(
        changed([](auto& c) { c["block_configs"][3]["attention"]["unshifted_sink"] = true; }),
        { "block_configs[3].attention", "unshifted_sink", "is true" });
    expectRefusal(changed([](auto& c) { c["block_configs"][4]["ffn"]["sparsify"] = "x"; }),
        { "block_configs[4].ffn.sparsify" });
    expectRefusal(
        changed([](auto& c) { c["block_configs"][5]["attention"]["n_heads_in_group"] = 7; }),
        { "block_configs[5].attention", "n_heads_in_group", "(7) must divide" });
    expectRefusal(changed([](auto& c) {
        c["block_configs"][2]["ffn"]["moe"] = { { "experts", 8 } };
    }),
        { "block_configs[2].ffn.moe" });
    expectRefusal(changed([](auto& c) { c["block_configs"][2]["ffn"].erase("ffn_mult"); }),
        { "block_configs[2].ffn", "ffn_mult", "is missing" });
    // --partial leaves the windowed attention out and reads the rest.
    const auto partial = changed(
        [](auto& c) { c["block_configs"][3]["attention"]["window_length"] = 4096; }, true);
    ASSERT_TRUE(partial) << partial.error().message;
    EXPECT_TRUE(partial->partial);
}
