// actions::runDemo, the embedded default headless (`day0 demo`): every step runs on real data
// and records what its own verb records.
#include "actions/demo.h"
#include "base/resources.h"
#include "history/recording.h"
#include "history/run_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

using namespace day0;
namespace fs = std::filesystem;

TEST(Demo, EveryStepRunsOnRealDataAndIsRecordedAsItsVerbRecordsIt)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const fs::path dir
        = fs::temp_directory_path() / ("day0_demo_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    ::setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
    history::RecordingOptions recording;
    recording.store = dir / "runs.sqlite";
    history::setRecordingOptions(recording);

    Progress progress;
    std::vector<std::string> seen;
    auto report = actions::runDemo(
        progress, {}, [&](const actions::DemoStep& s) { seen.push_back(s.name); });
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(seen,
        (std::vector<std::string> {
            "plan", "checkpoint", "verify", "precision", "timeline", "history" }));
    EXPECT_TRUE(report->ok());
    std::map<std::string, actions::DemoStep> steps;
    for (const auto& s : report->steps) {
        steps[s.name] = s;
        EXPECT_TRUE(s.ok) << s.name << ": " << s.summary;
    }
    EXPECT_NE(steps["plan"].summary.find("layouts fit"), std::string::npos);
    EXPECT_NE(steps["checkpoint"].summary.find("made now"), std::string::npos);
    EXPECT_TRUE(fs::exists(actions::demoCheckpointPath() / "config.json"));
    EXPECT_EQ(
        actions::demoCheckpointPath().parent_path().parent_path().parent_path(), dir / "cache");
    EXPECT_NE(steps["verify"].summary.find("all match"), std::string::npos);
    EXPECT_NE(steps["precision"].summary.find("bf16 against fp32"), std::string::npos);
    EXPECT_NE(steps["history"].summary.find("4 runs"), std::string::npos)
        << steps["history"].summary;

    // The store holds one run per recorded step, of the kind its verb records.
    auto store = history::RunStore::open(recording.store);
    ASSERT_TRUE(store);
    const std::map<std::string, history::RunKind> kinds { { "plan", history::RunKind::Plan },
        { "verify", history::RunKind::Verify }, { "precision", history::RunKind::Run },
        { "timeline", history::RunKind::Trace } };
    for (const auto& [name, kind] : kinds) {
        ASSERT_TRUE(steps[name].runId) << name;
        auto run = store->load(RunId(*steps[name].runId));
        ASSERT_TRUE(run) << name;
        EXPECT_EQ(run->info.kind, kind) << name;
    }
    auto precision = store->load(RunId(*steps["precision"].runId));
    ASSERT_TRUE(precision);
    EXPECT_NE(precision->findMetric("verdict_pass"), nullptr);
    EXPECT_NE(precision->findMetric("logits_kl_mean"), nullptr);
    EXPECT_FALSE(precision->layers.empty()) << "the heatmap's rows";

    // Again: the checkpoint comes from the cache, the unchanged plan is not recorded twice.
    auto again = actions::runDemo(progress, {});
    ASSERT_TRUE(again);
    EXPECT_NE(again->steps[1].summary.find("cached"), std::string::npos);
    EXPECT_EQ(again->steps[0].runId, steps["plan"].runId);

    // Cancelled before it starts: an error, nothing recorded.
    std::stop_source cancelled;
    cancelled.request_stop();
    const auto before = store->count();
    EXPECT_FALSE(actions::runDemo(progress, cancelled.get_token()));
    EXPECT_EQ(store->count().value(), before.value());
    history::setRecordingOptions({});
    ::unsetenv("XDG_CACHE_HOME");
    fs::remove_all(dir);
}
