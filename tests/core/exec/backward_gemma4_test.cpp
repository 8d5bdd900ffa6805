// Gemma-4's text model's backward (exec/backward_gemma4.cpp) against PyTorch autograd of its twin
// (plugins/torch/day0_torch_gemma4.py, float64), each feature shown to matter, and what the
// backward lacks refused by name.
#include "backward_twin.h"
#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "tiny_models.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace day0 {
namespace {

using numerics::Tensor;
using test::againstTwin;
using test::maxRel;
using test::refusals;

/// A Gemma-4 text model (Gemma4ForCausalLM, model_type gemma4_text): the text_config of the
/// bundled test config `config` (under tests/data/model/configs) on its own, without its
/// quantisation, vision and audio towers, shrunk to six layers: five sliding of window 4
/// (default RoPE over head_dim), one full (proportional RoPE over global_head_dim, k = v), the
/// shrunk logits bent by the soft-cap. Its fp64 engine's gradients on `ids`, the weights it
/// read, and the checkpoint in `dir / "ckpt"`.
using Gemma4Gradients = test::ShrunkGradients;

Gemma4Gradients gemma4Gradients(const std::string& config, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids)
{
    Gemma4Gradients g;
    const auto text = dir.string() + "_config";
    std::filesystem::create_directories(text);
    {
        std::ifstream in(std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / config);
        const auto full = nlohmann::ordered_json::parse(in);
        auto json = full.at("text_config");
        json["architectures"] = { "Gemma4ForCausalLM" };
        json["tie_word_embeddings"] = full.value("tie_word_embeddings", true);
        std::ofstream(std::filesystem::path(text) / "config.json") << json.dump(2);
    }
    checkpoint::ShrinkOptions options;
    options.layers = 6;
    return test::shrunkGradients(
        (std::filesystem::path(text) / "config.json").string(), dir, ids, options);
}

/// The dense Gemma-4 31B's text model (no MoE block; attention_k_eq_v with 4 global KV heads).
Gemma4Gradients denseGemma4Gradients(
    const std::filesystem::path& dir, const std::vector<std::int64_t>& ids)
{
    return gemma4Gradients("frontier-sizes/nvidia--Gemma-4-31B-IT-NVFP4.json", dir, ids);
}

TEST(Backward, ShrunkDenseGemma4MatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // 10 tokens through a window of 4: the sliding layers' mask cuts 6 of the 10 rows.
    const std::vector<std::int64_t> ids { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_gemma4_dense";
    const auto g = denseGemma4Gradients(dir, ids);
    ASSERT_EQ(g.spec.family, model::Family::Gemma4);
    ASSERT_FALSE(g.spec.moe);
    ASSERT_EQ(g.spec.layers.size(), 6u);
    ASSERT_EQ(g.spec.layers[0].slidingWindow, 4);
    ASSERT_EQ(g.spec.layers[5].mixer, model::MixerKind::Attention);
    ASSERT_TRUE(g.spec.layers[5].sharedKv);
    ASSERT_NE(g.spec.headDimOf(g.spec.layers[5]), g.spec.headDimOf(g.spec.layers[0]));
    ASSERT_GT(g.spec.finalLogitSoftcap, 0.0);
    ASSERT_TRUE(g.spec.tieEmbeddings);
    const auto a = againstTwin(dir, g.spec, g.ours, ids);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    // Per sliding layer: 4 sandwich norms, q/k/v/o, q/k norms, gate/up/down (13); the full layer
    // has no v_proj (12); the embedding (tied to the head) and the final norm. layer_scalar is a
    // buffer: no gradient.
    EXPECT_EQ(a.paramsOurs, std::size_t(5 * 13 + 12 + 2));
    // Every anchor of ours is the twin's. Per layer: the layer, its four sandwich norms,
    // self_attn and mlp (7); and the embedding, the final norm and the head.
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    EXPECT_EQ(a.activationsCompared, std::size_t(6 * 7 + 3));
    // Each Gemma-4 feature, switched off in the twin, moves its gradients away from ours: the
    // comparison above would catch a backward without it.
    for (const std::string feature :
        { "embed_scale", "qk_norm", "v_norm", "window", "proportional_rope", "k_eq_v",
            "sandwich_norms", "layer_scalar", "softcap", "attention_scaling" }) {
        const auto off = againstTwin(
            dir, g.spec, g.ours, ids, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-18s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(Backward, ShrunkGemma4MoeMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // Gemma-4 26B-A4B's text model: every layer's MoE block beside its dense MLP, the router
    // (weightless norm of the residual, learned scale, softmax, top-k, renormalised, times
    // per_expert_scale) and the fused experts fed pre_feedforward_layernorm_2 of the residual.
    const std::vector<std::int64_t> ids { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_gemma4_moe";
    const auto g = gemma4Gradients("frontier/google--gemma-4-26B-A4B.json", dir, ids);
    ASSERT_EQ(g.spec.family, model::Family::Gemma4);
    ASSERT_TRUE(g.spec.moe && g.spec.moe->denseBeside);
    ASSERT_TRUE(g.spec.layers[0].moe() && g.spec.layers[5].moe());
    ASSERT_TRUE(g.spec.layers[5].sharedKv);
    const auto a = againstTwin(dir, g.spec, g.ours, ids);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    // The dense layers' 13 (12 on the full layer) and per layer the router's proj, scale and
    // per_expert_scale, the fused gate_up_proj and down_proj and the three extra norms (8).
    EXPECT_EQ(a.paramsOurs, std::size_t(5 * 21 + 20 + 2));
    // Per layer the dense model's 7 anchors, the router's logits and the experts' output.
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    EXPECT_EQ(a.activationsCompared, std::size_t(6 * 9 + 3));
    for (const std::string feature :
        { "moe", "moe_residual_input", "router_scale", "per_expert_scale" }) {
        const auto off = againstTwin(
            dir, g.spec, g.ours, ids, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-18s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(Backward, ShrunkGemma4Fp32AgreesWithFp64)
{
    const std::vector<std::int64_t> ids { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    for (const char* config : { "frontier-sizes/nvidia--Gemma-4-31B-IT-NVFP4.json",
             "frontier/google--gemma-4-26B-A4B.json" }) {
        SCOPED_TRACE(config);
        const auto dir = std::filesystem::temp_directory_path() / "day0_backward_gemma4_fp32";
        const auto g = gemma4Gradients(config, dir, ids);
        ASSERT_FALSE(g.ours.parameters.empty());
        exec::GradientOptions o;
        o.fp64 = false;
        const auto narrow
            = exec::lossAndGradients(g.spec, g.weights, ids, exec::nextTokenTargets(ids), o, {});
        ASSERT_TRUE(narrow.ok()) << narrow.error().message;
        EXPECT_EQ(narrow->parameters.begin()->second.dtype(), DType::F32);
        ASSERT_EQ(narrow->parameters.size(), g.ours.parameters.size());
        double worst = 0.0;
        std::string worstName;
        for (const auto& [name, grad] : g.ours.parameters) {
            const double rel = maxRel(grad, narrow->parameters.at(name));
            if (rel > worst) {
                worst = rel;
                worstName = name;
            }
        }
        std::printf("%s fp32 against fp64: loss %.9f vs %.9f, parameters max rel %.2e (%s)\n",
            config, narrow->loss, g.ours.loss, worst, worstName.c_str());
        EXPECT_LE(worst, 1e-4) << worstName;
        EXPECT_NEAR(narrow->loss, g.ours.loss, 1e-5 * g.ours.loss);
    }
}

TEST(Backward, Gemma4RefusesWhatItLacksByName)
{
    // The E2B's per-layer input embeddings and KV-shared layers are not in the backward, nor is
    // any Gemma-4's vision tower (a text-only Gemma4ForCausalLM is covered), each named.
    const auto e2b = model::readConfigFile(
        std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "gemma-4-E2B-it.json");
    ASSERT_TRUE(e2b.ok()) << e2b.error().message;
    EXPECT_EQ(refusals(*e2b),
        "the vision tower; Gemma-4's per-layer input embeddings; Gemma-4's KV-shared layers");
    auto text = *e2b;
    text.vision.reset();
    text.perLayerInputSize = 0;
    text.kvSharedLayers = 0;
    EXPECT_EQ(refusals(text), "");
    text.bidirectionalText = true;
    EXPECT_EQ(refusals(text), "Gemma-4's bidirectional text attention");
    text.bidirectionalText = false;
    const auto moe = model::loadModel("gemma-4-26b-a4b");
    ASSERT_TRUE(moe.ok()) << moe.error().message;
    EXPECT_EQ(refusals(*moe), "the vision tower");
    // Emulated bf16 is covered (backward_bf16_frontier_test); tensor parallelism of Gemma-4
    // stays refused, by name.
    EXPECT_TRUE(exec::emulatedBackwardUnsupported(text).empty());
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(text, {}, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of Gemma-4"), std::string::npos)
        << r.error().message;
    // Its operators stay refused in the other families.
    auto llama = test::tinyLlama().spec;
    llama.finalLogitSoftcap = 30.0;
    EXPECT_EQ(refusals(llama), "logit soft-capping");
    llama.finalLogitSoftcap = 0.0;
    llama.hiddenAct = "gelu_pytorch_tanh";
    EXPECT_EQ(refusals(llama), "MLP activations other than silu (SwiGLU)");
    llama.hiddenAct = "silu";
    llama.layers[1].sharedKv = true;
    EXPECT_EQ(refusals(llama), "per-layer head, expert or routing overrides");
}

} // namespace
} // namespace day0
