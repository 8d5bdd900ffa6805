// `convert` on small checkpoints in the real layout of each quantised family: the configs are the
// published ones shrunk to a couple of layers, the codes and scales are random, and every output
// element is compared bit for bit against a dequantisation written here from the formats'
// definitions (E2M1 by its sign/exponent/mantissa bits, E8M0 and E4M3 with std::ldexp), rounded
// to BF16 once from the float product, as the production path does.

#include "checkpoint/arch_check.h"
#include "checkpoint/convert.h"
#include "checkpoint/shrink.h"
#include "quant_fixture.h"

#include <gtest/gtest.h>

namespace day0::checkpoint {
namespace {

using namespace test;

/// Converts `src` into `<name>_out` and checks the output: it verifies against its own
/// config, every dequantised element equals the reference, every other tensor is the source's.
/// Returns the count of dequantised tensors per format.
std::map<std::string, std::size_t> convertAndCheck(
    const Source& src, const std::string& name, DType to = DType::BF16, BlockShape block = {})
{
    std::map<std::string, std::size_t> formats;
    const auto dst = src.dir.parent_path() / (name + "_out");
    fs::remove_all(dst);
    ConvertOptions options;
    options.dtype = to;
    options.threads = 3;
    options.sharding.maxShardBytes = 300'000;
    Progress progress;
    auto summary = convertCheckpoint(src.dir, dst, options, progress, {});
    EXPECT_TRUE(summary.ok()) << summary.error().message;
    if (!summary) {
        return formats;
    }
    auto out = Checkpoint::open(dst);
    EXPECT_TRUE(out.ok());
    if (!out) {
        return formats;
    }
    EXPECT_FALSE(out->hasErrors());

    // The new config describes the new weights exactly.
    const Json config = loadConfig(dst / "config.json");
    EXPECT_FALSE(config.contains("quantization_config"));
    if (config.contains("text_config")) {
        EXPECT_FALSE(config["text_config"].contains("quantization_config"));
    }
    EXPECT_FALSE(fs::exists(dst / "hf_quant_config.json"));
    EXPECT_TRUE(fs::exists(dst / "tokenizer.json"));
    auto report = checkAgainstConfig(*out);
    EXPECT_TRUE(report.ok()) << report.error().message;
    if (report.ok()) {
        EXPECT_TRUE(report->has_value());
        if (report->has_value()) {
            EXPECT_TRUE((*report)->ok());
            for (const auto& row : (*report)->rows) {
                EXPECT_EQ(row.status, TensorStatus::Ok) << row.message;
            }
        }
    }

    std::size_t dequantized = 0;
    for (const auto& t : out->tensors()) {
        auto data = out->data(t);
        EXPECT_TRUE(data.ok());
        const auto plain = src.tensors.find(t.name);
        const bool mxfp4 = src.tensors.count(t.name + "_blocks") != 0;
        const bool linear = t.name.ends_with(".weight") && t.shape.size() == 2;
        const std::string module = linear ? t.name.substr(0, t.name.size() - 7) : t.name;
        Reference ref;
        if (linear) {
            ref = referenceOf(src.tensors, module, t.shape[1], block.rows, block.cols);
        }
        if (mxfp4) {
            // gpt-oss: [E, out, in/32, 16] blocks, written transposed as [E, in, out].
            const Stored& blocks = src.tensors.at(t.name + "_blocks");
            const Stored& scales = src.tensors.at(t.name + "_scales");
            const std::int64_t e = blocks.shape[0];
            const std::int64_t rows = blocks.shape[1];
            const std::int64_t cols = blocks.shape[2] * 32;
            EXPECT_EQ(t.shape, (std::vector<std::int64_t> { e, cols, rows }));
            expectBits(
                t, *data,
                [&](std::size_t i) {
                    const auto r = std::int64_t(i) % rows;
                    const auto c = (std::int64_t(i) / rows) % cols;
                    const auto x = std::int64_t(i) / (rows * cols);
                    const std::uint8_t byte
                        = blocks.u8(std::size_t(((x * rows + r) * cols + c) / 2));
                    const unsigned nib = c % 2 == 0 ? byte & 0xF : byte >> 4;
                    const float v = refE2m1(nib)
                        * refE8m0(scales.u8(std::size_t((x * rows + r) * (cols / 32) + c / 32)));
                    return bitsIn(v, to);
                },
                "mxfp4");
            ++formats["mxfp4"];
            ++dequantized;
        } else if (ref.format != nullptr) {
            EXPECT_EQ(t.dtype, to) << t.name;
            const std::int64_t cols = t.shape[1];
            expectBits(
                t, *data,
                [&](std::size_t i) {
                    return bitsIn(ref.value(std::int64_t(i) / cols, std::int64_t(i) % cols), to);
                },
                ref.format);
            ++formats[ref.format];
            ++dequantized;
        } else {
            EXPECT_NE(plain, src.tensors.end()) << t.name << " is not in the source";
            if (plain == src.tensors.end()) {
                continue;
            }
            const Stored& s = plain->second;
            EXPECT_EQ(t.shape, s.shape) << t.name;
            if (t.dtype == s.dtype) {
                EXPECT_TRUE(std::equal(data->begin(), data->end(), s.bytes.begin(), s.bytes.end()))
                    << t.name;
            } else {
                // A BF16 tensor widened to F32 (exact), or an F32 one the family also ships in
                // BF16 (Nemotron-H's A_log) rounded to it.
                if (s.dtype == DType::BF16 && t.dtype == DType::F32) {
                    expectBits(
                        t, *data, [&](std::size_t i) { return std::uint32_t(s.u16(i)) << 16; },
                        "widened");
                } else if (s.dtype == DType::F32 && t.dtype == DType::BF16) {
                    expectBits(
                        t, *data, [&](std::size_t i) { return std::uint32_t(refBf16(s.f32(i))); },
                        "rounded");
                } else {
                    ADD_FAILURE() << t.name << ": " << dtypeName(s.dtype) << " became "
                                  << t.dtypeName;
                }
            }
        }
    }
    // Every source tensor is in the output, or belongs to the quantised form only.
    for (const auto& [n, s] : src.tensors) {
        if (out->find(n) == nullptr) {
            EXPECT_TRUE(quantisationOnly(n)) << n << " was dropped";
        }
    }
    EXPECT_EQ(summary->dequantized, dequantized);
    EXPECT_EQ(summary->tensorsOut, out->tensors().size());
    return formats;
}

// --- the families -------------------------------------------------------------------------

TEST(ConvertQuantized, ModelOptNvfp4MiniMax)
{
    const Json config = minimaxNvfp4();
    const Json hfQuant = minimaxHfQuant();
    const auto src = writeSource("nvfp4_minimax", config, &hfQuant);
    // ModelOpt's FP8 KV cache scales are there, and go.
    ASSERT_EQ(src.tensors.count("model.layers.1.self_attn.k_proj.k_scale"), 1u);
    const auto formats = convertAndCheck(src, "nvfp4_minimax");
    EXPECT_EQ(formats.at("nvfp4"), 2u * 4u * 3u); // 2 layers × 4 experts × w1/w2/w3
    EXPECT_EQ(formats.size(), 1u);
}

TEST(ConvertQuantized, ModelOptNvfp4ToF32)
{
    const Json config = minimaxNvfp4();
    const Json hfQuant = minimaxHfQuant();
    const auto src = writeSource("nvfp4_minimax_f32", config, &hfQuant);
    const auto formats = convertAndCheck(src, "nvfp4_minimax_f32", DType::F32);
    EXPECT_EQ(formats.at("nvfp4"), 24u);
    EXPECT_EQ(loadConfig(src.dir.parent_path() / "nvfp4_minimax_f32_out" / "config.json")["dtype"],
        "float32");
}

TEST(ConvertQuantized, ModelOptFp8Nemotron)
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
    // The published copy is trimmed (no producer, no exclude_modules); ModelOpt's own file has
    // both.
    const Json hfQuant = Json::parse(R"({"producer": {"name": "modelopt", "version": "0.37.0"},
        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
        "exclude_modules": ["lm_head", "backbone.embeddings", "*.mixer.conv1d", "*.mixer.gate",
                            "mtp*"]}})");
    const auto src = writeSource("fp8_nemotron", config, &hfQuant);
    const auto formats = convertAndCheck(src, "fp8_nemotron");
    EXPECT_GT(formats.at("fp8_tensor"), 0u);
    EXPECT_EQ(formats.size(), 1u);
}

