// `day0 serve CKPT --plan ...` (issue #23): requests run on the plan's sharded ranks in this
// process, which hold the weights once (no second full load by the server), greedy tokens equal
// to the single-rank reference (checked by `day0 bench serve --check`), the plan named by the
// startup line, --json and /metrics; plans the sharded forward cannot run refused by name at
// start-up.
#include "serve_harness.h"

#include <gtest/gtest.h>

using namespace day0::test;

namespace {

/// `day0 serve kTiny --port 0 <extra>` expected to refuse: its exit code and stderr.
std::pair<int, std::string> refused(const fs::path& dir, std::vector<std::string> extra)
{
    std::vector<std::string> args { "serve", kTiny, "--port", "0", "-q", "--no-record" };
    args.insert(args.end(), extra.begin(), extra.end());
    Process p(args, dir, "refused");
    const int code = p.wait(std::chrono::seconds(60));
    return { code, p.err() };
}

} // namespace

TEST(ServePlanHttp, ShardedRanksServeTheReferencesGreedyTokensAndNameThePlan)
{
    const fs::path dir = scratchDir("serve_plan");
    // Two stages of two tensor-parallel ranks each: tiny-llama's two layers, two KV heads.
    Server server(kTiny, dir, { "--plan", "tp=2,pp=2", "--json" });
    ASSERT_GT(server.port, 0);
    const auto started
        = json::parse(server.process->out().substr(0, server.process->out().find('\n')));
    EXPECT_EQ(started["plan"].get<std::string>().rfind("tp=2,pp=2,", 0), 0u) << started;
    EXPECT_NE(
        started["decode"].get<std::string>().find("off for sharded serving"), std::string::npos)
        << started;
    // The weights are loaded once, by the ranks (each its slices): about one fp32 copy, as one
    // rank holds, not that copy plus the ranks' (twice) as when the server also loaded an engine.
    {
        Server one(kTiny, dir, { "--json" });
        ASSERT_GT(one.port, 0);
        const auto single
            = json::parse(one.process->out().substr(0, one.process->out().find('\n')));
        const double reference = single["weight_bytes"].get<double>();
        const double sharded = started["weight_bytes"].get<double>();
        ASSERT_GT(reference, 0.0) << single;
        // Above one copy only by the tensors every TP rank keeps whole (norms).
        EXPECT_GE(sharded, reference) << started;
        EXPECT_LT(sharded, 1.25 * reference) << started << single;
    }
    const auto r = runDay0({ "bench", "serve", server.url, "--check", kTiny, "--stages",
        "concurrency=1,concurrency=3", "--num-prompts", "6", "--input-len", "5", "--output-len",
        "6", "--json", "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 2u);
    for (const auto& level : levels) {
        EXPECT_EQ(level["completed"], 6) << level;
        EXPECT_EQ(level["check"]["checked"], 6) << level;
        EXPECT_EQ(level["check"]["diverged"], 0) << level["check"];
    }
    const json metrics = metricsOf(server);
    bool named = false;
    for (const auto& [series, value] : metrics.items()) {
        named = named
            || (series.starts_with("day0_serving_info{plan=\"tp=2,pp=2,")
                && series.find("backend=\"cpu\"") != std::string::npos && value == 1.0);
    }
    EXPECT_TRUE(named) << metrics.dump();
}

TEST(ServePlanHttp, PlansTheShardedForwardCannotRunAreRefusedByName)
{
    const fs::path dir = scratchDir("serve_plan_refused");
    // tiny-llama has four query heads: three ranks cannot split them.
    const auto [heads, headsErr] = refused(dir, { "--plan", "tp=3" });
    EXPECT_EQ(heads, 2) << headsErr;
    EXPECT_NE(headsErr.find("--plan: tp=3 does not divide"), std::string::npos) << headsErr;
    // Named once: the executor's refusal is not wrapped in a second "--plan".
    EXPECT_EQ(headsErr.find("--plan"), headsErr.rfind("--plan")) << headsErr;
    const auto [replicas, replicasErr] = refused(dir, { "--plan", "tp=2,dp=2" });
    EXPECT_NE(replicas, 0) << replicasErr;
    EXPECT_NE(replicasErr.find("dp=2"), std::string::npos) << replicasErr;
    const auto [context, contextErr] = refused(dir, { "--plan", "tp=2,cp=2" });
    EXPECT_NE(context, 0) << contextErr;
    EXPECT_NE(contextErr.find("cp"), std::string::npos) << contextErr;
    const auto [precision, precisionErr]
        = refused(dir, { "--plan", "tp=2", "--precision", "fp64" });
    EXPECT_NE(precision, 0) << precisionErr;
    EXPECT_NE(precisionErr.find("fp32 only"), std::string::npos) << precisionErr;
}
