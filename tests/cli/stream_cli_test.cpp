// day0 run --stream (issue #22): the weights streamed layer by layer give the logits and dumps of
// a normal run, bit for bit, on shrunk checkpoints of several families (dense Llama, Qwen3-MoE,
// DeepSeek-V3 with block-FP8 weights, MLA and a shared expert), over a prefill and decode steps;
// the stream really loads one layer at a time; what it cannot run is refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

std::string readAll(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}

class StreamCli : public ::testing::TestWithParam<const char*> { };

TEST_P(StreamCli, StreamedRunIsBitIdenticalToANormalRun)
{
    const std::string dir = scratchDir(std::string("stream_") + GetParam());
    const std::string model = dir + "/m";
    const auto shrunk = runDay0({ "shrink", GetParam(), "--out", model, "-q" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    for (const char* precision : { "fp32", "fp64" }) {
        SCOPED_TRACE(precision);
        const std::vector<std::string> common { "run", model, "--ids", "1,5,9,13,2", "--tokens",
            "3", "--precision", precision, "--capture-inputs", "--capture-projections", "--json",
            "-q", "--no-record" };
        auto normalArgs = common;
        normalArgs.insert(normalArgs.end(), { "--dump", dir + "/normal" });
        auto streamArgs = common;
        streamArgs.insert(streamArgs.end(), { "--dump", dir + "/streamed", "--stream" });
        const auto normal = runDay0(normalArgs);
        ASSERT_EQ(normal.exitCode, 0) << normal.err;
        const auto streamed = runDay0(streamArgs);
        ASSERT_EQ(streamed.exitCode, 0) << streamed.err;
        const auto n = normal.json();
        const auto s = streamed.json();
        EXPECT_EQ(s["target"]["generated"], n["target"]["generated"]);
        EXPECT_FALSE(n.contains("stream"));
        // The captured tensors (logits, every layer, its input and projections), bit for bit.
        const auto normalTensors = readAll(fs::path(dir) / "normal" / "tensors.safetensors");
        ASSERT_GT(normalTensors.size(), 1000u);
        EXPECT_TRUE(normalTensors == readAll(fs::path(dir) / "streamed" / "tensors.safetensors"))
            << "the streamed dump's tensors differ from the normal run's";
        // One layer at a time and the next one read ahead beside it: each of the 3 steps loads
        // the embedding, every layer, the norm and the head, all but the first load read ahead
        // by the loader thread, never holding more than the largest two together converted.
        const auto& st = s["stream"];
        const auto fingerprint = s["fingerprint"].get<std::string>(); // "llama/h64/l2/..."
        const int layers = std::stoi(fingerprint.substr(fingerprint.find("/l") + 2));
        EXPECT_EQ(st["layer_loads"].get<int>(), 3 * (layers + 3));
        EXPECT_GT(st["bytes_read"].get<std::uint64_t>(), 0u);
        EXPECT_EQ(st["layer_loads_read_ahead"].get<int>(), 3 * (layers + 3) - 1);
        EXPECT_LE(st["resident_weights_peak_bytes"].get<std::uint64_t>(),
            st["largest_two_layers_bytes"].get<std::uint64_t>());
        EXPECT_GT(st["peak_rss_bytes"].get<std::uint64_t>(), 0u);
        // MoE layers read only the experts their router chose: one decode token picks top-k of
        // the experts, so some are never read (0 if every expert were always converted).
        if (fingerprint.find("/e") != std::string::npos) {
            EXPECT_GT(st["expert_bytes_skipped"].get<std::uint64_t>(), 0u);
        } else {
            EXPECT_EQ(st["expert_bytes_skipped"].get<std::uint64_t>(), 0u);
        }
        fs::remove_all(fs::path(dir) / "normal");
        fs::remove_all(fs::path(dir) / "streamed");
    }
    fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, StreamCli,
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

TEST(StreamCliRefusals, OptionsThatNeedTheWholeModelAreRefusedByName)
{
    const std::string dir = scratchDir("stream_refusals");
    const std::string model = dir + "/m";
    ASSERT_EQ(runDay0({ "shrink", "qwen3-0.6b", "--out", model, "-q" }).exitCode, 0);
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases {
        { { "--inject" }, "--inject" }, { { "--backend", "cuda" }, "--backend" },
        // (--plan streams each rank's slice: RunPlanCli.StreamedRanksGiveTheSameTokens...)
    };
    for (const auto& [extra, named] : cases) {
        std::vector<std::string> args { "run", model, "--ids", "1,2", "--stream", "--no-record" };
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = runDay0(args);
        EXPECT_EQ(r.exitCode, 2) << named;
        EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    }
    const auto noStream
        = runDay0({ "run", model, "--ids", "1,2", "--memory-budget", "1G", "--no-record" });
    EXPECT_EQ(noStream.exitCode, 2);
    EXPECT_NE(noStream.err.find("--stream"), std::string::npos) << noStream.err;
    const auto badSize = runDay0(
        { "run", model, "--ids", "1,2", "--stream", "--memory-budget", "lots", "--no-record" });
    EXPECT_EQ(badSize.exitCode, 2);
    EXPECT_NE(badSize.err.find("'lots'"), std::string::npos) << badSize.err;
    // A budget no layer fits: refused before the run, naming the layer and the bytes it needs.
    const auto tooSmall = runDay0(
        { "run", model, "--ids", "1,2", "--stream", "--memory-budget", "64K", "--no-record" });
    EXPECT_EQ(tooSmall.exitCode, 2);
    EXPECT_NE(tooSmall.err.find("alone needs"), std::string::npos) << tooSmall.err;
    EXPECT_TRUE(tooSmall.err.find("model.layers.") != std::string::npos
        || tooSmall.err.find("model.embed_tokens") != std::string::npos
        || tooSmall.err.find("lm_head") != std::string::npos)
        << tooSmall.err;
    // A budget the model fits in runs and reports it.
    const auto fits = runDay0({ "run", model, "--ids", "1,2", "--stream", "--memory-budget", "1G",
        "--json", "-q", "--no-record" });
    ASSERT_EQ(fits.exitCode, 0) << fits.err;
    EXPECT_EQ(fits.json()["stream"]["memory_budget"].get<std::uint64_t>(), 1ull << 30);
    fs::remove_all(dir);
}

} // namespace

// `day0 validate --stream --memory-budget-per-rank SIZE`: the multi-rank step's ranks each get
// SIZE whole (not SIZE / ranks) and say so; the flag is refused beside --memory-budget, without
// --stream, and with a size that does not parse, each naming the flag.
TEST(StreamCliValidate, PerRankBudgetBoundsEachRankOfTheMultiRankStep)
{
    const std::string dir = scratchDir("stream_validate_per_rank");
    const std::string model = dir + "/m";
    const auto shrunk = runDay0({ "shrink", "llama-3.1-8b", "--out", model, "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::vector<std::string> common { "validate", model, "--plan", "tp=2", "--no-serve",
        "--tokens", "2", "--eval-sequences", "1", "--eval-length", "4", "--work", dir + "/work",
        "--json", "-q", "--no-record" };
    const auto with = [&](std::vector<std::string> extra) {
        auto args = common;
        args.insert(args.end(), extra.begin(), extra.end());
        return runDay0(args);
    };
    auto r = with({ "--stream", "--memory-budget", "64M", "--memory-budget-per-rank", "32M" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("two meanings of one bound"), std::string::npos) << r.err;
    r = with({ "--memory-budget-per-rank", "32M" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--memory-budget-per-rank bounds a streamed validation; add --stream"),
        std::string::npos)
        << r.err;
    r = with({ "--stream", "--memory-budget-per-rank", "lots" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--memory-budget-per-rank: 'lots' is not a size"), std::string::npos)
        << r.err;

    r = with({ "--stream", "--memory-budget-per-rank", "64M" });
    ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
    bool seen = false;
    const auto j = r.json();
    for (const auto& step : j["steps"]) {
        if (step["id"] != "multi_rank") {
            continue;
        }
        seen = true;
        EXPECT_EQ(step["status"], "passed") << step.dump();
        const auto summary = step["summary"].get<std::string>();
        EXPECT_NE(summary.find("(each rank within 64.0 MiB: 64.0 MiB per rank "
                               "(--memory-budget-per-rank))"),
            std::string::npos)
            << summary;
        EXPECT_EQ(step["metrics"]["stream_rank_budget_bytes"].get<double>(), 64.0 * (1 << 20));
        EXPECT_LE(step["metrics"]["stream_rank_peak_bytes"].get<double>(), 64.0 * (1 << 20));
    }
    EXPECT_TRUE(seen) << r.out;
}