TEST(ConvertQuantized, GptOssMxfp4ExpertsTransposed)
{
    const auto src = writeSource("mxfp4_gptoss", gptOssMxfp4(), nullptr);
    const auto formats = convertAndCheck(src, "mxfp4_gptoss");
    EXPECT_EQ(formats.at("mxfp4"), 4u); // gate_up_proj and down_proj of 2 layers
    // The converted config reads as the BF16 release: [E, H, 2I] and [E, I, H].
    auto spec = model::readConfigFile(src.dir.parent_path() / "mxfp4_gptoss_out" / "config.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_FALSE(spec->quantization.has_value());
    const auto graph = model::buildLayerGraph(*spec);
    const auto* gateUp = graph.findTensor("model.layers.0.mlp.experts.gate_up_proj");
    ASSERT_NE(gateUp, nullptr);
    EXPECT_EQ(gateUp->shape, (std::vector<std::int64_t> { 4, 64, 128 }));
}

Json kimiK25()
{
    return shrunk(fs::path(DAY0_RESOURCE_DIR) / "configs" / "kimi-k2.5.json",
        R"({"text_config": {"hidden_size": 64, "intermediate_size": 64,
            "moe_intermediate_size": 32, "num_hidden_layers": 2, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "kv_lora_rank": 32, "q_lora_rank": 32,
            "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
            "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256},
            "vision_config": {"vt_hidden_size": 32, "vt_intermediate_size": 64,
            "vt_num_attention_heads": 2, "vt_num_hidden_layers": 1, "mm_hidden_size": 32,
            "text_hidden_size": 64, "init_pos_emb_height": 4, "init_pos_emb_width": 4}})");
}

