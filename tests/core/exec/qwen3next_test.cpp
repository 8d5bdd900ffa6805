// Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5 dense and MoE): the delta rule's chunked and
// recurrent forms and the conv window by hand; the shrunk models on the engine against their
// PyTorch twin (plugins/torch/day0_torch_qwen3next.py) with each feature shown to matter; and,
// in fp64, a chunked prefill followed by decode steps against one prefill of the whole sequence.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/gated_delta_net.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

struct DeltaInputs {
    std::vector<double> q, k, v, g, beta, state;
};

DeltaInputs randomInputs(const exec::DeltaRuleShape& s, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    DeltaInputs in;
    const auto fill = [&](std::vector<double>& x, std::int64_t n) {
        x.resize(std::size_t(n));
        for (auto& value : x) {
            value = normal(rng);
        }
    };
    fill(in.q, s.tokens * s.heads * s.keyDim);
    fill(in.k, s.tokens * s.heads * s.keyDim);
    fill(in.v, s.tokens * s.heads * s.valueDim);
    fill(in.state, s.heads * s.keyDim * s.valueDim);
    exec::l2NormalizeRows(in.q.data(), s.tokens * s.heads, s.keyDim, 1e-6);
    exec::l2NormalizeRows(in.k.data(), s.tokens * s.heads, s.keyDim, 1e-6);
    for (std::int64_t i = 0; i < s.tokens * s.heads; ++i) {
        in.g.push_back(-unit(rng));
        in.beta.push_back(unit(rng));
    }
    return in;
}

double maxAbsDiff(const std::vector<double>& a, const std::vector<double>& b)
{
    double worst = 0.0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
    return worst;
}

} // namespace

TEST(GatedDeltaNet, RecurrentStepByHand)
{
    // One head, dk = dv = 1, state s = 2, k = q = 1, v = 3, decay e^g = 0.5, β = 0.25:
    // S ← 0.5·2 = 1; δ = 0.25·(3 − 1) = 0.5; S ← 1 + 0.5 = 1.5; o = 1.5.
    const exec::DeltaRuleShape shape { 1, 1, 1, 1 };
    const double q = 1, k = 1, v = 3, g = std::log(0.5), beta = 0.25;
    double state = 2;
    double out = 0;
    exec::gatedDeltaRecurrent(&q, &k, &v, &g, &beta, &state, &out, shape);
    EXPECT_DOUBLE_EQ(state, 1.5);
    EXPECT_DOUBLE_EQ(out, 1.5);
}

TEST(GatedDeltaNet, ChunkedFormEqualsRecurrentForEveryChunk)
{
    const exec::DeltaRuleShape shape { 11, 3, 5, 4 };
    const DeltaInputs in = randomInputs(shape, 7);
    std::vector<double> recurrentState = in.state;
    std::vector<double> recurrent(std::size_t(shape.tokens * shape.heads * shape.valueDim));
    exec::gatedDeltaRecurrent(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
        recurrentState.data(), recurrent.data(), shape);
    for (const std::int64_t chunk : { 1, 3, 4, 11, 64 }) {
        SCOPED_TRACE(chunk);
        std::vector<double> state = in.state;
        std::vector<double> out(recurrent.size());
        exec::gatedDeltaChunked(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
            state.data(), out.data(), shape, chunk);
        EXPECT_LE(maxAbsDiff(out, recurrent), 1e-13);
        EXPECT_LE(maxAbsDiff(state, recurrentState), 1e-13);
    }
}

TEST(GatedDeltaNet, ConvWindowCarriesAcrossSteps)
{
    // Two channels, kernel 3: the whole sequence at once equals 4 tokens then 1 then 2.
    const std::int64_t channels = 2;
    const std::int64_t kernel = 3;
    const std::vector<double> w { 0.5, -1.0, 2.0, 1.5, 0.25, -0.75 };
    std::vector<double> x(7 * 2);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = std::sin(double(i) + 0.3);
    }
    std::vector<double> window(std::size_t((kernel - 1) * channels), 0.0);
    std::vector<double> whole(x.size());
    exec::causalConv1dSilu(x.data(), whole.data(), 7, channels, w.data(), kernel, window.data());
    std::fill(window.begin(), window.end(), 0.0);
    std::vector<double> parts(x.size());
    std::int64_t first = 0;
    for (const std::int64_t n : { 4, 1, 2 }) {
        exec::causalConv1dSilu(x.data() + first * channels, parts.data() + first * channels, n,
            channels, w.data(), kernel, window.data());
        first += n;
    }
    EXPECT_LE(maxAbsDiff(whole, parts), 1e-15);
    // Token 0 of channel 0 sees only itself: silu(2·x0).
    const double pre = 2.0 * x[0];
    EXPECT_NEAR(whole[0], pre / (1.0 + std::exp(-pre)), 1e-15);
}

