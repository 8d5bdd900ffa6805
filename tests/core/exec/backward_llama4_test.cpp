// The backward pass of Llama-4's text model (exec/backward_llama4.cpp and the standard layer)
// against PyTorch autograd of its float64 twin (plugins/torch/day0_torch_models.py's llama4),
// every parameter and every anchor, on a shrunk checkpoint whose prompt is longer than its
// attention chunk (so the chunks cut) and whose NoPE layer sees a temperature above 1; each
// feature switched off in the twin moves its gradients away from ours; fp32 against fp64; the
// emulated bf16 backward and tensor parallelism refused by name.
#include "backward_twin.h"
#include "checkpoint/shrink.h"
#include "exec/attention.h"
#include "exec/backward.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace day0 {
namespace {

using test::againstTwin;
using test::maxRel;
using test::refusals;

/// 12 tokens: over two chunks of the config's attention_chunk_size (5) and past its floor_scale
/// (4), so that the RoPE layers' chunks cut and the NoPE layer's queries of positions ≥ 3 are
/// scaled.
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 250, 128 };

/// Llama-4 (Llama4ForConditionalGeneration, its text tower under language_model) with
/// attention_chunk_size 5, floor_scale 4, use_qk_norm, Scout's llama3 RoPE scaling and
/// Maverick's interleave_moe_layer_step 2: 4 layers, RoPE dense, RoPE MoE, RoPE dense, NoPE
/// MoE.
std::string chunkedConfig()
{
    return (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "gradients"
        / "llama-4-chunked.json")
        .string();
}

TEST(BackwardLlama4, ShrunkLlama4MatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_llama4";
    const auto s = test::shrunkGradients(chunkedConfig(), dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::Llama4);
    ASSERT_EQ(s.spec.numLayers, 4);
    ASSERT_TRUE(s.spec.qkL2Norm);
    ASSERT_GT(s.spec.attnTemperatureScale, 0.0);
    ASSERT_GT(exec::attentionTemperature(std::int64_t(kIds.size()) - 1, s.spec.attnFloorScale,
                  s.spec.attnTemperatureScale),
        1.0);
    ASSERT_TRUE(s.spec.moe && s.spec.moe->packedExperts && s.spec.moe->sharedIntermediate > 0);
    for (int l = 0; l < 3; ++l) {
        ASSERT_TRUE(s.spec.layers[std::size_t(l)].rope);
        ASSERT_EQ(s.spec.layers[std::size_t(l)].attentionChunk, 5);
    }
    ASSERT_FALSE(s.spec.layers[3].rope);
    ASSERT_EQ(s.spec.layers[3].attentionChunk, 0);
    ASSERT_FALSE(s.spec.layers[0].moe());
    ASSERT_TRUE(s.spec.layers[1].moe());
    ASSERT_TRUE(s.spec.layers[3].moe());
    ASSERT_NE(s.spec.ffnWidthOf(s.spec.layers[0]), s.spec.moe->expertIntermediate);

    const auto a = againstTwin(dir, s.spec, s.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * s.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    EXPECT_EQ(a.activationsCompared, s.ours.activations.size());
    // The packed experts under the checkpoint's fused names, none per expert.
    const auto named = exec::checkpointGradients(s.spec, s.ours.parameters);
    EXPECT_TRUE(named.contains("model.layers.1.feed_forward.experts.gate_up_proj"));
    EXPECT_TRUE(named.contains("model.layers.3.feed_forward.experts.down_proj"));
    EXPECT_FALSE(named.contains("model.layers.1.feed_forward.experts.0.gate_proj.weight"));
    // Each feature, switched off in the twin, moves some gradient by more than 1e-3.
    for (const char* feature : { "chunk", "qk_norm", "temperature", "input_scale" }) {
        const auto off = againstTwin(
            dir, s.spec, s.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-12s parameters max rel %.2e (%s)\n", feature, off.params,
            off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(BackwardLlama4, ExpertsNoTokenReachesGetZeroGradients)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // Two tokens, top-1 of 8 experts: at least six experts of each MoE layer idle.
    const std::vector<std::int64_t> ids { 11, 80 };
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_llama4_idle";
    const auto s = test::shrunkGradients(chunkedConfig(), dir, ids);
    ASSERT_EQ(s.spec.family, model::Family::Llama4);
    const auto a = againstTwin(dir, s.spec, s.ours, ids);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    // Per MoE layer, gate_up_proj's and down_proj's idle slices: 2 tensors × ≥ 6 experts × 2.
    EXPECT_GE(a.zeroExperts, std::size_t(24));
}

TEST(BackwardLlama4, Fp32AgreesWithFp64AndTheRestIsRefusedByName)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_llama4_fp32";
    const auto s = test::shrunkGradients(chunkedConfig(), dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::Llama4);
    const auto targets = exec::nextTokenTargets(kIds);
    exec::GradientOptions o;
    o.fp64 = false;
    const auto narrow = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_TRUE(narrow.ok()) << narrow.error().message;
    double fp32 = 0.0;
    std::string worst;
    for (const auto& [name, g] : s.ours.parameters) {
        const double rel = maxRel(g, narrow->parameters.at(name));
        if (rel > fp32) {
            fp32 = rel;
            worst = name;
        }
    }
    std::printf("llama4 fp32 against fp64: %zu parameters max rel %.2e (%s), loss %.9f vs %.9f\n",
        s.ours.parameters.size(), fp32, worst.c_str(), narrow->loss, s.ours.loss);
    EXPECT_LE(fp32, 1e-4);
    EXPECT_NEAR(narrow->loss, s.ours.loss, 1e-5 * s.ours.loss);
    // The emulated bf16 backward does not model Llama-4's rounding points: refused by name.
    o.emulated = exec::PrecisionMode::BF16;
    const auto emulated = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_FALSE(emulated.ok());
    EXPECT_EQ(emulated.error().code, ErrorCode::Unsupported);
    EXPECT_NE(emulated.error().message.find("Llama-4"), std::string::npos)
        << emulated.error().message;
    // Tensor parallelism, likewise.
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(s.spec, s.weights, kIds, targets, tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of Llama-4"), std::string::npos)
        << r.error().message;
}

TEST(BackwardLlama4, BundledLlama4ModelsAreCovered)
{
    for (const char* name : { "llama-4-scout", "llama-4-maverick" }) {
        const auto spec = model::loadModel(name);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        EXPECT_EQ(refusals(*spec), "") << name;
        EXPECT_FALSE(exec::emulatedBackwardUnsupported(*spec).empty()) << name;
    }
}

} // namespace
} // namespace day0
