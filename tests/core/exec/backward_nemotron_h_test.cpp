// Nemotron-H's backward (exec/backward_nemotron_h.cpp, backward_mamba2.cpp) against PyTorch
// autograd of its twin (plugins/torch/day0_torch_nemotron_h.py, float64): a shrunk hybrid of
// Mamba-2, attention and relu2 MLP layers, Nemotron 3 Nano's MoE and Super's latent MoE, each
// feature shown to matter, fp32 against fp64, and what the backward lacks refused by name.
#include "backward_twin.h"
#include "base/python_json.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

namespace day0 {
namespace {

namespace fs = std::filesystem;
using numerics::Tensor;
using test::againstTwin;
using test::maxRel;

// Longer than the conv kernel (4) and than two SSD chunks of the shrunk model (4 + 4 + 2).
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };

/// A shrunk Nemotron-H checkpoint in `dir / "ckpt"`, its fp64 engine's gradients on kIds and the
/// weights it read.
using NemotronHGradients = test::ShrunkGradients;

/// The bundled config `bundled` without its quantisation, with `edit` applied, shrunk by
/// `options` into `dir`, and its fp64 gradients.
NemotronHGradients nemotronHGradients(const std::string& bundled, const fs::path& dir,
    const checkpoint::ShrinkOptions& options,
    const std::function<void(nlohmann::ordered_json&)>& edit)
{
    return test::shrunkEditedGradients(bundled, dir, kIds, options, edit);
}

/// A config edit: the layers of `pattern` (hybrid_override_pattern).
std::function<void(nlohmann::ordered_json&)> withPattern(std::string pattern)
{
    return [pattern](nlohmann::ordered_json& config) {
        config["hybrid_override_pattern"] = pattern;
        config["num_hidden_layers"] = pattern.size();
    };
}

/// Nemotron-H's hybrid (Mamba-2, attention, relu2 MLP; no MoE layer) on Nano's config, with the
/// projection and MLP biases (use_bias, mlp_bias) that the released models leave off.
NemotronHGradients hybridGradients(const fs::path& dir)
{
    checkpoint::ShrinkOptions options;
    options.layers = 6;
    return nemotronHGradients("nemotron-3-nano-30b", dir, options, [](auto& config) {
        config["hybrid_override_pattern"] = "M*M-M-";
        config["num_hidden_layers"] = 6;
        config["use_bias"] = true;
        config["mamba_proj_bias"] = true;
        config["mlp_bias"] = true;
    });
}

/// Each feature of `features`, switched off in the twin, moves its gradients away from ours:
/// the comparison would catch a backward without it.
void expectEachFeatureMatters(
    const fs::path& dir, const NemotronHGradients& g, const std::vector<std::string>& features)
{
    for (const auto& feature : features) {
        const auto off = againstTwin(
            dir, g.spec, g.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-16s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(BackwardNemotronH, ShrunkHybridMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = fs::temp_directory_path() / "day0_backward_nemotron_h";
    const auto g = hybridGradients(dir);
    ASSERT_EQ(g.spec.family, model::Family::NemotronH);
    ASSERT_EQ(g.spec.layers.size(), 6u);
    ASSERT_EQ(g.spec.layers[0].mixer, model::MixerKind::Mamba2);
    ASSERT_EQ(g.spec.layers[1].mixer, model::MixerKind::Attention);
    ASSERT_EQ(g.spec.layers[3].ffn, model::FfnKind::Dense);
    ASSERT_TRUE(g.spec.mamba && g.spec.mamba->projBias && g.spec.mamba->convBias);
    ASSERT_TRUE(g.spec.mlpBias);
    ASSERT_GT(g.spec.mamba->numGroups, 1);
    ASSERT_GT(g.spec.mamba->numHeads, g.spec.mamba->numGroups);
    ASSERT_LT(g.spec.mamba->chunkSize, std::int64_t(kIds.size()));
    ASSERT_LT(g.spec.mamba->convKernel, std::int64_t(kIds.size()));
    const auto a = againstTwin(dir, g.spec, g.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    // Per Mamba-2 layer: its norm, in_proj and out_proj with biases, conv1d's weight and bias,
    // dt_bias, A_log, D and the gated norm (11); attention: norm, q/k/v/o (5); MLP: norm, up
    // and down with biases (5); the embedding, norm_f and lm_head.
    EXPECT_EQ(a.paramsOurs, std::size_t(3 * 11 + 5 + 2 * 5 + 3));
    // Every anchor of ours is the twin's: per layer the block, its norm and its mixer, the
    // Mamba-2 layers' gated norm; the embedding, norm_f and the head.
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    EXPECT_EQ(a.activationsCompared, std::size_t(6 * 3 + 3 + 3));
    expectEachFeatureMatters(dir, g,
        { "conv", "conv_bias", "gate", "gate_order", "softplus", "dt_bias", "d_skip", "state",
            "groups", "norm_groups", "relu2" });
}

TEST(BackwardNemotronH, ShrunkNano3MoeMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // Nemotron 3 Nano: the sigmoid router choosing by the scores plus e_score_correction_bias,
    // top-6 of 64 experts (10 tokens leave some without a token), weights renormalised and
    // times routed_scaling_factor, relu2 experts and the shared expert.
    const auto dir = fs::temp_directory_path() / "day0_backward_nemotron_h_nano";
    checkpoint::ShrinkOptions options;
    options.layers = 6;
    options.experts = 64;
    const auto g = nemotronHGradients("nemotron-3-nano-30b", dir, options, withPattern("M*M-EM"));
    ASSERT_TRUE(g.spec.moe);
    ASSERT_TRUE(g.spec.layers[4].moe());
    ASSERT_EQ(g.spec.moe->scoring, model::RouterScoring::Sigmoid);
    ASSERT_GT(g.spec.moe->routedScalingFactor, 1.0);
    ASSERT_EQ(g.spec.moe->latentSize, 0);
    const auto a = againstTwin(dir, g.spec, g.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.zeroExperts, 0u); // present and zero, as the twin's
    // Per layer the block, its norm, its mixer; the gated norms of the three Mamba-2 layers; the
    // MoE's router logits and shared expert; the embedding, norm_f and the head.
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    EXPECT_EQ(a.activationsCompared, std::size_t(6 * 3 + 3 + 2 + 3));
    expectEachFeatureMatters(dir, g, { "e_score_bias", "routed_scaling", "shared_experts" });
}

TEST(BackwardNemotronH, ShrunkSuperLatentMoeMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // Nemotron 3 Super: its experts between fc1_latent_proj and fc2_latent_proj (its ModelOpt
    // FP8 left out: its config alone, shrunk; its MTP block is not run, so not trained).
    const auto dir = fs::temp_directory_path() / "day0_backward_nemotron_h_super";
    const auto g = nemotronHGradients("nemotron-3-super-120b-fp8", dir, {}, [](auto&) {});
    ASSERT_TRUE(g.spec.moe);
    ASSERT_GT(g.spec.moe->latentSize, 0);
    const auto a = againstTwin(dir, g.spec, g.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.zeroExperts, 0u);
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    expectEachFeatureMatters(dir, g, { "latent" });
}

TEST(BackwardNemotronH, Fp32AgreesWithFp64)
{
    const auto hybrid = fs::temp_directory_path() / "day0_backward_nemotron_h_fp32";
    const auto nano = fs::temp_directory_path() / "day0_backward_nemotron_h_fp32_nano";
    checkpoint::ShrinkOptions options;
    options.layers = 6;
    for (const auto& g : { hybridGradients(hybrid),
             nemotronHGradients("nemotron-3-nano-30b", nano, options, withPattern("M*M-EM")) }) {
        ASSERT_FALSE(g.ours.parameters.empty());
        exec::GradientOptions o;
        o.fp64 = false;
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
        std::printf("%s fp32 against fp64: loss %.9f vs %.9f, parameters max rel %.2e (%s)\n",
            g.spec.moe && g.spec.layers[4].moe() ? "nano (MoE)" : "hybrid", narrow->loss,
            g.ours.loss, worst, worstName.c_str());
        EXPECT_LE(worst, 1e-4) << worstName;
        EXPECT_NEAR(narrow->loss, g.ours.loss, 1e-5 * g.ours.loss);
    }
}

TEST(BackwardNemotronH, RefusesWhatItLacksByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto nano = model::loadModel("nemotron-3-nano-30b");
    ASSERT_TRUE(nano.ok()) << nano.error().message;
    EXPECT_EQ(test::refusals(*nano), "");
    // Group-limited routing (which the engine refuses too) is named.
    auto grouped = *nano;
    grouped.moe->numGroups = 4;
    EXPECT_EQ(
        test::refusals(grouped), "Nemotron-H routers other than the ungrouped sigmoid router");
    // Emulated bf16 is covered (backward_bf16_frontier_test); tensor parallelism stays refused,
    // by name.
    EXPECT_TRUE(exec::emulatedBackwardUnsupported(*nano).empty());
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(*nano, {}, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of Nemotron-H"), std::string::npos)
        << r.error().message;
}

} // namespace
} // namespace day0
