// The backward of Kimi-Linear (exec/backward_kimi.cpp: Kimi Delta Attention with its short convs,
// L2-normed q/k, per-channel decay, β and gated o_norm; backward_mla.cpp: MLA without RoPE;
// backward_ffn.cpp: the dense first layer, the sigmoid router with its selection bias, the
// shared experts) against PyTorch autograd of its twin (plugins/torch/day0_torch_kimi_linear.py,
// float64), each feature shown to matter, fp32 against fp64, and what the backward lacks for it
// (emulated bf16, tensor parallelism, Kimi-K3's additions) refused by name.
#include "backward_twin.h"
#include "base/resources.h"
#include "exec/backward.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

namespace day0 {
namespace {

using test::againstTwin;
using test::maxRel;

/// 11 tokens: longer than the short convs' kernel (4), so every tap sees a token.
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };

std::string kimiLinearConfig()
{
    return (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
        / "kimi-linear-48b-a3b.json")
        .string();
}

/// KDA and MLA layers both, MLA without RoPE, a dense first layer then MoE, convs shorter than
/// the prompt.
void expectKimiLinear(const model::ModelSpec& spec)
{
    ASSERT_EQ(spec.family, model::Family::KimiLinear);
    ASSERT_TRUE(spec.linearAttention.has_value());
    bool kda = false;
    bool mla = false;
    for (const auto& layer : spec.layers) {
        kda = kda || layer.mixer == model::MixerKind::KimiDelta;
        mla = mla || layer.mixer == model::MixerKind::Attention;
    }
    ASSERT_TRUE(kda && mla) << "the shrunk model keeps both kinds of layer";
    ASSERT_EQ(spec.attention, model::AttentionKind::MLA);
    ASSERT_TRUE(spec.mla.noRope);
    ASSERT_TRUE(spec.moe.has_value());
    ASSERT_GT(spec.moe->sharedIntermediate, 0);
    ASSERT_FALSE(spec.layers.front().moe());
    ASSERT_TRUE(spec.layers.back().moe());
    ASSERT_LT(spec.linearAttention->convKernel, std::int64_t(kIds.size()));
}

TEST(BackwardKimiLinear, ShrunkKimiLinearMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_kimi_linear";
    const auto g = test::shrunkGradients(kimiLinearConfig(), dir, kIds);
    expectKimiLinear(g.spec);
    ASSERT_FALSE(g.ours.parameters.empty());
    // Routed experts that no token chose: present, with a zero gradient.
    std::size_t idle = 0;
    for (const auto& [name, grad] : g.ours.parameters) {
        idle += test::zeroExpertsIn(name, grad);
    }
    std::printf("idle expert weights: %zu\n", idle);
    EXPECT_GT(idle, 0u);
    // The twin's prefill runs the chunked (WY) form of the rule, ours the recurrent one: the
    // same rule, the logits within 1e-12.
    const auto a = againstTwin(dir, g.spec, g.ours, kIds);
    std::printf("against the twin: %zu parameters max rel %.2e (%s), %zu anchors max rel %.2e "
                "(%s), loss diff %.2e\n",
        a.paramsCompared, a.params, a.worstParam.c_str(), a.activationsCompared, a.activations,
        a.worstActivation.c_str(), a.lossDiff);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    // Every parameter of ours is the twin's, and every anchor (per layer: the layer, its two
    // norms, self_attn, the mlp or block_sparse_moe, its router and shared experts).
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_EQ(a.paramsOurs, g.ours.parameters.size());
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    // Each feature switched off in the twin moves its gradients away from ours.
    for (const char* feature :
        { "conv", "l2norm", "decay", "channel_decay", "beta", "output_gate", "nope" }) {
        const auto off = againstTwin(
            dir, g.spec, g.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-14s parameters max rel %.2e (%s)\n", feature, off.params,
            off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
    // The MLA's latent norms at rms_norm_eps instead of KimiRMSNorm's default 1e-6: a small
    // change, still beyond the bound.
    const auto eps = againstTwin(dir, g.spec, g.ours, kIds, 1e-12, "DAY0_TWIN_WITHOUT=latent_eps");
    std::printf("  twin without latent_eps     parameters max rel %.2e (%s)\n", eps.params,
        eps.worstParam.c_str());
    EXPECT_GT(eps.params, 1e-6);
    std::filesystem::remove_all(dir);
}

TEST(BackwardKimiLinear, KimiK3GatesMatchTorchAutogradAndEachMatters)
{
    // Kimi-K3's MLA output gate, safe KDA gate (its published lower bound −5) and full-rank KDA
    // output gate, each set in Kimi-Linear's config, against the twin with it and without it.
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    struct Addition {
        const char* name;
        std::function<void(nlohmann::ordered_json&)> patch;
        const char* feature; ///< the twin's switch that drops it
    };
    const Addition additions[] = {
        { "mla_use_output_gate", [](auto& c) { c["mla_use_output_gate"] = true; }, "mla_gate" },
        { "gate_lower_bound", [](auto& c) { c["linear_attn_config"]["gate_lower_bound"] = -5.0; },
            "safe_gate" },
        { "use_full_rank_gate",
            [](auto& c) { c["linear_attn_config"]["use_full_rank_gate"] = true; }, "output_gate" },
    };
    for (const auto& addition : additions) {
        SCOPED_TRACE(addition.name);
        const auto dir = std::filesystem::temp_directory_path()
            / (std::string("day0_backward_kimi_") + addition.name);
        // Beside the folder, which the shrink empties.
        const auto configPath = std::filesystem::temp_directory_path()
            / (std::string("day0_backward_kimi_") + addition.name + ".json");
        {
            std::ifstream in(kimiLinearConfig());
            auto config = nlohmann::ordered_json::parse(in);
            addition.patch(config);
            std::ofstream(configPath) << config.dump(2);
        }
        const auto g = test::shrunkGradients(configPath.string(), dir, kIds);
        ASSERT_FALSE(g.ours.parameters.empty());
        const auto a = againstTwin(dir, g.spec, g.ours, kIds);
        std::printf("kimi-linear + %s: %zu parameters max rel %.2e (%s), %zu anchors %.2e\n",
            addition.name, a.paramsCompared, a.params, a.worstParam.c_str(), a.activationsCompared,
            a.activations);
        EXPECT_LE(a.params, 1e-6) << a.worstParam;
        EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
        EXPECT_EQ(a.paramsCompared, g.ours.parameters.size());
        EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
        const auto off = againstTwin(dir, g.spec, g.ours, kIds, 1e-12,
            fmt::format("DAY0_TWIN_WITHOUT={}", addition.feature));
        std::printf("  twin without %-12s parameters max rel %.2e (%s)\n", addition.feature,
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3);
        std::filesystem::remove_all(dir);
        std::filesystem::remove(configPath);
    }
}

TEST(BackwardKimiLinear, Fp32AgreesWithFp64)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_kimi_linear_fp32";
    const auto g = test::shrunkGradients(kimiLinearConfig(), dir, kIds);
    ASSERT_FALSE(g.ours.parameters.empty());
    exec::GradientOptions o;
    o.fp64 = false;
    o.engineNorms = true;
    const auto narrow
        = exec::lossAndGradients(g.spec, g.weights, kIds, exec::nextTokenTargets(kIds), o, {});
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
    std::printf("fp32 against fp64: loss %.9f vs %.9f, parameters max rel %.2e (%s)\n",
        narrow->loss, g.ours.loss, worst, worstName.c_str());
    EXPECT_LE(worst, 1e-4) << worstName;
    EXPECT_NEAR(narrow->loss, g.ours.loss, 1e-5 * g.ours.loss);
    std::filesystem::remove_all(dir);
}

TEST(BackwardKimiLinear, RefusesWhatItLacksByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto loaded = model::loadModel(kimiLinearConfig());
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    const model::ModelSpec& spec = *loaded;
    EXPECT_EQ(test::refusals(spec), "");
    // Emulated bf16 and tensor parallelism are refused, naming the family.
    const auto emulated = exec::emulatedBackwardUnsupported(spec);
    ASSERT_EQ(emulated.size(), 1u);
    EXPECT_NE(emulated[0].find("Kimi Delta Attention"), std::string::npos) << emulated[0];
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(spec, {}, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of Kimi-Linear"), std::string::npos)
        << r.error().message;
    exec::GradientOptions bf16;
    bf16.fp64 = false;
    bf16.emulated = exec::PrecisionMode::BF16;
    const auto b = exec::lossAndGradients(spec, {}, ids, exec::nextTokenTargets(ids), bf16, {});
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().code, ErrorCode::Unsupported);
    EXPECT_NE(b.error().message.find("Kimi Delta Attention"), std::string::npos)
        << b.error().message;

    // Kimi-K3's additions, one at a time on Kimi-Linear, each by name.
    const auto with = [&](auto change) {
        model::ModelSpec s = spec;
        change(s);
        return test::refusals(s);
    };
    // (Its safe and full-rank KDA gates and the MLA output gate are covered, below.)
    EXPECT_EQ(with([](auto& s) { s.linearAttention->gateLowerBound = -5.0; }), "");
    EXPECT_EQ(with([](auto& s) { s.linearAttention->fullRankGate = true; }), "");
    EXPECT_EQ(with([](auto& s) { s.mla.outputGate = true; }), "");
    EXPECT_EQ(with([](auto& s) { s.linearAttention->paddedALog = true; }),
        "Kimi-K3's A_log padded to head_dim");
    EXPECT_EQ(with([](auto& s) { s.attnResBlockSize = 6; }), "Kimi-K3's Block Attention Residuals");
    EXPECT_EQ(with([](auto& s) { s.moe->latentSize = 64; }), "latent MoE");
    EXPECT_EQ(
        with([](auto& s) { s.hiddenAct = "situ"; }), "MLP activations other than silu (SwiGLU)");
    // Kimi-K3 whole: each of its additions named.
    const auto k3 = model::loadModel("kimi-k3");
    ASSERT_TRUE(k3.ok()) << k3.error().message;
    const std::string lines = test::refusals(*k3);
    for (const char* name : { "latent MoE", "MLP activations other than silu",
             "Kimi-K3's Block Attention Residuals", "Kimi-K3's A_log padded to head_dim" }) {
        EXPECT_NE(lines.find(name), std::string::npos) << name << " in: " << lines;
    }
    // KDA and MLA without RoPE stay refused in the other families.
    const auto v3 = model::loadModel("deepseek-v3");
    ASSERT_TRUE(v3.ok()) << v3.error().message;
    auto nope = *v3;
    nope.mla.noRope = true;
    EXPECT_EQ(test::refusals(nope), "MLA without RoPE");
}

} // namespace
} // namespace day0
