// day0 verify / convert / inspect --tensors on fixtures: exit codes, one-line errors, outputs.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

namespace {

using day0::test::runDay0;
namespace fs = std::filesystem;

std::string brokenDir(const std::string& name)
{
    return (fs::path(DAY0_TEST_DATA_DIR) / "checkpoint" / "broken" / name).string();
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

struct BrokenCase {
    const char* folder;
    const char* file; ///< what the first error line must name
    const char* tensor; ///< the tensor it must name, or "" when the damage is not about one
    int exitCode;
};

TEST(CheckpointCli, EveryBrokenCheckpointGetsOneLineAndTheRightExitCode)
{
    const BrokenCase cases[] = {
        { "truncated", "model.safetensors", "lm_head.weight", 2 },
        { "header_too_long", "model.safetensors", "", 2 },
        { "overlapping_offsets", "model.safetensors", "b.weight", 2 },
        { "size_mismatch", "model.safetensors", "model.embed_tokens.weight", 2 },
        { "bad_json", "model.safetensors", "", 2 },
        { "duplicate_names", "model.safetensors", "x.weight", 2 },
        { "unknown_dtype", "model.safetensors", "q.weight", 2 },
        { "trailing_bytes", "model.safetensors", "lm_head.weight", 2 },
        { "missing_shard", "model-00002-of-00002.safetensors",
            "model.layers.0.mlp.down_proj.weight", 2 },
        { "unindexed_tensor", "model-00001-of-00001.safetensors", "lm_head.weight", 2 },
        { "bad_index_json", "model.safetensors.index.json", "", 2 },
        { "pickle", "pytorch_model.bin", "", 2 },
        { "truncated_gguf", "model.gguf", "token_embd.w", 2 },
        { "wrong_hash", "model.safetensors", "", 1 },
    };
    for (const auto& c : cases) {
        const auto r = runDay0({ "verify", brokenDir(c.folder), "-q" });
        EXPECT_EQ(r.exitCode, c.exitCode) << c.folder << ": " << r.err;
        const auto line = firstLine(r.err);
        EXPECT_EQ(line.rfind("day0: error: ", 0), 0u) << c.folder << ": " << line;
        EXPECT_NE(line.find(c.file), std::string::npos) << c.folder << ": " << line;
        EXPECT_NE(line.find(c.tensor), std::string::npos) << c.folder << ": " << line;
    }
}

/// Writes a safetensors file from (name, dtype, shape, bytes) entries, header padded to 8.
void writeSafetensors(const fs::path& path,
    const std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, std::string>>&
        tensors)
{
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const auto& [name, dtype, shape, bytes] : tensors) {
        header[name] = { { "dtype", dtype }, { "shape", shape },
            { "data_offsets", { data.size(), data.size() + bytes.size() } } };
        data += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) {
        out[std::size_t(i)] = char((text.size() >> (8 * i)) & 0xFF);
    }
    std::ofstream(path, std::ios::binary) << out << text << data;
}

TEST(CheckpointCli, ConvertThenVerifyAndInspect)
{
    const fs::path dir = day0::test::scratchDir("checkpoint_cli_convert");
    const fs::path src = dir / "src";
    fs::create_directories(src);
    std::string codes(256 * 64, '\0');
    for (std::size_t i = 0; i < codes.size(); ++i) {
        codes[i] = char((i * 37) % 0x7E);
    }
    std::string scales(2 * 4, '\0');
    const float one = 1.0f;
    std::memcpy(scales.data(), &one, 4);
    std::memcpy(scales.data() + 4, &one, 4);
    writeSafetensors(src / "model.safetensors",
        { { "model.layers.0.self_attn.o_proj.weight", "F8_E4M3", { 256, 64 }, codes },
            { "model.layers.0.self_attn.o_proj.weight_scale_inv", "F32", { 2, 1 }, scales },
            { "model.norm.weight", "F32", { 2 }, std::string(8, '\0') } });
    std::ofstream(src / "tokenizer_config.json") << "{}";

    const auto out = (dir / "bf16").string();
    const auto convert
        = runDay0({ "convert", src.string(), "--dtype", "bf16", "--out", out, "--json", "-q" });
    ASSERT_EQ(convert.exitCode, 0) << convert.err;
    const auto summary = convert.json();
    EXPECT_EQ(summary["dequantized"], 1);
    EXPECT_EQ(summary["tensors_out"], 2);
    EXPECT_TRUE(fs::exists(fs::path(out) / "model.safetensors.index.json"));
    EXPECT_TRUE(fs::exists(fs::path(out) / "day0-manifest.json"));

    const auto verify = runDay0({ "verify", out, "--json", "-q" });
    EXPECT_EQ(verify.exitCode, 0) << verify.err;
    EXPECT_EQ(verify.json()["integrity"]["ok"], true);

    // Converting onto an existing folder is refused and leaves it alone.
    const auto again = runDay0({ "convert", src.string(), "--out", out, "-q" });
    EXPECT_EQ(again.exitCode, 2);
    EXPECT_EQ(runDay0({ "verify", out, "-q" }).exitCode, 0);

    // A flipped byte in a shard is a hash mismatch naming the shard.
    const auto shard = fs::path(out) / "model-00001-of-00001.safetensors";
    {
        std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-1, std::ios::end);
        f.put('\x55');
    }
    const auto bad = runDay0({ "verify", out, "-q" });
    EXPECT_EQ(bad.exitCode, 1);
    EXPECT_NE(firstLine(bad.err).find("model-00001-of-00001.safetensors"), std::string::npos)
        << bad.err;

