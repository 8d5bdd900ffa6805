// The backward pass (exec/backward.h) against PyTorch autograd of the twins (plugins/torch,
// day0_dump.py --grad, float64) for every parameter and every anchor's activation gradient, and
// against central finite differences of our own loss, independent of torch.
#include "backward_twin.h"
#include "checkpoint/tensor_file.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "numerics/gradient_anchor.h"
#include "tiny_models.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stop_token>

namespace day0 {
namespace {

using numerics::Tensor;
using test::againstTwin;
using test::maxRel;
using test::refusals;
using test::TwinAgreement;
using test::zeroExpertsIn;

test::TinyModel tiedLlama()
{
    auto m = test::tinyLlama();
    m.spec.tieEmbeddings = true;
    m.config["tie_word_embeddings"] = true;
    m.weights.erase("lm_head.weight");
    return m;
}

/// The trainable parameters of a tiny model (every weight but the routers' selection bias).
std::size_t trainable(const test::TinyModel& m)
{
    return std::size_t(std::count_if(m.weights.begin(), m.weights.end(),
        [](const auto& w) { return !w.first.ends_with("e_score_correction_bias"); }));
}

/// Our fp64 gradients of the tiny model `m` on `ids` against the float64 twin's.
TwinAgreement againstTwin(
    const test::TinyModel& m, const std::string& tag, const std::vector<std::int64_t>& ids)
{
    const auto dir = std::filesystem::temp_directory_path() / ("day0_backward_" + tag);
    std::filesystem::remove_all(dir);
    test::writeCheckpoint(m, dir / "ckpt");
    exec::GradientOptions o;
    o.activations = true;
    const auto ours
        = exec::lossAndGradients(m.spec, m.weights, ids, exec::nextTokenTargets(ids), o, {});
    EXPECT_TRUE(ours.ok()) << (ours.ok() ? "" : ours.error().message);
    if (!ours.ok()) {
        return {};
    }
    EXPECT_EQ(ours->parameters.size(), trainable(m));
    return againstTwin(dir, m.spec, *ours, ids);
}

void expectTwinAgrees(const test::TinyModel& m, const std::string& tag,
    const std::vector<std::int64_t>& ids, std::size_t anchors)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto a = againstTwin(m, tag, ids);
    EXPECT_LE(a.lossDiff, 1e-12);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.activationsCompared, anchors); // every anchor gradient of ours has the twin's
}

TEST(Backward, LlamaMatchesTorchAutogradForEveryParameter)
{
    expectTwinAgrees(test::tinyLlama(), "llama", { 3, 17, 42, 99, 7, 250, 128 }, 2 * 5 + 3);
}

TEST(Backward, Qwen2BiasesMatchTorchAutograd)
{
    expectTwinAgrees(test::tinyQwen2(), "qwen2", { 3, 17, 42, 99, 7 }, 2 * 5 + 3);
}

TEST(Backward, TiedLlamaSumsTheHeadIntoTheEmbedding)
{
    const auto m = tiedLlama();
    expectTwinAgrees(m, "llama_tied", { 5, 9, 200, 31, 77 }, 2 * 5 + 3);
}

TEST(Backward, Qwen3MoeMatchesTorchAutogradForEveryParameter)
{
    expectTwinAgrees(test::tinyQwen3Moe(), "qwen3moe", { 3, 17, 42, 99, 7, 250 }, 2 * 6 + 3);
}

TEST(Backward, Qwen3MoeWithoutNormTopkProbMatchesTorch)
{
    // Unnormalised top-k weights are the softmax's own probabilities: the softmax's backward
    // then carries its −Σ p·dp term (with norm_topk_prob it cancels).
    auto m = test::tinyQwen3Moe();
    m.spec.moe->normTopkProb = false;
    m.config["norm_topk_prob"] = false;
    expectTwinAgrees(m, "qwen3moe_unnormalised", { 3, 17, 42, 99, 7, 250 }, 2 * 6 + 3);
}

