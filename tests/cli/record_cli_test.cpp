// `day0 plan` and `day0 memory` record their results as runs of kind plan, unless --no-record.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

nlohmann::json metric(const nlohmann::json& run, const std::string& name)
{
    for (const auto& m : run["metrics"]) {
        if (m["name"] == name) {
            return m["value"];
        }
    }
    return nullptr;
}

} // namespace

TEST(RecordCli, PlanRecordsTheBestLayoutWithItsMemory)
{
    const std::string store = scratchDir("record_plan") + "/runs.sqlite";
    const auto r = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--mode", "train",
        "--global-batch", "64", "--top", "3", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto plan = r.json();
    ASSERT_TRUE(plan["run_id"].is_number_integer()) << plan["run_id"];
    const auto show = runDay0(
        { "runs", "show", std::to_string(plan["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    EXPECT_EQ(run["kind"], "plan");
    EXPECT_EQ(run["status"], "ok");
    EXPECT_EQ(run["model"], "llama-3.1-8b");
    EXPECT_EQ(run["plan"], plan["layouts"][0]["plan"]);
    EXPECT_EQ(run["properties"]["cluster"], "h100-sxm:1x8");
    EXPECT_EQ(run["properties"]["mode"], "train");
    EXPECT_NE(run["command"].get<std::string>().find("day0 plan llama-3.1-8b"), std::string::npos)
        << run["command"];
    EXPECT_EQ(metric(run, "evaluated"), plan["evaluated"]);
    EXPECT_EQ(metric(run, "feasible"), plan["feasible"]);
    EXPECT_DOUBLE_EQ(metric(run, "tokens_per_s").get<double>(),
        plan["layouts"][0]["tokens_per_s"].get<double>());
    EXPECT_DOUBLE_EQ(
        metric(run, "step_time_s").get<double>(), plan["layouts"][0]["step_time_s"].get<double>());
    // The busiest stage's components add up to the layout's memory (to rounding of each part).
    std::map<int, std::int64_t> stageTotal;
    for (const auto& e : run["memory"]) {
        stageTotal[e["stage"].get<int>()] += e["bytes"].get<std::int64_t>();
    }
    ASSERT_EQ(int(stageTotal.size()), plan["layouts"][0]["pp"].get<int>());
    std::int64_t busiest = 0;
    for (const auto& [stage, total] : stageTotal) {
        busiest = std::max(busiest, total);
    }
    EXPECT_NEAR(double(busiest), plan["layouts"][0]["max_memory"].get<double>(), 16.0);
}

TEST(RecordCli, NoRecordWritesNothing)
{
    const std::string dir = scratchDir("record_off");
    const std::string store = dir + "/runs.sqlite";
    const auto r = runDay0({ "--no-record", "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8",
        "--top", "2", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(r.json()["run_id"].is_null());
    EXPECT_FALSE(std::filesystem::exists(store)) << "--no-record must not even create the store";
    const auto m = runDay0(
        { "memory", "llama-3.1-8b", "--plan", "tp=2", "--no-record", "--json", "--store", store });
    ASSERT_EQ(m.exitCode, 0) << m.err;
    EXPECT_TRUE(m.json()["run_id"].is_null());
    EXPECT_FALSE(std::filesystem::exists(store));
}

TEST(RecordCli, MemoryRecordsEveryStageAndFailsWhenItDoesNotFit)
{
    const std::string store = scratchDir("record_memory") + "/runs.sqlite";
    const auto fits
        = runDay0({ "memory", "llama-3.1-8b", "--plan", "tp=2,pp=2", "--json", "--store", store });
    ASSERT_EQ(fits.exitCode, 0) << fits.err;
    const auto report = fits.json();
    const auto shown = runDay0({ "runs", "show", "last", "--json", "--store", store });
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    const auto run = shown.json();
    EXPECT_EQ(run["id"], report["run_id"]);
    EXPECT_EQ(run["kind"], "plan");
    EXPECT_EQ(run["status"], "ok");
    EXPECT_EQ(run["properties"]["source"], "memory");
    EXPECT_EQ(metric(run, "peak_bytes"), report["max_total"]);
    for (const auto& stage : report["per_rank"]) {
        std::int64_t weights = -1;
        for (const auto& e : run["memory"]) {
            if (e["stage"] == stage["pp_stage"] && e["component"] == "weights") {
                weights = e["bytes"].get<std::int64_t>();
                EXPECT_EQ(e["rank"], stage["rank"]);
            }
        }
        EXPECT_EQ(weights, stage["weights"].get<std::int64_t>());
    }

    const auto tooBig = runDay0(
        { "memory", "llama-3.1-405b", "--plan", "tp=1", "--device", "l40s", "--store", store });
    EXPECT_EQ(tooBig.exitCode, 1) << tooBig.err;
    const auto failed = runDay0({ "runs", "show", "last", "--json", "--store", store }).json();
    EXPECT_EQ(failed["status"], "failed");
    EXPECT_EQ(failed["model"], "llama-3.1-405b");
    EXPECT_NE(failed["message"].get<std::string>().find("does not fit"), std::string::npos);
    EXPECT_EQ(
        runDay0({ "runs", "list", "--kind", "plan", "--json", "--store", store }).json()["total"],
        2);
}

TEST(RecordCli, StoreFromTheEnvironment)
{
    // runDay0 points DAY0_STORE at a scratch file: plan and runs find the same store.
    const auto r = runDay0({ "memory", "llama-3.1-8b", "--plan", "tp=8", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto id = r.json()["run_id"];
    ASSERT_TRUE(id.is_number_integer());
    const auto show = runDay0({ "runs", "show", std::to_string(id.get<int>()), "--json" });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_EQ(show.json()["plan"].get<std::string>().rfind("tp=8,", 0), 0u) << show.json()["plan"];
}

TEST(RecordCli, UnwritableStoreIsAWarningNotAFailure)
{
    const std::string dir = scratchDir("record_bad");
    const std::string notAStore = dir + "/garbage.sqlite";
    {
        std::ofstream(notAStore) << "this is not a database, and it must stay as it is\n";
    }
    const auto r
        = runDay0({ "memory", "llama-3.1-8b", "--plan", "tp=8", "--json", "--store", notAStore });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(r.json()["run_id"].is_null());
    EXPECT_NE(r.err.find("warning: the run was not recorded"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("garbage.sqlite"), std::string::npos) << r.err;
}

TEST(RecordCli, CompareJsonHasWhatTheRunsPanelPlots)
{
    const std::string data = std::string(DAY0_TEST_DATA_DIR) + "/history/";
    const std::string store = scratchDir("record_compare") + "/runs.sqlite";
    ASSERT_EQ(runDay0({ "runs", "import", data + "run_bf16.json", data + "run_fp8.json", "--store",
                          store })
                  .exitCode,
        0);
    const auto r = runDay0({ "runs", "compare", "1", "2", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    const auto& curve = j["depth_curves"]["rel_l2"];
    ASSERT_EQ(curve.size(), 4u) << j["depth_curves"].dump();
    for (std::size_t i = 0; i < curve.size(); ++i) {
        EXPECT_EQ(curve[i]["layer"], int(i));
        EXPECT_NEAR(curve[i]["b"].get<double>(), 4.0 * curve[i]["a"].get<double>(), 1e-15);
    }
    const auto& busiest = j["memory_busiest"];
    ASSERT_TRUE(busiest["a"].is_object()) << busiest.dump();
    EXPECT_EQ(busiest["components"][0]["component"], "weights");
    EXPECT_EQ(busiest["components"][0]["a"].get<std::int64_t>(),
        2 * busiest["components"][0]["b"].get<std::int64_t>());
}
