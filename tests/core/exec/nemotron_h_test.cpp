// Nemotron-H on the engine (nemotron_h_block.cpp, mamba2.cpp) against its PyTorch twin
// (plugins/torch/day0_torch_nemotron_h.py): shrunk Nemotron 3 Nano (Mamba-2, attention, MLP and
// MoE layers) and Super (latent MoE) with a 4-token SSD chunk under a 10-token prompt, each
// feature shown to matter, and the chunked prefill followed by recurrent decode steps equal to
// one prefill over the whole sequence.
#include "base/python_json.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

namespace fs = std::filesystem;

const std::vector<std::int64_t> kPrompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };

fs::path configPath(const std::string& bundled)
{
    return fs::path(DAY0_RESOURCE_DIR) / "configs" / (bundled + ".json");
}

// The bundled config `bundled` rewritten into dir / "config" / config.json: without its
// ModelOpt sidecar (so unquantised: shrink does not generate ModelOpt FP8) and, when `pattern`
// is given, with that hybrid_override_pattern.
fs::path writeConfig(const std::string& bundled, const fs::path& dir, const std::string& pattern)
{
    fs::create_directories(dir / "config");
    std::ifstream in(configPath(bundled));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Super's time_step_limit holds Infinity, as Python writes it.
    auto parsed = parsePythonJsonOrdered(text, bundled);
    EXPECT_TRUE(parsed.ok()) << parsed.error().message;
    auto config = parsed->value;
    config.erase("quantization_config");
    if (!pattern.empty()) {
        config["hybrid_override_pattern"] = pattern;
        config["num_hidden_layers"] = pattern.size();
    }
    const fs::path out = dir / "config" / "config.json";
    std::ofstream(out) << dumpPythonJson(config, 2);
    return out;
}

Result<model::ModelSpec> shrinkTo(
    const fs::path& config, const fs::path& ckpt, const checkpoint::ShrinkOptions& so)
{
    fs::remove_all(ckpt);
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(config.string(), ckpt, so, p, {});
    if (!shrunk) {
        return shrunk.error();
    }
    return exec::loadCheckpointModel(ckpt);
}

// The fp64 engine's logits of `prompt` then `forced` fed one decode step at a time
// ([prompt + forced, vocab]).
std::vector<double> engineLogits(const fs::path& ckpt, const std::vector<std::int64_t>& prompt,
    const std::vector<std::int64_t>& forced)
{
    const auto spec = exec::loadCheckpointModel(ckpt);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(ckpt);
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!spec.ok() || !weights.ok()) {
        return {};
    }
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, true, p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) {
        return {};
    }
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp64");
    o.promptIds = prompt;
    o.newTokens = std::int64_t(forced.size()) + 1;
    o.forcedTokens = forced;
    const auto run = engine->run(o, p, {});
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (!run.ok()) {
        return {};
    }
    return run->dump.tensor("lm_head")->toDoubles();
}

double maxRelative(const std::vector<double>& a, const std::vector<double>& b)
{
    EXPECT_EQ(a.size(), b.size());
    double largest = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        largest = std::max(largest, std::fabs(b[i]));
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
    return largest > 0.0 ? worst / largest : worst;
}

} // namespace

