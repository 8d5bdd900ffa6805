// --stream beyond a lone run (issue #22): `day0 eval --stream` gives the same figures as a normal
// eval (over a corpus file or one sampled from the reference), and `day0 run --stream
// --reference` (the precision panel's run and compare) the same dumps and comparison, the
// reference, the target and its inject-mode run streamed, and says which streamed.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

const std::string kStories = std::string(DAY0_TEST_DATA_DIR) + "/exec/stories260K-hf";

std::string readAll(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}

TEST(StreamVerbs, EvalStreamedGivesTheSameFigures)
{
    const std::string dir = scratchDir("stream_eval");
    const fs::path ids = fs::path(dir) / "doc.txt";
    std::ofstream(ids) << "1,461,461,401,401,401,461,378,455,473,456,435,299,362,409,283,264,283,"
                          "452,288,13,431,431,431,431,431,431,431,431,431,431\n";
    for (const char* target : { "fp32", "bf16" }) {
        SCOPED_TRACE(target);
        const std::vector<std::string> common { "eval", kStories, "--ids-file", ids.string(),
            "--seq-len", "16", "--reference", "fp64", "--target", target, "--generate", "3",
            "--generate-prompts", "1", "--prompt-length", "4", "--json", "-q", "--no-record" };
        auto streamedArgs = common;
        streamedArgs.push_back("--stream");
        const auto normal = runDay0(common);
        ASSERT_TRUE(normal.exitCode == 0 || normal.exitCode == 1) << normal.err;
        const auto streamed = runDay0(streamedArgs);
        ASSERT_EQ(streamed.exitCode, normal.exitCode) << streamed.err;
        auto n = normal.json();
        auto s = streamed.json();
        EXPECT_FALSE(n.contains("streamed"));
        ASSERT_TRUE(s.contains("streamed")) << s.dump();
        EXPECT_TRUE(s["streamed"]["reference"].get<bool>());
        // The target on the CPU streams too, an emulated one included.
        EXPECT_TRUE(s["streamed"]["target"].get<bool>());
        s.erase("streamed");
        for (const char* timing : { "run_id", "seconds" }) {
            n.erase(timing);
            s.erase(timing);
        }
        EXPECT_GT(n["positions"].get<int>(), 0);
        EXPECT_EQ(s, n) << "the streamed eval's figures differ";
    }
    // A corpus sampled from the reference: the sampler decodes token by token, each step
    // streaming the weights once; the same tokens, so the same figures.
    const std::vector<std::string> sampledArgs { "eval", kStories, "--sample-corpus", "2",
        "--seq-len", "12", "--target", "bf16", "--json", "-q", "--no-record" };
    auto streamedSampled = sampledArgs;
    streamedSampled.push_back("--stream");
    const auto normal = runDay0(sampledArgs);
    ASSERT_TRUE(normal.exitCode == 0 || normal.exitCode == 1) << normal.err;
    const auto streamed = runDay0(streamedSampled);
    ASSERT_EQ(streamed.exitCode, normal.exitCode) << streamed.err;
    auto n = normal.json();
    auto s = streamed.json();
    EXPECT_TRUE(s["streamed"]["reference"].get<bool>());
    for (const char* key : { "streamed", "run_id", "seconds" }) {
        n.erase(key);
        s.erase(key);
    }
    EXPECT_GT(n["positions"].get<int>(), 0);
    EXPECT_EQ(s, n) << "the streamed sampled eval's figures differ";
    fs::remove_all(dir);
}

TEST(StreamVerbs, RunAgainstAReferenceStreamedGivesTheSameDumpsAndComparison)
{
    const std::string dir = scratchDir("stream_reference");
    const std::string model = dir + "/m";
    ASSERT_EQ(runDay0({ "shrink", "qwen3-30b-a3b", "--out", model, "-q" }).exitCode, 0);
    for (const char* target : { "bf16", "fp32" }) {
        SCOPED_TRACE(target);
        const std::vector<std::string> common { "run", model, "--ids", "1,5,9,13,2", "--tokens",
            "3", "--reference", "fp64", "--precision", target, "--json", "-q", "--no-record" };
        auto normalArgs = common;
        normalArgs.insert(normalArgs.end(), { "--dump", dir + "/normal" });
        auto streamArgs = common;
        streamArgs.insert(streamArgs.end(), { "--dump", dir + "/streamed", "--stream" });
        const bool inject = std::string(target) == "bf16";
        if (inject) {
            normalArgs.push_back("--inject");
            streamArgs.push_back("--inject");
        }
        const auto normal = runDay0(normalArgs);
        ASSERT_TRUE(normal.exitCode == 0 || normal.exitCode == 1) << normal.err;
        const auto streamed = runDay0(streamArgs);
        ASSERT_EQ(streamed.exitCode, normal.exitCode) << streamed.err;
        const auto n = normal.json();
        const auto s = streamed.json();
        ASSERT_TRUE(s.contains("stream")) << s.dump();
        EXPECT_TRUE(s["stream"]["reference_streamed"].get<bool>());
        EXPECT_TRUE(s["stream"]["target_streamed"].get<bool>()) << "emulated or not";
        EXPECT_GT(s["stream"]["bytes_read"].get<std::uint64_t>(), 0u);
        EXPECT_EQ(s["comparison"], n["comparison"]);
        EXPECT_EQ(s["reference"]["generated"], n["reference"]["generated"]);
        EXPECT_EQ(s["target"]["generated"], n["target"]["generated"]);
        std::vector<std::string> parts { "reference", "target" };
        if (inject) {
            parts.push_back("target-inject");
        }
        for (const auto& part : parts) {
            const auto a = readAll(fs::path(dir) / "normal" / part / "tensors.safetensors");
            ASSERT_GT(a.size(), 1000u) << part;
            EXPECT_TRUE(a == readAll(fs::path(dir) / "streamed" / part / "tensors.safetensors"))
                << part << ": the streamed run's dump differs";
        }
        fs::remove_all(fs::path(dir) / "normal");
        fs::remove_all(fs::path(dir) / "streamed");
    }
    fs::remove_all(dir);
}

} // namespace
