// Gemma-4's vision tower on the engine (vision_gemma4.cpp) against its PyTorch twin
// (plugins/torch/day0_torch_gemma4_vision.py): a shrunk gemma-4-26b-a4b with an image in the
// prompt, its logits and captures lined up by HF module name, and each distinctive piece of the
// tower shown to matter.
#include "base/json_util.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/op_check.h"
#include "exec/vision_input.h"
#include "model/config_reader.h"
#include "numerics/metrics.h"
#include "numerics/tolerance.h"
#include "tiny_models.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

using namespace day0;
using test::bridgeScript;
using test::kPython;
using test::torchAvailable;

namespace {

constexpr std::int64_t kHeight = 96; // 6 x 9 patches of 16, pooled 3 x 3 into 2 x 3 tokens
constexpr std::int64_t kWidth = 144;

/// Shrinks gemma-4-26b-a4b to six layers (five sliding of window 4, one full) into `dir`,
/// gives every rank-1 tensor (norms, std_bias, std_scale) values around one or zero, and writes
/// the checkpoint to `dir / "ckpt"` with a synthetic image at `dir / "image.ppm"`.
void prepare(const std::filesystem::path& dir)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    std::filesystem::remove_all(dir);
    Progress p;
    checkpoint::ShrinkOptions so;
    so.layers = 6;
    const auto shrunk = checkpoint::shrinkModel("gemma-4-26b-a4b", dir / "shrunk", so, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    test::TinyModel m;
    auto config = readJsonFile(dir / "shrunk" / "config.json");
    ASSERT_TRUE(config.ok());
    m.config = *config;
    const auto source = exec::openCheckpointWeights(dir / "shrunk");
    ASSERT_TRUE(source.ok()) << source.error().message;
    std::uint32_t state = 4321;
    const auto noise = [&state] {
        state = state * 1664525u + 1013904223u;
        return double(state >> 8) / double(1u << 24) - 0.5;
    };
    for (const auto& name : (*source)->names()) {
        auto t = (*source)->read(name);
        ASSERT_TRUE(t.ok()) << t.error().message;
        auto values = t->toDoubles();
        if (t->rank() == 1 && !name.ends_with("layer_scalar")) {
            const bool bias = name.ends_with("std_bias");
            for (auto& v : values) {
                v = bias ? 0.3 * noise() : 1.0 + 0.2 * noise();
            }
        }
        m.weights[name] = numerics::Tensor::fromDoubles(t->shape(), values).to(DType::F32);
    }
    test::writeCheckpoint(m, dir / "ckpt");
    const auto image = exec::syntheticImage(kHeight, kWidth);
    std::ofstream ppm(dir / "image.ppm", std::ios::binary);
    ppm << "P6\n" << image.width << " " << image.height << "\n255\n";
    ppm.write(reinterpret_cast<const char*>(image.rgb.data()), std::streamsize(image.rgb.size()));
}

struct Run {
    numerics::Dump dump;
    std::vector<std::int64_t> prompt; ///< with the image token expanded
    std::vector<std::int64_t> generated;
};

Result<Run> runEngine(const std::filesystem::path& dir, bool fp64)
{
    Progress p;
    auto input = exec::loadImageInput(dir / "ckpt", (dir / "image.ppm").string());
    DAY0_TRY(input);
    auto spec = exec::loadCheckpointModel(dir / "ckpt");
    DAY0_TRY(spec);
    auto weights = exec::openCheckpointWeights(dir / "ckpt");
    DAY0_TRY(weights);
    auto engine = exec::Engine::create(*spec, **weights, fp64, p, {});
    DAY0_TRY(engine);
    auto plan = exec::parsePrecisionPlan(fp64 ? "fp64" : "fp32");
    DAY0_TRY(plan);
    exec::RunOptions o;
    o.precision = *plan;
    o.promptIds = { 5, 17, input->imageTokenId, 42, 99, 7, 3 };
    o.newTokens = 3;
    o.image = *input;
    auto result = engine->run(o, p, {});
    DAY0_TRY(result);
    Run run;
    const auto& fed = result->dump.info.inputIds;
    run.prompt.assign(fed.begin(), fed.begin() + result->dump.info.promptLength);
    run.generated = result->generated;
    run.dump = std::move(result->dump);
    return run;
}

/// The twin's float64 dump of the same prompt and image (with DAY0_TWIN_WITHOUT=`without`).
Result<numerics::Dump> runTwin(
    const std::filesystem::path& dir, const Run& ours, const std::string& without)
{
    const std::string command = fmt::format(
        "DAY0_TWIN_WITHOUT={} {} {} {} --ids {} --tokens 3 --forced {} --image {} --dtype "
        "float64 --out {} > {} 2>&1",
        without, kPython, bridgeScript().string(), (dir / "ckpt").string(),
        fmt::join(ours.prompt, ","),
        fmt::join(ours.generated.begin(), ours.generated.end() - 1, ","),
        (dir / "image.ppm").string(), (dir / "torch").string(), (dir / "torch.log").string());
    if (std::system(command.c_str()) != 0) {
        return Error::internal("twin failed: " + command);
    }
    return checkpoint::readDump(dir / "torch");
}

/// max |Δ| / max |logit| of the lm_head captures.
double logitsMaxAbsOverMax(const numerics::Dump& theirs, const numerics::Dump& ours)
{
    const auto a = theirs.tensor("lm_head")->toDoubles();
    const auto b = ours.tensor("lm_head")->toDoubles();
    double diff = 0.0;
    double scale = 0.0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        diff = std::max(diff, std::abs(a[i] - b[i]));
        scale = std::max(scale, std::abs(a[i]));
    }
    return a.size() == b.size() ? diff / scale : 1.0;
}

} // namespace

