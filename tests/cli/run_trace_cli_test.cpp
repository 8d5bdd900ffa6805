#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

TEST(RunTraceCli, TheRunsCpuTraceLandsBesideItsDumpOrWhereAsked)
{
    const std::string dir = scratchDir("run_trace");
    const auto r = runDay0(
        { "run", kTiny, "--ids", "1,2,3", "--tokens", "2", "--dump", dir + "/dump", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["trace"], dir + "/dump/trace.json");
    ASSERT_TRUE(std::filesystem::exists(dir + "/dump/trace.json"));
    ASSERT_TRUE(std::filesystem::exists(dir + "/dump/dump.json")) << "the dump is still written";
    const auto imported = runDay0({ "trace", "import", dir + "/dump/trace.json", "--json" });
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_GE(imported.json()["slices"].get<int>(), 2) << "open checkpoint, run";
    EXPECT_GE(imported.json()["by_category"]["annotation"].get<int>(), 2);

    // The engine's own scopes: prefill, one decode step, every layer of every step.
    const auto stats = runDay0(
        { "trace", "stats", dir + "/dump/trace.json", "--top", "-1", "--json", "--no-record" });
    ASSERT_EQ(stats.exitCode, 0) << stats.err;
    std::map<std::string, int> counts;
    const auto statsJson = stats.json();
    for (const auto& op : statsJson["cpu_ops"]) {
        counts[op["name"].get<std::string>()] = op["count"].get<int>();
    }
    EXPECT_EQ(counts["prefill"], 1);
    EXPECT_EQ(counts["decode step"], 1);
    EXPECT_EQ(counts["model.layers.0"], 2) << "prefill and the decode step";
    EXPECT_EQ(counts["model.layers.0.self_attn"], 2);
    EXPECT_EQ(counts["lm_head"], 2);

    const std::string file = dir + "/elsewhere.json";
    const auto own
        = runDay0({ "run", kTiny, "--ids", "1,2,3", "--tokens", "1", "--trace", file, "--json" });
    ASSERT_EQ(own.exitCode, 0) << own.err;
    EXPECT_TRUE(std::filesystem::exists(file));
    const auto none = runDay0({ "run", kTiny, "--ids", "1,2,3", "--tokens", "1", "--json" });
    ASSERT_EQ(none.exitCode, 0) << none.err;
    EXPECT_FALSE(none.json().contains("trace")) << "no dump, no --trace: no file";
}

} // namespace
