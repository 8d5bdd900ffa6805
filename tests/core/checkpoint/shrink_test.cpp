#include "base/file_util.h"
#include "base/python_json.h"
#include "checkpoint/arch_check.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shrink.h"
#include "model/config_reader.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <set>

namespace day0::checkpoint {
namespace {

// The 2024–25 families shrink; a 2026 family either shrinks to a homologous model or is
// refused saying why (a weight format shrink does not generate, a per-layer pattern it cannot
// keep): never a shrunk checkpoint of another architecture.
bool mustShrink(const std::string& name)
{
    static const std::set<std::string> frontier { "deepseek-v4-pro", "deepseek-v4-flash", "kimi-k3",
        "glm-5", "qwen3.5-397b-a17b", "qwen3.5-27b", "qwen3-next-80b-a3b", "gemma-4-26b-a4b",
        "minimax-m2.5", "minimax-m3", "nemotron-3-super-120b-fp8", "nemotron-3-nano-30b",
        "gpt-oss-120b", "gpt-oss-20b", "hunyuan-a13b", "llama-3.3-nemotron-super-49b" };
    return frontier.count(name) == 0;
}

TEST(Shrink, EveryBundledModelKeepsItsStructure)
{
    int shrunk = 0;
    for (const auto& bundled : model::bundledModels()) {
        SCOPED_TRACE(bundled.name);
        auto plan = planShrink(bundled.name, {});
        if (!plan) {
            EXPECT_FALSE(mustShrink(bundled.name)) << plan.error().message;
            EXPECT_TRUE(plan.error().code == ErrorCode::Unsupported
                || plan.error().code == ErrorCode::BadInput)
                << plan.error().message;
            continue;
        }
        ++shrunk;
        const auto& a = plan->original;
        const auto& b = plan->spec;
        EXPECT_EQ(b.modelType, a.modelType);
        EXPECT_EQ(b.family, a.family);
        EXPECT_EQ(b.attention, a.attention);
        if (a.attention == model::AttentionKind::GQA || a.attention == model::AttentionKind::MHA) {
            EXPECT_EQ(b.numHeads / b.numKvHeads, a.numHeads / a.numKvHeads) << "GQA ratio";
        }
        EXPECT_EQ(b.mla.qLoraRank > 0, a.mla.qLoraRank > 0);
        EXPECT_EQ(b.mla.indexerHeads > 0, a.mla.indexerHeads > 0);
        EXPECT_EQ(b.qkNorm, a.qkNorm);
        EXPECT_EQ(b.tieEmbeddings, a.tieEmbeddings);
        EXPECT_EQ(b.ropeScaling.type, a.ropeScaling.type);
        EXPECT_EQ(b.numMtpLayers, a.numMtpLayers);
        EXPECT_EQ(b.quantization.has_value(), a.quantization.has_value());
        EXPECT_EQ(b.vision.has_value(), a.vision.has_value());
        ASSERT_EQ(b.moe.has_value(), a.moe.has_value());
        if (a.moe) {
            EXPECT_EQ(b.moe->scoring, a.moe->scoring);
            EXPECT_EQ(b.moe->expertScoreBias, a.moe->expertScoreBias);
            EXPECT_EQ(b.moe->numSharedExperts > 0, a.moe->numSharedExperts > 0);
            EXPECT_EQ(b.moe->numGroups > 1, a.moe->numGroups > 1);
            EXPECT_EQ(b.moe->packedExperts, a.moe->packedExperts);
            EXPECT_LE(b.moe->topK, b.moe->numExperts);
            // Dense and MoE layers both survive when the original has both.
            EXPECT_EQ(b.numMoeLayers() > 0, a.numMoeLayers() > 0);
            EXPECT_EQ(b.numMoeLayers() < b.numLayers, a.numMoeLayers() < a.numLayers);
        }
        if (mustShrink(bundled.name)) {
            EXPECT_LE(b.numLayers, 4);
        }
        EXPECT_LE(b.vocabSize, 2048);
    }
    EXPECT_GE(shrunk, 21);
}

TEST(Shrink, KimiK2IsSmallDeterministicAndVerifies)
{
    const auto dir = test::scratch("shrink");
    Progress progress;
    ShrinkOptions options;
    options.seed = 7;
    auto a = shrinkModel("kimi-k2", dir / "a", options, progress, {});
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->modelType, "kimi_k2");
    EXPECT_LT(a->bytes, 8'000'000u);
    auto again = shrinkModel("kimi-k2", dir / "b", options, progress, {});
    ASSERT_TRUE(again.ok());
    options.seed = 8;
    auto other = shrinkModel("kimi-k2", dir / "c", options, progress, {});
    ASSERT_TRUE(other.ok());

    auto ckpt = Checkpoint::open(dir / "a");
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
    EXPECT_EQ(ckpt->format(), CheckpointFormat::ShardedSafetensors);
    EXPECT_GT(ckpt->files().size(), 1u);
    EXPECT_FALSE(ckpt->hasErrors());
    auto arch = checkAgainstConfig(*ckpt);
    ASSERT_TRUE(arch.ok() && arch->has_value());
    EXPECT_TRUE((*arch)->ok()) << (*arch)->rows.size();
    // Block FP8 survives: projections are F8_E4M3 with F32 scales.
    const auto* proj = ckpt->find("model.layers.1.mlp.experts.0.down_proj.weight");
    ASSERT_NE(proj, nullptr);
    EXPECT_EQ(proj->dtype, DType::F8E4M3);
    EXPECT_NE(ckpt->find("model.layers.1.mlp.experts.0.down_proj.weight_scale_inv"), nullptr);

