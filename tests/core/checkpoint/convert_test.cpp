#include "base/file_util.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/manifest.h"
#include "numerics/dtype_convert.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

namespace day0::checkpoint {
namespace {

constexpr std::int64_t kRows = 130;
constexpr std::int64_t kCols = 260;

/// A two-tensor block-FP8 checkpoint: a quantised projection with its scale, and a BF16 norm.
std::filesystem::path makeFp8Checkpoint(std::vector<std::uint8_t>& w, std::vector<float>& s)
{
    const auto dir = test::scratch("convert_src");
    std::mt19937 rng(3);
    w.resize(std::size_t(kRows * kCols));
    for (auto& b : w) {
        do {
            b = std::uint8_t(rng());
        } while ((b & 0x7F) == 0x7F);
    }
    s = { 0.25f, 1.0f, 0.5f, 2.0f, 0.125f, 4.0f };
    std::vector<std::uint16_t> norm(std::size_t(kCols), 0x3F80);
    std::vector<TensorSource> t;
    t.push_back(tensorFromBytes("model.layers.0.mlp.down_proj.weight", DType::F8E4M3,
        { kRows, kCols }, std::as_bytes(std::span(w))));
    t.push_back(tensorFromBytes("model.layers.0.mlp.down_proj.weight_scale_inv", DType::F32,
        { 2, 3 }, std::as_bytes(std::span(s))));
    t.push_back(tensorFromBytes(
        "model.norm.weight", DType::BF16, { kCols }, std::as_bytes(std::span(norm))));
    EXPECT_TRUE(writeSafetensors(dir / "model.safetensors", t).ok());
    EXPECT_TRUE(writeFileAtomic(dir / "config.json",
        R"({"model_type":"deepseek_v3","torch_dtype":"bfloat16","quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}})")
                    .ok());
    EXPECT_TRUE(writeFileAtomic(dir / "tokenizer.json", "{}").ok());
    return dir;
}

TEST(Convert, DequantizesBlockFp8ToBf16Exactly)
{
    std::vector<std::uint8_t> w;
    std::vector<float> s;
    const auto src = makeFp8Checkpoint(w, s);
    const auto dst = src.parent_path() / "convert_bf16";
    std::filesystem::remove_all(dst);
    Progress progress;
    ConvertOptions options;
    options.dtype = DType::BF16;
    options.sharding.maxShardBytes = 40000; // forces two shards
    auto summary = convertCheckpoint(src, dst, options, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->dequantized, 1u);
    EXPECT_EQ(summary->tensorsOut, 2u);

    auto out = Checkpoint::open(dst);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->format(), CheckpointFormat::ShardedSafetensors);
    EXPECT_EQ(out->files().size(), 2u);
    EXPECT_FALSE(out->hasErrors());
    EXPECT_EQ(out->find("model.layers.0.mlp.down_proj.weight_scale_inv"), nullptr);
    const auto* t = out->find("model.layers.0.mlp.down_proj.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, DType::BF16);
    auto data = out->data(*t);
    ASSERT_TRUE(data.ok());
    for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t c = 0; c < kCols; ++c) {
            const auto i = std::size_t(r * kCols + c);
            std::uint16_t got;
            std::memcpy(&got, data->data() + 2 * i, 2);
            ASSERT_EQ(got,
                numerics::floatToBf16(
                    numerics::e4m3ToFloat(w[i]) * s[std::size_t((r / 128) * 3 + c / 128)]))
                << r << "," << c;
        }
    }
    const auto config = nlohmann::json::parse(*readFile(dst / "config.json"));
    EXPECT_FALSE(config.contains("quantization_config"));
    EXPECT_EQ(config["torch_dtype"], "bfloat16");
    EXPECT_TRUE(std::filesystem::exists(dst / "tokenizer.json"));
    auto manifest = findManifest(dst);
    ASSERT_TRUE(manifest.ok() && manifest->has_value());
    Progress p2;
    auto report = verifyIntegrity(dst, **manifest, out->files(), {}, p2, {});
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
    EXPECT_EQ(report->files.size(), 5u); // 2 shards, index, config, tokenizer
}

TEST(Convert, OnlyFp8LeavesOtherTensorsAlone)
{
    std::vector<std::uint8_t> w;
    std::vector<float> s;
    const auto src = makeFp8Checkpoint(w, s);
    const auto dst = src.parent_path() / "convert_only_fp8";
    std::filesystem::remove_all(dst);
    Progress progress;
    ConvertOptions options;
    options.dtype = DType::F16;
    options.onlyFp8 = true;
    auto summary = convertCheckpoint(src, dst, options, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->dequantized, 1u);
    EXPECT_EQ(summary->copied, 1u);
    auto out = Checkpoint::open(dst);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->find("model.layers.0.mlp.down_proj.weight")->dtype, DType::F16);
    EXPECT_EQ(out->find("model.norm.weight")->dtype, DType::BF16);
    const auto config = nlohmann::json::parse(*readFile(dst / "config.json"));
    EXPECT_FALSE(config.contains("quantization_config"));
    EXPECT_EQ(config["torch_dtype"], "bfloat16") << "unchanged: other tensors keep their dtype";
}

TEST(Convert, QuantizesToBlockFp8AndRefusesToOverwrite)
{
    std::vector<std::uint8_t> w;
    std::vector<float> s;
    const auto src = makeFp8Checkpoint(w, s);
    const auto bf16 = src.parent_path() / "convert_bf16_b";
    const auto fp8 = src.parent_path() / "convert_fp8";
    std::filesystem::remove_all(bf16);
    std::filesystem::remove_all(fp8);
    Progress progress;
    ASSERT_TRUE(convertCheckpoint(src, bf16, {}, progress, {}).ok());
    ConvertOptions toFp8;
    toFp8.dtype = DType::F8E4M3;
    auto summary = convertCheckpoint(bf16, fp8, toFp8, progress, {});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->quantized, 1u);
    auto out = Checkpoint::open(fp8);
    ASSERT_TRUE(out.ok());
    const auto* scale = out->find("model.layers.0.mlp.down_proj.weight_scale_inv");
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(scale->shape, (std::vector<std::int64_t> { 2, 3 }));
    EXPECT_EQ(out->find("model.norm.weight")->dtype, DType::BF16);
    EXPECT_TRUE(
        nlohmann::json::parse(*readFile(fp8 / "config.json")).contains("quantization_config"));
    // The output exists now: a second run must not touch it.
    auto again = convertCheckpoint(bf16, fp8, toFp8, progress, {});
    EXPECT_FALSE(again.ok());
    EXPECT_TRUE(Checkpoint::open(fp8).ok());
    // A cancelled run leaves no output and no temporary folder.
    std::stop_source stop;
    stop.request_stop();
    const auto cancelled = src.parent_path() / "convert_cancelled";
    std::filesystem::remove_all(cancelled);
    EXPECT_FALSE(convertCheckpoint(src, cancelled, {}, progress, stop.get_token()).ok());
    EXPECT_FALSE(std::filesystem::exists(cancelled));
    for (const auto& e : std::filesystem::directory_iterator(src.parent_path())) {
        EXPECT_EQ(e.path().filename().string().find(".convert_cancelled.tmp"), std::string::npos);
    }
}

} // namespace
} // namespace day0::checkpoint
