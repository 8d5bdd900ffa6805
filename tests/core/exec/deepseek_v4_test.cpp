// DeepSeek-V4 on the engine against its PyTorch twin (plugins/torch/day0_torch_deepseek_v4.py):
// a shrunk deepseek-v4-flash with a sliding, a compressed-sparse and a heavily compressed layer,
// hash-routed and score-routed MoE, hyper-connections; each feature shown to matter.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "model/config_reader.h"
#include "scripted_backend.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

// The bundled deepseek-v4-flash config without its quantisation: shrink does not generate FP4
// experts, and the engine does not read the FP8 `.scale` format (both refused by name).
std::filesystem::path unquantisedConfig(const std::filesystem::path& dir)
{
    std::filesystem::create_directories(dir / "config");
    std::ifstream in(
        std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
    auto config = nlohmann::ordered_json::parse(in);
    config.erase("quantization_config");
    config.erase("expert_dtype");
    std::ofstream(dir / "config" / "config.json") << config.dump(2);
    return dir / "config" / "config.json";
}

} // namespace

TEST(DeepseekV4, ShrunkModelHasEveryLayerKind)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_deepseek_v4_plan";
    std::filesystem::remove_all(dir);
    const auto plan = checkpoint::planShrink(unquantisedConfig(dir).string(), {});
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const auto& spec = plan->spec;
    ASSERT_EQ(spec.family, model::Family::DeepseekV4);
    std::vector<std::int64_t> ratios;
    for (const auto& l : spec.layers) {
        ratios.push_back(l.compressRatio);
    }
    // Flash's layers 0, 2, 3 and 4: sliding + hash, CSA + hash, HCA, CSA (its last layer, 42,
    // is a CSA one too).
    EXPECT_EQ(ratios, (std::vector<std::int64_t> { 0, 4, checkpoint::kShrunkHcaRatio, 4 }));
    EXPECT_TRUE(spec.layers[0].hashRouted && spec.layers[1].hashRouted);
    EXPECT_FALSE(spec.layers[2].hashRouted);
    EXPECT_EQ(spec.layers[0].slidingWindow, checkpoint::kShrunkWindow);
    EXPECT_EQ(spec.compressedAttention->indexerTopK, 2);
    EXPECT_TRUE(exec::unsupportedFeatures(spec).empty())
        << fmt::format("{}", fmt::join(exec::unsupportedFeatures(spec), "; "));
    std::filesystem::remove_all(dir);
}

TEST(DeepseekV4, RefusesWhatItDoesNotComputeByName)
{
    // The published checkpoints' FP8 weights with E8M0 scales and FP4 experts are not read.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto spec = model::readConfigFile(
        std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto missing = fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
    EXPECT_NE(missing.find("quantised deepseek_v4 checkpoints"), std::string::npos) << missing;
    EXPECT_EQ(missing.find("the DeepSeek-V4 family"), std::string::npos) << missing;
}

TEST(DeepseekV4, BackendsAndEmulatedPrecisionsAreRefusedByName)
{
    // The forward computes on the CPU reference loops in fp32 or fp64: a device backend or an
    // emulated precision is refused, named, rather than silently ignored.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_deepseek_v4_refusals";
    std::filesystem::remove_all(dir);
    Progress p;
    ASSERT_TRUE(
        checkpoint::shrinkModel(unquantisedConfig(dir).string(), dir / "ckpt", {}, p, {}).ok());
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto engine = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.promptIds = { 5, 17, 42 };
    o.newTokens = 1;
    o.precision = *exec::parsePrecisionPlan("fp32");
    exec::testing::ScriptedBackend device;
    o.backend = &device;
    const auto onBackend = engine->run(o, p, {});
    ASSERT_FALSE(onBackend.ok());
    EXPECT_EQ(onBackend.error().code, ErrorCode::Unsupported);
    EXPECT_NE(onBackend.error().message.find("on deepseek_v4"), std::string::npos)
        << onBackend.error().message;
    o.backend = nullptr;
    o.precision = *exec::parsePrecisionPlan("bf16");
    const auto bf16 = engine->run(o, p, {});
    ASSERT_FALSE(bf16.ok());
    EXPECT_NE(bf16.error().message.find("precision plan on deepseek_v4"), std::string::npos)
        << bf16.error().message;
    std::filesystem::remove_all(dir);
}

TEST(DeepseekV4, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_deepseek_v4";
    std::filesystem::remove_all(dir);
    const auto config = unquantisedConfig(dir);
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(config.string(), dir / "ckpt", {}, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    // 14 prompt tokens (positions 0-13) and 2 fed decode steps (14, 15): the ratio-4 windows
    // close at positions 3, 7, 11 and, in the last decode step, 15 (its entry pooling window
    // 2's cached projections), the ratio-8 ones at 7 and 15; the indexer keeps 2 of up to 4
    // entries; the window is 4.
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 120, 77, 31, 200 };
    const auto exact = checkpointAgainstTorch(dir, "", prompt, true);
    std::printf("deepseek_v4 fp64 logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over "
                "%zu; selections %zu rows, %zu differ\n",
        exact.logitsMaxRel, exact.logitsRelL2, exact.worstCapture.c_str(), exact.worstCaptureRelL2,
        exact.common, exact.selectionRows, exact.selectionRowsDiffering);
    EXPECT_LE(exact.logitsMaxRel, 1e-10);
    EXPECT_LE(exact.worstCaptureRelL2, 1e-12) << exact.worstCapture;
    EXPECT_EQ(exact.selectionRowsDiffering, 0u);
    EXPECT_GE(exact.common, 4u * 7u);
    const auto a = checkpointAgainstTorch(dir, "", prompt);
    std::printf("deepseek_v4 fp32 max |d| / max |logit| %.2e, logits max rel %.2e, rel L2 %.2e; "
                "worst capture %s %.2e\n",
        a.logitsMaxAbsOverMax, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(),
        a.worstCaptureRelL2);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
    test::expectEachFeatureMatters(dir,
        { "window", "compressor", "overlap", "indexer", "hyper_connections", "sinkhorn",
            "hash_routing", "sqrtsoftplus", "grouped_o_proj", "compress_rope", "output_rope",
            "q_norm", "sinks", "swiglu_clamp", "shared_expert" },
        prompt, true);
    std::filesystem::remove_all(dir);
}