    const auto ma = findManifest(dir / "a");
    const auto mb = findManifest(dir / "b");
    const auto mc = findManifest(dir / "c");
    ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok());
    const auto shard = shardFileName(1, int(ckpt->files().size()));
    EXPECT_EQ((*ma)->find(shard)->sha256, (*mb)->find(shard)->sha256) << "same seed, same bytes";
    EXPECT_NE((*ma)->find(shard)->sha256, (*mc)->find(shard)->sha256) << "other seed, other bytes";
    Progress p2;
    auto report = verifyIntegrity(dir / "a", **ma, ckpt->files(), {}, p2, {});
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
}

using Json = nlohmann::ordered_json;

Json bundledConfig(const std::string& file)
{
    const auto path = std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / file;
    auto text = readFile(path);
    EXPECT_TRUE(text.ok()) << path;
    auto parsed = parsePythonJsonOrdered(text ? *text : std::string("{}"), path.string());
    EXPECT_TRUE(parsed.ok());
    return parsed ? parsed->value : Json::object();
}

TEST(ShrinkWindow, WindowsOverFourBecomeFourUnlessToldOtherwise)
{
    // The test prompts are 6-10 tokens: a window of 128 would mask nothing.
    const Json gptOss = bundledConfig("gpt-oss-20b.json");
    auto small = shrinkConfig(gptOss, {});
    ASSERT_TRUE(small.ok()) << small.error().message;
    EXPECT_EQ((*small)["sliding_window"], 4);
    ShrinkOptions options;
    options.window = 7;
    small = shrinkConfig(gptOss, options);
    ASSERT_TRUE(small.ok());
    EXPECT_EQ((*small)["sliding_window"], 7);
    options.window = 0;
    EXPECT_FALSE(shrinkConfig(gptOss, options).ok());
    // A window already under the default stays; a null window stays null.
    Json narrow = gptOss;
    narrow["sliding_window"] = 3;
    small = shrinkConfig(narrow, {});
    ASSERT_TRUE(small.ok());
    EXPECT_EQ((*small)["sliding_window"], 3);
    const Json qwen = bundledConfig("qwen3-8b.json");
    small = shrinkConfig(qwen, {});
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(small->value("sliding_window", Json()), qwen.value("sliding_window", Json()));
}

TEST(ShrinkUnquantized, FormatsShrinkDoesNotGenerateBecomeUnquantisedOnRequest)
{
    // Nemotron-3 Super (ModelOpt FP8 in its hf_quant_config.json sidecar) and Kimi-K3 (packed
    // MXFP4 in text_config): refused, naming the way out; with --unquantized the same
    // architecture without its weight format (Kimi-K3 with its linear_attn_config layer lists
    // naming the shrunk layers). DeepSeek-V4's format (E8M0-scaled FP8, FP4 experts) is
    // generated, and left out on request.
    const auto dir = test::scratch("unquantized");
    Progress progress;
    auto v4 = planShrink("deepseek-v4-flash", {});
    ASSERT_TRUE(v4.ok()) << v4.error().message;
    ASSERT_TRUE(v4->spec.quantization.has_value());
    EXPECT_EQ(v4->spec.quantization->scaleDtype, DType::F8E8M0);
    EXPECT_EQ(v4->spec.quantization->expertScheme, model::QuantScheme::Fp4Block);
    for (const char* model : { "nemotron-3-super-120b-fp8", "kimi-k3" }) {
        SCOPED_TRACE(model);
        auto refused = planShrink(model, {});
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.error().code, ErrorCode::Unsupported);
        EXPECT_NE(refused.error().message.find("--unquantized"), std::string::npos)
            << refused.error().message;
    }
    for (const char* model : { "deepseek-v4-flash", "nemotron-3-super-120b-fp8", "kimi-k3" }) {
        SCOPED_TRACE(model);
        ShrinkOptions options;
        options.unquantized = true;
        auto plan = planShrink(model, options);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        EXPECT_FALSE(plan->original.quantization.has_value());
        EXPECT_FALSE(plan->spec.quantization.has_value());
        EXPECT_EQ(plan->spec.family, plan->original.family);
        EXPECT_FALSE(plan->config.contains("quantization_config"));
        EXPECT_FALSE(plan->config.contains("expert_dtype"));
    }
    ShrinkOptions options;
    options.unquantized = true;
    auto written = shrinkModel("deepseek-v4-flash", dir / "v4", options, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto ckpt = Checkpoint::open(dir / "v4");
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
    EXPECT_FALSE(ckpt->hasErrors());
    auto arch = checkAgainstConfig(*ckpt);
    ASSERT_TRUE(arch.ok() && arch->has_value());
    EXPECT_TRUE((*arch)->ok());
}

} // namespace
} // namespace day0::checkpoint
