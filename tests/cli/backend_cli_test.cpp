// day0 opcheck/run --backend: the CPU reference, an unknown backend, and the CUDA plugin, which
// on a machine without a GPU must name the missing device and still list its coverage.
#include "cli_runner.h"

#include <gtest/gtest.h>

namespace day0::test {
namespace {

TEST(BackendCli, UnknownBackendIsAUsageErrorListingTheAvailableOnes)
{
    const auto r = runDay0({ "opcheck", "qwen3-8b", "--backend", "tpu-v9" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--backend tpu-v9"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("available: cpu"), std::string::npos) << r.err;
}

TEST(BackendCli, CpuBackendIsTheDefault)
{
    const auto r = runDay0({ "opcheck", "qwen3-0.6b", "--backend", "cpu", "--tokens", "2",
        "--max-outputs", "64", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["backends"][0]["name"], "day0-cpu");
}

TEST(BackendCli, CudaOpcheckNamesTheMissingDeviceOrRunsOnIt)
{
    const auto r = runDay0({ "opcheck", "deepseek-v3", "--backend", "cuda", "--tokens", "2",
        "--max-outputs", "64", "--json" });
    if (r.exitCode == 2 && r.err.find("not installed") != std::string::npos) {
        GTEST_SKIP() << "the cuda plugin is not built here (no CUDA toolkit): " << r.err;
    }
    const auto json = r.json();
    if (r.exitCode == 2) {
        EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
        EXPECT_EQ(json["available"], false);
        EXPECT_EQ(json["backend"], "cuda");
        bool mla = false;
        for (const auto& row : json["coverage"]) {
            mla = mla || (row["op"] == "attention_mla" && row["native"] == true);
        }
        EXPECT_TRUE(mla) << json.dump();
    } else {
        // A GPU is present: the operators ran on it.
        EXPECT_EQ(r.exitCode, 0) << r.err;
        EXPECT_EQ(json["backends"][0]["name"], "cuda");
        EXPECT_FALSE(json["backends"][0]["coverage"].empty());
    }
}

TEST(BackendCli, RunWithAnUnknownBackendFailsBeforeLoadingWeights)
{
    const auto dir = scratchDir("backend_run");
    const auto shrunk = runDay0({ "shrink", "qwen3-0.6b", "--out", dir + "/m", "-q" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const auto r = runDay0({ "run", dir + "/m", "--backend", "tpu-v9", "--ids", "1,2" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--backend tpu-v9"), std::string::npos) << r.err;
}

} // namespace
} // namespace day0::test
