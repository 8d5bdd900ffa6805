// Kimi-Linear (KDA / MLA-without-RoPE hybrid): the KDA rule's chunked and recurrent forms by hand
// and against each other; `day0 shrink`'s layer lists; the shrunk model on the engine against its
// PyTorch twin (plugins/torch/day0_torch_kimi_linear.py) with each feature shown to matter; and,
// in fp64, a chunked prefill followed by decode steps against one prefill of the whole sequence.
#include "actions/run.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/backend.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/kimi_delta.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

std::string kimiLinearConfig()
{
    return (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
        / "kimi-linear-48b-a3b.json")
        .string();
}

struct KdaInputs {
    std::vector<double> q, k, v, g, beta, state;
};

KdaInputs randomInputs(const exec::DeltaRuleShape& s, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    KdaInputs in;
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
    for (std::int64_t i = 0; i < s.tokens * s.heads * s.keyDim; ++i) {
        in.g.push_back(-unit(rng)); // a decay per key channel
    }
    for (std::int64_t i = 0; i < s.tokens * s.heads; ++i) {
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

TEST(KimiDelta, RecurrentStepByHand)
{
    // One head, dk = 2, dv = 1: S = (2, 4), decays (0.5, 0.25), k = (1, 0), q = (1, 1), v = 3,
    // β = 0.5: S ← (1, 1); δ = 0.5·(3 − 1) = 1; S ← (2, 1); o = 3. A per-head decay could not
    // give channel 2 its own factor.
    const exec::DeltaRuleShape shape { 1, 1, 2, 1 };
    const double q[2] = { 1, 1 };
    const double k[2] = { 1, 0 };
    const double v = 3;
    const double g[2] = { std::log(0.5), std::log(0.25) };
    const double beta = 0.5;
    double state[2] = { 2, 4 };
    double out = 0;
    exec::kimiDeltaRecurrent(q, k, &v, g, &beta, state, &out, shape);
    EXPECT_DOUBLE_EQ(state[0], 2.0);
    EXPECT_DOUBLE_EQ(state[1], 1.0);
    EXPECT_DOUBLE_EQ(out, 3.0);
}

TEST(KimiDelta, ChunkedFormEqualsRecurrentForEveryChunk)
{
    const exec::DeltaRuleShape shape { 11, 3, 5, 4 };
    const KdaInputs in = randomInputs(shape, 7);
    std::vector<double> recurrentState = in.state;
    std::vector<double> recurrent(std::size_t(shape.tokens * shape.heads * shape.valueDim));
    exec::kimiDeltaRecurrent(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
        recurrentState.data(), recurrent.data(), shape);
    for (const std::int64_t chunk : { 1, 3, 4, 11, 64 }) {
        SCOPED_TRACE(chunk);
        std::vector<double> state = in.state;
        std::vector<double> out(recurrent.size());
        exec::kimiDeltaChunked(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
            state.data(), out.data(), shape, chunk);
        EXPECT_LE(maxAbsDiff(out, recurrent), 1e-13);
        EXPECT_LE(maxAbsDiff(state, recurrentState), 1e-13);
    }
}

TEST(KimiLinear, ShrinkNamesTheShrunkLayers)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    std::ifstream file(kimiLinearConfig());
    const auto config = nlohmann::ordered_json::parse(file);
    const auto small = checkpoint::shrinkConfig(config, {});
    ASSERT_TRUE(small.ok()) << small.error().message;
    // Layers 0 (dense, KDA), 1 (MoE, KDA), 3 (MoE, full) are the kinds; layer 2 fills to 4.
    const auto& la = (*small)["linear_attn_config"];
    EXPECT_EQ((*small)["num_hidden_layers"], 4);
    EXPECT_EQ(la["kda_layers"], nlohmann::ordered_json({ 1, 2, 3 }));
    EXPECT_EQ(la["full_attn_layers"], nlohmann::ordered_json({ 4 }));
    EXPECT_EQ(la["num_heads"], 2);
    EXPECT_EQ(la["head_dim"], 16);
    checkpoint::ShrinkOptions five;
    five.layers = 5; // the following original layer (5, KDA) joins
    const auto deeper = checkpoint::shrinkConfig(config, five);
    ASSERT_TRUE(deeper.ok()) << deeper.error().message;
    EXPECT_EQ(
        (*deeper)["linear_attn_config"]["kda_layers"], nlohmann::ordered_json({ 1, 2, 3, 5 }));
    EXPECT_EQ((*deeper)["linear_attn_config"]["full_attn_layers"], nlohmann::ordered_json({ 4 }));
}

TEST(KimiLinear, TwinChunkedAndRecurrentFormsAgree)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    const auto script = test::bridgeScript().parent_path() / "test_kimi_linear_twin.py";
    EXPECT_EQ(std::system(fmt::format("{} {}", kPython, script.string()).c_str()), 0);
}