TEST(ConvertQuantized, CompressedTensorsInt4KimiK25)
{
    const auto src = writeSource("int4_kimi_k25", kimiK25(), nullptr);
    const auto formats = convertAndCheck(src, "int4_kimi_k25");
    EXPECT_EQ(formats.at("packed_int"), 4u * 3u); // layer 1: 4 experts × gate/up/down
    EXPECT_EQ(formats.size(), 1u);
}

TEST(ConvertQuantized, CompressedTensorsMxfp4KimiK3)
{
    const Json config = shrunk(frontier("frontier/moonshotai--Kimi-K3.json"),
        R"({"text_config": {"hidden_size": 64, "intermediate_size": 64,
            "moe_intermediate_size": 32, "routed_expert_hidden_size": 32,
            "num_hidden_layers": 2, "num_experts": 4, "num_experts_per_token": 2,
            "kv_lora_rank": 32, "q_lora_rank": 32, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 16, "num_attention_heads": 4,
            "num_key_value_heads": 4, "vocab_size": 256, "attn_res_block_size": 2,
            "linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1], "head_dim": 16,
                                   "num_heads": 4}},
            "vision_config": {"vt_hidden_size": 32, "vt_intermediate_size": 64,
            "vt_num_attention_heads": 2, "vt_num_hidden_layers": 1, "mm_hidden_size": 32,
            "qkv_hidden_size": 96, "text_hidden_size": 64, "init_pos_emb_height": 4,
            "init_pos_emb_width": 4}})");
    const auto src = writeSource("mxfp4_kimi_k3", config, nullptr);
    const auto formats = convertAndCheck(src, "mxfp4_kimi_k3");
    EXPECT_EQ(formats.at("packed_mxfp4"), 4u * 3u);
    EXPECT_EQ(formats.size(), 1u);
}

const char* kDeepseekV4Patch = R"({"hidden_size": 64, "head_dim": 32,
    "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_hash_layers": 1,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "num_attention_heads": 4,
    "q_lora_rank": 48, "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 2,
    "index_head_dim": 16, "index_topk": 4, "qk_rope_head_dim": 8, "vocab_size": 256,
    "compress_ratios": [4, 128, 0], "quantization_config": {"weight_block_size": [32, 32]}})";

TEST(ConvertQuantized, DeepseekV4E8m0BlockFp8AndFp4Experts)
{
    const Json config
        = shrunk(frontier("frontier/deepseek-ai--DeepSeek-V4-Pro.json"), kDeepseekV4Patch);
    const auto src = writeSource("fp4_dsv4", config, nullptr);
    const auto formats = convertAndCheck(src, "fp4_dsv4", DType::BF16, { 32, 32 });
    EXPECT_GT(formats.at("block_fp8"), 0u);
    EXPECT_EQ(formats.at("fp4_block"), 3u * 4u * 3u); // 2 layers + MTP, 4 experts, w1/w2/w3
    EXPECT_FALSE(loadConfig(src.dir.parent_path() / "fp4_dsv4_out" / "config.json")
                     .contains("expert_dtype"));
}

