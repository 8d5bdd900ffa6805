// The fp32 engine against an independent PyTorch computation of the same checkpoint, through the
// dump bridge plugins/torch/day0_dump.py (Debian's python3-torch), computed there in float64 so
// that the differences are the fp32 engine's own rounding.
#include "base/json_util.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "numerics/dump_compare.h"
#include "numerics/metrics.h"
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
#include <map>

using namespace day0;

namespace {

using test::Agreement;
using test::bridgeScript;
using test::kPython;
using test::logitsMaxRel;
using test::torchAvailable;

Agreement checkAgainstTorch(const test::TinyModel& m)
{
    const auto dir = std::filesystem::temp_directory_path() / ("day0_torch_" + m.spec.modelType);
    std::filesystem::remove_all(dir);
    test::writeCheckpoint(m, dir);
    exec::MemoryWeights weights(m.weights);
    Progress p;
    auto engine = exec::Engine::create(m.spec, weights, false, p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 5, 77, 12, 200, 31, 9 };
    o.newTokens = 4;
    auto ours = engine->run(o, p, {});
    EXPECT_TRUE(ours.ok()) << ours.error().message;
    const auto& gen = ours->generated;
    const std::string command
        = fmt::format("{} {} {} --ids {} --tokens 4 --forced {} --dtype float64 --out {} > {} 2>&1",
            kPython, bridgeScript().string(), dir.string(), fmt::join(o.promptIds, ","),
            fmt::join(gen.begin(), gen.end() - 1, ","), (dir / "torch").string(),
            (dir / "torch.log").string());
    const int rc = std::system(command.c_str());
    EXPECT_EQ(rc, 0) << command;
    auto theirs = checkpoint::readDump(dir / "torch");
    EXPECT_TRUE(theirs.ok()) << (theirs.ok() ? "" : theirs.error().message);
    Agreement a;
    if (!theirs.ok() || !ours.ok()) {
        return a;
    }
    EXPECT_EQ(theirs->info.fingerprint, ours->dump.info.fingerprint);
    EXPECT_EQ(theirs->info.inputIds, ours->dump.info.inputIds);
    EXPECT_EQ(theirs->info.generatedIds, ours->dump.info.generatedIds);
    // Sigmoid routers' selection scores (σ + bias) and group stage: both sides record them.
    for (const auto& c : ours->dump.captures()) {
        if (c.name.ends_with("#score")) {
            EXPECT_NE(theirs->tensor(c.name), nullptr) << c.name;
            EXPECT_EQ(theirs->info.extra.value("router", nlohmann::json()),
                ours->dump.info.extra.at("router"));
        }
    }
    a.logitsMaxRel = logitsMaxRel(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
    const auto logits
        = numerics::compareTensors(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
    a.logitsRelL2 = logits->relL2;
    for (const auto& c : theirs->captures()) {
        const auto* ourTensor = ours->dump.tensor(c.name);
        const auto* theirTensor = theirs->tensor(c.name);
        if (ourTensor == nullptr || theirTensor == nullptr) {
            continue;
        }
        ++a.common;
        if (c.name.ends_with("#topk")) {
            const auto e = numerics::compareExpertSelection(*theirTensor, *ourTensor);
            EXPECT_TRUE(e.ok());
            EXPECT_EQ(e->exactSetShare, 1.0) << c.name;
            continue;
        }
        const auto err = numerics::compareTensors(*theirTensor, *ourTensor);
        EXPECT_TRUE(err.ok()) << c.name << ": " << (err.ok() ? "" : err.error().message);
        if (err.ok() && err->relL2 > a.worstCaptureRelL2) {
            a.worstCaptureRelL2 = err->relL2;
            a.worstCapture = c.name;
        }
    }
    std::filesystem::remove_all(dir);
    return a;
}

} // namespace

TEST(TorchBridge, Fp32LogitsAgreeWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    for (const auto& m : { test::tinyLlama(), test::tinyQwen2(), test::tinyMixtral(),
             test::tinyQwen3Moe(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const Agreement a = checkAgainstTorch(m);
        std::printf(
            "%-12s logits max rel %.2e, rel L2 %.2e; %zu common captures, worst %s rel L2 %.2e\n",
            m.spec.modelType.c_str(), a.logitsMaxRel, a.logitsRelL2, a.common,
            a.worstCapture.c_str(), a.worstCaptureRelL2);
        EXPECT_LE(a.logitsMaxRel, 1e-4);
        EXPECT_LE(a.logitsRelL2, 1e-6);
        EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
        EXPECT_GE(a.common, 2u + 4u * std::size_t(m.spec.numLayers));
    }
}

TEST(TorchBridge, EmulatedBf16DriftsLikePyTorchBf16)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // The error of our emulated bf16 against fp32, as a ratio to the error PyTorch's own bf16
    // forward has against the same fp32 reference (the measured noise floor of day0 compare).
    for (const auto& m : { test::tinyLlama(), test::tinyDeepseekV3() }) {
        SCOPED_TRACE(m.spec.modelType);
        const auto dir
            = std::filesystem::temp_directory_path() / ("day0_torch_bf16_" + m.spec.modelType);
        std::filesystem::remove_all(dir);
        test::writeCheckpoint(m, dir, DType::BF16);
        Progress p;
        // The checkpoint holds bf16 weights: the fp32 reference runs on the same rounded values.
        std::map<std::string, numerics::Tensor> rounded;
        for (const auto& [name, t] : m.weights) {
            rounded[name] = t.to(DType::BF16).to(DType::F32);
        }
        exec::MemoryWeights roundedWeights(rounded);
        auto fromCheckpoint = exec::Engine::create(m.spec, roundedWeights, false, p, {});
        ASSERT_TRUE(fromCheckpoint.ok());
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp32");
        o.promptIds = { 5, 77, 12, 200, 31, 9, 44, 101 };
        o.newTokens = 3;
        const auto ref = fromCheckpoint->run(o, p, {});
        ASSERT_TRUE(ref.ok());
        o.precision = *exec::parsePrecisionPlan("bf16");
        o.forcedTokens = { ref->generated[0], ref->generated[1] };
        const auto ours = fromCheckpoint->run(o, p, {});
        ASSERT_TRUE(ours.ok());
        const std::string command = fmt::format(
            "{} {} {} --ids {} --tokens 3 --forced {} --dtype bfloat16 --out {} > {} 2>&1", kPython,
            bridgeScript().string(), dir.string(), fmt::join(o.promptIds, ","),
            fmt::join(o.forcedTokens, ","), (dir / "torch").string(), (dir / "torch.log").string());
        ASSERT_EQ(std::system(command.c_str()), 0) << command;
        const auto torch = checkpoint::readDump(dir / "torch");
        ASSERT_TRUE(torch.ok()) << torch.error().message;
        for (const auto& c : ref->dump.captures()) {
            const auto* r = ref->dump.tensor(c.name);
            const auto* t = torch->tensor(c.name);
            if (r == nullptr || t == nullptr || c.name.ends_with("#topk")
                || c.name == "model.embed_tokens") {
                continue;
            }
            const double oursErr = numerics::compareTensors(*r, *ours->dump.tensor(c.name))->relL2;
            const double torchErr = numerics::compareTensors(*r, *t)->relL2;
            std::printf("%-12s %-42s day0 bf16 %.2e  torch bf16 %.2e  ratio %.2f\n",
                m.spec.modelType.c_str(), c.name.c_str(), oursErr, torchErr, oursErr / torchErr);
            EXPECT_GT(oursErr / torchErr, 0.5) << c.name;
            EXPECT_LT(oursErr / torchErr, 2.0) << c.name;
        }
        std::filesystem::remove_all(dir);
    }
}

TEST(TorchBridge, TrainedWeightsDriftInBf16AsPyTorchsBf16Does)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // stories260K, a trained tiny Llama (tests/data/exec/SOURCES.md): on trained weights the
    // emulated bf16 must drift from fp32 as PyTorch's own bf16 forward does (bf16 weights,
    // activations and residual stream; RMSNorm and softmax in fp32), layer by layer and in the
    // logits, over 64 tokens of the model's own text.
    const auto ckpt = std::filesystem::path(DAY0_TEST_DATA_DIR) / "exec" / "stories260K-hf";
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_stories_bf16";
    std::filesystem::remove_all(dir);
    Progress p;
    const auto spec = exec::loadCheckpointModel(ckpt);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(ckpt);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto engine = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    // In-distribution text: the fp32 model's greedy continuation of BOS (id 1).
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 1 };
    o.newTokens = 63;
    const auto text = engine->run(o, p, {});
    ASSERT_TRUE(text.ok()) << text.error().message;
    o.promptIds.insert(o.promptIds.end(), text->generated.begin(), text->generated.end());
    ASSERT_EQ(o.promptIds.size(), 64U);
    o.newTokens = 1;
    const auto ref = engine->run(o, p, {});
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    o.precision = *exec::parsePrecisionPlan("bf16");
    const auto ours = engine->run(o, p, {});
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    const std::string command
        = fmt::format("{} {} {} --ids {} --tokens 1 --dtype bfloat16 --out {} > {} 2>&1", kPython,
            bridgeScript().string(), ckpt.string(), fmt::join(o.promptIds, ","),
            (dir / "torch").string(), (dir.string() + ".log"));
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const auto torch = checkpoint::readDump(dir / "torch");
    ASSERT_TRUE(torch.ok()) << torch.error().message;
    int layers = 0;
    for (const auto& c : ref->dump.captures()) {
        const auto* r = ref->dump.tensor(c.name);
        const auto* t = torch->tensor(c.name);
        if (r == nullptr || t == nullptr || c.name.ends_with("#topk")) {
            continue;
        }
        const double oursErr = numerics::compareTensors(*r, *ours->dump.tensor(c.name))->relL2;
        const double torchErr = numerics::compareTensors(*r, *t)->relL2;
        std::printf("%-42s day0 bf16 %.2e  torch bf16 %.2e  ratio %.2f\n", c.name.c_str(), oursErr,
            torchErr, oursErr / torchErr);
        EXPECT_GT(oursErr / torchErr, 0.5) << c.name;
        EXPECT_LT(oursErr / torchErr, 2.0) << c.name;
        layers += c.name.find("layers.") != std::string::npos ? 1 : 0;
    }
    EXPECT_GE(layers, 25) << "5 decoder layers, 5 captures each";
    const auto oursLogits
        = numerics::compareLogits(*ref->dump.tensor("lm_head"), *ours->dump.tensor("lm_head"));
    const auto torchLogits
        = numerics::compareLogits(*ref->dump.tensor("lm_head"), *torch->tensor("lm_head"));
    ASSERT_TRUE(oursLogits.ok() && torchLogits.ok());
    std::printf("logits: day0 bf16 KL %.3e top-1 %.1f%%; torch bf16 KL %.3e top-1 %.1f%%\n",
        oursLogits->klMean, 100 * oursLogits->top1Agreement, torchLogits->klMean,
        100 * torchLogits->top1Agreement);
    EXPECT_GT(oursLogits->klMean / torchLogits->klMean, 0.5);
    EXPECT_LT(oursLogits->klMean / torchLogits->klMean, 2.0);
    EXPECT_LE(std::fabs(oursLogits->top1Agreement - torchLogits->top1Agreement), 0.08);
    // The default table passes this healthy bf16 run (day0 run --precision bf16 --reference
    // fp32), as it passes PyTorch's own bf16 of the same weights.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto table = numerics::resolveToleranceTable("day0-default");
    ASSERT_TRUE(table.ok()) << table.error().message;
    numerics::CompareOptions compare;
    compare.table = &*table;
    const auto verdicts = numerics::compareDumps(ref->dump, ours->dump, compare, p, {});
    ASSERT_TRUE(verdicts.ok()) << verdicts.error().message;
    EXPECT_EQ(verdicts->failCount, 0) << verdicts->status();
    EXPECT_GE(verdicts->passCount, 25);
    std::filesystem::remove_all(dir);
}

TEST(TorchBridge, ShrunkBundledModelsAgreeWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // `day0 shrink` checkpoints (sharded safetensors; block-FP8 weights with partial edge blocks
    // for DeepSeek-V3 and Kimi-K2) through core/checkpoint, against PyTorch in float64.
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name :
        { "deepseek-v3", "kimi-k2", "mixtral-8x7b", "qwen3-30b-a3b", "llama-3.1-8b" }) {
        SCOPED_TRACE(name);
        const auto dir
            = std::filesystem::temp_directory_path() / (std::string("day0_torch_shrunk_") + name);
        std::filesystem::remove_all(dir);
        Progress p;
        checkpoint::ShrinkOptions so;
        so.layers = 3;
        const auto shrunk = checkpoint::shrinkModel(name, dir / "ckpt", so, p, {});
        ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
        const auto spec = exec::loadCheckpointModel(dir / "ckpt");
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        const auto weights = exec::openCheckpointWeights(dir / "ckpt");
        ASSERT_TRUE(weights.ok()) << weights.error().message;
        auto engine = exec::Engine::create(*spec, **weights, false, p, {});
        ASSERT_TRUE(engine.ok()) << engine.error().message;
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp32");
        o.promptIds = { 5, 17, 42, 99, 7, 3 };
        o.newTokens = 3;
        const auto ours = engine->run(o, p, {});
        ASSERT_TRUE(ours.ok()) << ours.error().message;
        const std::string command = fmt::format(
            "{} {} {} --ids {} --tokens 3 --forced {} --dtype float64 --out {} > {} 2>&1", kPython,
            bridgeScript().string(), (dir / "ckpt").string(), fmt::join(o.promptIds, ","),
            fmt::join(ours->generated.begin(), ours->generated.end() - 1, ","),
            (dir / "torch").string(), (dir / "torch.log").string());
        ASSERT_EQ(std::system(command.c_str()), 0) << command;
        const auto theirs = checkpoint::readDump(dir / "torch");
        ASSERT_TRUE(theirs.ok()) << theirs.error().message;
        EXPECT_EQ(theirs->info.fingerprint, ours->dump.info.fingerprint);
        const auto logits
            = numerics::compareTensors(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
        std::printf("%-14s logits rel L2 %.2e\n", name, logits->relL2);
        EXPECT_LE(logits->relL2, 1e-6);
        EXPECT_EQ(theirs->info.generatedIds, ours->dump.info.generatedIds);
        std::filesystem::remove_all(dir);
    }
}

// MLA's latent norms (q_a_layernorm, kv_a_layernorm) take HF's RMSNorm default eps, 1e-6, not
// rms_norm_eps (which Kimi-K2.5/K2.6, GLM-5 and Kimi-K3 set to 1e-5). With rms_norm_eps raised to
// 0.5 in a shrunk DeepSeek-V3's config the decoder's norms use 0.5 and the latents still 1e-6 in
// the engine and the twin alike; the twin with rms_norm_eps in its latent norms must then miss.
TEST(TorchBridge, MlaLatentNormsTakeHfsDefaultEpsNotRmsNormEps)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_mla_latent_eps";
    ASSERT_TRUE(test::shrinkForTwin("deepseek-v3", dir).ok());
    const auto config = dir / "ckpt" / "config.json";
    {
        std::ifstream in(config);
        auto j = nlohmann::ordered_json::parse(in);
        j["rms_norm_eps"] = 0.5;
        std::ofstream(config) << j.dump(2);
    }
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->normEps, 0.5);
    EXPECT_EQ(spec->mla.latentNormEps, 1e-6);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23 };
    const Agreement a = test::checkpointAgainstTorch(dir, "", prompt);
    std::printf(
        "deepseek-v3 with rms_norm_eps 0.5: logits max|d|/max %.2e\n", a.logitsMaxAbsOverMax);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    test::expectEachFeatureMatters(dir, { "latent_eps" }, prompt);
    std::filesystem::remove_all(dir);
}

