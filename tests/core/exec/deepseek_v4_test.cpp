// DeepSeek-V4 on the engine against its PyTorch twin (plugins/torch/day0_torch_deepseek_v4.py):
// a shrunk deepseek-v4-flash with a sliding, a compressed-sparse and a heavily compressed layer,
// hash-routed and score-routed MoE, hyper-connections; each feature shown to matter.
#include "base/resources.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "scripted_backend.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

// The bundled deepseek-v4-flash config without its quantisation, for the twin, which reads
// plain float tensors (the released format: ReleasedFormatDequantisesBitExact).
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

TEST(DeepseekV4, ReleasedFormatIsComputed)
{
    // The published checkpoints' FP8 weights with E8M0 scales and FP4 experts are dequantised
    // on load (ReleasedFormatDequantisesBitExact), so nothing of the released config is missing.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto spec = model::readConfigFile(
        std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->quantization.has_value());
    const auto missing = fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
    EXPECT_TRUE(missing.empty()) << missing;
}

namespace {

// The formats by their definitions (OCP FP8 E4M3 "fn", OCP MX E2M1 and E8M0), written out here
// so that the loader's decoding is checked against an independent one.
double e4m3(std::uint8_t b)
{
    const int e = (b >> 3) & 0xF;
    const int m = b & 7;
    const double sign = (b & 0x80) != 0 ? -1.0 : 1.0;
    if (e == 0xF && m == 7) {
        return std::nan("");
    }
    return sign * (e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7));
}

double e2m1(std::uint8_t nibble)
{
    static constexpr double kMagnitude[8] = { 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0 };
    return ((nibble & 8) != 0 ? -1.0 : 1.0) * kMagnitude[nibble & 7];
}

double e8m0(std::uint8_t b) { return std::ldexp(1.0, int(b) - 127); }

/// The stored tensor `name` of `ckpt` decoded by hand: FP8 codes × the 128 × 128 block's E8M0
/// scale, or FP4 codes (element 2k in the low nibble) × the E8M0 scale of each 32 inputs.
std::vector<double> decodeByHand(const checkpoint::Checkpoint& ckpt,
    const checkpoint::CheckpointTensor& codes, const checkpoint::CheckpointTensor& scale)
{
    const auto c = *ckpt.data(codes);
    const auto s = *ckpt.data(scale);
    const bool fp4 = codes.dtype == DType::I8;
    const std::int64_t rows = codes.shape[0];
    const std::int64_t cols = fp4 ? codes.shape[1] * 2 : codes.shape[1];
    const std::int64_t scaleCols = scale.shape[1];
    std::vector<double> out(std::size_t(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < cols; ++k) {
            double v = 0.0;
            double x = 0.0;
            if (fp4) {
                const auto byte = std::uint8_t(c[std::size_t(r * cols / 2 + k / 2)]);
                v = e2m1(k % 2 == 0 ? (byte & 0xF) : (byte >> 4));
                x = e8m0(std::uint8_t(s[std::size_t(r * scaleCols + k / 32)]));
            } else {
                v = e4m3(std::uint8_t(c[std::size_t(r * cols + k)]));
                x = e8m0(std::uint8_t(s[std::size_t((r / 128) * scaleCols + k / 128)]));
            }
            out[std::size_t(r * cols + k)] = v * x;
        }
    }
    return out;
}

} // namespace