TEST(Qwen3Next, TwinChunkedAndRecurrentFormsAgree)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // plugins/torch/test_qwen3next_twin.py: the twin's two forms of the rule agree for every
    // chunk, a whole model gives the same logits stepped as the engine steps, chunked or
    // recurrent throughout, and the carried state matters.
    const auto script = test::bridgeScript().parent_path() / "test_qwen3next_twin.py";
    EXPECT_EQ(std::system(fmt::format("{} {}", kPython, script.string()).c_str()), 0);
}

namespace {

// Shrinks `model` and checks its twin agreement (fp32 engine against the float64 twin, the
// engine's chunk 4 under an 11-token prompt) and that each feature matters.
void expectAgreesWithTwin(
    const std::string& model, const std::string& dirName, std::vector<std::string> features)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / dirName;
    const auto spec = test::shrinkForTwin(model, dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->linearAttention.has_value());
    bool delta = false;
    bool full = false;
    for (const auto& layer : spec->layers) {
        delta = delta || layer.mixer == model::MixerKind::GatedDeltaNet;
        full = full || layer.mixer == model::MixerKind::Attention;
    }
    ASSERT_TRUE(delta && full) << "the shrunk model keeps both kinds of layer";
    ASSERT_LT(spec->partialRotaryFactor, 1.0);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };
    const std::int64_t chunk = 4; // chunks 4 + 4 + 3: boundaries not aligned with the prompt
    const auto a = checkpointAgainstTorch(dir, "DAY0_TWIN_CHUNK=3", prompt, false, chunk);
    std::printf("%s logits max|d|/max %.2e, max rel %.2e, rel L2 %.2e; worst capture %s %.2e "
                "over %zu; router rows differing %zu of %zu\n",
        model.c_str(), a.logitsMaxAbsOverMax, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(),
        a.worstCaptureRelL2, a.common, a.selectionRowsDiffering, a.selectionRows);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-5);
    EXPECT_LE(a.worstCaptureRelL2, 1e-4) << a.worstCapture;
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
    EXPECT_GE(a.common, 4u * 4u);
    test::expectEachFeatureMatters(dir, features, prompt, false, chunk);
    std::filesystem::remove_all(dir);
}

} // namespace

TEST(Qwen3Next, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectAgreesWithTwin("qwen3-next-80b-a3b", "day0_torch_qwen3next",
        { "conv", "l2norm", "decay", "beta", "state", "output_gate", "norm_gate", "norm_offset",
            "partial_rotary", "shared_expert_gate" });
}

TEST(Qwen35, DenseAgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectAgreesWithTwin(
        "qwen3.5-27b", "day0_torch_qwen35", { "conv", "l2norm", "decay", "beta", "state", "gate" });
}

TEST(Qwen35, MoeAgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectAgreesWithTwin("qwen3.5-397b-a17b", "day0_torch_qwen35_moe",
        { "state", "gate", "shared_expert_gate", "norm_offset" });
}

TEST(Qwen3Next, ChunkedPrefillThenDecodeEqualsOnePrefillInFp64)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_qwen3next_steps";
    const auto spec = test::shrinkForTwin("qwen3-next-80b-a3b", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, true, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    const std::vector<std::int64_t> all { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31, 2, 77, 14, 9,
        60 };
    // 11 prompt tokens in chunks of 4 (4 + 4 + 3), then 5 decode steps of the recurrent form.
    exec::RunOptions stepped;
    stepped.precision = *exec::parsePrecisionPlan("fp64");
    stepped.promptIds.assign(all.begin(), all.begin() + 11);
    stepped.forcedTokens.assign(all.begin() + 11, all.end());
    stepped.newTokens = 6;
    stepped.linearAttentionChunk = 4;
    // The whole sequence in one prefill, in chunks of 5 (5 + 5 + 5 + 1).
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
    for (const double v : lb) {
        largest = std::max(largest, std::fabs(v));
    }
    const double rel = maxAbsDiff(la, lb) / largest;
    std::printf("fp64 chunked prefill + decode against one prefill: max|d|/max %.2e\n", rel);
    EXPECT_LE(rel, 1e-9);
    // The linear-attention layers are captured under their HF module name.
    EXPECT_NE(a->dump.tensor("model.layers.0.linear_attn"), nullptr);
    EXPECT_NE(a->dump.tensor("model.layers.3.self_attn"), nullptr);
    std::filesystem::remove_all(dir);
}

TEST(Qwen35, ImageInputIsRefusedByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_qwen35_image";
    const auto spec = test::shrinkForTwin("qwen3.5-27b", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->vision.has_value());
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty());
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 5, 17, 42 };
    o.image = exec::ImageInput { exec::syntheticImage(32, 32), 7 };
    const auto run = engine->run(o, p, {});
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.error().message.find("vision tower of qwen3_5"), std::string::npos)
        << run.error().message;
    std::filesystem::remove_all(dir);
}
