// The backward of the Qwen3-Next hybrid and of Qwen3.5's text model, dense and MoE
// (exec/backward_qwen3next.cpp: Gated DeltaNet layers, the gated full attention, zero-centred
// norms, the gated shared expert) against PyTorch autograd of their twin
// (plugins/torch/day0_torch_qwen3next.py, float64), each feature shown to matter, fp32 against
// fp64, and what the backward lacks for them refused by name.
#include "backward_twin.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/layout_weights.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

namespace day0 {
namespace {

using numerics::Tensor;
using test::againstTwin;
using test::maxRel;

/// 11 tokens: longer than the conv kernel (4), so every tap of the conv sees a token.
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };

/// A shrunk checkpoint of the bundled `model` in `dir / "ckpt"`, its fp64 engine's gradients on
/// kIds (activations too), the engine's weights (zero-centred norms as 1 + w) and the
/// checkpoint's own (as stored, w), as a trainer reads them.
struct QwenNextGradients {
    model::ModelSpec spec;
    std::map<std::string, Tensor> engineWeights;
    std::map<std::string, Tensor> storedWeights;
    exec::GradientResult ours;
};

QwenNextGradients qwenNextGradients(const std::string& model, const std::filesystem::path& dir)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    QwenNextGradients g;
    auto shrunk = test::shrunkGradients(model, dir, kIds);
    g.spec = std::move(shrunk.spec);
    g.engineWeights = std::move(shrunk.weights);
    g.ours = std::move(shrunk.ours);
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!weights.ok()) {
        return g;
    }
    const exec::detail::LayoutWeights mapped(**weights, g.spec);
    const exec::WeightSource& source = exec::detail::needsLayoutMapping(g.spec)
        ? static_cast<const exec::WeightSource&>(mapped)
        : **weights;
    for (const auto& req : exec::detail::requiredWeights(g.spec)) {
        if (!source.has(req.name)) {
            continue;
        }
        bool exact = false;
        auto t = exec::detail::loadForwardWeight(source, req, g.spec, DType::F64, exact);
        EXPECT_TRUE(t.ok()) << req.name;
        if (t.ok()) {
            g.storedWeights.emplace(req.name, std::move(*t));
        }
    }
    return g;
}

/// Both kinds of layer, partial RoPE, and the Gated DeltaNet's conv shorter than the prompt.
void expectHybrid(const model::ModelSpec& spec)
{
    ASSERT_TRUE(spec.linearAttention.has_value());
    bool delta = false;
    bool full = false;
    for (const auto& layer : spec.layers) {
        delta = delta || layer.mixer == model::MixerKind::GatedDeltaNet;
        full = full || layer.mixer == model::MixerKind::Attention;
    }
    ASSERT_TRUE(delta && full) << "the shrunk model keeps both kinds of layer";
    ASSERT_LT(spec.partialRotaryFactor, 1.0);
    ASSERT_TRUE(spec.attentionOutputGate);
    ASSERT_LT(spec.linearAttention->convKernel, std::int64_t(kIds.size()));
}