    // --write-manifest on a folder without one, then a clean verify.
    fs::remove(fs::path(out) / "day0-manifest.json");
    EXPECT_EQ(runDay0({ "verify", out, "--write-manifest", "-q" }).exitCode, 0);
    EXPECT_EQ(runDay0({ "verify", out, "-q" }).exitCode, 0);
    EXPECT_EQ(runDay0({ "verify", out, "--write-manifest", "-q" }).exitCode, 2)
        << "refuses to overwrite";
}

} // namespace

namespace {

TEST(CheckpointCli, ShrinkKimiThenVerifyShardAndInspect)
{
    const fs::path dir = day0::test::scratchDir("checkpoint_cli_shrink");
    const auto small = (dir / "kimi").string();
    const auto shrink
        = runDay0({ "shrink", "kimi-k2", "--out", small, "--seed", "3", "--json", "-q" });
    ASSERT_EQ(shrink.exitCode, 0) << shrink.err;
    EXPECT_EQ(shrink.json()["model_type"], "kimi_k2");

    const auto verify = runDay0({ "verify", small, "--json", "-q" });
    EXPECT_EQ(verify.exitCode, 0) << verify.err;
    const auto v = verify.json();
    EXPECT_EQ(v["integrity"]["ok"], true);
    EXPECT_EQ(v["architecture"]["ok"], true);
    EXPECT_EQ(v["architecture"]["counts"]["missing"], 0);

    // Removing a tensor from the architecture's point of view: a checkpoint of another model.
    const auto other = (dir / "dsv3").string();
    ASSERT_EQ(runDay0({ "shrink", "deepseek-v3", "--out", other, "-q" }).exitCode, 0);
    fs::copy_file(fs::path(small) / "config.json", fs::path(other) / "config.json",
        fs::copy_options::overwrite_existing);
    fs::remove(fs::path(other) / "day0-manifest.json");
    const auto mismatch = runDay0({ "verify", other, "--json", "-q" });
    EXPECT_EQ(mismatch.exitCode, 1) << mismatch.err;
    EXPECT_GT(mismatch.json()["architecture"]["counts"]["wrong shape"].get<int>()
            + mismatch.json()["architecture"]["counts"]["unexpected"].get<int>(),
        0);

    const auto ranks = (dir / "ranks").string();
    const auto shard
        = runDay0({ "shard", small, "--plan", "tp=4,pp=2,ep=4", "--out", ranks, "--json", "-q" });
    ASSERT_EQ(shard.exitCode, 0) << shard.err;
    EXPECT_EQ(shard.json()["ranks"], 8);
    EXPECT_TRUE(fs::exists(fs::path(ranks) / "rank-00007.safetensors"));
    EXPECT_TRUE(fs::exists(fs::path(ranks) / "plan.json"));
    EXPECT_EQ(
        runDay0({ "shard", small, "--plan", "tp=4,ep=3", "--out", (dir / "bad").string(), "-q" })
            .exitCode,
        2);
    EXPECT_FALSE(fs::exists(dir / "bad"));

    const auto rank0 = runDay0(
        { "verify", (fs::path(ranks) / "rank-00000.safetensors").string(), "--json", "-q" });
    EXPECT_EQ(rank0.exitCode, 0) << rank0.err;
}

} // namespace