namespace {

void checkReleasedFormat(bool fp4Experts)
{
    const auto dir = std::filesystem::temp_directory_path()
        / (fp4Experts ? "day0_deepseek_v4_released_fp4" : "day0_deepseek_v4_released_fp8");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "config");
    {
        std::ifstream in(
            std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
        auto config = nlohmann::ordered_json::parse(in);
        if (!fp4Experts) {
            config.erase("expert_dtype");
        }
        std::ofstream(dir / "config" / "config.json") << config.dump(2);
    }
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(
        (dir / "config" / "config.json").string(), dir / "ckpt", {}, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->quantization.has_value());
    ASSERT_EQ(spec->quantization->expertScheme.has_value(), fp4Experts);
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    const auto ckpt = checkpoint::Checkpoint::open(dir / "ckpt");
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
    std::map<std::string, const checkpoint::CheckpointTensor*> stored;
    for (const auto& t : ckpt->tensors()) {
        stored[t.name] = &t;
    }
    std::map<std::string, numerics::Tensor> decoded;
    int fp8 = 0;
    int fp4 = 0;
    for (const auto& req : exec::detail::requiredWeights(*spec)) {
        const auto it = stored.find(req.name);
        ASSERT_NE(it, stored.end()) << req.name;
        const auto& t = *it->second;
        bool exact = false;
        auto loaded = exec::detail::loadForwardWeight(**weights, req, *spec, DType::F32, exact);
        ASSERT_TRUE(loaded.ok()) << loaded.error().message;
        ASSERT_EQ(loaded->shape(), req.shape) << req.name;
        const bool quantised = t.dtype == DType::F8E4M3 || t.dtype == DType::I8;
        if (!quantised) {
            decoded.emplace(req.name, std::move(*loaded));
            continue;
        }
        const auto scale = stored.find(req.name.substr(0, req.name.size() - 6) + "scale");
        ASSERT_NE(scale, stored.end()) << req.name;
        ASSERT_EQ(scale->second->dtype, DType::F8E8M0) << req.name;
        const auto byHand = decodeByHand(*ckpt, t, *scale->second);
        const auto values = loaded->toDoubles();
        ASSERT_EQ(values.size(), byHand.size()) << req.name;
        std::size_t differ = 0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            differ += values[i] == byHand[i] ? 0 : 1;
        }
        EXPECT_EQ(differ, 0u) << req.name;
        (t.dtype == DType::I8 ? fp4 : fp8) += 1;
        decoded.emplace(req.name, numerics::Tensor::fromDoubles(req.shape, byHand).to(DType::F32));
    }
    std::printf(
        "deepseek_v4 released format: %d FP8 and %d FP4 weights decode bit-exactly\n", fp8, fp4);
    EXPECT_GT(fp8, 0);
    EXPECT_EQ(fp4 > 0, fp4Experts);
    // The engine on the checkpoint and on the hand-decoded weights: the same logits.
    const exec::MemoryWeights memory(std::move(decoded));
    auto unquantised = *spec;
    unquantised.quantization.reset();
    std::vector<std::vector<double>> logits;
    for (const bool fromCheckpoint : { true, false }) {
        auto engine = exec::Engine::create(fromCheckpoint ? *spec : unquantised,
            fromCheckpoint ? static_cast<const exec::WeightSource&>(**weights) : memory, false, p,
            {});
        ASSERT_TRUE(engine.ok()) << engine.error().message;
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp32");
        o.promptIds = { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 120, 77, 31, 200 };
        o.newTokens = 2;
        o.capture.filters = { "lm_head" };
        auto run = engine->run(o, p, {});
        ASSERT_TRUE(run.ok()) << run.error().message;
        logits.push_back(run->dump.tensor("lm_head")->toDoubles());
    }
    EXPECT_EQ(logits[0], logits[1]);
    std::filesystem::remove_all(dir);
}

TEST(DeepseekV4, BackendsAreRefusedByName)
{
    // The forward computes on the CPU reference loops (fp64, fp32 and the emulated precisions,
    // deepseek_v4_precision_test.cpp): a device backend is refused, named, rather than silently
    // ignored.
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
    EXPECT_TRUE(bf16.ok()) << bf16.error().message;
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

} // namespace

TEST(DeepseekV4, ReleasedFormatDequantisesBitExact)
{
    // `day0 shrink` of the released config writes its format: block FP8 (E4M3) with an F8_E8M0
    // `.scale` per 128 × 128 block, routed experts as FP4 (E2M1 codes packed in I8 [out, in/2])
    // with an F8_E8M0 `.scale` per 32 inputs; without expert_dtype (sgl-project's FP8 re-pack)
    // the experts are block FP8 too, read without the dequantising reader. Every quantised
    // weight the forward loads equals its codes decoded by hand, bit for bit, and the engine's
    // logits on the checkpoint equal those on the hand-decoded weights held in memory.
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const bool fp4Experts : { true, false }) {
        SCOPED_TRACE(fp4Experts ? "FP4 experts" : "FP8 experts");
        checkReleasedFormat(fp4Experts);
    }
}