TEST(Backward, Qwen3MoeExpertsWithoutTokensGetZeroGradients)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // 3 tokens choose 2 of 8 experts each: at least 2 experts per layer see no token.
    const auto a = againstTwin(test::tinyQwen3Moe(), "qwen3moe_idle", { 11, 80, 160 });
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_GE(a.zeroExperts, std::size_t(2 * 2 * 3)); // 2 layers × ≥ 2 experts × 3 weights
}

TEST(Backward, DeepseekV3MatchesTorchAutogradForEveryParameter)
{
    expectTwinAgrees(
        test::tinyDeepseekV3(), "deepseek_v3", { 3, 17, 42, 99, 7, 250 }, 5 + 2 * 7 + 3);
}

/// `day0 shrink` of a bundled model, its gradients on the fp64 engine against the twin's.
void expectShrunkAgrees(
    const std::string& model, const checkpoint::ShrinkOptions& options, double forwardBound)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path()
        / fmt::format("day0_backward_shrunk_{}{}", model, options.unquantized ? "_bf16" : "");
    const auto spec = test::shrinkForTwin(model, dir, options);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, true, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7, 250 };
    const auto ours = exec::lossAndGradients(*engine, ids, exec::nextTokenTargets(ids), true, {});
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    const auto a = againstTwin(dir, *spec, *ours, ids, forwardBound);
    EXPECT_LE(a.lossDiff, forwardBound * ours->loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    EXPECT_EQ(a.activationsCompared, ours->activations.size());
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
}

TEST(Backward, ShrunkLlamaCheckpointMatchesTorch) { expectShrunkAgrees("llama-3.1-8b", {}, 1e-12); }

TEST(Backward, ShrunkQwen3MoeCheckpointMatchesTorch)
{
    expectShrunkAgrees("qwen3-30b-a3b", {}, 1e-12);
}

TEST(Backward, ShrunkDeepseekV3CheckpointMatchesTorch)
{
    checkpoint::ShrinkOptions bf16;
    bf16.unquantized = true;
    expectShrunkAgrees("deepseek-v3", bf16, 1e-12);
}

TEST(Backward, ShrunkKimiK2CheckpointMatchesTorch)
{
    // DeepSeek-V3's architecture with one expert group, 384 experts shrunk, a degenerate YaRN
    // ramp (beta_fast == beta_slow).
    checkpoint::ShrinkOptions bf16;
    bf16.unquantized = true;
    expectShrunkAgrees("kimi-k2", bf16, 1e-12);
}

TEST(Backward, ShrunkFp8DeepseekV3CheckpointMatchesTorch)
{
    // The engine reads block-FP8 weights through checkpoint::DequantizedWeights, whose products
    // are rounded to float32; the twin multiplies in float64. The weights then differ by float32
    // rounding (~5e-8 of the logits), and every gradient still agrees within 1e-6.
    expectShrunkAgrees("deepseek-v3", {}, 1e-6);
}

/// gpt-oss-20b shrunk to 2 layers (layer 0 slides over the last 4 keys, layer 1 sees them all;
/// MXFP4 experts dequantised on load; swiglu_limit at the shrunk activations' scale, so that the
/// clamps bite), in the fp64 engine, and its gradients on `ids` against the twin's.
struct GptOssGradients {
    model::ModelSpec spec;
    exec::GradientResult ours;
    TwinAgreement twin;
};

