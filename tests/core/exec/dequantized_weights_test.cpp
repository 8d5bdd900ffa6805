// The engine's weights of a quantised checkpoint (exec::openCheckpointWeights): each weight the
// checkpoint stores quantised reads as the F32 tensor `day0 convert` writes for it, bit for
// bit, under the converted config's name; every other tensor reads as stored.

#include "checkpoint/convert.h"
#include "exec/checkpoint_weights.h"
#include "quant_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace day0::exec {
namespace {

using namespace checkpoint::test;
using checkpoint::Checkpoint;

/// True when the converted tensor `name` is made from quantised codes rather than copied: the
/// source has no tensor of that name (gpt-oss `gate_up_proj`), or holds the codes under it
/// (ModelOpt `<module>.weight`).
bool dequantisedIn(const Tensors& src, const std::string& name)
{
    const auto it = src.find(name);
    if (it == src.end()) {
        return true;
    }
    const DType d = it->second.dtype;
    return d == DType::U8 || d == DType::I8 || d == DType::F8E4M3 || d == DType::F8E5M2;
}

/// Converts `src` to F32 and reads every tensor of the output through the engine's weights of
/// `src`; returns how many were dequantised.
std::size_t expectReadsAsConverted(const Source& src, const std::string& name)
{
    const auto dst = src.dir.parent_path() / (name + "_f32");
    fs::remove_all(dst);
    checkpoint::ConvertOptions options;
    options.dtype = DType::F32;
    options.threads = 2;
    Progress progress;
    auto summary = checkpoint::convertCheckpoint(src.dir, dst, options, progress, {});
    EXPECT_TRUE(summary.ok()) << summary.error().message;
    auto converted = Checkpoint::open(dst);
    EXPECT_TRUE(converted.ok());
    auto weights = openCheckpointWeights(src.dir);
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!summary || !converted || !weights) {
        return 0;
    }
    const auto names = (*weights)->names();
    std::size_t dequantised = 0;
    for (const auto& t : converted->tensors()) {
        if (!dequantisedIn(src.tensors, t.name)) {
            continue;
        }
        ++dequantised;
        EXPECT_TRUE(std::binary_search(names.begin(), names.end(), t.name)) << t.name;
        EXPECT_TRUE((*weights)->has(t.name)) << t.name;
        auto read = (*weights)->read(t.name);
        auto want = converted->data(t);
        EXPECT_TRUE(read.ok()) << read.error().message;
        EXPECT_TRUE(want.ok()) << t.name;
        if (!read || !want) {
            continue;
        }
        EXPECT_EQ(read->dtype(), DType::F32) << t.name;
        EXPECT_EQ(read->shape(), t.shape) << t.name;
        const auto got = read->bytes();
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want->begin(), want->end()))
            << t.name << " differs from the converted checkpoint";
    }
    EXPECT_EQ(dequantised, summary->dequantized);
    return dequantised;
}

TEST(DequantizedWeights, GptOssMxfp4ExpertsReadAsConverted)
{
    const auto src = writeSource("read_mxfp4_gptoss", gptOssMxfp4(), nullptr);
    EXPECT_EQ(expectReadsAsConverted(src, "read_mxfp4_gptoss"), 4u); // 2 layers × gate_up/down
    auto weights = openCheckpointWeights(src.dir);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    // The BF16 release's layout, [E, H, 2I] and [E, I, H]; the stored blocks stay readable.
    auto gateUp = (*weights)->read("model.layers.1.mlp.experts.gate_up_proj");
    ASSERT_TRUE(gateUp.ok()) << gateUp.error().message;
    EXPECT_EQ(gateUp->shape(), (numerics::Shape { 4, 64, 128 }));
    auto down = (*weights)->read("model.layers.1.mlp.experts.down_proj");
    ASSERT_TRUE(down.ok()) << down.error().message;
    EXPECT_EQ(down->shape(), (numerics::Shape { 4, 64, 64 }));
    EXPECT_TRUE((*weights)->has("model.layers.1.mlp.experts.down_proj_blocks"));
    // Plain tensors read as stored.
    auto bias = (*weights)->read("model.layers.0.mlp.experts.down_proj_bias");
    ASSERT_TRUE(bias.ok()) << bias.error().message;
    EXPECT_EQ(bias->dtype(), src.tensors.at("model.layers.0.mlp.experts.down_proj_bias").dtype);
}

TEST(DequantizedWeights, ModelOptNvfp4WeightsReadAsConverted)
{
    const Json hfQuant = minimaxHfQuant();
    const auto src = writeSource("read_nvfp4_minimax", minimaxNvfp4(), &hfQuant);
    // The codes and the weight they stand for share a name: the dequantised weight wins.
    const std::string w1 = "model.layers.0.block_sparse_moe.experts.0.w1.weight";
    ASSERT_EQ(src.tensors.at(w1).dtype, DType::U8);
    EXPECT_EQ(expectReadsAsConverted(src, "read_nvfp4_minimax"), 2u * 4u * 3u);
    auto weights = openCheckpointWeights(src.dir);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto read = (*weights)->read(w1);
    ASSERT_TRUE(read.ok()) << read.error().message;
    EXPECT_EQ(read->dtype(), DType::F32);
    EXPECT_EQ(read->shape(), (numerics::Shape { 32, 64 }));
}

TEST(DequantizedWeights, ModelOptFp8PerTensorReadsAsConverted)
{
    const Json config
        = shrunk(frontier("frontier/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json"),
            R"({"hybrid_override_pattern": "M*E", "mtp_hybrid_override_pattern": "*E",
            "num_hidden_layers": 3, "hidden_size": 64, "head_dim": 16,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32,
            "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 16,
            "moe_intermediate_size": 32, "moe_latent_size": 32,
            "moe_shared_expert_intermediate_size": 64, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "vocab_size": 256})");
    const Json hfQuant = Json::parse(R"({"producer": {"name": "modelopt", "version": "0.37.0"},
        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
        "exclude_modules": ["lm_head", "backbone.embeddings", "*.mixer.conv1d", "*.mixer.gate",
                            "mtp*"]}})");
    const auto src = writeSource("read_fp8_nemotron", config, &hfQuant);
    EXPECT_GT(expectReadsAsConverted(src, "read_fp8_nemotron"), 0u);
}

TEST(DequantizedWeights, AWrongScaleShapeNamesTheFileAndTensor)
{
    const Json hfQuant = minimaxHfQuant();
    const std::string scale = "model.layers.1.block_sparse_moe.experts.2.w2.weight_scale";
    const auto src = writeSource("read_bad_scale", minimaxNvfp4(), &hfQuant, [&](Tensors& t) {
        Stored& s = t.at(scale);
        s.shape[1] -= 1;
        s.bytes.resize(std::size_t(numel(s.shape)));
    });
    auto weights = openCheckpointWeights(src.dir);
    ASSERT_FALSE(weights.ok());
    const std::string& message = weights.error().message;
    EXPECT_EQ(weights.error().code, ErrorCode::BadInput);
    EXPECT_NE(message.find("'" + scale + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(".safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find("[64, 2]"), std::string::npos) << message;
}

} // namespace
} // namespace day0::exec
