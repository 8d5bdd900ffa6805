// The backward pass of GLM-4.5, GLM-5 and MiniMax-M2 (exec/backward_glm.cpp and the standard
// layer) against PyTorch autograd of their float64 twins (plugins/torch: day0_torch_models.py's
// glm4_moe, day0_torch_dsa.py, day0_torch_minimax.py), every parameter and every anchor; each
// feature switched off in the twin moves its gradients away from ours; fp32 against fp64 and
// emulated bf16 against fp64 (its forward the engine's bf16 run); and what stays uncovered
// (tensor parallelism) refused by name.
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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

namespace day0 {
namespace {

using numerics::Tensor;
using test::againstTwin;
using test::maxRel;
using test::refusals;

/// 12 tokens: longer than the shrunk DSA index_topk (checkpoint::kShrunkIndexTopK), so that
/// the indexer's mask drops keys of the later queries.
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 250, 128 };

using Shrunk = test::ShrunkGradients;
using test::shrunkGradients;

/// Every parameter and anchor gradient of `s` within 1e-6 of the twin's (and the loss within
/// 1e-12); then each of `features`, switched off in the twin, moves some parameter gradient
/// by more than 1e-3 (the comparison would catch a backward without it).
void expectTwinAgrees(const Shrunk& s, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, const std::vector<std::string>& features)
{
    const auto a = againstTwin(dir, s.spec, s.ours, ids);
    EXPECT_LE(a.lossDiff, 1e-12 * s.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    EXPECT_EQ(a.activationsCompared, s.ours.activations.size());
    for (const auto& feature : features) {
        const auto off = againstTwin(
            dir, s.spec, s.ours, ids, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-16s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

/// ‖ours − theirs‖₂ / ‖theirs‖₂ over one tensor.
double relativeL2(const Tensor& theirs, const Tensor& ours)
{
    const auto r = theirs.toDoubles();
    const auto t = ours.toDoubles();
    double diff = 0.0;
    double norm = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        diff += (t[i] - r[i]) * (t[i] - r[i]);
        norm += r[i] * r[i];
    }
    return norm == 0.0 ? (diff == 0.0 ? 0.0 : 1.0) : std::sqrt(diff / norm);
}

/// fp32 gradients of `s` against its fp64 ones (every parameter within 1e-4). With `bf16`, the
/// emulated bf16 pass: its logits are the engine's bf16 run's (its rounding points are the
/// engine's), its gradients a bf16-sized distance from fp64's; without, it is refused by name.
void expectNarrowerAgree(const Shrunk& s, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, bool bf16)
{
    const auto targets = exec::nextTokenTargets(ids);
    exec::GradientOptions o;
    o.fp64 = false;
    const auto narrow = exec::lossAndGradients(s.spec, s.weights, ids, targets, o, {});
    ASSERT_TRUE(narrow.ok()) << narrow.error().message;
    double fp32 = 0.0;
    for (const auto& [name, g] : s.ours.parameters) {
        fp32 = std::max(fp32, maxRel(g, narrow->parameters.at(name)));
    }
    std::printf("%s fp32 against fp64: parameters max rel %.2e, loss %.9f vs %.9f\n",
        s.spec.modelType.c_str(), fp32, narrow->loss, s.ours.loss);
    EXPECT_LE(fp32, 1e-4);
    EXPECT_NEAR(narrow->loss, s.ours.loss, 1e-5 * s.ours.loss);
    o.emulated = exec::PrecisionMode::BF16;
    const auto emulated = exec::lossAndGradients(s.spec, s.weights, ids, targets, o, {});
    if (!bf16) {
        ASSERT_FALSE(emulated.ok());
        EXPECT_EQ(emulated.error().code, ErrorCode::Unsupported);
        std::printf(
            "%s emulated bf16: %s\n", s.spec.modelType.c_str(), emulated.error().message.c_str());
        return;
    }
    ASSERT_TRUE(emulated.ok()) << emulated.error().message;
    std::vector<double> errors;
    std::string worstName;
    for (const auto& [name, g] : s.ours.parameters) {
        errors.push_back(relativeL2(g, emulated->parameters.at(name)));
        if (errors.back() >= *std::max_element(errors.begin(), errors.end())) {
            worstName = name;
        }
    }
    std::sort(errors.begin(), errors.end());
    // The engine's own emulated bf16 forward of the checkpoint.
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(s.spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions run;
    run.precision = *exec::parsePrecisionPlan("bf16");
    run.promptIds = ids;
    run.newTokens = 1;
    const auto r = engine->run(run, p, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    const double toEngine = relativeL2(*r->dump.tensor("lm_head"), emulated->logits);
    const double fp32ToEngine = relativeL2(*r->dump.tensor("lm_head"), narrow->logits);
    std::printf("%s emulated bf16 against fp64: per-parameter relative L2 median %.1e, largest "
                "%.1e (%s); loss %.6f vs %.6f; logits against the engine's bf16 run %.2e (fp32 "
                "pass's %.2e)\n",
        s.spec.modelType.c_str(), errors[errors.size() / 2], errors.back(), worstName.c_str(),
        emulated->loss, s.ours.loss, toEngine, fp32ToEngine);
    EXPECT_LT(toEngine, 1e-3);
    EXPECT_GT(fp32ToEngine, 1e-3);
    EXPECT_GE(errors[errors.size() / 2], 1e-3);
    EXPECT_LE(errors[errors.size() / 2], 5e-2);
    EXPECT_NEAR(emulated->loss, s.ours.loss, 1e-2 * s.ours.loss);
}

/// Our fp64 gradients of `s`'s checkpoint on two tokens against the twin's: experts no token
/// reaches get zero gradients, present under their names.
void expectIdleExpertsZero(const Shrunk& s, const std::filesystem::path& dir)
{
    const std::vector<std::int64_t> ids { 11, 80 };
    exec::GradientOptions o;
    o.activations = true;
    const auto ours
        = exec::lossAndGradients(s.spec, s.weights, ids, exec::nextTokenTargets(ids), o, {});
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    const auto idle = againstTwin(dir, s.spec, *ours, ids);
    EXPECT_LE(idle.params, 1e-6) << idle.worstParam;
    EXPECT_EQ(idle.paramsCompared, idle.paramsOurs);
    EXPECT_GT(idle.zeroExperts, std::size_t(0));
}

/// Tensor parallelism of the family is refused by name (MiniMax-M2: its q/k norms span every
/// head, which a rank holds a share of; GLM-4.5, GLM-5 and DeepSeek-V3.2 train under tp:
/// tests/cli/grad_glm_minimax_cli_test.cpp).
void expectTensorParallelRefused(const Shrunk& s, const std::vector<std::int64_t>& ids)
{
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r
        = exec::lossAndGradients(s.spec, s.weights, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of"), std::string::npos)
        << r.error().message;
}

std::string glm45Config()
{
    return (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "glm-4.5.json")
        .string();
}

TEST(BackwardGlm, ShrunkGlm45MatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // GLM-4.5 shrunk to 4 layers: 3 dense (first_k_dense_replace) then one sigmoid-routed MoE
    // layer with a shared expert; biased q/k/v, per-head q/k norms, half the lanes rotated.
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_glm45";
    const auto s = shrunkGradients(glm45Config(), dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::Glm4Moe);
    ASSERT_TRUE(s.spec.qkNorm && s.spec.attentionBias && !s.spec.attentionOutputBias);
    ASSERT_EQ(s.spec.partialRotaryFactor, 0.5);
    ASSERT_FALSE(s.spec.layers[0].moe());
    ASSERT_TRUE(s.spec.layers.back().moe());
    ASSERT_GT(s.spec.moe->sharedIntermediate, 0);
    expectTwinAgrees(s, dir, kIds, { "partial_rotary", "qk_norm", "attention_bias", "score_bias" });
    expectIdleExpertsZero(s, dir);
    expectNarrowerAgree(s, dir, kIds, true);
}

TEST(BackwardGlm, ShrunkGlm5MatchesTorchAutogradThroughItsIndexersSelection)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // GLM-5: MLA over the keys its DSA indexer keeps (index_topk shrunk below the 12 tokens),
    // 2 dense layers, then sigmoid-routed MoE with a shared expert.
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_glm5";
    checkpoint::ShrinkOptions bf16;
    bf16.unquantized = true;
    const auto s = shrunkGradients("glm-5", dir, kIds, bf16);
    ASSERT_EQ(s.spec.family, model::Family::GlmMoeDsa);
    ASSERT_GT(s.spec.mla.indexerHeads, 0);
    ASSERT_LT(s.spec.mla.indexerTopK, std::int64_t(kIds.size()));
    ASSERT_EQ(s.spec.layers[0].mixer, model::MixerKind::SparseMla);
    expectTwinAgrees(s, dir, kIds, { "indexer", "indexer_rope", "indexer_k_norm" });
    // The indexer's weights: present, and zero (the top-k passes no gradient back).
    std::size_t indexerWeights = 0;
    for (const auto& [name, g] : s.ours.parameters) {
        if (name.find(".indexer.") == std::string::npos) {
            continue;
        }
        ++indexerWeights;
        const auto v = g.toDoubles();
        EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; })) << name;
    }
    EXPECT_EQ(indexerWeights, std::size_t(5 * s.spec.numLayers));
    expectIdleExpertsZero(s, dir);
    expectNarrowerAgree(s, dir, kIds, true);
}

TEST(BackwardGlm, ShrunkDeepseekV32MatchesTorchAutogradThroughItsIndexersSelection)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // DeepSeek-V3.2: GLM-5's DSA under DeepSeek-V3's MLA and group-limited router.
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_deepseek_v32";
    checkpoint::ShrinkOptions bf16;
    bf16.unquantized = true;
    const auto s = shrunkGradients("deepseek-v3.2", dir, kIds, bf16);
    ASSERT_EQ(s.spec.family, model::Family::DeepseekV3);
    ASSERT_GT(s.spec.mla.indexerHeads, 0);
    ASSERT_LT(s.spec.mla.indexerTopK, std::int64_t(kIds.size()));
    expectTwinAgrees(s, dir, kIds, { "indexer", "indexer_rope", "indexer_k_norm" });
    expectIdleExpertsZero(s, dir);
}

TEST(BackwardGlm, ShrunkGlm52SharedLayersReuseTheSelectionInTheBackward)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // GLM-5.2's indexer_types: shrunk, layers full, full, shared, full; the shared layer has no
    // indexer and attends over layer 1's selection (its weights: none to train).
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_glm52";
    checkpoint::ShrinkOptions bf16;
    bf16.unquantized = true;
    const auto s = shrunkGradients((std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
                                       / "frontier-sizes" / "zai-org--GLM-5.2.json")
                                       .string(),
        dir, kIds, bf16);
    ASSERT_EQ(s.spec.family, model::Family::GlmMoeDsa);
    ASSERT_EQ(s.spec.layers[2].mixer, model::MixerKind::Attention);
    ASSERT_EQ(s.spec.layers[1].mixer, model::MixerKind::SparseMla);
    ASSERT_LT(s.spec.mla.indexerTopK, std::int64_t(kIds.size()));
    expectTwinAgrees(s, dir, kIds, { "indexer_shared", "indexer" });
}

TEST(BackwardMiniMax, ShrunkMiniMaxM2MatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // MiniMax-M2.5: q/k RMSNorm over all heads, rotary_dim of the head's lanes, the sigmoid
    // router choosing by score + e_score_correction_bias, w1/w3/w2 experts.
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_minimax_m2";
    checkpoint::ShrinkOptions bf16; // unquantised: block-FP8 products are rounded to float32
    bf16.unquantized = true;
    const auto s = shrunkGradients("minimax-m2.5", dir, kIds, bf16);
    ASSERT_EQ(s.spec.family, model::Family::MiniMaxM2);
    ASSERT_TRUE(s.spec.qkNormAcrossHeads);
    ASSERT_LT(s.spec.partialRotaryFactor, 1.0);
    expectTwinAgrees(s, dir, kIds, { "qk_norm", "partial_rotary", "score_bias" });
    expectIdleExpertsZero(s, dir);
    expectNarrowerAgree(s, dir, kIds, true);
    expectTensorParallelRefused(s, kIds);
}

TEST(BackwardGlm, TheirOperatorsStayRefusedElsewhere)
{
    const auto glm5 = model::loadModel("glm-5");
    ASSERT_TRUE(glm5.ok()) << glm5.error().message;
    EXPECT_EQ(refusals(*glm5), "");
    const auto minimax = model::loadModel("minimax-m2.5");
    ASSERT_TRUE(minimax.ok()) << minimax.error().message;
    EXPECT_EQ(refusals(*minimax), "");
    // DeepSeek-V3.2's indexer is GLM-5's; q/k norms across heads in another family stay named.
    const auto v32 = model::loadModel("deepseek-v3.2");
    ASSERT_TRUE(v32.ok()) << v32.error().message;
    EXPECT_EQ(refusals(*v32), "");
    auto across = test::tinyLlama().spec;
    across.qkNormAcrossHeads = true;
    EXPECT_EQ(refusals(across), "q/k norms across heads");
    // Their emulated backward covers them (the indexer's rounding included).
    EXPECT_TRUE(exec::emulatedBackwardUnsupported(*glm5).empty());
    EXPECT_TRUE(exec::emulatedBackwardUnsupported(*minimax).empty());
}

} // namespace
} // namespace day0