TEST(Gemma4Vision, ShrinkKeepsTheTowerSmall)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    checkpoint::ShrinkOptions so;
    so.layers = 6;
    const auto plan = checkpoint::planShrink("gemma-4-26b-a4b", so);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_TRUE(plan->spec.vision);
    const auto& v = *plan->spec.vision;
    EXPECT_EQ(v.kind, "gemma4");
    EXPECT_EQ(v.depth, 2);
    EXPECT_EQ(v.hiddenSize, 32);
    EXPECT_EQ(v.headDim, 16);
    EXPECT_EQ(v.positionTableSize, 64);
    EXPECT_EQ(v.poolingKernel, 3); // the pool stays, as does the standardisation
    EXPECT_TRUE(v.standardize);
}

TEST(Gemma4Vision, PatchesAreRasterOrderedAndRescaled)
{
    model::VisionSpec v;
    v.kind = "gemma4";
    v.patchSize = 2;
    v.poolingKernel = 1;
    v.positionTableSize = 8;
    const auto image = exec::syntheticImage(4, 6);
    const auto p = exec::detail::patchifyGemma4(image, v);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->gridH, 2);
    EXPECT_EQ(p->gridW, 3);
    // Patch 4 is (row 1, column 1); its element (y 1, x 0, channel 2) is pixel (3, 2).
    const auto px = [&](std::int64_t y, std::int64_t x, std::int64_t c) {
        return double(image.rgb[std::size_t((y * 6 + x) * 3 + c)]) / 255.0;
    };
    EXPECT_DOUBLE_EQ(p->values[4 * 12 + (1 * 2 + 0) * 3 + 2], px(3, 2, 2));
    v.poolingKernel = 3;
    const auto bad = exec::detail::patchifyGemma4(image, v);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("multiples of 6"), std::string::npos) << bad.error().message;
}

TEST(Gemma4Vision, ImageRunAgreesWithPyTorchAndEachPieceMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_gemma4_vision";
    prepare(dir);
    if (HasFatalFailure()) {
        return;
    }
    // fp64: the math exactly.
    const auto exact = runEngine(dir, true);
    ASSERT_TRUE(exact.ok()) << exact.error().message;
    ASSERT_EQ(exact->prompt.size(), 6u + 6u); // one image token expanded to 2 x 3
    const auto theirs = runTwin(dir, *exact, "");
    ASSERT_TRUE(theirs.ok()) << theirs.error().message;
    EXPECT_EQ(theirs->info.generatedIds, exact->dump.info.generatedIds);
    const double exactRel = logitsMaxAbsOverMax(*theirs, exact->dump);
    std::size_t vision = 0;
    double worst = 0.0;
    std::string worstName;
    for (const auto& c : theirs->captures()) {
        const auto* mine = exact->dump.tensor(c.name);
        if (mine == nullptr || c.name.ends_with("#topk")) {
            continue;
        }
        const bool tower
            = c.name.starts_with("model.vision_tower") || c.name.starts_with("model.embed_vision");
        vision += tower ? 1 : 0;
        const auto err = numerics::compareTensors(*theirs->tensor(c.name), *mine);
        ASSERT_TRUE(err.ok()) << c.name;
        if (err->relL2 > worst) {
            worst = err->relL2;
            worstName = c.name;
        }
    }
    std::printf("gemma4 + %lldx%lld image fp64: max |d| / max |logit| %.2e; %zu vision captures, "
                "worst capture %s rel L2 %.2e\n",
        static_cast<long long>(kHeight), static_cast<long long>(kWidth), exactRel, vision,
        worstName.c_str(), worst);
    EXPECT_LE(exactRel, 1e-10);
    EXPECT_LE(worst, 1e-10) << worstName;
    // patch_embedder, 2 layers x (layer, self_attn, mlp), encoder, pooler, vision_tower,
    // embed_vision.
    EXPECT_EQ(vision, 1u + 2u * 3u + 4u);

    // fp32: the bound.
    const auto single = runEngine(dir, false);
    ASSERT_TRUE(single.ok()) << single.error().message;
    const double singleRel = logitsMaxAbsOverMax(*theirs, single->dump);
    std::printf("gemma4 + image fp32: max |d| / max |logit| %.2e\n", singleRel);
    EXPECT_LE(singleRel, 1e-4);

    // Each piece switched off in the twin breaks the agreement.
    for (const char* piece : { "vision_position_table", "vision_rope", "vision_pool_by_position",
             "vision_standardize", "image_bidirectional" }) {
        const auto without = runTwin(dir, *exact, piece);
        ASSERT_TRUE(without.ok()) << without.error().message;
        const double rel = logitsMaxAbsOverMax(*without, exact->dump);
        std::printf("  without %-24s max |d| / max |logit| %.2e\n", piece, rel);
        EXPECT_GT(rel, 1e-3) << piece << " does not change the logits";
    }
    std::filesystem::remove_all(dir);
}

