#include "exec/checkpoint_weights.h"
#include "exec/gguf_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

using namespace day0;

TEST(GgufModel, NamesMapToHuggingFace)
{
    EXPECT_EQ(exec::hfNameForGguf("token_embd.weight"), "model.embed_tokens.weight");
    EXPECT_EQ(
        exec::hfNameForGguf("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
    EXPECT_EQ(exec::hfNameForGguf("blk.0.ffn_down.weight"), "model.layers.0.mlp.down_proj.weight");
    EXPECT_EQ(exec::hfNameForGguf("blk.0.ffn_norm.weight"),
        "model.layers.0.post_attention_layernorm.weight");
    EXPECT_EQ(exec::hfNameForGguf("output.weight"), "lm_head.weight");
    EXPECT_FALSE(exec::hfNameForGguf("rope_freqs.weight").has_value());
    EXPECT_FALSE(exec::hfNameForGguf("blk.0.attn_qkv.weight").has_value());
}

TEST(GgufModel, UnpermuteInvertsLlamaCppsRotaryPermutation)
{
    // HF -> GGUF (convert_hf_to_gguf): rows viewed as [heads, 2, half] are swapped to [heads, half,
    // 2].
    const std::int64_t heads = 2;
    const std::int64_t headDim = 8;
    const std::int64_t cols = 3;
    std::vector<float> hf(std::size_t(heads * headDim * cols));
    std::iota(hf.begin(), hf.end(), 0.0f);
    std::vector<float> gguf(hf.size());
    const std::int64_t half = headDim / 2;
    for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t a = 0; a < 2; ++a) {
            for (std::int64_t b = 0; b < half; ++b) {
                for (std::int64_t c = 0; c < cols; ++c) {
                    gguf[std::size_t((h * headDim + b * 2 + a) * cols + c)]
                        = hf[std::size_t((h * headDim + a * half + b) * cols + c)];
                }
            }
        }
    }
    const auto back = exec::unpermuteRotary(
        numerics::Tensor::fromFloats({ heads * headDim, cols }, gguf), heads);
    EXPECT_EQ(back.toFloats(), hf);
}

TEST(GgufModel, SpecFromLlamaMetadata)
{
    std::map<std::string, nlohmann::json> kv { { "general.architecture", "llama" },
        { "llama.embedding_length", 8 }, { "llama.block_count", 1 },
        { "llama.attention.head_count", 2 }, { "llama.attention.head_count_kv", 2 },
        { "llama.feed_forward_length", 32 }, { "llama.rope.dimension_count", 4 },
        { "llama.context_length", 4096 }, { "llama.attention.layer_norm_rms_epsilon", 1e-5 } };
    const auto lookup = [&](std::string_view key) -> const nlohmann::json* {
        const auto it = kv.find(std::string(key));
        return it == kv.end() ? nullptr : &it->second;
    };
    auto spec = exec::specFromGguf(lookup, 32000, "tiny.gguf");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->hiddenSize, 8);
    EXPECT_EQ(spec->headDim, 4);
    EXPECT_EQ(spec->vocabSize, 32000);
    EXPECT_EQ(spec->attention, model::AttentionKind::MHA);
    EXPECT_DOUBLE_EQ(spec->ropeTheta, 10000.0);
    kv["llama.rope.dimension_count"] = 2;
    EXPECT_EQ(exec::specFromGguf(lookup, 32000, "tiny.gguf").error().code, ErrorCode::Unsupported);
    kv["general.architecture"] = "qwen2";
    const auto other = exec::specFromGguf(lookup, 32000, "tiny.gguf");
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.error().message.find("qwen2"), std::string::npos);
    kv["general.architecture"] = "llama";
    kv.erase("llama.block_count");
    kv["llama.rope.dimension_count"] = 4;
    EXPECT_NE(exec::specFromGguf(lookup, 32000, "tiny.gguf").error().message.find("block_count"),
        std::string::npos);
}

// The one rule for "does this model source hold weights" (issue #16: three copies disagreed —
// the topology panel took a GGUF folder for a config-only model).
TEST(HoldsWeights, FilesAndFoldersWithWeightsNotConfigsOrLookAlikes)
{
    namespace fs = std::filesystem;
    const fs::path dir
        = fs::temp_directory_path() / ("day0_holds_weights_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "config-only");
    std::ofstream(dir / "config-only" / "config.json") << "{}";
    fs::create_directories(dir / "st");
    std::ofstream(dir / "st" / "model.safetensors") << "x";
    fs::create_directories(dir / "gguf");
    std::ofstream(dir / "gguf" / "model.gguf") << "x";
    fs::create_directories(dir / "lookalike" / "model.safetensors");
    EXPECT_FALSE(day0::exec::holdsWeights(dir / "config-only"));
    EXPECT_FALSE(day0::exec::holdsWeights(dir / "config-only" / "config.json"));
    EXPECT_TRUE(day0::exec::holdsWeights(dir / "st"));
    EXPECT_TRUE(day0::exec::holdsWeights(dir / "st" / "model.safetensors"));
    EXPECT_TRUE(day0::exec::holdsWeights(dir / "gguf"));
    EXPECT_FALSE(day0::exec::holdsWeights(dir / "lookalike")) << "a folder named *.safetensors";
    EXPECT_FALSE(day0::exec::holdsWeights(dir / "missing"));
    EXPECT_FALSE(day0::exec::holdsWeights("kimi-k2")) << "a bundled name";
    fs::remove_all(dir);
}
