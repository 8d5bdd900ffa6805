// Llama-4 text tower pieces against hand-computed values: the chunked attention mask, the NoPE
// attention temperature, the weightless QK norm, and the bundled configs the engine now accepts.
#include "base/resources.h"
#include "exec/attention.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace day0;

TEST(Llama4, FirstVisibleKeyOfChunks)
{
    exec::AttentionShape s;
    s.chunk = 4;
    // Causal visibility of the query at position p is [0, p + 1).
    EXPECT_EQ(exec::firstVisibleKey(s, 0, 1), 0);
    EXPECT_EQ(exec::firstVisibleKey(s, 3, 4), 0);
    EXPECT_EQ(exec::firstVisibleKey(s, 4, 5), 4);
    EXPECT_EQ(exec::firstVisibleKey(s, 7, 8), 4);
    EXPECT_EQ(exec::firstVisibleKey(s, 9, 10), 8);
    s.window = 3; // window [7, 10) is wider than the chunk start 8: the chunk wins
    EXPECT_EQ(exec::firstVisibleKey(s, 9, 10), 8);
    s.window = 1; // window [9, 10)
    EXPECT_EQ(exec::firstVisibleKey(s, 9, 10), 9);
    s.chunk = 0;
    s.window = 0;
    EXPECT_EQ(exec::firstVisibleKey(s, 9, 10), 0);
}

TEST(Llama4, ChunkedAttentionAveragesItsOwnChunk)
{
    // Zero queries and keys give equal scores, so each output is the mean of the values the
    // query sees; value j = j. Chunk 3 over 7 tokens: chunks {0,1,2}, {3,4,5}, {6}.
    const std::int64_t n = 7;
    std::vector<double> q(n, 0.0);
    std::vector<double> k(n, 0.0);
    std::vector<double> v(n);
    for (std::int64_t j = 0; j < n; ++j) {
        v[std::size_t(j)] = double(j);
    }
    std::vector<double> out(n, -1.0);
    exec::AttentionShape s;
    s.queries = n;
    s.keys = n;
    s.heads = 1;
    s.kvHeads = 1;
    s.headDim = 1;
    s.valueDim = 1;
    s.chunk = 3;
    exec::attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    const std::vector<double> expected { 0.0, 0.5, 1.0, 3.0, 3.5, 4.0, 6.0 };
    for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(out[std::size_t(i)], expected[std::size_t(i)], 1e-12) << "query " << i;
    }
    // Decoding the last token alone against the 7 cached keys gives the same answer.
    double last = -1.0;
    s.queries = 1;
    exec::attention<double>(q.data() + 6, k.data(), v.data(), &last, s);
    EXPECT_NEAR(last, 6.0, 1e-12);
    // Without chunks the last query sees all seven: mean 3.
    s.chunk = 0;
    exec::attention<double>(q.data() + 6, k.data(), v.data(), &last, s);
    EXPECT_NEAR(last, 3.0, 1e-12);
}

TEST(Llama4, AttentionTemperatureByPosition)
{
    // log(floor((p + 1) / 8192) + 1) · 0.1 + 1
    EXPECT_DOUBLE_EQ(exec::attentionTemperature(0, 8192.0, 0.1), 1.0);
    EXPECT_DOUBLE_EQ(exec::attentionTemperature(8190, 8192.0, 0.1), 1.0);
    EXPECT_NEAR(exec::attentionTemperature(8191, 8192.0, 0.1), 1.0693147180559945, 1e-15);
    EXPECT_NEAR(exec::attentionTemperature(16383, 8192.0, 0.1), 1.1098612288668110, 1e-15);
    EXPECT_NEAR(exec::attentionTemperature(5, 2.0, 0.5), 1.6931471805599453, 1e-15); // ⌊6/2⌋ = 3
}

TEST(Llama4, WeightlessQkNorm)
{
    std::vector<double> x { 3.0, 4.0, 0.0, 2.0 };
    exec::unitRmsNorm(x.data(), 2, 2, 0.0);
    // rms(3, 4) = sqrt(12.5); rms(0, 2) = sqrt(2)
    EXPECT_NEAR(x[0], 3.0 / std::sqrt(12.5), 1e-15);
    EXPECT_NEAR(x[1], 4.0 / std::sqrt(12.5), 1e-15);
    EXPECT_NEAR(x[2], 0.0, 1e-15);
    EXPECT_NEAR(x[3], 2.0 / std::sqrt(2.0), 1e-15);
}

TEST(Llama4, BundledConfigsAreSupported)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name : { "llama-4-scout", "llama-4-maverick" }) {
        const auto spec = model::loadModel(name);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty()) << name;
        EXPECT_DOUBLE_EQ(spec->attnTemperatureScale, 0.1) << name; // HF defaults
        EXPECT_DOUBLE_EQ(spec->attnFloorScale, 8192.0) << name;
    }
}

TEST(Llama4, EngineWeightsAreTheLayerGraphTensors)
{
    // The engine's canonical names, mapped as exec/layout_weights does (text prefix, lm_head,
    // per-expert slices of the fused 3-D tensors), against core/model's LayerGraph of the
    // published checkpoints.
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name : { "llama-4-scout", "llama-4-maverick" }) {
        SCOPED_TRACE(name);
        const auto spec = model::loadModel(name);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        const auto graph = model::buildLayerGraph(*spec);
        const auto& moe = *spec->moe;
        int experts = 0;
        for (const auto& req : exec::detail::requiredWeights(*spec)) {
            std::string mapped = req.name;
            if (mapped.starts_with("lm_head.")) {
                mapped = spec->layout.lmHead + mapped.substr(7);
            } else if (mapped.starts_with("model.")) {
                mapped = spec->layout.textPrefix + mapped.substr(5);
            }
            const auto at = mapped.find(".experts.");
            if (at != std::string::npos) {
                const bool down = mapped.ends_with(".down_proj.weight");
                const auto* fused = graph.findTensor(
                    mapped.substr(0, at) + (down ? ".experts.down_proj" : ".experts.gate_up_proj"));
                ASSERT_NE(fused, nullptr) << req.name;
                const std::vector<std::int64_t> expected = down
                    ? std::vector<std::int64_t> { moe.numExperts, moe.expertIntermediate,
                          spec->hiddenSize }
                    : std::vector<std::int64_t> { moe.numExperts, spec->hiddenSize,
                          2 * moe.expertIntermediate };
                EXPECT_EQ(fused->shape, expected) << req.name;
                ++experts;
                continue;
            }
            const auto* t = graph.findTensor(mapped);
            ASSERT_NE(t, nullptr) << mapped;
            EXPECT_EQ(t->shape, req.shape) << mapped;
        }
        EXPECT_EQ(experts, 3 * moe.numExperts * spec->numMoeLayers());
    }
}
