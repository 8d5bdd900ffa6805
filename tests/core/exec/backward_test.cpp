// The backward pass (exec/backward.h) against PyTorch autograd of the twins (plugins/torch,
// day0_dump.py --grad, float64) for every parameter and every anchor's activation gradient, and
// against central finite differences of our own loss, independent of torch.
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

/// max |ours − theirs| / max |theirs| over one tensor (0 when both are zero; 1 when only ours
/// is, or when ours has values where theirs is all zero).
double maxRel(const Tensor& theirs, const Tensor& ours)
{
    const auto r = theirs.toDoubles();
    const auto t = ours.toDoubles();
    if (r.size() != t.size()) {
        return 1.0;
    }
    double largest = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        largest = std::max(largest, std::fabs(r[i]));
        worst = std::max(worst, std::fabs(t[i] - r[i]));
    }
    if (largest == 0.0) {
        return worst == 0.0 ? 0.0 : 1.0;
    }
    return worst / largest;
}

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

struct TwinAgreement {
    double params = 0.0; ///< worst parameter gradient max rel
    std::string worstParam;
    double activations = 0.0; ///< worst anchor gradient max rel
    std::string worstActivation;
    std::size_t paramsCompared = 0;
    std::size_t activationsCompared = 0;
    /// Expert weights whose gradient is zero (for packed experts, zero expert slices).
    std::size_t zeroExperts = 0;
    std::size_t paramsOurs = 0; ///< our parameter gradients under the checkpoint's names
    double lossDiff = 1.0;
};

/// Expert weights (or, in a packed expert tensor [E, ...], expert slices) all zero in `grad`.
std::size_t zeroExpertsIn(const std::string& name, const Tensor& grad)
{
    const auto at = name.find(".experts.");
    if (at == std::string::npos) {
        return 0;
    }
    const auto values = grad.toDoubles();
    const bool packed = name.find('.', at + 9) == std::string::npos; // "...experts.down_proj"
    const std::size_t slices = packed ? std::size_t(grad.shape()[0]) : 1;
    const std::size_t width = values.size() / slices;
    std::size_t zero = 0;
    for (std::size_t e = 0; e < slices; ++e) {
        const auto first = values.begin() + std::ptrdiff_t(e * width);
        zero += std::all_of(first, first + std::ptrdiff_t(width), [](double v) { return v == 0.0; })
            ? 1
            : 0;
    }
    return zero;
}