TEST(NemotronH, ShrinkKeepsEveryLayerKindAndASmallChunk)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name : { "nemotron-3-nano-30b", "nemotron-3-super-120b-fp8" }) {
        SCOPED_TRACE(name);
        const auto dir = fs::temp_directory_path() / "day0_torch_nemotron_h_plan";
        fs::remove_all(dir);
        const auto config = writeConfig(name, dir, "");
        const auto plan = checkpoint::planShrink(config.string(), {});
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        const auto& spec = plan->spec;
        EXPECT_EQ(plan->config["hybrid_override_pattern"], "MEM*");
        const auto has = [&](model::MixerKind mixer, model::FfnKind ffn) {
            return std::any_of(spec.layers.begin(), spec.layers.end(),
                [&](const model::LayerSpec& l) { return l.mixer == mixer && l.ffn == ffn; });
        };
        EXPECT_TRUE(has(model::MixerKind::Mamba2, model::FfnKind::None));
        EXPECT_TRUE(has(model::MixerKind::Attention, model::FfnKind::None));
        EXPECT_TRUE(has(model::MixerKind::None, model::FfnKind::Moe));
        ASSERT_TRUE(spec.mamba);
        EXPECT_EQ(spec.mamba->chunkSize, checkpoint::kShrunkMambaChunk);
        EXPECT_EQ(spec.mamba->numGroups, 2);
        EXPECT_GT(spec.mamba->numHeads, spec.mamba->numGroups);
        EXPECT_TRUE(exec::unsupportedFeatures(spec).empty())
            << fmt::format("{}", fmt::join(exec::unsupportedFeatures(spec), "; "));
        fs::remove_all(dir);
    }
    // The chunk is a shrink parameter; a pattern with an MLP layer keeps it.
    checkpoint::ShrinkOptions so;
    so.chunk = 3;
    so.layers = 6;
    const auto dir = fs::temp_directory_path() / "day0_torch_nemotron_h_plan_mlp";
    fs::remove_all(dir);
    const auto plan = checkpoint::planShrink(
        writeConfig("nemotron-3-nano-30b", dir, "MEMEM*EM-EM").string(), so);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->config["hybrid_override_pattern"], "MEME*-");
    EXPECT_EQ(plan->spec.mamba->chunkSize, 3);
    fs::remove_all(dir);
}

TEST(NemotronH, RefusesWhatItDoesNotComputeByName)
{
    // Super ships ModelOpt FP8, which no twin has checked the engine's reading of.
    const auto super = model::readConfigFile(configPath("nemotron-3-super-120b-fp8"));
    ASSERT_TRUE(super.ok()) << super.error().message;
    const auto missing = fmt::format("{}", fmt::join(exec::unsupportedFeatures(*super), "; "));
    EXPECT_NE(missing.find("quantised nemotron_h"), std::string::npos) << missing;
    EXPECT_EQ(missing.find("the nemotron_h family"), std::string::npos) << missing;
    EXPECT_EQ(missing.find("mamba2 layers"), std::string::npos) << missing;
    // A dt clamp other than the kernels' default (0, inf) is not modelled.
    std::ifstream in(configPath("nemotron-3-nano-30b"));
    auto config = nlohmann::json::parse(in);
    config["time_step_limit"] = { 0.001, 0.1 };
    const auto clamped = model::readConfig(config, "config.json");
    ASSERT_FALSE(clamped.ok());
    EXPECT_NE(clamped.error().message.find("time_step_limit"), std::string::npos)
        << clamped.error().message;
    config["time_step_limit"] = { 0.0, std::numeric_limits<double>::infinity() };
    EXPECT_TRUE(model::readConfig(config, "config.json").ok());
}

TEST(NemotronH, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // Nano's config with an MLP layer in its pattern (Nano and Super have none): Mamba-2,
    // attention, Mamba-2, MLP, MoE, Mamba-2; chunk 4 under the 10-token prompt (4 + 4 + 2) and
    // 3 decode steps.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = fs::temp_directory_path() / "day0_torch_nemotron_h";
    fs::remove_all(dir);
    checkpoint::ShrinkOptions so;
    so.layers = 6;
    const auto spec = shrinkTo(writeConfig("nemotron-3-nano-30b", dir, "M*M-EM"), dir / "ckpt", so);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_EQ(spec->layers.size(), 6u);
    ASSERT_EQ(spec->mamba->chunkSize, 4);
    ASSERT_FALSE(spec->gatedMlp);
    // The math, exactly: the fp64 engine against the float64 twin, whose scan is chunked
    // (default) or recurrent over the whole sequence.
    for (const char* scan : { "", "DAY0_TWIN_SCAN=recurrent" }) {
        const auto exact = checkpointAgainstTorch(dir, scan, kPrompt, true);
        std::printf("nemotron_h fp64 (twin scan %s) logits max rel %.2e, rel L2 %.2e; worst "
                    "capture %s %.2e over %zu; expert rows differing %zu of %zu\n",
            *scan != '\0' ? "recurrent" : "chunked", exact.logitsMaxRel, exact.logitsRelL2,
            exact.worstCapture.c_str(), exact.worstCaptureRelL2, exact.common,
            exact.selectionRowsDiffering, exact.selectionRows);
        EXPECT_LE(exact.logitsMaxRel, 1e-10);
        EXPECT_LE(exact.worstCaptureRelL2, 1e-12) << exact.worstCapture;
        EXPECT_GE(exact.common, 6u * 3u);
        EXPECT_EQ(exact.selectionRowsDiffering, 0u);
    }
    // fp32 engine against the float64 twin: the bound.
    const auto a = checkpointAgainstTorch(dir, "", kPrompt);
    std::printf("nemotron_h fp32 max |d| / max |logit| %.2e, logits max rel %.2e; worst capture "
                "%s %.2e\n",
        a.logitsMaxAbsOverMax, a.logitsMaxRel, a.worstCapture.c_str(), a.worstCaptureRelL2);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    test::expectEachFeatureMatters(dir,
        { "conv", "conv_bias", "gate", "gate_order", "softplus", "dt_bias", "d_skip", "state",
            "groups", "norm_groups", "relu2", "e_score_bias", "routed_scaling", "shared_experts" },
        kPrompt, true);
    fs::remove_all(dir);
}

