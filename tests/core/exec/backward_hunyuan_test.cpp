// The backward pass of Hunyuan-A13B (the standard layer with its q/k norms after RoPE, the
// NTK-alpha RoPE base, the softmax router renormalised over its top-k, the shared mixed MLP,
// tied embeddings) against PyTorch autograd of its float64 twin
// (plugins/torch/day0_torch_hunyuan.py), every parameter and every anchor; each of its features
// switched off in the twin moves the gradients away from ours; fp32 against fp64; the emulated
// bf16 backward refused by name.
#include "backward_twin.h"
#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

namespace day0 {
namespace {

using test::againstTwin;
using test::maxRel;

const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 250, 128 };

TEST(BackwardHunyuan, ShrunkHunyuanMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_hunyuan";
    const auto s = test::shrunkGradients("hunyuan-a13b", dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::Hunyuan);
    ASSERT_TRUE(s.spec.qkNorm);
    ASSERT_TRUE(s.spec.tieEmbeddings);
    ASSERT_GT(s.spec.ropeScaling.alpha, 0.0);
    ASSERT_TRUE(s.spec.moe && s.spec.moe->sharedIntermediate > 0 && s.spec.moe->normTopkProb);
    const auto a = againstTwin(dir, s.spec, s.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * s.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    EXPECT_EQ(a.activationsCompared, s.ours.activations.size());
    for (const char* feature : { "ntk_alpha", "norm_after_rope" }) {
        const auto off = againstTwin(
            dir, s.spec, s.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-16s parameters max rel %.2e (%s)\n", feature, off.params,
            off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
    // fp32 against fp64.
    const auto targets = exec::nextTokenTargets(kIds);
    exec::GradientOptions o;
    o.fp64 = false;
    const auto narrow = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_TRUE(narrow.ok()) << narrow.error().message;
    double fp32 = 0.0;
    for (const auto& [name, g] : s.ours.parameters) {
        fp32 = std::max(fp32, maxRel(g, narrow->parameters.at(name)));
    }
    std::printf("hunyuan fp32 against fp64: parameters max rel %.2e, loss %.9f vs %.9f\n", fp32,
        narrow->loss, s.ours.loss);
    EXPECT_LE(fp32, 1e-4);
    // The emulated bf16 backward: refused by name (tensor parallelism runs: train --plan tp=2,
    // tests/cli/grad_hunyuan_cli_test.cpp).
    o.emulated = exec::PrecisionMode::BF16;
    const auto emulated = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_FALSE(emulated.ok());
    EXPECT_EQ(emulated.error().code, ErrorCode::Unsupported);
    EXPECT_NE(emulated.error().message.find("Hunyuan"), std::string::npos);
}

TEST(BackwardHunyuan, ExpertsNoTokenReachesGetZeroGradients)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // Two tokens, top-8 of 32 experts: at least 16 experts of each layer idle.
    const std::vector<std::int64_t> ids { 11, 80 };
    checkpoint::ShrinkOptions options;
    options.experts = 32;
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_hunyuan_idle";
    const auto s = test::shrunkGradients("hunyuan-a13b", dir, ids, options);
    ASSERT_EQ(s.spec.family, model::Family::Hunyuan);
    const auto a = againstTwin(dir, s.spec, s.ours, ids);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    // 3 weights × ≥ 16 idle experts × every layer.
    EXPECT_GE(a.zeroExperts, std::size_t(48 * s.spec.numLayers));
}

TEST(BackwardHunyuan, TheBundledModelIsCovered)
{
    const auto spec = model::loadModel("hunyuan-a13b");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(test::refusals(*spec), "");
}

} // namespace
} // namespace day0
