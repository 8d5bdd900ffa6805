// Kimi-K3's text model whole: its SiTU-GLU and attention-residual operators by hand, `day0
// shrink`'s K3 (more layers than an attention-residual block, KDA and MLA layers, the dense first
// layer and latent MoE layers), and the shrunk K3 on the engine against its PyTorch twin
// (plugins/torch/day0_torch_kimi_linear.py) with SiTU, the attention residuals and the reading of
// the padded A_log each shown to matter.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/kimi_k3_ops.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

std::string kimiK3Config()
{
    return (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "frontier"
        / "moonshotai--Kimi-K3.json")
        .string();
}

} // namespace

TEST(KimiK3, SituGluByHand)
{
    // β 4, β_lin 25: a large gate saturates at 4·tanh(g/4), a large up at 25·tanh(u/25).
    const double beta = 4.0;
    const double linear = 25.0;
    double g[3] = { 0.0, 2.0, 40.0 };
    const double u[3] = { 5.0, 3.0, 100.0 };
    exec::situGlu(g, u, 3, beta, linear);
    const auto sigma = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    EXPECT_DOUBLE_EQ(g[0], 0.0);
    EXPECT_NEAR(g[1], 4.0 * std::tanh(0.5) * sigma(2.0) * 25.0 * std::tanh(3.0 / 25.0), 1e-15);
    EXPECT_NEAR(g[2], 4.0 * std::tanh(10.0) * sigma(40.0) * 25.0 * std::tanh(4.0), 1e-12);
    EXPECT_LT(g[2], 4.0 * 25.0); // bounded where SwiGLU would give 40·100
    // Without activation_situ_linear_beta, up enters as it is.
    double h[1] = { 2.0 };
    const double up[1] = { 100.0 };
    exec::situGlu(h, up, 1, beta, 0.0);
    EXPECT_NEAR(h[0], 4.0 * std::tanh(0.5) * sigma(2.0) * 100.0, 1e-12);
}

TEST(KimiK3, AttentionResidualMixByHand)
{
    // Two values of one token, (1, 1) and (2, −2): RMS-normalised (1, 1) and (1, −1), scored
    // by (0, ln 3): ln 3 and −ln 3, so weights 9/10 and 1/10 of the values themselves (not of
    // their normalised forms).
    const double block[2] = { 1.0, 1.0 };
    double partial[2] = { 2.0, -2.0 };
    const double score[2] = { 0.0, std::log(3.0) };
    const double* values[2] = { block, partial };
    exec::attnResMix<double>(values, 1, 2, score, 0.0, partial); // out aliases a value
    EXPECT_NEAR(partial[0], 1.1, 1e-15);
    EXPECT_NEAR(partial[1], 0.7, 1e-15);
}

TEST(KimiK3, ShrinkKeepsBlocksKdaMlaTheDenseLayerAndLatentMoe)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    std::ifstream file(kimiK3Config());
    const auto config = nlohmann::ordered_json::parse(file);
    const auto small = checkpoint::shrinkConfig(config, {});
    ASSERT_TRUE(small.ok()) << small.error().message;
    const auto& t = (*small)["text_config"];
    // Four layers in blocks of two: the embedding, layers 0-1 and 2-3 are the blocks layer 3 mixes.
    EXPECT_EQ(t["num_hidden_layers"], 4);
    EXPECT_EQ(t["attn_res_block_size"], 2);
    EXPECT_EQ(t["linear_attn_config"]["kda_layers"], nlohmann::ordered_json({ 1, 2, 3 }));
    EXPECT_EQ(t["linear_attn_config"]["full_attn_layers"], nlohmann::ordered_json({ 4 }));
    EXPECT_EQ(t["first_k_dense_replace"], 1);
    EXPECT_TRUE(t.contains("routed_expert_hidden_size"));
    EXPECT_EQ(t["hidden_act"], "situ");
    checkpoint::ShrinkOptions six;
    six.layers = 6;
    const auto deeper = checkpoint::shrinkConfig(config, six);
    ASSERT_TRUE(deeper.ok()) << deeper.error().message;
    EXPECT_EQ((*deeper)["text_config"]["attn_res_block_size"], 3);
}

