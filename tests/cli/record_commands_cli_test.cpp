// Every command that produces a result records a run: run, compare, trace import/stats,
// convert, shard and shrink, each of its kind, honouring --no-record and --store.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace {

using day0::test::CliResult;
using day0::test::runDay0;
using day0::test::scratchDir;

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";
const std::string kIds = "3,17,42,99,7";

std::string traceData(const std::string& name)
{
    return std::string(DAY0_TEST_DATA_DIR) + "/profile/" + name;
}

double metric(const nlohmann::json& run, const std::string& name)
{
    for (const auto& m : run["metrics"]) {
        if (m["name"] == name) {
            return m["value"].get<double>();
        }
    }
    ADD_FAILURE() << "no metric " << name << " in " << run["metrics"].dump();
    return -1;
}

/// The run a command recorded (its --json output names it), as `runs show --json` gives it.
nlohmann::json recorded(const CliResult& r, const std::string& store)
{
    const auto j = r.json();
    EXPECT_TRUE(j["run_id"].is_number_integer()) << r.out.substr(0, 300);
    if (!j["run_id"].is_number_integer()) {
        return {};
    }
    const auto show = runDay0({ "runs", "show", std::to_string(j["run_id"].get<int>()), "--json",
        "--layers", "--store", store });
    EXPECT_EQ(show.exitCode, 0) << show.err;
    return show.json();
}

TEST(RecordCommandsCli, RunWithReferenceRecordsPrecisionSpeedAndLayerMetrics)
{
    const std::string dir = scratchDir("record_run");
    const std::string store = dir + "/runs.sqlite";
    const auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "3", "--precision", "bf16",
        "--reference", "fp32", "--inject", "--dump", dir + "/dump", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto run = recorded(r, store);
    EXPECT_EQ(run["kind"], "run");
    EXPECT_EQ(run["precision"], "bf16");
    EXPECT_EQ(run["backend"], "day0-cpu");
    EXPECT_GT(metric(run, "tokens_per_s"), 0.0);
    EXPECT_EQ(metric(run, "new_tokens"), 3.0);
    EXPECT_EQ(metric(run, "verdict_fail"), 0.0);
    EXPECT_EQ(run["properties"]["reference"], "fp32");
    EXPECT_FALSE(run["layer_summary"].empty());
    bool relL2 = false;
    for (const auto& s : run["layer_summary"]) {
        relL2 = relL2 || s["metric"] == "rel_l2";
    }
    EXPECT_TRUE(relL2) << run["layer_summary"].dump();
    EXPECT_FALSE(run["artifacts"].empty());
}

TEST(RecordCommandsCli, CompareRecordsLayerMetricsAndVerdicts)
{
    const std::string dir = scratchDir("record_compare");
    const std::string store = dir + "/runs.sqlite";
    const auto dumps = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "2", "--precision",
        "bf16", "--reference", "fp32", "--dump", dir + "/d", "-q", "--no-record" });
    ASSERT_EQ(dumps.exitCode, 0) << dumps.err;
    EXPECT_FALSE(std::filesystem::exists(store));
    const auto r = runDay0(
        { "compare", dir + "/d/reference", dir + "/d/target", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto run = recorded(r, store);
    EXPECT_EQ(run["kind"], "compare");
    EXPECT_EQ(run["precision"], "bf16");
    EXPECT_EQ(metric(run, "verdict_pass") + metric(run, "verdict_warn")
            + metric(run, "verdict_fail") + metric(run, "verdict_not_judged"),
        double(r.json()["captures"].size()));
    EXPECT_EQ(metric(run, "verdict_fail"), r.json()["counts"]["fail"].get<double>());
    EXPECT_FALSE(run["layer_summary"].empty());
}

TEST(RecordCommandsCli, TraceImportAndStatsRecordTraceRuns)
{
    const std::string dir = scratchDir("record_trace");
    const std::string store = dir + "/runs.sqlite";
    const auto imported = runDay0({ "trace", "import", traceData("hta_trace_compare_base.json.gz"),
        "--json", "--store", store });
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    const auto run = recorded(imported, store);
    EXPECT_EQ(run["kind"], "trace");
    EXPECT_EQ(run["properties"]["action"], "import");
    EXPECT_EQ(metric(run, "slices"), imported.json()["slices"].get<double>());
    const auto stats = runDay0({ "trace", "stats", traceData("synthetic_rank0.json"),
        traceData("synthetic_rank1.json"), "--json", "--store", store });
    ASSERT_EQ(stats.exitCode, 0) << stats.err;
    const auto statsRun = recorded(stats, store);
    EXPECT_EQ(statsRun["properties"]["action"], "stats");
    EXPECT_EQ(metric(statsRun, "ranks"), 2.0);
    EXPECT_GE(metric(statsRun, "rank0.compute_s"), 0.0);
}

TEST(RecordCommandsCli, ShrinkConvertShardRecordCheckpointToolRuns)
{
    const std::string dir = scratchDir("record_tools");
    const std::string store = dir + "/runs.sqlite";
    const auto shrunk = runDay0(
        { "shrink", "deepseek-v3", "--out", dir + "/s", "--json", "-q", "--store", store });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const auto s = recorded(shrunk, store);
    EXPECT_EQ(s["kind"], "verify");
    EXPECT_EQ(s["properties"]["tool"], "shrink");
    EXPECT_EQ(metric(s, "parameters"), shrunk.json()["parameters"].get<double>());

    const auto converted = runDay0({ "convert", dir + "/s", "--dtype", "bf16", "--out", dir + "/c",
        "--json", "-q", "--store", store });
    ASSERT_EQ(converted.exitCode, 0) << converted.err;
    const auto c = recorded(converted, store);
    EXPECT_EQ(c["properties"]["tool"], "convert");
    EXPECT_EQ(c["precision"], "BF16");
    EXPECT_EQ(metric(c, "dequantized"), converted.json()["dequantized"].get<double>());
    EXPECT_GT(metric(c, "dequantized"), 0.0);

    const auto sharded = runDay0({ "shard", dir + "/c", "--plan", "tp=2", "--out", dir + "/t",
        "--json", "-q", "--store", store });
    ASSERT_EQ(sharded.exitCode, 0) << sharded.err;
    const auto t = recorded(sharded, store);
    EXPECT_EQ(t["properties"]["tool"], "shard");
    EXPECT_EQ(t["plan"], "tp=2");
    EXPECT_EQ(metric(t, "ranks"), 2.0);

    // --no-record: nothing more in the store.
    const auto before = runDay0({ "runs", "list", "--json", "--store", store }).json();
    const auto quiet = runDay0({ "shrink", "deepseek-v3", "--out", dir + "/s2", "--json", "-q",
        "--no-record", "--store", store });
    ASSERT_EQ(quiet.exitCode, 0) << quiet.err;
    EXPECT_TRUE(quiet.json()["run_id"].is_null());
    const auto after = runDay0({ "runs", "list", "--json", "--store", store }).json();
    EXPECT_EQ(before.dump(), after.dump());
}

} // namespace