TEST(ConvertQuantized, DeepseekV4ModelOptMixedNvfp4)
{
    const Json config
        = shrunk(frontier("frontier-sizes/nvidia--DeepSeek-V4-Pro-NVFP4.json"), kDeepseekV4Patch);
    const Json hfQuant
        = loadConfig(frontier("frontier-sizes/nvidia--DeepSeek-V4-Pro-NVFP4.hf_quant_config.json"));
    const auto src = writeSource("nvfp4_dsv4", config, &hfQuant);
    const auto formats = convertAndCheck(src, "nvfp4_dsv4", DType::BF16, { 32, 32 });
    EXPECT_GT(formats.at("block_fp8"), 0u);
    EXPECT_EQ(formats.at("nvfp4"), 2u * 4u * 3u);
}

TEST(ConvertQuantized, DeepseekV3BlockFp8FromTheGraph)
{
    const Json config = shrunk(fs::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v3.json",
        R"({"hidden_size": 160, "intermediate_size": 96, "moe_intermediate_size": 32,
            "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "kv_lora_rank": 32,
            "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "num_attention_heads": 4, "num_key_value_heads": 4,
            "vocab_size": 256, "quantization_config": {"weight_block_size": [64, 64]}})");
    const auto src = writeSource("fp8_dsv3", config, nullptr);
    const auto formats = convertAndCheck(src, "fp8_dsv3", DType::BF16, { 64, 64 });
    EXPECT_GT(formats.at("block_fp8"), 0u);
    EXPECT_EQ(formats.size(), 1u);
}