GptOssGradients shrunkGptOssAgainstTwin(
    const std::string& tag, const std::vector<std::int64_t>& ids)
{
    GptOssGradients g;
    const auto dir = std::filesystem::temp_directory_path() / ("day0_backward_gpt_oss_" + tag);
    checkpoint::ShrinkOptions options;
    options.layers = 2;
    const auto spec = test::shrinkForTwin("gpt-oss-20b", dir, options);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    if (!spec.ok()) {
        return g;
    }
    g.spec = *spec;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(g.spec, **weights, true, p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) {
        return g;
    }
    const auto ours = exec::lossAndGradients(*engine, ids, exec::nextTokenTargets(ids), true, {});
    EXPECT_TRUE(ours.ok()) << ours.error().message;
    if (!ours.ok()) {
        return g;
    }
    g.ours = *ours;
    g.twin = againstTwin(dir, g.spec, g.ours, ids);
    return g;
}

TEST(Backward, ShrunkGptOssMatchesTorchAutogradPastItsSlidingWindow)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // 12 tokens through a window of 4: layer 0's mask cuts 8 of the 12 rows, so a backward
    // without the window (or the wrong width) misses the twin's gradients.
    const std::vector<std::int64_t> ids { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 250, 128 };
    const auto g = shrunkGptOssAgainstTwin("window", ids);
    ASSERT_EQ(g.spec.family, model::Family::GptOss);
    ASSERT_EQ(g.spec.layers[0].slidingWindow, 4);
    ASSERT_EQ(g.spec.layers[1].slidingWindow, 0);
    ASSERT_LT(g.spec.layers[0].slidingWindow, std::int64_t(ids.size()));
    const auto& a = g.twin;
    EXPECT_LE(a.lossDiff, 1e-12 * g.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_EQ(a.activationsCompared, g.ours.activations.size());
    // Per layer: 2 norms, q/k/v/o weights and biases, sinks, router weight and bias, the four
    // fused expert tensors; and the embedding, final norm and head.
    EXPECT_EQ(a.paramsOurs, std::size_t(2 * 17 + 3));
    // The sinks have a gradient of their own (compared above, under their HF name).
    for (int l = 0; l < 2; ++l) {
        const auto sinks
            = g.ours.parameters.find(fmt::format("model.layers.{}.self_attn.sinks", l));
        ASSERT_NE(sinks, g.ours.parameters.end());
        const auto v = sinks->second.toDoubles();
        EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double x) { return x != 0.0; }));
    }
}

TEST(Backward, ShrunkGptOssExpertsWithoutTokensGetZeroSlices)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    // 2 tokens choose top-k experts each: every other expert gets no token, and its slice of
    // each fused tensor (gate_up_proj, its bias, down_proj, its bias) is zero, not missing.
    const auto g = shrunkGptOssAgainstTwin("idle", { 11, 80 });
    const auto& moe = *g.spec.moe;
    EXPECT_LE(g.twin.params, 1e-6) << g.twin.worstParam;
    EXPECT_EQ(g.twin.paramsCompared, g.twin.paramsOurs);
    const auto idle = std::size_t(moe.numExperts - 2 * moe.topK);
    ASSERT_GT(idle, 0u);
    EXPECT_GE(g.twin.zeroExperts, 2 * 4 * idle); // 2 layers × 4 fused tensors
    const auto fused = exec::checkpointGradients(g.spec, g.ours.parameters);
    const auto it = fused.find("model.layers.0.mlp.experts.gate_up_proj");
    ASSERT_NE(it, fused.end());
    EXPECT_EQ(it->second.shape(),
        (numerics::Shape { moe.numExperts, g.spec.hiddenSize, 2 * moe.expertIntermediate }));
}

