// day0 run --layers A-B --slice-input DUMP (issue #22): a slice of the decoder layers, fed the
// residual stream entering its first layer from a whole run's dump, writes the whole run's
// captures of those layers bit for bit (prefill and decode steps), streamed or not, on shrunk
// dense, MoE and MLA/block-FP8 checkpoints; it says which layers ran; a dump that cannot feed
// it is refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

namespace fs = std::filesystem;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

/// The raw bytes of every tensor of a safetensors file, by name (the format's 8-byte header
/// length, JSON header with data_offsets, then the data).
std::map<std::string, std::string> tensorBytes(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    const std::string all { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
    std::map<std::string, std::string> out;
    if (all.size() < 8) {
        ADD_FAILURE() << path << " is not a safetensors file";
        return out;
    }
    std::uint64_t headerSize = 0;
    std::memcpy(&headerSize, all.data(), 8);
    const auto header = nlohmann::json::parse(all.substr(8, headerSize));
    const std::size_t base = 8 + headerSize;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            continue;
        }
        const auto begin = entry["data_offsets"][0].get<std::size_t>();
        const auto end = entry["data_offsets"][1].get<std::size_t>();
        out[name] = all.substr(base + begin, end - begin);
    }
    return out;
}

/// The decoder layer an anchor belongs to (-1: embedding, norm, head).
int layerOf(const std::string& name)
{
    const std::string prefix = "model.layers.";
    if (name.rfind(prefix, 0) != 0) {
        return -1;
    }
    return std::stoi(name.substr(prefix.size()));
}

class SliceCli : public ::testing::TestWithParam<const char*> { };

TEST_P(SliceCli, SliceDumpsAreTheWholeRunsBitForBitStreamedOrNot)
{
    const std::string dir = scratchDir(std::string("slice_") + GetParam());
    const std::string model = dir + "/m";
    ASSERT_EQ(runDay0({ "shrink", GetParam(), "--out", model, "--layers", "4", "-q" }).exitCode, 0);
    for (const char* precision : { "fp32", "fp64" }) {
        SCOPED_TRACE(precision);
        const std::string whole = dir + "/whole";
        const auto ran = runDay0({ "run", model, "--ids", "1,5,9,13,2", "--tokens", "3",
            "--precision", precision, "--capture-inputs", "--capture-projections", "--dump", whole,
            "-q", "--no-record" });
        ASSERT_EQ(ran.exitCode, 0) << ran.err;
        const auto wholeTensors = tensorBytes(fs::path(whole) / "tensors.safetensors");
        // From the embedding (layer 0), an interior slice, and the last layer.
        for (const auto& [first, last] : { std::pair { 0, 0 }, { 1, 2 }, { 3, 3 } }) {
            for (const bool stream : { false, true }) {
                SCOPED_TRACE(std::to_string(first) + "-" + std::to_string(last)
                    + (stream ? " streamed" : ""));
                const std::string sliceDir = dir + "/slice";
                std::vector<std::string> args { "run", model, "--layers",
                    std::to_string(first) + "-" + std::to_string(last), "--slice-input", whole,
                    "--precision", precision, "--capture-inputs", "--capture-projections", "--dump",
                    sliceDir, "--json", "-q", "--no-record" };
                if (stream) {
                    args.push_back("--stream");
                }
                const auto r = runDay0(args);
                ASSERT_EQ(r.exitCode, 0) << r.err;
                const auto j = r.json();
                EXPECT_EQ(j["layers"]["first"], first);
                EXPECT_EQ(j["layers"]["last"], last);
                EXPECT_EQ(j["layers"]["input_capture"],
                    first == 0 ? "model.embed_tokens"
                               : "model.layers." + std::to_string(first - 1));
                EXPECT_TRUE(j["target"]["generated"].empty());
                // The whole run's tokens: the prompt and the two fed back.
                const auto ids = j["target"]["input_ids"].get<std::vector<int>>();
                ASSERT_EQ(ids.size(), 7u);
                EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 5),
                    (std::vector<int> { 1, 5, 9, 13, 2 }));
                if (stream) {
                    // Only the slice's layers were read, once per step (prefill + 2 decode).
                    EXPECT_EQ(j["stream"]["layer_loads"].get<int>(), 3 * (last - first + 1));
                }
                const auto sliced = tensorBytes(fs::path(sliceDir) / "tensors.safetensors");
                ASSERT_FALSE(sliced.empty());
                std::size_t expected = 0;
                for (const auto& [name, bytes] : wholeTensors) {
                    const int l = layerOf(name);
                    if (l < first || l > last) {
                        EXPECT_EQ(sliced.count(name), 0u) << name << " is outside the slice";
                        continue;
                    }
                    ++expected;
                    const auto it = sliced.find(name);
                    ASSERT_NE(it, sliced.end()) << "the slice lacks " << name;
                    EXPECT_TRUE(it->second == bytes) << name << " differs from the whole run's";
                }
                EXPECT_EQ(sliced.size(), expected);
                EXPECT_GT(expected, 4u);
                fs::remove_all(sliceDir);
            }
        }
        fs::remove_all(whole);
    }
    fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, SliceCli,
    ::testing::Values("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3"),
    [](const ::testing::TestParamInfo<const char*>& param) {
        std::string name = param.param;
        for (auto& c : name) {
            if (!std::isalnum(static_cast<unsigned char>(c))) {
                c = '_';
            }
        }
        return name;
    });