TEST(ConvertQuantized, OnlyFp8KeepsEveryOtherTensor)
{
    const Json config
        = shrunk(frontier("frontier/deepseek-ai--DeepSeek-V4-Pro.json"), kDeepseekV4Patch);
    const auto src = writeSource("only_dsv4", config, nullptr);
    const auto dst = src.dir.parent_path() / "only_dsv4_out";
    fs::remove_all(dst);
    ConvertOptions options;
    options.dtype = DType::F16;
    options.onlyFp8 = true;
    Progress progress;
    auto summary = convertCheckpoint(src.dir, dst, options, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    auto out = Checkpoint::open(dst);
    ASSERT_TRUE(out.ok());
    for (const auto& t : out->tensors()) {
        const auto it = src.tensors.find(t.name);
        ASSERT_NE(it, src.tensors.end()) << t.name;
        if (it->second.dtype == DType::F8E4M3 || it->second.dtype == DType::I8) {
            EXPECT_EQ(t.dtype, DType::F16) << t.name;
        } else {
            EXPECT_EQ(t.dtype, it->second.dtype) << t.name;
            auto data = out->data(t);
            ASSERT_TRUE(data.ok());
            EXPECT_TRUE(std::equal(
                data->begin(), data->end(), it->second.bytes.begin(), it->second.bytes.end()))
                << t.name;
        }
    }
    EXPECT_EQ(summary->converted, 0u);
    const Json written = loadConfig(dst / "config.json");
    EXPECT_FALSE(written.contains("quantization_config"));
    EXPECT_EQ(written["torch_dtype"], "bfloat16") << "unchanged: other tensors keep their dtype";
}

TEST(ConvertQuantized, ShrunkBlockFp8ModelConvertsAndVerifies)
{
    // What `day0 validate` does with a rehearsal checkpoint: shrink, dequantise, verify.
    const auto dir = test::scratch("shrunk_fp8");
    Progress progress;
    ShrinkOptions shrink;
    shrink.layers = 2;
    auto small = shrinkModel("deepseek-v3", dir / "src", shrink, progress, {});
    ASSERT_TRUE(small.ok()) << small.error().message;
    ConvertOptions options;
    options.onlyFp8 = true;
    auto summary = convertCheckpoint(dir / "src", dir / "out", options, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_GT(summary->dequantized, 0u);
    auto out = Checkpoint::open(dir / "out");
    ASSERT_TRUE(out.ok());
    auto report = checkAgainstConfig(*out);
    ASSERT_TRUE(report.ok() && report->has_value());
    EXPECT_TRUE((*report)->ok());
}

// --- malformed groups ---------------------------------------------------------------------

/// Converting a source edited by `edit` fails naming `tensor`, and writes nothing.
void expectRefused(const std::string& name, const Json& config, const Json* hfQuant,
    const std::string& tensor, const std::function<void(Tensors&)>& edit,
    const std::string& problem)
{
    const auto src = writeSource(name, config, hfQuant, edit);
    const auto dst = src.dir.parent_path() / (name + "_out");
    fs::remove_all(dst);
    Progress progress;
    auto r = convertCheckpoint(src.dir, dst, {}, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_NE(r.error().message.find("'" + tensor + "'"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(".safetensors"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(problem), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(dst));
    for (const auto& e : fs::directory_iterator(src.dir.parent_path())) {
        EXPECT_EQ(e.path().filename().string().find("." + name + "_out"), std::string::npos);
    }
}

TEST(ConvertQuantized, RefusesAWrongScaleShape)
{
    const Json hfQuant = minimaxHfQuant();
    const std::string scale = "model.layers.1.block_sparse_moe.experts.2.w2.weight_scale";
    expectRefused(
        "bad_scale", minimaxNvfp4(), &hfQuant, scale,
        [&](Tensors& t) {
            Stored& s = t.at(scale);
            s.shape[1] -= 1;
            s.bytes.resize(std::size_t(numel(s.shape)));
        },
        "stores its scales as F8_E4M3 [64, 2]");
}

TEST(ConvertQuantized, RefusesAMissingGlobalScale)
{
    const Json hfQuant = minimaxHfQuant();
    const std::string global = "model.layers.0.block_sparse_moe.experts.1.w3.weight_scale_2";
    expectRefused(
        "no_global", minimaxNvfp4(), &hfQuant, global, [&](Tensors& t) { t.erase(global); },
        "is missing");
}

TEST(ConvertQuantized, RefusesAWrongWeightShape)
{
    const std::string shape = "language_model.model.layers.1.mlp.experts.0.down_proj.weight_shape";
    expectRefused(
        "bad_weight_shape", kimiK25(), nullptr, shape,
        [&](Tensors& t) { put(t.at(shape), 1, std::int32_t(48)); }, "[64, 48]");
}

/// A checkpoint whose config Day0 cannot read (a stub), with one F8 weight and its `scale`.
fs::path stubCheckpoint(const std::string& name, const char* config)
{
    const auto dir = scratch(name);
    std::vector<std::uint8_t> w(64 * 64, 0x38);
    std::vector<std::uint8_t> s(4, 127);
    std::vector<TensorSource> t;
    t.push_back(tensorFromBytes(
        "layers.0.attn.wq_a.weight", DType::F8E4M3, { 64, 64 }, std::as_bytes(std::span(w))));
    t.push_back(tensorFromBytes(
        "layers.0.attn.wq_a.scale", DType::F8E8M0, { 2, 2 }, std::as_bytes(std::span(s))));
    EXPECT_TRUE(writeSafetensors(dir / "model.safetensors", t).ok());
    EXPECT_TRUE(writeFileAtomic(dir / "config.json", config).ok());
    return dir;
}

TEST(ConvertQuantized, WithoutALayoutRefusesWhatItCannotPair)
{
    // Block FP8 is paired by name (`_scale_inv`) without a layout; DeepSeek-V4's `scale` is not.
    const auto src = stubCheckpoint("stub_fp8",
        R"({"model_type": "deepseek_v4", "quantization_config": {"quant_method": "fp8"}})");
    Progress progress;
    auto r = convertCheckpoint(src, src.parent_path() / "stub_fp8_out", {}, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("'layers.0.attn.wq_a.weight'"), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(fs::exists(src.parent_path() / "stub_fp8_out"));

    // Any other quantisation needs the layout only the config gives.
    const auto ct = stubCheckpoint("stub_ct",
        R"({"model_type": "kimi_k25", "quantization_config": {"quant_method": "compressed-tensors"}})");
    r = convertCheckpoint(ct, ct.parent_path() / "stub_ct_out", {}, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("compressed-tensors"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(ct.parent_path() / "stub_ct_out"));
}

} // namespace
} // namespace day0::checkpoint