namespace {

/// Shrinks `model`, runs it with a synthetic `height` x `width` image on the fp32 engine and in
/// PyTorch (float64, plugins/torch/day0_torch_vl.py: its own processor reshape, Conv3d, window
/// reordering and M-RoPE), and checks logits and every common capture. `fullAttention`, when not
/// empty, replaces the shrunk config's fullatt_block_indexes (Qwen2.5-VL window attention).
void checkVisionAgainstTorch(const std::string& model, std::int64_t height, std::int64_t width,
    std::size_t expectedVisionCaptures, const std::vector<int>& fullAttention = {})
{
    SCOPED_TRACE(model);
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path()
        / ("day0_torch_vl_" + std::filesystem::path(model).stem().string());
    std::filesystem::remove_all(dir);
    Progress p;
    checkpoint::ShrinkOptions so;
    so.layers = 3;
    const auto shrunk = checkpoint::shrinkModel(model, dir / "shrunk", so, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    // Shrink initialises biases to zero and norms to one, as HF does; give them values so that
    // every bias and norm weight of the tower and the decoder is exercised, and rewrite the
    // checkpoint (one F32 model.safetensors) with the same names.
    test::TinyModel m;
    auto config = readJsonFile(dir / "shrunk" / "config.json");
    ASSERT_TRUE(config.ok());
    m.config = *config;
    if (!fullAttention.empty()) {
        m.config["vision_config"]["fullatt_block_indexes"] = fullAttention;
    }
    const auto source = exec::openCheckpointWeights(dir / "shrunk");
    ASSERT_TRUE(source.ok()) << source.error().message;
    std::uint32_t state = 12345;
    const auto noise = [&state] {
        state = state * 1664525u + 1013904223u;
        return double(state >> 8) / double(1u << 24) - 0.5;
    };
    for (const auto& name : (*source)->names()) {
        auto t = (*source)->read(name);
        ASSERT_TRUE(t.ok()) << t.error().message;
        auto values = t->toDoubles();
        if (t->rank() == 1) {
            const bool bias = name.ends_with(".bias");
            for (auto& v : values) {
                v = bias ? 0.1 * noise() : 1.0 + 0.2 * noise();
            }
        }
        m.weights[name] = numerics::Tensor::fromDoubles(t->shape(), values).to(DType::F32);
    }
    test::writeCheckpoint(m, dir / "ckpt");
    const auto image = exec::syntheticImage(height, width);
    {
        std::ofstream ppm(dir / "image.ppm", std::ios::binary);
        ppm << "P6\n" << image.width << " " << image.height << "\n255\n";
        ppm.write(
            reinterpret_cast<const char*>(image.rgb.data()), std::streamsize(image.rgb.size()));
    }
    auto input = exec::loadImageInput(dir / "ckpt", (dir / "image.ppm").string());
    ASSERT_TRUE(input.ok()) << input.error().message;
    EXPECT_EQ(input->image.rgb, image.rgb);
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto engine = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 5, 17, input->imageTokenId, 42, 99, 7 };
    o.newTokens = 3;
    o.image = *input;
    const auto ours = engine->run(o, p, {});
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    const auto& fed = ours->dump.info.inputIds;
    const std::int64_t merge = spec->vision->spatialMergeSize * spec->vision->patchSize;
    const std::int64_t imageTokens = (height / merge) * (width / merge);
    ASSERT_EQ(ours->dump.info.promptLength, 5 + imageTokens); // the pad token was expanded
    const std::vector<std::int64_t> prompt(fed.begin(), fed.begin() + 5 + imageTokens);
    const std::string command = fmt::format(
        "{} {} {} --ids {} --tokens 3 --forced {} --image {} --dtype float64 --out {} > {} 2>&1",
        kPython, bridgeScript().string(), (dir / "ckpt").string(), fmt::join(prompt, ","),
        fmt::join(ours->generated.begin(), ours->generated.end() - 1, ","),
        (dir / "image.ppm").string(), (dir / "torch").string(), (dir / "torch.log").string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const auto theirs = checkpoint::readDump(dir / "torch");
    ASSERT_TRUE(theirs.ok()) << theirs.error().message;
    EXPECT_EQ(theirs->info.fingerprint, ours->dump.info.fingerprint);
    EXPECT_EQ(theirs->info.generatedIds, ours->dump.info.generatedIds);
    const double maxRel = logitsMaxRel(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
    std::size_t vision = 0;
    double worst = 0.0;
    for (const auto& c : theirs->captures()) {
        const auto* mine = ours->dump.tensor(c.name);
        if (mine == nullptr || c.name.ends_with("#topk")) {
            continue;
        }
        vision += c.name.find("visual.") != std::string::npos ? 1 : 0;
        const auto err = numerics::compareTensors(*theirs->tensor(c.name), *mine);
        ASSERT_TRUE(err.ok()) << c.name;
        worst = std::max(worst, err->relL2);
        EXPECT_LE(err->relL2, 1e-5) << c.name;
    }
    std::printf("%-14s + %lldx%lld image: logits max rel %.2e; %zu vision captures, worst capture "
                "rel L2 %.2e\n",
        spec->modelType.c_str(), static_cast<long long>(height), static_cast<long long>(width),
        maxRel, vision, worst);
    EXPECT_LE(maxRel, 1e-4);
    EXPECT_EQ(vision, expectedVisionCaptures);
    std::filesystem::remove_all(dir);
}

} // namespace

TEST(TorchBridge, ShrunkQwenVlWithImageAgreesWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // Qwen3-VL-MoE (model.language_model / model.visual prefixes, fused 3-D experts, learned
    // positions, deepstack): 4 x 6 patches of 16 → 2 x 3 merged tokens; captures: 4 blocks x
    // (block, attn, mlp) + merger + 3 deepstack mergers.
    checkVisionAgainstTorch("qwen3-vl-30b-a3b", 64, 96, 4 * 3 + 1 + 3);
    const auto configs = std::filesystem::path(DAY0_TEST_DATA_DIR) / "exec" / "configs";
    // Qwen2-VL (LayerNorm, QuickGELU, sectioned M-RoPE, CLIP normalisation).
    checkVisionAgainstTorch((configs / "qwen2-vl-7b.json").string(), 56, 84, 4 * 3 + 1);
    // Qwen2.5-VL (RMSNorm, SwiGLU): 8 x 12 patches of 14 → 4 x 6 merged tokens in two windows
    // of 4 x 4 (and 4 x 2); blocks 0 and 2 attend within windows.
    checkVisionAgainstTorch(
        (configs / "qwen2.5-vl-7b.json").string(), 112, 168, 4 * 3 + 1, { 1, 3 });
}

TEST(TorchBridge, ShrunkLlama4AgreesWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // Scout (MoE every layer, QK-norm) and Maverick (MoE every other layer, no QK-norm), shrunk
    // to 4 layers (three chunked RoPE layers, one NoPE layer). The config is rewritten with a
    // 3-token attention chunk and floor_scale 2, so that the 9-token prompt spans three chunks
    // and the NoPE layer's temperature changes with the position; norm weights get random values.
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const char* name : { "llama-4-scout", "llama-4-maverick" }) {
        SCOPED_TRACE(name);
        const auto dir
            = std::filesystem::temp_directory_path() / (std::string("day0_torch_l4_") + name);
        std::filesystem::remove_all(dir);
        Progress p;
        checkpoint::ShrinkOptions so;
        so.layers = 4;
        const auto shrunk = checkpoint::shrinkModel(name, dir / "shrunk", so, p, {});
        ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
        test::TinyModel m;
        auto config = readJsonFile(dir / "shrunk" / "config.json");
        ASSERT_TRUE(config.ok());
        m.config = *config;
        m.config["text_config"]["attention_chunk_size"] = 3;
        m.config["text_config"]["floor_scale"] = 2;
        const auto source = exec::openCheckpointWeights(dir / "shrunk");
        ASSERT_TRUE(source.ok()) << source.error().message;
        std::uint32_t state = 4242;
        const auto noise = [&state] {
            state = state * 1664525u + 1013904223u;
            return double(state >> 8) / double(1u << 24) - 0.5;
        };
        for (const auto& tensor : (*source)->names()) {
            auto t = (*source)->read(tensor);
            ASSERT_TRUE(t.ok()) << t.error().message;
            auto values = t->toDoubles();
            if (t->rank() == 1) { // norm weights: shrink writes ones
                for (auto& v : values) {
                    v = 1.0 + 0.2 * noise();
                }
            }
            m.weights[tensor] = numerics::Tensor::fromDoubles(t->shape(), values).to(DType::F32);
        }
        test::writeCheckpoint(m, dir / "ckpt");
        const auto spec = exec::loadCheckpointModel(dir / "ckpt");
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        int nope = 0;
        for (const auto& layer : spec->layers) {
            nope += layer.rope ? 0 : 1;
            EXPECT_EQ(layer.attentionChunk, layer.rope ? 3 : 0);
        }
        EXPECT_EQ(nope, 1);
        const auto weights = exec::openCheckpointWeights(dir / "ckpt");
        ASSERT_TRUE(weights.ok()) << weights.error().message;
        auto engine = exec::Engine::create(*spec, **weights, false, p, {});
        ASSERT_TRUE(engine.ok()) << engine.error().message;
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp32");
        o.promptIds = { 5, 17, 42, 99, 7, 3, 250, 11, 64 };
        o.newTokens = 4;
        const auto ours = engine->run(o, p, {});
        ASSERT_TRUE(ours.ok()) << ours.error().message;
        const std::string command = fmt::format(
            "{} {} {} --ids {} --tokens 4 --forced {} --dtype float64 --out {} > {} 2>&1", kPython,
            bridgeScript().string(), (dir / "ckpt").string(), fmt::join(o.promptIds, ","),
            fmt::join(ours->generated.begin(), ours->generated.end() - 1, ","),
            (dir / "torch").string(), (dir / "torch.log").string());
        ASSERT_EQ(std::system(command.c_str()), 0) << command;
        const auto theirs = checkpoint::readDump(dir / "torch");
        ASSERT_TRUE(theirs.ok()) << theirs.error().message;
        EXPECT_EQ(theirs->info.fingerprint, ours->dump.info.fingerprint);
        EXPECT_EQ(theirs->info.generatedIds, ours->dump.info.generatedIds);
        const double maxRel
            = logitsMaxRel(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
        EXPECT_LE(maxRel, 1e-4);
        int compared = 0;
        int selections = 0;
        double worst = 0.0;
        std::string worstName;
        for (const auto& c : theirs->captures()) {
            const auto* ourTensor = ours->dump.tensor(c.name);
            if (ourTensor == nullptr) {
                continue;
            }
            if (c.name.ends_with("#topk")) {
                // The experts Llama-4's top-1 router chose, token by token.
                const auto e
                    = numerics::compareExpertSelection(*theirs->tensor(c.name), *ourTensor);
                ASSERT_TRUE(e.ok()) << c.name;
                EXPECT_EQ(e->exactSetShare, 1.0) << c.name;
                ++selections;
                continue;
            }
            ++compared;
            const auto err = numerics::compareTensors(*theirs->tensor(c.name), *ourTensor);
            ASSERT_TRUE(err.ok()) << c.name << ": " << err.error().message;
            EXPECT_LE(err->relL2, 1e-5) << c.name;
            if (err->relL2 > worst) {
                worst = err->relL2;
                worstName = c.name;
            }
        }
        std::printf("%-16s logits max rel %.2e over %zu values; %d common captures, worst %s "
                    "rel L2 %.2e\n",
            name, maxRel, std::size_t(theirs->tensor("lm_head")->numel()), compared,
            worstName.c_str(), worst);
        EXPECT_GE(compared, 4 * 5); // per layer: norms, attention, feed-forward, output
        EXPECT_GT(selections, 0) << "the routers' expert choices were compared";
        std::filesystem::remove_all(dir);
    }
}