TEST(NemotronH, SuperLatentMoeAgreesWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // Super's structure (latent MoE, MTP block) without its ModelOpt FP8, which shrink does not
    // generate and the engine refuses: its config.json alone, shrunk.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = fs::temp_directory_path() / "day0_torch_nemotron_h_super";
    fs::remove_all(dir);
    const auto spec = shrinkTo(writeConfig("nemotron-3-super-120b-fp8", dir, ""), dir / "ckpt", {});
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->moe);
    ASSERT_GT(spec->moe->latentSize, 0);
    ASSERT_FALSE(spec->quantization);
    const auto exact = checkpointAgainstTorch(dir, "", kPrompt, true);
    std::printf("nemotron_h super fp64 logits max rel %.2e; worst capture %s %.2e over %zu\n",
        exact.logitsMaxRel, exact.worstCapture.c_str(), exact.worstCaptureRelL2, exact.common);
    EXPECT_LE(exact.logitsMaxRel, 1e-10);
    EXPECT_LE(exact.worstCaptureRelL2, 1e-12) << exact.worstCapture;
    const auto a = checkpointAgainstTorch(dir, "", kPrompt);
    std::printf("nemotron_h super fp32 max |d| / max |logit| %.2e\n", a.logitsMaxAbsOverMax);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    test::expectEachFeatureMatters(dir, { "latent", "routed_scaling" }, kPrompt, true);
    fs::remove_all(dir);
}

TEST(NemotronH, ChunkedPrefillThenDecodeEqualsOnePrefill)
{
    // The engine alone in fp64: a 10-token chunked prefill (chunk 4: 4 + 4 + 2) and 3 recurrent
    // decode steps carrying the conv and SSM states give the logits of one 13-token prefill
    // (4 + 4 + 4 + 1), and the chunk size (3, 4, 16: one chunk) changes nothing.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = fs::temp_directory_path() / "day0_torch_nemotron_h_steps";
    fs::remove_all(dir);
    const auto config = writeConfig("nemotron-3-nano-30b", dir, "M*M-EM");
    const std::vector<std::int64_t> forced { 31, 400, 1000 };
    std::vector<std::int64_t> whole = kPrompt;
    whole.insert(whole.end(), forced.begin(), forced.end());
    std::vector<double> reference;
    for (const std::int64_t chunk : { 4, 3, 16 }) {
        SCOPED_TRACE(chunk);
        checkpoint::ShrinkOptions so;
        so.layers = 6;
        so.chunk = chunk;
        const auto spec = shrinkTo(config, dir / "ckpt", so);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        ASSERT_EQ(spec->mamba->chunkSize, chunk);
        const auto stepped = engineLogits(dir / "ckpt", kPrompt, forced);
        const auto once = engineLogits(dir / "ckpt", whole, {});
        ASSERT_FALSE(stepped.empty());
        const double rel = maxRelative(stepped, once);
        std::printf("nemotron_h fp64 chunk %lld: prefill + 3 decode steps vs one prefill, max "
                    "|d| / max |logit| %.2e\n",
            static_cast<long long>(chunk), rel);
        EXPECT_LE(rel, 1e-9);
        if (reference.empty()) {
            reference = once;
        } else {
            const double across = maxRelative(once, reference);
            std::printf("  against chunk 4: %.2e\n", across);
            EXPECT_LE(across, 1e-9);
        }
    }
    fs::remove_all(dir);
}
