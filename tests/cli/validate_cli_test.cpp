// day0 validate: the whole Day-0 pipeline on the embedded default (a shrunk Kimi-K2), its three
// reports, the run it records, and a damaged checkpoint failing with its dependents skipped.
#include "cli_runner.h"
#include "junit_check.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

using day0::test::runDay0;
using day0::test::scratchDir;
namespace fs = std::filesystem;

std::string readAll(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json step(const nlohmann::json& report, const std::string& id)
{
    for (const auto& s : report["steps"]) {
        if (s["id"] == id) {
            return s;
        }
    }
    return nullptr;
}

TEST(ValidateCli, KimiK2PassesEndToEndWithThreeReports)
{
    const std::string dir = scratchDir("validate_kimi");
    const std::string store = dir + "/runs.sqlite";
    const auto r = runDay0(
        { "validate", "kimi-k2", "--work", dir + "/work", "--junit", dir + "/out.xml", "--report",
            dir + "/out.html", "--json-report", dir + "/out.json", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
    const auto j = r.json();
    EXPECT_TRUE(j["passed"].get<bool>());
    ASSERT_EQ(j["steps"].size(), 9u);
    const char* ids[] = { "weights", "convert", "shard", "smoke", "multi_rank", "precision",
        "performance", "serving", "report" };
    for (std::size_t i = 0; i < 9; ++i) {
        EXPECT_EQ(j["steps"][i]["id"], ids[i]);
    }
    // Only a config was given: the weights step says it shrank a homologous checkpoint.
    EXPECT_NE(step(j, "weights")["details"].dump().find("shrank a homologous"), std::string::npos);
    EXPECT_GT(step(j, "convert")["metrics"]["dequantized"].get<double>(), 0.0);
    EXPECT_EQ(step(j, "shard")["metrics"]["reassembly_mismatches"].get<double>(), 0.0);
    EXPECT_EQ(step(j, "smoke")["status"], "passed");
    const auto multi = step(j, "multi_rank");
    if (multi["status"] == "skipped") {
        EXPECT_EQ(multi["reason"], "sharded execution not available in this build");
    } else {
        EXPECT_EQ(multi["status"], "passed");
    }
    EXPECT_EQ(step(j, "precision")["metrics"]["verdict_fail"].get<double>(), 0.0);
    // The end-to-end check (day0 eval's action) ran and its KL is measured, within the rule.
    EXPECT_GT(step(j, "precision")["metrics"]["eval_kl_mean"].get<double>(), 0.0);
    EXPECT_GT(step(j, "precision")["metrics"]["eval_same_top"].get<double>(), 0.5);
    EXPECT_GT(step(j, "performance")["metrics"]["decode_tokens_per_s"].get<double>(), 0.0);
    // The serving step: day0 serve in-process under concurrency 1 and 4, 8 requests each, every
    // answer's greedy tokens the reference engine's.
    const auto serving = step(j, "serving");
    EXPECT_EQ(serving["status"], "passed") << serving.dump();
    EXPECT_EQ(serving["metrics"]["c1_completed"].get<double>(), 8.0);
    EXPECT_EQ(serving["metrics"]["c4_completed"].get<double>(), 8.0);
    EXPECT_EQ(serving["metrics"]["c4_diverged"].get<double>(), 0.0);
    EXPECT_GT(serving["metrics"]["c4_output_tokens_per_s"].get<double>(), 0.0);
    // Kimi-K2's MLA decodes in batches: the summary says how its decode steps ran.
    EXPECT_NE(serving["summary"].get<std::string>().find("(decode steps batched)"),
        std::string::npos)
        << serving["summary"];

    const auto xml = readAll(dir + "/out.xml");
    const auto testcases = day0::test::junitTestcases(xml);
    ASSERT_TRUE(testcases) << testcases.error;
    EXPECT_EQ(testcases.names.size(), 9u);
    EXPECT_EQ(testcases.names.front(), "weights");

    const auto file = nlohmann::json::parse(readAll(dir + "/out.json"));
    EXPECT_EQ(file["steps"].size(), 9u);

    const auto html = readAll(dir + "/out.html");
    EXPECT_NE(html.find("<!DOCTYPE html>"), std::string::npos);
    if (j["figures"].get<int>() > 0) {
        EXPECT_NE(html.find("src=\"data:image/png;base64,"), std::string::npos);
    }
    EXPECT_EQ(j["figures"].get<int>() > 0, day0::test::kCliHasPlots);

    // Recorded as a run of kind validate with step and layer metrics.
    ASSERT_TRUE(j["run_id"].is_number_integer());
    const auto show = runDay0(
        { "runs", "show", std::to_string(j["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    EXPECT_EQ(run["kind"], "validate");
    EXPECT_EQ(run["status"], "ok");
    EXPECT_EQ(run["model"], "kimi-k2");
    EXPECT_EQ(run["properties"]["smoke.status"], "passed");
    bool hasStepMetric = false;
    for (const auto& m : run["metrics"]) {
        hasStepMetric = hasStepMetric || m["name"] == "performance.decode_tokens_per_s";
    }
    EXPECT_TRUE(hasStepMetric);
    // The serving step's bench is a run of its own, as `day0 bench serve --check` records it.
    ASSERT_TRUE(j["serving_run_id"].is_number_integer()) << j.dump();
    const auto bench = runDay0({ "runs", "show", std::to_string(j["serving_run_id"].get<int>()),
        "--json", "--store", store });
    ASSERT_EQ(bench.exitCode, 0) << bench.err;
    EXPECT_EQ(bench.json()["properties"]["tool"], "bench");
    EXPECT_EQ(bench.json()["status"], "ok");
}

TEST(ValidateCli, DamagedShardFailsIntegrityAndSkipsWhatNeedsIt)
{
    const std::string dir = scratchDir("validate_damaged");
    const auto shrunk = runDay0({ "shrink", "deepseek-v3", "--out", dir + "/ckpt", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    fs::path shard;
    for (const auto& e : fs::directory_iterator(dir + "/ckpt")) {
        if (e.path().extension() == ".safetensors") {
            shard = e.path();
            break;
        }
    }
    ASSERT_FALSE(shard.empty());
    {
        // Flip one byte far inside the tensor data: the structure stays valid, the hash does not.
        std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-16, std::ios::end);
        char c = 0;
        f.read(&c, 1);
        f.seekp(-16, std::ios::end);
        c = char(c ^ 0x5a);
        f.write(&c, 1);
    }
    // --no-serve leaves the serving step out: eight steps.
    const auto r = runDay0({ "validate", dir + "/ckpt", "--work", dir + "/work", "--junit",
        dir + "/out.xml", "--json", "--no-record", "--no-serve" });
    EXPECT_EQ(r.exitCode, 1) << r.err;
    const auto j = r.json();
    EXPECT_FALSE(j["passed"].get<bool>());
    EXPECT_EQ(step(j, "weights")["status"], "failed");
    EXPECT_NE(step(j, "weights")["reason"].get<std::string>().find("SHA-256"), std::string::npos);
    // The failed check keeps what it found: the damaged file, by name.
    EXPECT_NE(
        step(j, "weights")["details"].dump().find(shard.filename().string()), std::string::npos)
        << step(j, "weights")["details"];
    for (const char* id : { "convert", "shard", "smoke", "precision", "performance" }) {
        EXPECT_EQ(step(j, id)["status"], "skipped") << id;
        EXPECT_NE(step(j, id)["reason"].get<std::string>().find("needs"), std::string::npos);
    }
    EXPECT_EQ(step(j, "report")["status"], "passed");
    EXPECT_EQ(j["steps"].size(), 8u);
    EXPECT_TRUE(step(j, "serving").is_null());
    const auto testcases = day0::test::junitTestcases(readAll(dir + "/out.xml"));
    ASSERT_TRUE(testcases) << testcases.error;
    EXPECT_EQ(testcases.failures, 1);
    EXPECT_EQ(testcases.skipped, 6);
}

TEST(ValidateCli, BadPlanIsAUsageError)
{
    const std::string dir = scratchDir("validate_bad_plan");
    const auto r
        = runDay0({ "validate", "kimi-k2", "--plan", "tp=banana", "--work", dir, "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("tp"), std::string::npos) << r.err;
}

} // namespace