TEST(Gemma4Vision, OpcheckListsTheTowersOperators)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    checkpoint::ShrinkOptions so;
    so.layers = 6;
    const auto plan = checkpoint::planShrink("gemma-4-26b-a4b", so);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const auto table = numerics::resolveToleranceTable(
        std::string(DAY0_RESOURCE_DIR) + "/tolerances/day0-default-v4.json");
    ASSERT_TRUE(table.ok()) << table.error().message;
    exec::OpCheckOptions o;
    auto target = exec::parsePrecisionPlan("bf16");
    ASSERT_TRUE(target.ok());
    o.target = *target;
    o.table = &*table;
    Progress p;
    const auto report = exec::runOpCheck(plan->spec, o, p, {});
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_TRUE(report->missing.empty());
    std::map<std::string, std::string> found;
    for (const auto& row : report->rows) {
        for (const char* op :
            { "vision rms_norm", "vision v_norm", "embed_vision pre-projection", "vision rope (2-D",
                "vision attention (full, per image, scaling 1)", "vision gated activation",
                "visual.patch_embedder.input_proj", "visual.encoder.layers.0.self_attn.q_proj",
                "visual.encoder.layers.0.mlp.down_proj", "embed_vision.embedding_projection" }) {
            if (row.op.find(op) != std::string::npos) {
                found[op] = std::string(numerics::verdictStatusName(row.verdict.status));
            }
        }
    }
    for (const auto& [op, status] : found) {
        std::printf("  %-48s %s\n", op.c_str(), status.c_str());
        EXPECT_NE(status, "fail") << op;
    }
    EXPECT_EQ(found.size(), 10u);
}

TEST(Gemma4Vision, RefusesWhatItDoesNotComputeByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    // An image beside E2B's per-layer input embeddings (HF embeds the image rows' per-layer
    // inputs from the pad token): refused by name, not run without them.
    const auto dir = std::filesystem::temp_directory_path() / "day0_gemma4_vision_e2b";
    std::filesystem::remove_all(dir);
    Progress p;
    checkpoint::ShrinkOptions so;
    so.layers = 4;
    const auto shrunk = checkpoint::shrinkModel(
        (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "gemma-4-E2B-it.json")
            .string(),
        dir, so, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto spec = exec::loadCheckpointModel(dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_GT(spec->perLayerInputSize, 0);
    const auto weights = exec::openCheckpointWeights(dir);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto engine = exec::Engine::create(*spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    auto input = exec::loadImageInput(dir, "synthetic:48x48");
    ASSERT_TRUE(input.ok()) << input.error().message;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 5, input->imageTokenId, 7 };
    o.image = *input;
    const auto run = engine->run(o, p, {});
    ASSERT_FALSE(run.ok());
    EXPECT_NE(
        run.error().message.find("an image with the per-layer input embeddings"), std::string::npos)
        << run.error().message;
    std::filesystem::remove_all(dir);

    // Kimi-K3's MoonViT-3 tower: named as not run (its text model runs) with the config keys
    // of what is missing.
    const auto k3 = model::loadModel((std::filesystem::path(DAY0_TEST_DATA_DIR) / "model"
        / "configs" / "frontier" / "moonshotai--Kimi-K3.json")
                                         .string());
    ASSERT_TRUE(k3.ok()) << k3.error().message;
    const auto missing = exec::visionTowerNotRun(*k3).value_or("");
    for (const char* piece : { "vision tower of kimi_k3 (moonvit3", "divided_fixed", "sd2_tpool",
             "mm_projector_type 'patchmergerv2'" }) {
        EXPECT_NE(missing.find(piece), std::string::npos) << piece << " in: " << missing;
    }
}