TEST(KimiLinear, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_kimi_linear";
    const auto spec = test::shrinkForTwin(kimiLinearConfig(), dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->linearAttention.has_value());
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty());
    bool kda = false;
    bool mla = false;
    for (const auto& layer : spec->layers) {
        kda = kda || layer.mixer == model::MixerKind::KimiDelta;
        mla = mla || layer.mixer == model::MixerKind::Attention;
    }
    ASSERT_TRUE(kda && mla) << "the shrunk model keeps both kinds of layer";
    ASSERT_TRUE(spec->mla.noRope);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };
    const std::int64_t chunk = 4; // chunks 4 + 4 + 3, then 3 decode steps
    const auto a = checkpointAgainstTorch(dir, "DAY0_TWIN_CHUNK=3", prompt, false, chunk);
    std::printf("kimi-linear logits max|d|/max %.2e, max rel %.2e, rel L2 %.2e; worst capture "
                "%s %.2e over %zu; router rows differing %zu of %zu\n",
        a.logitsMaxAbsOverMax, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(),
        a.worstCaptureRelL2, a.common, a.selectionRowsDiffering, a.selectionRows);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-5);
    EXPECT_LE(a.worstCaptureRelL2, 1e-4) << a.worstCapture;
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
    EXPECT_GT(a.selectionRows, 0u);
    EXPECT_GE(a.common, 4u * 4u);
    test::expectEachFeatureMatters(dir,
        { "conv", "l2norm", "decay", "channel_decay", "beta", "state", "output_gate", "nope" },
        prompt, false, chunk);
    std::filesystem::remove_all(dir);
}

TEST(KimiLinear, ChunkedPrefillThenDecodeEqualsOnePrefillInFp64)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_kimi_linear_steps";
    const auto spec = test::shrinkForTwin(kimiLinearConfig(), dir);
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
    std::printf(
        "kimi-linear fp64 chunked prefill + decode against one prefill: max|d|/max %.2e\n", rel);
    EXPECT_LE(rel, 1e-9);
    EXPECT_NE(a->dump.tensor("model.layers.0.self_attn"), nullptr);
    EXPECT_NE(a->dump.tensor("model.layers.3.self_attn"), nullptr);

    // On a backend (the CPU one here) the KDA layers' own operators stay on the host, and the
    // dispatch report says so, as it does for Mamba-2 and Gated DeltaNet.
    auto fp32 = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(fp32.ok()) << fp32.error().message;
    const auto backend = exec::makeCpuBackend();
    exec::RunOptions onBackend;
    onBackend.precision = *exec::parsePrecisionPlan("fp32");
    onBackend.promptIds = stepped.promptIds;
    onBackend.newTokens = 2;
    onBackend.backend = backend.get();
    const auto run = fp32->run(onBackend, p, {});
    ASSERT_TRUE(run.ok()) << run.error().message;
    const auto& notes = run->dispatch.notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
        return note.find("KDA") != std::string::npos
            && note.find("on the host CPU") != std::string::npos;
    })) << fmt::format("{}", fmt::join(notes, "; "));
    std::filesystem::remove_all(dir);
}

