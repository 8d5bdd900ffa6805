// Qwen3-Next / Qwen3.5: the KV cache and recurrent state of each real config per layer kind,
// and malformed configs refused naming the file, key and value (family_qwen_next_test.cpp
// reads the configs themselves).

#include "model/cache_footprint.h"
#include "model_test_util.h"
#include "qwen_next_configs.h"

#include <gtest/gtest.h>

#include <functional>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

// Full-attention KV per token and Gated DeltaNet state per sequence (research §7).
TEST(QwenNext, CacheAndStateFootprint)
{
    struct Case {
        const char* config;
        std::int64_t full, gdn;
        double kvPerTokenBf16; // all full layers
        double convPerLayer, ssmPerLayer; // elements
        double ssmAllBytes, convAllBytes;
    };
    const Case cases[] = {
        // Qwen3-Next keeps its state in BF16 (no mamba_ssm_dtype); 75,497,472 B in F32.
        { kNextConfig, 12, 36, 24'576, 24'576, 524'288, 37'748'736, 1'769'472 },
        { k27BConfig, 16, 48, 65'536, 30'720, 786'432, 150'994'944, 2'949'120 },
        { k35BConfig, 10, 30, 20'480, 24'576, 524'288, 62'914'560, 1'474'560 },
        { k122BConfig, 12, 36, 24'576, 36'864, 1'048'576, 150'994'944, 2'654'208 },
        // The 397B audit: 64·128·128·4 = 4,194,304 B per layer, 188,743,680 B for 45 layers.
        { k397BConfig, 15, 45, 30'720, 36'864, 1'048'576, 188'743'680, 3'317'760 },
    };
    for (const Case& c : cases) {
        const ModelSpec spec = fromData(c.config);
        for (const auto& byKind : cacheByKind(spec, 1.0, 2.0)) {
            if (byKind.kind == MixerKind::Attention) {
                EXPECT_EQ(byKind.layers, c.full) << c.config;
                EXPECT_DOUBLE_EQ(byKind.bytesPerToken, c.kvPerTokenBf16) << c.config;
                EXPECT_DOUBLE_EQ(byKind.fixedBytes, 0.0) << c.config;
            } else {
                ASSERT_EQ(byKind.kind, MixerKind::GatedDeltaNet) << c.config;
                EXPECT_EQ(byKind.layers, c.gdn) << c.config;
                EXPECT_DOUBLE_EQ(byKind.bytesPerToken, 0.0) << c.config;
                EXPECT_DOUBLE_EQ(byKind.fixedBytes, c.ssmAllBytes + c.convAllBytes) << c.config;
            }
        }
        const auto terms = layerCache(spec, spec.layers[0], 0);
        ASSERT_EQ(terms.size(), 2u) << c.config;
        EXPECT_EQ(terms[0].what, "conv state");
        EXPECT_DOUBLE_EQ(terms[0].elementsPerSequence, c.convPerLayer) << c.config;
        EXPECT_EQ(terms[0].dtype, DType::BF16);
        EXPECT_EQ(terms[1].what, "recurrent state");
        EXPECT_DOUBLE_EQ(terms[1].elementsPerSequence, c.ssmPerLayer) << c.config;
        // Each full layer: 2 · nkv · 256 elements per token; the MTP layer has one too.
        const auto kv = layerCache(spec, spec.layers[3], 3);
        ASSERT_EQ(kv.size(), 1u);
        EXPECT_DOUBLE_EQ(kv[0].elementsPerToken, double(2 * spec.numKvHeads * 256));
        EXPECT_DOUBLE_EQ(cacheBytes(kv, 1000.0, 1, 2.0), 1000.0 * 2 * 2 * spec.numKvHeads * 256);
        const auto mtpKv = layerCache(spec, spec.mtpLayers[0], spec.numLayers);
        ASSERT_EQ(mtpKv.size(), 1u);
        EXPECT_DOUBLE_EQ(mtpKv[0].elementsPerToken, kv[0].elementsPerToken);
    }
    // State bytes of one GDN layer of 397B at tp = 1 and split over 4 ranks by value head.
    const ModelSpec spec = fromData(k397BConfig);
    const auto terms = layerCache(spec, spec.layers[0], 0);
    EXPECT_DOUBLE_EQ(cacheBytes(terms, 1.0, 1, 2.0), 4'194'304.0 + 36'864.0 * 2);
    EXPECT_DOUBLE_EQ(cacheBytes(terms, 1.0, 4, 2.0), (4'194'304.0 + 36'864.0 * 2) / 4);
}

TEST(QwenNextErrors, LayerTypes)
{
    // Wrong length.
    auto shorter = readEdited(
        k397BConfig, [](nlohmann::json& j) { j["text_config"]["layer_types"].erase(59); });
    ASSERT_FALSE(shorter.ok());
    EXPECT_TRUE(contains(shorter.error().message,
        "Qwen--Qwen3.5-397B-A17B.json (text_config): 'layer_types' has 59 entries but the model "
        "has 60 layers"))
        << shorter.error().message;
    // Unknown entry.
    auto unknown = readEdited(k397BConfig,
        [](nlohmann::json& j) { j["text_config"]["layer_types"][7] = "sliding_attention"; });
    ASSERT_FALSE(unknown.ok());
    EXPECT_TRUE(contains(unknown.error().message,
        "'layer_types' entry 7 is \"sliding_attention\", which Day0 does not model"))
        << unknown.error().message;
    // Absent: full_attention_interval decides ((i + 1) % interval == 0 is full attention).
    auto interval = readEdited(k27BConfig, [](nlohmann::json& j) {
        j["text_config"].erase("layer_types");
        j["text_config"]["full_attention_interval"] = 2;
    });
    ASSERT_TRUE(interval.ok()) << interval.error().message;
    EXPECT_EQ(interval->layers[0].mixer, MixerKind::GatedDeltaNet);
    EXPECT_EQ(interval->layers[1].mixer, MixerKind::Attention);
    EXPECT_EQ(interval->layers[63].mixer, MixerKind::Attention);
}