TEST(SliceCliRefusals, ADumpThatCannotFeedTheSliceIsRefusedByName)
{
    const std::string dir = scratchDir("slice_refusals");
    const std::string model = dir + "/m";
    ASSERT_EQ(
        runDay0({ "shrink", "qwen3-0.6b", "--out", model, "--layers", "4", "-q" }).exitCode, 0);
    const std::string whole = dir + "/whole";
    ASSERT_EQ(runDay0({ "run", model, "--ids", "1,2,3", "--tokens", "2", "--dump", whole, "-q",
                          "--no-record" })
                  .exitCode,
        0);
    // Only the head and layer 3 kept: layer 2's input is missing.
    const std::string partial = dir + "/partial";
    ASSERT_EQ(runDay0({ "run", model, "--ids", "1,2,3", "--tokens", "2", "--dump", partial,
                          "--capture", "model.layers.3", "-q", "--no-record" })
                  .exitCode,
        0);
    const auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args { "run", model, "--no-record", "-q" };
        args.insert(args.end(), extra.begin(), extra.end());
        return runDay0(args);
    };
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases {
        { { "--layers", "2-3", "--slice-input", partial }, "model.layers.1" },
        { { "--layers", "2-3", "--slice-input", whole, "--tokens", "5" }, "--tokens 5" },
        { { "--layers", "2-3", "--slice-input", whole, "--ids", "7,8,9" }, "differs" },
        { { "--layers", "2-3", "--slice-input", whole, "--precision", "fp64" }, "precision" },
        { { "--layers", "2-9", "--slice-input", whole }, "4 decoder layers" },
        { { "--layers", "3-2", "--slice-input", whole }, "before the first" },
        { { "--layers", "2-3" }, "--slice-input" },
        { { "--slice-input", whole, "--ids", "1,2" }, "--layers" },
        { { "--layers", "2-3", "--slice-input", dir + "/none" }, "none" },
        { { "--layers", "2-3", "--slice-input", whole, "--reference", "fp64" }, "--reference" },
    };
    for (const auto& [extra, named] : cases) {
        const auto r = run(extra);
        EXPECT_EQ(r.exitCode, 2) << named << "\n" << r.err;
        EXPECT_NE(r.err.find(named), std::string::npos) << named << "\n" << r.err;
    }
    // The text output names the layers that ran.
    const auto text = run({ "--layers", "2-3", "--slice-input", whole });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("layers 2-3 of 4 ran"), std::string::npos) << text.out;
    fs::remove_all(dir);
}

} // namespace