TEST(KimiK3, TheWholeTextModelAgreesWithPyTorchAndEachAdditionMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_kimi_k3";
    checkpoint::ShrinkOptions options;
    options.unquantized = true; // the twin reads BF16 experts, as from a BF16 release
    const auto spec = test::shrinkForTwin(kimiK3Config(), dir, options);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty())
        << fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
    EXPECT_TRUE(exec::visionTowerNotRun(*spec).has_value());
    ASSERT_EQ(spec->hiddenAct, "situ");
    ASSERT_TRUE(spec->linearAttention && spec->linearAttention->paddedALog);
    ASSERT_TRUE(spec->moe && spec->moe->latentSize > 0);
    // More layers than a block: the later layers mix over several sealed blocks.
    ASSERT_GT(spec->numLayers, spec->attnResBlockSize);
    ASSERT_GT(spec->attnResBlockSize, 0);
    bool kda = false;
    bool mla = false;
    for (const auto& layer : spec->layers) {
        kda = kda || layer.mixer == model::MixerKind::KimiDelta;
        mla = mla || layer.mixer == model::MixerKind::Attention;
    }
    ASSERT_TRUE(kda && mla) << "the shrunk K3 keeps both kinds of layer";
    ASSERT_FALSE(spec->layers.front().moe());
    ASSERT_TRUE(spec->layers.back().moe());
    // 11 prompt tokens in KDA chunks of 4 (4 + 4 + 3), then 3 decode steps.
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };
    const auto a = checkpointAgainstTorch(dir, "DAY0_TWIN_CHUNK=3", prompt, false, 4);
    std::printf("kimi-k3 logits max|d|/max %.2e, max rel %.2e, rel L2 %.2e; worst capture %s "
                "%.2e over %zu; router rows differing %zu of %zu\n",
        a.logitsMaxAbsOverMax, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(),
        a.worstCaptureRelL2, a.common, a.selectionRowsDiffering, a.selectionRows);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-5);
    EXPECT_LE(a.worstCaptureRelL2, 1e-4) << a.worstCapture;
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
    EXPECT_GT(a.selectionRows, 0u);
    // Every layer's anchors line up by HF module name: the layer, its two norms, its mixer, its
    // MLP or MoE.
    EXPECT_GE(a.common, std::size_t(spec->numLayers) * 5u);
    test::expectEachFeatureMatters(dir, { "situ", "attn_res", "a_log_channels" }, prompt, false, 4);
    std::filesystem::remove_all(dir);
}

TEST(KimiK3, ChunkedPrefillThenDecodeEqualsOnePrefillInFp64)
{
    // The attention residuals are per token: a prefill followed by decode steps gives the logits
    // of one prefill of the whole sequence.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_kimi_k3_steps";
    checkpoint::ShrinkOptions options;
    options.unquantized = true;
    const auto spec = test::shrinkForTwin(kimiK3Config(), dir, options);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, true, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    const std::vector<std::int64_t> all { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31, 2, 77, 14 };
    exec::RunOptions stepped;
    stepped.precision = *exec::parsePrecisionPlan("fp64");
    stepped.promptIds.assign(all.begin(), all.begin() + 10);
    stepped.forcedTokens.assign(all.begin() + 10, all.end());
    stepped.newTokens = 5;
    stepped.linearAttentionChunk = 4;
    exec::RunOptions whole;
    whole.precision = stepped.precision;
    whole.promptIds = all;
    whole.linearAttentionChunk = 5;
    const auto a = engine->run(stepped, p, {});
    const auto b = engine->run(whole, p, {});
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    const auto la = a->dump.tensor("lm_head")->toDoubles();
    const auto lb = b->dump.tensor("lm_head")->toDoubles();
    ASSERT_EQ(la.size(), lb.size());
    double largest = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < la.size(); ++i) {
        largest = std::max(largest, std::fabs(lb[i]));
        worst = std::max(worst, std::fabs(la[i] - lb[i]));
    }
    std::printf(
        "kimi-k3 fp64 prefill + decode against one prefill: max|d|/max %.2e\n", worst / largest);
    EXPECT_LE(worst / largest, 1e-9);
    std::filesystem::remove_all(dir);
}