/// Central differences of our own fp64 loss at the largest-gradient element of `name`.
void expectFiniteDifference(const test::TinyModel& m, const std::vector<std::int64_t>& ids,
    const std::vector<std::string>& names)
{
    std::map<std::string, Tensor> weights;
    for (const auto& [name, t] : m.weights) {
        weights[name] = t.to(DType::F64);
    }
    const auto targets = exec::nextTokenTargets(ids);
    const auto base = exec::lossAndGradients(m.spec, weights, ids, targets, {}, {});
    ASSERT_TRUE(base.ok()) << base.error().message;
    for (const auto& name : names) {
        SCOPED_TRACE(name);
        const auto it = base->parameters.find(name);
        ASSERT_NE(it, base->parameters.end());
        const auto grad = it->second.toDoubles();
        const auto at
            = std::size_t(std::max_element(grad.begin(), grad.end(), [](double x, double y) {
                  return std::fabs(x) < std::fabs(y);
              }) - grad.begin());
        const double step = 1e-5;
        double loss[2] = {};
        for (int side = 0; side < 2; ++side) {
            auto moved = weights;
            moved[name] = weights[name].clone();
            moved[name].data<double>()[at] += side == 0 ? step : -step;
            const auto r = exec::lossAndGradients(m.spec, moved, ids, targets, {}, {});
            ASSERT_TRUE(r.ok()) << r.error().message;
            loss[side] = r->loss;
        }
        const double numeric = (loss[0] - loss[1]) / (2 * step);
        std::printf("  %s[%zu]: backward %.10e, central difference %.10e\n", name.c_str(), at,
            grad[at], numeric);
        EXPECT_NEAR(numeric, grad[at], 1e-6 * std::fabs(grad[at]) + 1e-9);
    }
}

TEST(Backward, LlamaAgreesWithFiniteDifferences)
{
    expectFiniteDifference(test::tinyLlama(), { 3, 17, 42, 99, 7 },
        { "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
            "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
            "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
            "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight",
            "model.layers.1.mlp.down_proj.weight", "model.layers.1.post_attention_layernorm.weight",
            "model.norm.weight", "lm_head.weight" });
}

TEST(Backward, MoeRoutersAgreeWithFiniteDifferences)
{
    expectFiniteDifference(test::tinyQwen3Moe(), { 3, 17, 42, 99 },
        { "model.layers.0.mlp.gate.weight", "model.layers.1.self_attn.q_norm.weight",
            "model.layers.1.self_attn.k_norm.weight" });
    expectFiniteDifference(test::tinyDeepseekV3(), { 3, 17, 42, 99 },
        { "model.layers.2.mlp.gate.weight", "model.layers.0.self_attn.q_a_proj.weight",
            "model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
            "model.layers.1.self_attn.kv_b_proj.weight",
            "model.layers.2.mlp.shared_experts.down_proj.weight" });
}