/// The twin's gradients agree with ours within 1e-6 for every parameter and anchor; each of
/// `features`, switched off in the twin, moves them away by more than 1e-3.
void expectAgreesWithTwin(const QwenNextGradients& g, const std::filesystem::path& dir,
    const std::vector<std::string>& features)
{
    // The twin's prefill runs the chunked (WY) form of the rule, ours the recurrent one: the
    // same rule, the logits within 1e-12.
    const auto a = againstTwin(dir, g.spec, g.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_EQ(a.paramsOurs, g.ours.parameters.size());
    // Every anchor of ours is the twin's (per layer: the layer, its two norms, its mixer,
    // linear_attn or self_attn, and its mlp; the router and the shared expert in a MoE layer).
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    for (const auto& feature : features) {
        const auto off = againstTwin(
            dir, g.spec, g.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-18s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(BackwardQwen3Next, ShrunkQwen3NextMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_qwen3next";
    const auto g = qwenNextGradients("qwen3-next-80b-a3b", dir);
    ASSERT_EQ(g.spec.family, model::Family::Qwen3Next);
    expectHybrid(g.spec);
    ASSERT_TRUE(g.spec.moe && g.spec.moe->sharedExpertGate);
    ASSERT_FALSE(g.ours.parameters.empty());
    // Routed experts that no token chose: present, with a zero gradient.
    std::size_t idle = 0;
    for (const auto& [name, grad] : g.ours.parameters) {
        idle += test::zeroExpertsIn(name, grad);
    }
    std::printf("idle expert weights: %zu\n", idle);
    EXPECT_GT(idle, 0u);
    expectAgreesWithTwin(g, dir,
        { "conv", "l2norm", "decay", "beta", "output_gate", "norm_gate", "norm_offset",
            "partial_rotary", "shared_expert_gate" });
    std::filesystem::remove_all(dir);
}

TEST(BackwardQwen3Next, ShrunkDenseQwen35MatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_qwen35";
    const auto g = qwenNextGradients("qwen3.5-27b", dir);
    ASSERT_EQ(g.spec.family, model::Family::Qwen35);
    expectHybrid(g.spec);
    ASSERT_FALSE(g.spec.moe);
    ASSERT_FALSE(g.ours.parameters.empty());
    expectAgreesWithTwin(g, dir,
        { "conv", "l2norm", "decay", "beta", "output_gate", "norm_gate", "norm_offset",
            "partial_rotary" });
    std::filesystem::remove_all(dir);
}

TEST(BackwardQwen3Next, ShrunkQwen35MoeMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_qwen35_moe";
    const auto g = qwenNextGradients("qwen3.5-397b-a17b", dir);
    ASSERT_EQ(g.spec.family, model::Family::Qwen35Moe);
    expectHybrid(g.spec);
    ASSERT_TRUE(g.spec.moe && g.spec.moe->sharedExpertGate);
    ASSERT_FALSE(g.ours.parameters.empty());
    expectAgreesWithTwin(g, dir, { "decay", "output_gate", "norm_offset", "shared_expert_gate" });
    std::filesystem::remove_all(dir);
}

TEST(BackwardQwen3Next, StoredWeightsGiveTheEnginesGradientsAndFp32AgreesWithFp64)
{
    for (const char* model : { "qwen3-next-80b-a3b", "qwen3.5-27b" }) {
        SCOPED_TRACE(model);
        const auto dir = std::filesystem::temp_directory_path() / "day0_backward_qwen_next_fp32";
        const auto g = qwenNextGradients(model, dir);
        ASSERT_FALSE(g.ours.parameters.empty());
        const auto targets = exec::nextTokenTargets(kIds);
        // A trainer's weights are the checkpoint's (zero-centred norms as w): the pass adds the
        // 1 the engine's table holds already.
        exec::GradientOptions stored;
        const auto fromStored
            = exec::lossAndGradients(g.spec, g.storedWeights, kIds, targets, stored, {});
        ASSERT_TRUE(fromStored.ok()) << fromStored.error().message;
        EXPECT_NEAR(fromStored->loss, g.ours.loss, 1e-13 * g.ours.loss);
        double same = 0.0;
        for (const auto& [name, grad] : g.ours.parameters) {
            same = std::max(same, maxRel(grad, fromStored->parameters.at(name)));
        }
        EXPECT_LE(same, 1e-12);
        // The same weights taken as the engine's (1 + w added twice) give another model.
        exec::GradientOptions asEngine;
        asEngine.engineNorms = true;
        const auto wrong
            = exec::lossAndGradients(g.spec, g.storedWeights, kIds, targets, asEngine, {});
        ASSERT_TRUE(wrong.ok()) << wrong.error().message;
        EXPECT_GT(std::fabs(wrong->loss - g.ours.loss), 1e-6);

        exec::GradientOptions o;
        o.fp64 = false;
        o.engineNorms = true;
        const auto narrow = exec::lossAndGradients(g.spec, g.engineWeights, kIds, targets, o, {});
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
            model, narrow->loss, g.ours.loss, worst, worstName.c_str());
        EXPECT_LE(worst, 1e-4) << worstName;
        EXPECT_NEAR(narrow->loss, g.ours.loss, 1e-5 * g.ours.loss);
        std::filesystem::remove_all(dir);
    }
}

TEST(BackwardQwen3Next, RefusesWhatItLacksByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name : { "qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-397b-a17b" }) {
        SCOPED_TRACE(name);
        const auto spec = model::loadModel(name);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        // The text model is covered (Qwen3.5's vision tower is not read).
        EXPECT_EQ(test::refusals(*spec), "");
        // Emulated bf16 is covered (backward_bf16_frontier_test); tensor parallelism is refused,
        // naming the family.
        EXPECT_TRUE(exec::emulatedBackwardUnsupported(*spec).empty());
        const std::vector<std::int64_t> ids { 1, 2, 3 };
        exec::GradientOptions tp;
        tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
        const auto r = exec::lossAndGradients(*spec, {}, ids, exec::nextTokenTargets(ids), tp, {});
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
        EXPECT_NE(r.error().message.find("tensor parallelism of"), std::string::npos)
            << r.error().message;
    }
    // Its operators stay refused in the other families.
    const auto moe = model::loadModel("qwen3-30b-a3b");
    ASSERT_TRUE(moe.ok()) << moe.error().message;
    auto spec = *moe;
    spec.attentionOutputGate = true;
    EXPECT_EQ(test::refusals(spec), "the attention output gate");
}

} // namespace
} // namespace day0
