// The engine's weight list and the tiny models' configs against core/model's reading of them.
#include "exec/forward.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "tiny_models.h"

#include <gtest/gtest.h>

using namespace day0;

TEST(GraphConsistency, TinyConfigsReadBackToTheSameSpecs)
{
    for (const auto& m : { test::tinyLlama(), test::tinyQwen2(), test::tinyMixtral(),
             test::tinyQwen3Moe(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const auto spec = model::readConfig(m.config, "config.json");
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        EXPECT_EQ(spec->family, m.spec.family);
        EXPECT_EQ(spec->hiddenSize, m.spec.hiddenSize);
        EXPECT_EQ(spec->numLayers, m.spec.numLayers);
        EXPECT_EQ(spec->numHeads, m.spec.numHeads);
        EXPECT_EQ(spec->numKvHeads, m.spec.numKvHeads);
        EXPECT_EQ(spec->headDim, m.spec.headDim);
        EXPECT_EQ(spec->vocabSize, m.spec.vocabSize);
        EXPECT_EQ(spec->qkNorm, m.spec.qkNorm);
        EXPECT_EQ(spec->attentionBias, m.spec.attentionBias);
        EXPECT_EQ(spec->attention == model::AttentionKind::MLA,
            m.spec.attention == model::AttentionKind::MLA);
        EXPECT_EQ(spec->ropeScaling.type, m.spec.ropeScaling.type);
        EXPECT_DOUBLE_EQ(spec->ropeScaling.factor, m.spec.ropeScaling.factor);
        EXPECT_DOUBLE_EQ(spec->normEps, m.spec.normEps);
        EXPECT_EQ(spec->moe.has_value(), m.spec.moe.has_value());
        if (spec->moe && m.spec.moe) {
            EXPECT_EQ(spec->moe->numExperts, m.spec.moe->numExperts);
            EXPECT_EQ(spec->moe->topK, m.spec.moe->topK);
            EXPECT_EQ(spec->moe->expertIntermediate, m.spec.moe->expertIntermediate);
            EXPECT_EQ(spec->moe->sharedIntermediate, m.spec.moe->sharedIntermediate);
            EXPECT_EQ(spec->moe->scoring, m.spec.moe->scoring);
            EXPECT_EQ(spec->moe->expertScoreBias, m.spec.moe->expertScoreBias);
            EXPECT_EQ(spec->moe->numGroups, m.spec.moe->numGroups);
            EXPECT_DOUBLE_EQ(spec->moe->routedScalingFactor, m.spec.moe->routedScalingFactor);
        }
        ASSERT_EQ(spec->layers.size(), m.spec.layers.size());
        for (std::size_t l = 0; l < spec->layers.size(); ++l) {
            EXPECT_EQ(spec->layers[l].moe(), m.spec.layers[l].moe()) << l;
        }
    }
}

TEST(GraphConsistency, EngineWeightsAreTheLayerGraphTensors)
{
    for (const auto& m : { test::tinyLlama(), test::tinyQwen2(), test::tinyMixtral(),
             test::tinyQwen3Moe(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const auto spec = model::readConfig(m.config, "config.json");
        ASSERT_TRUE(spec.ok());
        const auto graph = model::buildLayerGraph(*spec);
        for (const auto& req : exec::detail::requiredWeights(*spec)) {
            const auto* t = graph.findTensor(req.name);
            if (req.optional && t == nullptr) {
                continue;
            }
            ASSERT_NE(t, nullptr) << req.name;
            EXPECT_EQ(t->shape, req.shape) << req.name;
        }
    }
}