/// `ours` (fp64 gradients of the checkpoint in `dir / "ckpt"` of `spec` on `ids`) against the
/// float64 twin's, by the checkpoint's names (exec::checkpointGradients).
/// `twinEnv` ("DAY0_TWIN_WITHOUT=feature", the twins' switch) is set before the twin runs: its
/// gradients are then those of the model without that feature, and the logits are not checked.
TwinAgreement againstTwin(const std::filesystem::path& dir, const model::ModelSpec& spec,
    const exec::GradientResult& ours, const std::vector<std::int64_t>& ids,
    double forwardBound = 1e-12, const std::string& twinEnv = "")
{
    TwinAgreement a;
    const std::string command
        = fmt::format("{} {} {} {} --grad --ids {} --dtype float64 --out {} > {} 2>&1",
            twinEnv.empty() ? "" : "env " + twinEnv, test::kPython, test::bridgeScript().string(),
            (dir / "ckpt").string(), fmt::join(ids, ","), (dir / "torch").string(),
            (dir / "torch.log").string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const auto theirs = checkpoint::readDump(dir / "torch");
    EXPECT_TRUE(theirs.ok()) << (theirs.ok() ? "" : theirs.error().message);
    if (!theirs.ok()) {
        return a;
    }
    a.lossDiff = std::fabs(theirs->info.extra.value("loss", 0.0) - ours.loss);
    if (twinEnv.empty()) {
        EXPECT_LE(maxRel(*theirs->tensor("lm_head"), ours.logits), forwardBound);
    }
    // Every parameter: present on both sides, and within the bound.
    const auto parameters = exec::checkpointGradients(spec, ours.parameters);
    a.paramsOurs = parameters.size();
    for (const auto& [name, grad] : parameters) {
        const Tensor* ref = theirs->tensor(name + "#grad");
        EXPECT_NE(ref, nullptr) << name << " has no twin gradient";
        if (ref == nullptr) {
            continue;
        }
        ++a.paramsCompared;
        const double rel = maxRel(*ref, grad);
        if (rel > a.params) {
            a.params = rel;
            a.worstParam = name;
        }
        a.zeroExperts += zeroExpertsIn(name, grad);
    }
    std::size_t theirParams = 0;
    for (const auto& c : theirs->captures()) {
        theirParams += numerics::isParameterGradient(c.name) ? 1 : 0;
    }
    EXPECT_EQ(theirParams, parameters.size());
    for (const auto& [name, grad] : ours.activations) {
        const Tensor* ref = theirs->tensor(name);
        if (ref == nullptr) {
            continue;
        }
        ++a.activationsCompared;
        const double rel = maxRel(*ref, grad);
        if (rel > a.activations) {
            a.activations = rel;
            a.worstActivation = name;
        }
    }
    std::printf("%s: loss %.12f, %zu parameters max rel %.2e (%s), %zu anchor gradients max rel "
                "%.2e (%s), %zu idle expert weights\n",
        dir.filename().c_str(), ours.loss, a.paramsCompared, a.params, a.worstParam.c_str(),
        a.activationsCompared, a.activations, a.worstActivation.c_str(), a.zeroExperts);
    return a;
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

/// A Gemma-4 text model (Gemma4ForCausalLM, model_type gemma4_text): the text_config of the
/// bundled test config `config` (under tests/data/model/configs) on its own, without its
/// quantisation, vision and audio towers, shrunk to six layers: five sliding of window 4
/// (default RoPE over head_dim), one full (proportional RoPE over global_head_dim, k = v), the
/// shrunk logits bent by the soft-cap. Its fp64 engine's gradients on `ids`, the weights it
/// read, and the checkpoint in `dir / "ckpt"`.
struct Gemma4Gradients {
    model::ModelSpec spec;
    std::map<std::string, Tensor> weights;
    exec::GradientResult ours;
};

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
    const auto spec
        = test::shrinkForTwin((std::filesystem::path(text) / "config.json").string(), dir, options);
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
    g.weights = engine->weightTable().tensors;
    const auto ours = exec::lossAndGradients(*engine, ids, exec::nextTokenTargets(ids), true, {});
    EXPECT_TRUE(ours.ok()) << ours.error().message;
    if (ours.ok()) {
        g.ours = *ours;
    }
    return g;
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

/// backwardUnsupported's lines for `spec`, joined.
std::string refusals(const model::ModelSpec& spec)
{
    return fmt::format("{}", fmt::join(exec::backwardUnsupported(spec), "; "));
}

TEST(Backward, GptOssOperatorsAreCoveredForGptOssOnly)
{
    const auto gptOss = model::loadModel("gpt-oss-20b");
    ASSERT_TRUE(gptOss.ok()) << gptOss.error().message;
    EXPECT_EQ(refusals(*gptOss), "");
    // Emulated bf16 and tensor parallelism stay refused for it, by name.
    const auto emulated = exec::emulatedBackwardUnsupported(*gptOss);
    ASSERT_EQ(emulated.size(), 1u);
    EXPECT_NE(emulated[0].find("gpt-oss"), std::string::npos) << emulated[0];
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
    // Emulated bf16 and tensor parallelism of Gemma-4 stay refused, by name.
    const auto emulated = exec::emulatedBackwardUnsupported(text);
    ASSERT_EQ(emulated.size(), 1u);
    EXPECT_NE(emulated[0].find("Gemma-4"), std::string::npos) << emulated[0];
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(text, {}, ids, exec::nextTokenTargets(ids), tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of Gemma-4"), std::string::npos)
        << r.error().message;
    exec::GradientOptions bf16;
    bf16.fp64 = false;
    bf16.emulated = exec::PrecisionMode::BF16;
    const auto b = exec::lossAndGradients(text, {}, ids, exec::nextTokenTargets(ids), bf16, {});
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().code, ErrorCode::Unsupported);
    EXPECT_NE(b.error().message.find("Gemma-4"), std::string::npos) << b.error().message;
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
