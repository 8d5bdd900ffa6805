// `day0 serve CHECKPOINT --backend PLUGIN` (issue #23): requests computed on a backend plugin's
// operators (the host-simulated test backend, tests/plugins/hostsim_plugin.cpp, found through
// DAY0_PLUGIN_PATH), greedy tokens equal to the CPU reference's (`day0 bench serve --check`), the
// backend named by the startup line and /metrics, a plan's ranks each on an instance of it; what
// it cannot serve refused at start-up; and `--check` catching the plugin made batch-dependent
// (DAY0_HOSTSIM_FLIP: its head GEMM over 3 to 16 rows moves each row's pick by one) at the load
// level where batched steps reach 3 rows.
#include "serve_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace day0::test;

#ifdef DAY0_HOSTSIM_PLUGIN_DIR

namespace {

class ServeBackendHttp : public ::testing::Test {
protected:
    static void SetUpTestSuite() { ::setenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR, 1); }
    static void TearDownTestSuite() { ::unsetenv("DAY0_PLUGIN_PATH"); }
};

/// `day0 serve kTiny --port 0 <extra>` expected to refuse: its exit code and stderr.
std::pair<int, std::string> refusedServe(const fs::path& dir, std::vector<std::string> extra)
{
    std::vector<std::string> args { "serve", kTiny, "--port", "0", "-q", "--no-record" };
    args.insert(args.end(), extra.begin(), extra.end());
    Process p(args, dir, "refused");
    const int code = p.wait(std::chrono::seconds(60));
    return { code, p.err() };
}

} // namespace

TEST_F(ServeBackendHttp, RequestsRunOnThePluginWithTheReferencesGreedyTokens)
{
    const fs::path dir = scratchDir("serve_backend");
    Server server(kTiny, dir, { "--backend", "hostsim", "--json" });
    ASSERT_GT(server.port, 0);
    const std::string out = server.process->out();
    const auto started = json::parse(out.substr(0, out.find('\n')));
    EXPECT_EQ(started["backend"], "hostsim") << started;
    // Decode steps batched on the plugin, as on the CPU: one linear over the running rows.
    EXPECT_EQ(started["decode"], "batched") << started;
    const auto r = runDay0({ "bench", "serve", server.url, "--check", kTiny, "--stages",
        "concurrency=1,concurrency=3", "--num-prompts", "6", "--input-len", "5", "--output-len",
        "6", "--json", "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 2u);
    for (const auto& level : levels) {
        EXPECT_EQ(level["check"]["checked"], 6) << level;
        EXPECT_EQ(level["check"]["diverged"], 0) << level["check"];
    }
    const json metrics = metricsOf(server);
    bool named = false;
    for (const auto& [series, value] : metrics.items()) {
        named = named || (series.find("backend=\"hostsim\"") != std::string::npos && value == 1.0);
    }
    EXPECT_TRUE(named) << metrics.dump();
}

TEST_F(ServeBackendHttp, CheckCatchesABatchDependentPluginAtTheLevelWhereItStarts)
{
    const fs::path dir = scratchDir("serve_backend_flip");
    // tiny-llama's head has 256 outputs; prompts of 20 tokens keep every prefill above 16 rows.
    ::setenv("DAY0_HOSTSIM_FLIP", "3-16:256", 1);
    Server server(kTiny, dir, { "--backend", "hostsim" });
    ::unsetenv("DAY0_HOSTSIM_FLIP");
    ASSERT_GT(server.port, 0);
    const auto r = runDay0({ "bench", "serve", server.url, "--check", kTiny, "--stages",
        "concurrency=1,concurrency=2,concurrency=8", "--num-prompts", "8", "--input-len", "20",
        "--output-len", "8", "--json", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 3u);
    EXPECT_EQ(levels[0]["check"]["diverged"], 0) << levels[0]["check"];
    EXPECT_EQ(levels[1]["check"]["diverged"], 0) << levels[1]["check"];
    EXPECT_GT(levels[2]["check"]["diverged"].get<int>(), 0) << levels[2]["check"];
    const auto first = levels[2]["check"]["first_divergence"];
    EXPECT_EQ(first["kind"], "token");
    EXPECT_EQ(first["got"].get<std::int64_t>(), (first["expected"].get<std::int64_t>() + 1) % 256);
    EXPECT_NE(r.err.find("level 3 (concurrency=8 20→8 tok):"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("level 1 ("), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("level 2 ("), std::string::npos) << r.err;
}

TEST_F(ServeBackendHttp, WhatThePluginCannotServeIsRefusedAtStartUp)
{
    const fs::path dir = scratchDir("serve_backend_refused");
    const auto [unknown, unknownErr] = refusedServe(dir, { "--backend", "tpu-v9" });
    EXPECT_EQ(unknown, 2) << unknownErr;
    EXPECT_NE(unknownErr.find("tpu-v9"), std::string::npos) << unknownErr;
    const auto [f64, f64Err] = refusedServe(dir, { "--backend", "hostsim", "--precision", "fp64" });
    EXPECT_NE(f64, 0) << f64Err;
    EXPECT_NE(f64Err.find("fp64 reference runs on day0-cpu only"), std::string::npos) << f64Err;
    // A plan's ranks on the plugin keep the plan's own refusals.
    const auto [sharded, shardedErr]
        = refusedServe(dir, { "--backend", "hostsim", "--plan", "tp=2", "--precision", "fp64" });
    EXPECT_NE(sharded, 0) << shardedErr;
    EXPECT_NE(shardedErr.find("fp32 only"), std::string::npos) << shardedErr;
}

TEST_F(ServeBackendHttp, APlansRanksEachComputeOnAnInstanceOfThePlugin)
{
    const fs::path dir = scratchDir("serve_backend_plan");
    {
        Server server(kTiny, dir, { "--backend", "hostsim", "--plan", "tp=2", "--json" });
        ASSERT_GT(server.port, 0);
        const std::string out = server.process->out();
        const auto started = json::parse(out.substr(0, out.find('\n')));
        EXPECT_EQ(started["backend"], "hostsim") << started;
        EXPECT_EQ(started["plan"].get<std::string>().rfind("tp=2,", 0), 0u) << started;
        EXPECT_EQ(started["decode"], "batched") << started;
        const auto r = runDay0({ "bench", "serve", server.url, "--check", kTiny, "--stages",
            "concurrency=1,concurrency=3", "--num-prompts", "6", "--input-len", "5", "--output-len",
            "6", "--json", "-q", "--no-record" });
        ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
        for (const auto& level : r.json()["stages"]) {
            EXPECT_EQ(level["check"]["checked"], 6) << level;
            EXPECT_EQ(level["check"]["diverged"], 0) << level["check"];
        }
    }
    // The ranks' head slices (128 of tiny-llama's 256 outputs each) run on the plugin: made
    // batch-dependent there, the plan's batched steps of 3 rows or more change the tokens.
    ::setenv("DAY0_HOSTSIM_FLIP", "3-16:128", 1);
    Server flipped(kTiny, dir, { "--backend", "hostsim", "--plan", "tp=2" });
    ::unsetenv("DAY0_HOSTSIM_FLIP");
    ASSERT_GT(flipped.port, 0);
    const auto r = runDay0({ "bench", "serve", flipped.url, "--check", kTiny, "--stages",
        "concurrency=1,concurrency=8", "--num-prompts", "8", "--input-len", "20", "--output-len",
        "8", "--json", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 2u);
    EXPECT_EQ(levels[0]["check"]["diverged"], 0) << levels[0]["check"];
    EXPECT_GT(levels[1]["check"]["diverged"].get<int>(), 0) << levels[1]["check"];
}

#endif