TEST(KimiLinear, KimiK3IsRefusedFeatureByFeature)
{
    // Kimi-K3's text model runs whole (kimi_k3_test.cpp): SiTU, the attention residuals and the
    // padded A_log are no longer refused. Its MoonViT-3 tower is named as not run, with what it
    // lacks, and an image is refused; a padded A_log with more heads than head_dim is refused.
    setResourceDir(DAY0_RESOURCE_DIR);
    auto spec = model::loadModel((std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
        / "frontier" / "moonshotai--Kimi-K3.json")
                                     .string());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto refused = exec::unsupportedFeatures(*spec);
    EXPECT_TRUE(refused.empty()) << fmt::format("{}", fmt::join(refused, "; "));
    const auto tower = exec::visionTowerNotRun(*spec);
    ASSERT_TRUE(tower.has_value());
    EXPECT_NE(tower->find("vision tower of kimi_k3 (moonvit3"), std::string::npos) << *tower;
    const auto notRun = actions::notRunParts(*spec);
    EXPECT_TRUE(std::any_of(notRun.begin(), notRun.end(), [](const std::string& part) {
        return part.find("moonvit3") != std::string::npos
            && part.find("the text model runs without it") != std::string::npos;
    })) << fmt::format("{}", fmt::join(notRun, "; "));
    spec->linearAttention->valueHeads = spec->linearAttention->valueHeadDim + 1;
    const auto more = exec::unsupportedFeatures(*spec);
    EXPECT_TRUE(std::any_of(more.begin(), more.end(), [](const std::string& r) {
        return r.find("A_log padded to head_dim") != std::string::npos;
    })) << fmt::format("{}", fmt::join(more, "; "));
}

namespace {

// Kimi-Linear with one of Kimi-K3's additions set in its config (`patch` edits the JSON),
// shrunk, against the twin with `feature` switched off there too.
void expectK3AdditionAgrees(const std::string& name,
    const std::function<void(nlohmann::ordered_json&)>& patch, const std::string& feature)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / ("day0_torch_kimi_" + name);
    const auto configPath
        = std::filesystem::temp_directory_path() / ("day0_kimi_" + name + ".json");
    {
        std::ifstream in(kimiLinearConfig());
        auto config = nlohmann::ordered_json::parse(in);
        patch(config);
        std::ofstream(configPath) << config.dump(2);
    }
    const auto spec = test::shrinkForTwin(configPath.string(), dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty());
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };
    const auto a = checkpointAgainstTorch(dir, "DAY0_TWIN_CHUNK=3", prompt, false, 4);
    std::printf("kimi-linear + %s logits max|d|/max %.2e, rel L2 %.2e\n", name.c_str(),
        a.logitsMaxAbsOverMax, a.logitsRelL2);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.worstCaptureRelL2, 1e-4) << a.worstCapture;
    test::expectEachFeatureMatters(dir, { feature }, prompt, false, 4);
    std::filesystem::remove_all(dir);
    std::filesystem::remove(configPath);
}

} // namespace

TEST(KimiLinear, MlaOutputGateAgreesWithPyTorchAndMatters)
{
    // Kimi-K3's mla_use_output_gate: the MLA output times σ(g_proj(x)) before o_proj.
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectK3AdditionAgrees(
        "mla_use_output_gate", [](auto& c) { c["mla_use_output_gate"] = true; }, "mla_gate");
}

TEST(KimiLinear, SafeGateAgreesWithPyTorchAndMatters)
{
    // Kimi-K3's gate_lower_bound (its published -5): g = lb · σ(e^A_log · (f + dt_bias)).
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectK3AdditionAgrees(
        "gate_lower_bound", [](auto& c) { c["linear_attn_config"]["gate_lower_bound"] = -5.0; },
        "safe_gate");
}

TEST(KimiLinear, FullRankGateAgreesWithPyTorchAndMatters)
{
    // Kimi-K3's use_full_rank_gate: the KDA output gate is one g_proj [heads·dim, hidden].
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectK3AdditionAgrees(
        "use_full_rank_gate", [](auto& c) { c["linear_attn_config"]["use_full_rank_gate"] = true; },
        "output_gate");
}

TEST(KimiLinear, LatentMoeAgreesWithPyTorchAndMatters)
{
    // Kimi-K3's latent MoE: routed experts on routed_expert_down_proj(x), their sum through
    // routed_expert_norm and routed_expert_up_proj; the router and shared experts read x.
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectK3AdditionAgrees(
        "latent_moe",
        [](auto& c) {
            c["routed_expert_hidden_size"] = 1152;
            c["latent_moe_use_norm"] = true;
        },
        "latent_norm");
}