TEST(Backward, LossIsTheEnginesForward)
{
    // The gradient pass recomputes the forward: its logits are the engine's.
    for (const auto& m : { test::tinyLlama(), test::tinyQwen3Moe(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const auto dir
            = std::filesystem::temp_directory_path() / ("day0_backward_fwd_" + m.spec.modelType);
        std::filesystem::remove_all(dir);
        test::writeCheckpoint(m, dir);
        const auto weights = exec::openCheckpointWeights(dir);
        ASSERT_TRUE(weights.ok());
        Progress p;
        auto engine = exec::Engine::create(m.spec, **weights, true, p, {});
        ASSERT_TRUE(engine.ok()) << engine.error().message;
        const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7 };
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp64");
        o.promptIds = ids;
        o.newTokens = 1;
        const auto run = engine->run(o, p, {});
        ASSERT_TRUE(run.ok()) << run.error().message;
        const auto grads
            = exec::lossAndGradients(*engine, ids, exec::nextTokenTargets(ids), false, {});
        ASSERT_TRUE(grads.ok()) << grads.error().message;
        EXPECT_LE(maxRel(*run->dump.tensor("lm_head"), grads->logits), 1e-12);
        EXPECT_TRUE(grads->activations.empty());
    }
}

TEST(Backward, Fp32AgreesWithFp64)
{
    for (const auto& m : { test::tinyLlama(), test::tinyQwen3Moe(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7 };
        const auto targets = exec::nextTokenTargets(ids);
        exec::GradientOptions o;
        const auto wide = exec::lossAndGradients(m.spec, m.weights, ids, targets, o, {});
        o.fp64 = false;
        const auto narrow = exec::lossAndGradients(m.spec, m.weights, ids, targets, o, {});
        ASSERT_TRUE(wide.ok() && narrow.ok());
        EXPECT_EQ(narrow->parameters.begin()->second.dtype(), DType::F32);
        double worst = 0.0;
        for (const auto& [name, g] : wide->parameters) {
            worst = std::max(worst, maxRel(g, narrow->parameters.at(name)));
        }
        std::printf(
            "%s fp32 against fp64: parameters max rel %.2e\n", m.spec.modelType.c_str(), worst);
        EXPECT_LE(worst, 1e-4);
        EXPECT_NEAR(narrow->loss, wide->loss, 1e-5 * wide->loss);
    }
}

TEST(Backward, RefusesWhatItLacksByName)
{
    const auto mixtral = test::tinyMixtral();
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    const auto r = exec::lossAndGradients(
        mixtral.spec, mixtral.weights, ids, exec::nextTokenTargets(ids), {}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("mixtral"), std::string::npos) << r.error().message;
    const auto llama = test::tinyLlama();
    const std::vector<std::int64_t> wrong { 1, 2 };
    EXPECT_FALSE(exec::lossAndGradients(llama.spec, llama.weights, ids, wrong, {}, {}).ok());
    const std::vector<std::int64_t> outside { 1, 2, 9999 };
    EXPECT_FALSE(exec::lossAndGradients(
        llama.spec, llama.weights, outside, exec::nextTokenTargets(ids), {}, {})
                     .ok());
}

TEST(Backward, GptOssOperatorsAreCoveredForGptOssOnly)
{
    const auto gptOss = model::loadModel("gpt-oss-20b");
    ASSERT_TRUE(gptOss.ok()) << gptOss.error().message;
    EXPECT_EQ(refusals(*gptOss), "");
    // Emulated bf16 is covered (backward_bf16_frontier_test); tensor parallelism stays refused
    // for it, by name.
    EXPECT_TRUE(exec::emulatedBackwardUnsupported(*gptOss).empty());
    const auto m = test::tinyLlama();
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r
        = exec::lossAndGradients(*gptOss, m.weights, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of gpt-oss"), std::string::npos)
        << r.error().message;
    // Each of its operators is still refused in another family.
    auto sinks = m.spec;
    sinks.attentionSinks = true;
    EXPECT_EQ(refusals(sinks), "attention sinks");
    auto sliding = m.spec;
    sliding.layers[0].mixer = model::MixerKind::Sliding;
    sliding.layers[0].slidingWindow = 4;
    EXPECT_NE(refusals(sliding).find("sliding"), std::string::npos) << refusals(sliding);
    auto clamped = m.spec;
    clamped.swigluLimit = 7.0;
    EXPECT_EQ(refusals(clamped), "the clamped SwiGLU");
    auto moe = test::tinyQwen3Moe().spec;
    moe.moe->packedExperts = true;
    moe.moe->expertBias = true;
    moe.moe->routerBias = true;
    EXPECT_EQ(refusals(moe), "biased experts or routers; packed (fused 3-D) experts");
}

} // namespace
} // namespace day0

namespace day0 {
namespace {

TEST(Backward, CountsLayersAndCancels)
{
    const auto m = test::tinyLlama();
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    Progress progress;
    exec::GradientOptions o;
    o.progress = &progress;
    ASSERT_TRUE(
        exec::lossAndGradients(m.spec, m.weights, ids, exec::nextTokenTargets(ids), o, {}).ok());
    EXPECT_EQ(progress.total(), 2 * m.spec.numLayers);
    EXPECT_EQ(progress.done(), 2 * m.spec.numLayers);
    std::stop_source stop;
    stop.request_stop();
    const auto r = exec::lossAndGradients(
        m.spec, m.weights, ids, exec::nextTokenTargets(ids), {}, stop.get_token());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
}

} // namespace
} // namespace day0
