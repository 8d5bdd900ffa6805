// actions::runStagedBench, the Serving panel's action: a checkpoint served in-process on a
// loopback port for the run, stages in order, each checked against the reference, one record.
#include "actions/staged_bench.h"
#include "shrunk.h"

#include <gtest/gtest.h>

using namespace day0;

namespace {

actions::BenchStage stage(int concurrency, int requests)
{
    actions::BenchStage s;
    s.concurrency = concurrency;
    s.inputTokens = 6;
    s.outputTokens = 3;
    s.numPrompts = requests;
    return s;
}

} // namespace

TEST(StagedBench, ServesTheCheckpointInProcessAndChecksEveryLevel)
{
    const auto checkpoint = actions::test::shrunk("llama-3.1-8b", "llama");
    actions::StagedBenchRequest request;
    request.checkpoint = checkpoint.string();
    request.stages = { stage(1, 2), stage(2, 4) };
    request.check = true;
    request.workload.slos.e2elMs = 1e7;
    Progress progress;
    std::vector<std::string> seen;
    auto out = actions::runStagedBench(request, progress, {},
        [&](const actions::BenchLevelOutcome& level) { seen.push_back(level.label); });
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->url.rfind("http://127.0.0.1:", 0), 0u) << out->url;
    ASSERT_EQ(out->levels.size(), 2u);
    EXPECT_EQ(
        seen, (std::vector<std::string> { "concurrency=1 6→3 tok", "concurrency=2 6→3 tok" }));
    const auto& second = out->levels[1];
    EXPECT_EQ(second.result.completed, 4);
    EXPECT_EQ(second.result.options.maxConcurrency, 2);
    EXPECT_EQ(second.result.options.warmups, 0) << "warm-ups before the first level only";
    ASSERT_TRUE(second.check.has_value());
    EXPECT_EQ(second.check->checked, 4);
    EXPECT_TRUE(second.check->divergences.empty());
    EXPECT_EQ(second.result.good, 4);
    const auto& r = out->record;
    ASSERT_NE(r.findProperty("tool"), nullptr);
    EXPECT_EQ(r.findProperty("tool")->value, "bench");
    ASSERT_NE(r.findProperty("served"), nullptr);
    EXPECT_EQ(r.findProperty("served")->value, "in-process");
    ASSERT_NE(r.findMetric("bench_l2_check_diverged"), nullptr);
    EXPECT_EQ(r.info.status, history::RunStatus::Ok);
}

TEST(StagedBench, RefusesWhatItCannotRun)
{
    Progress progress;
    actions::StagedBenchRequest none;
    none.url = "http://127.0.0.1:1";
    auto a = actions::runStagedBench(none, progress, {});
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("no load level"), std::string::npos) << a.error().message;
    actions::StagedBenchRequest check = none;
    check.stages = { stage(1, 1) };
    check.check = true;
    auto b = actions::runStagedBench(check, progress, {});
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("--check"), std::string::npos) << b.error().message;
    actions::StagedBenchRequest unreachable = none;
    unreachable.stages = { stage(1, 1) };
    auto c = actions::runStagedBench(unreachable, progress, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find("127.0.0.1:1"), std::string::npos) << c.error().message;
}
