#include "cli_runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

const std::string kData = std::string(DAY0_TEST_DATA_DIR) + "/history/";

// A fresh store in its own folder, filled with the two fixture runs (ids 1 = bf16, 2 = fp8).
std::string importedStore(const std::string& name)
{
    const std::string store = scratchDir(name) + "/runs.sqlite";
    const auto r = runDay0(
        { "runs", "import", kData + "run_bf16.json", kData + "run_fp8.json", "--store", store });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return store;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

TEST(RunsCli, ListShowsNewestFirstAndFilters)
{
    const std::string store = importedStore("runs_list");
    const auto table = runDay0({ "runs", "list", "--store", store });
    ASSERT_EQ(table.exitCode, 0) << table.err;
    const auto fp8 = table.out.find("fp8 kernels v2");
    const auto bf16 = table.out.find("bf16 baseline");
    ASSERT_NE(fp8, std::string::npos) << table.out;
    ASSERT_NE(bf16, std::string::npos);
    EXPECT_LT(fp8, bf16) << "newest first";
    EXPECT_NE(table.out.find("kimi-k2-shrunk"), std::string::npos);
    EXPECT_NE(table.out.find("9.75 s"), std::string::npos);

    const auto all = runDay0({ "runs", "list", "--store", store, "--json" }).json();
    EXPECT_EQ(all["total"], 2);
    EXPECT_EQ(all["runs"][0]["label"], "fp8 kernels v2");
    EXPECT_EQ(all["runs"][0]["created"], "2025-07-11T09:30:00.000000Z");
    const auto count = [&](std::vector<std::string> filter) {
        std::vector<std::string> args { "runs", "list", "--store", store, "--json" };
        args.insert(args.end(), filter.begin(), filter.end());
        const auto r = runDay0(args);
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return r.json()["runs"].size();
    };
    EXPECT_EQ(count({ "--precision", "fp8" }), 1u);
    EXPECT_EQ(count({ "--label", "BASELINE" }), 1u);
    EXPECT_EQ(count({ "--model", "kimi" }), 2u);
    EXPECT_EQ(count({ "--model", "qwen" }), 0u);
    EXPECT_EQ(count({ "--kind", "run" }), 2u);
    EXPECT_EQ(count({ "--kind", "plan" }), 0u);
    EXPECT_EQ(count({ "--status", "ok" }), 2u);
    EXPECT_EQ(count({ "--since", "2025-07-11T00:00Z" }), 1u);
    EXPECT_EQ(count({ "--until", "2025-07-11T00:00Z" }), 1u);
    EXPECT_EQ(count({ "--limit", "1" }), 1u);

    EXPECT_EQ(count({ "--tool", "bench" }), 0u);

    // A run of a tool: KIND shows it in brackets, --tool lists it, --json carries it.
    auto benchRun = nlohmann::json::parse(readText(kData + "run_fp8.json")).at(0);
    benchRun["uuid"] = "6f1c0c52-7d4e-4c2b-9a55-2b1f0e0b0001";
    benchRun["properties"]["tool"] = "bench";
    const std::string benchFile = scratchDir("runs_list_tool") + "/bench_run.json";
    std::ofstream(benchFile) << benchRun.dump();
    ASSERT_EQ(runDay0({ "runs", "import", benchFile, "--store", store }).exitCode, 0);
    EXPECT_EQ(count({ "--tool", "bench" }), 1u);
    EXPECT_EQ(count({ "--kind", "run", "--tool", "bench" }), 1u);
    const auto tools = runDay0({ "runs", "list", "--store", store, "--json", "--tool", "bench" });
    EXPECT_EQ(tools.json()["runs"][0]["tool"], "bench");
    EXPECT_NE(
        runDay0({ "runs", "list", "--store", store }).out.find("run (bench)"), std::string::npos);

    const auto limited = runDay0({ "runs", "list", "--store", store, "--limit", "1" });
    EXPECT_NE(limited.err.find("showing the newest 1 of 3 runs"), std::string::npos) << limited.err;
}

TEST(RunsCli, ShowPrintsEverySection)
{
    const std::string store = importedStore("runs_show");
    const auto text = runDay0({ "runs", "show", "last", "--store", store });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    for (const char* expected :
        { "fp8 kernels v2", "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "tp=2,pp=2", "h200:1x4",
            "171.2 tok/s", "310 ms", "weights", "1.00 GiB", "/runs/dumps/fp8", "rel_l2",
            "model.layers.3.mlp", "layer 3 mlp slower than expected" }) {
        EXPECT_NE(text.out.find(expected), std::string::npos) << expected << "\n" << text.out;
    }
    EXPECT_EQ(text.out.find("model.layers.2.mlp.gate"), std::string::npos)
        << "rows only with --layers";
    const auto rows = runDay0({ "runs", "show", "2", "--layers", "--store", store });
    EXPECT_NE(rows.out.find("model.layers.2.mlp.gate"), std::string::npos);

    const auto json = runDay0({ "runs", "show", "1", "--store", store, "--json" }).json();
    EXPECT_EQ(json["precision"], "bf16");
    EXPECT_EQ(json["metrics"][0]["name"], "tokens_per_s");
    EXPECT_EQ(json["memory"].size(), 12u);
    EXPECT_FALSE(json.contains("layer_metrics"));
    EXPECT_EQ(json["layer_summary"][0]["metric"], "rel_l2");
    EXPECT_EQ(json["layer_summary"][0]["rows"], 21);
    EXPECT_EQ(json["layer_summary"][0]["max_anchor"], "lm_head");
    const auto withRows
        = runDay0({ "runs", "show", "1", "--layers", "--store", store, "--json" }).json();
    EXPECT_EQ(withRows["layer_metrics"].size(), 41u);
}

TEST(RunsCli, CompareAlignsLayersAndMemory)
{
    const std::string store = importedStore("runs_compare");
    const auto r = runDay0({ "runs", "compare", "1", "2", "--store", store, "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto json = r.json();
    bool precisionChanged = false;
    for (const auto& f : json["fields"]) {
        precisionChanged |= f["field"] == "precision" && f["a"] == "bf16" && f["b"] == "fp8";
    }
    EXPECT_TRUE(precisionChanged) << json["fields"].dump();
    EXPECT_EQ(json["duration_s"]["delta"], -2.75);
    EXPECT_EQ(json["metrics"][0]["name"], "tokens_per_s");
    EXPECT_EQ(json["metrics"][0]["delta"], 52.75);
    EXPECT_EQ(json["memory"][0]["component"], "weights");
    EXPECT_EQ(json["memory"][0]["delta"], -1073741824);
    EXPECT_EQ(json["memory_totals"].size(), 4u);
    EXPECT_EQ(json["layer_summary"][0]["aligned"], 21);
    EXPECT_EQ(json["layer_summary"][0]["increased"], 20);
    EXPECT_NEAR(json["layer_summary"][0]["geomean_ratio"].get<double>(), 4.0, 1e-9);
    EXPECT_EQ(json["largest_layer_changes"][0]["anchor"], "lm_head")
        << "a value turning NaN comes first";
    EXPECT_TRUE(json["largest_layer_changes"][0]["b"].is_null());
    EXPECT_FALSE(json.contains("layers"));
    EXPECT_EQ(runDay0({ "runs", "compare", "1", "2", "--all", "--store", store, "--json" })
                  .json()["layers"]
                  .size(),
        41u);

    const auto text = runDay0({ "runs", "compare", "1", "last", "--store", store, "--top", "2" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    for (const char* expected : { "precision", "bf16", "fp8", "+52.75 tok/s", "+44.5%", "-1.00 GiB",
             "GEOMEAN B/A", "largest changes (top 2 per metric" }) {
        EXPECT_NE(text.out.find(expected), std::string::npos) << expected << "\n" << text.out;
    }
}

TEST(RunsCli, ExportImportRoundTrip)
{
    const std::string store = importedStore("runs_export");
    const std::string dir = scratchDir("runs_export_out");
    const auto stdoutExport = runDay0({ "runs", "export", "2", "--store", store });
    ASSERT_EQ(stdoutExport.exitCode, 0) << stdoutExport.err;
    const auto exported = stdoutExport.json();
    EXPECT_EQ(exported["layer_metrics"].size(), 41u);
    EXPECT_TRUE(exported["layer_metrics"][40]["value"].is_null());

    const auto toFile
        = runDay0({ "runs", "export", "2", "-o", dir + "/run.json", "--store", store });
    ASSERT_EQ(toFile.exitCode, 0) << toFile.err;
    EXPECT_EQ(nlohmann::json::parse(readText(dir + "/run.json")), exported);

    const std::string other = dir + "/other.sqlite";
    ASSERT_EQ(runDay0({ "runs", "import", dir + "/run.json", "--store", other }).exitCode, 0);
    auto again = runDay0({ "runs", "export", "last", "--store", other }).json();
    EXPECT_EQ(again["id"], 1);
    again["id"] = exported["id"];
    EXPECT_EQ(again, exported) << "an imported run exports the same JSON";

    const auto twice = runDay0({ "runs", "import", dir + "/run.json", "--store", other, "--json" });
    ASSERT_EQ(twice.exitCode, 0) << twice.err;
    EXPECT_EQ(twice.json()["imported"].size(), 0u);
    EXPECT_EQ(twice.json()["skipped"][0], exported["uuid"]);
}

TEST(RunsCli, DeleteResolvesEveryRunFirst)
{
    const std::string store = importedStore("runs_delete");
    const auto typo = runDay0({ "runs", "delete", "2", "99", "--store", store });
    EXPECT_EQ(typo.exitCode, 2);
    EXPECT_NE(typo.err.find("runs.sqlite: no run '99'"), std::string::npos) << typo.err;
    EXPECT_EQ(runDay0({ "runs", "list", "--store", store, "--json" }).json()["total"], 2)
        << "nothing deleted";

    const auto r = runDay0({ "runs", "delete", "9a8b7c6d", "--store", store, "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["deleted"], nlohmann::json::array({ 2 }));
    const auto left = runDay0({ "runs", "list", "--store", store, "--json" }).json();
    EXPECT_EQ(left["total"], 1);
    EXPECT_EQ(left["runs"][0]["id"], 1);
    EXPECT_EQ(runDay0({ "runs", "show", "2", "--store", store }).exitCode, 2);
}

TEST(RunsCli, StoreComesFromOptionOrEnvironment)
{
    const std::string envStore = (std::filesystem::temp_directory_path()
        / fmt::format("day0_cli_store_{}.sqlite", ::getpid()))
                                     .string();
    std::filesystem::remove(envStore);
    std::filesystem::remove(envStore + "-wal");
    std::filesystem::remove(envStore + "-shm");
    ASSERT_EQ(runDay0({ "runs", "import", kData + "run_bf16.json" }).exitCode, 0);
    const auto viaEnv = runDay0({ "runs", "list", "--json" }).json();
    EXPECT_EQ(viaEnv["store"], envStore);
    EXPECT_EQ(viaEnv["total"], 1);

    const std::string store = importedStore("runs_option");
    const auto before = runDay0({ "--store", store, "runs", "list", "--json" });
    ASSERT_EQ(before.exitCode, 0) << before.err;
    EXPECT_EQ(before.json()["total"], 2) << "--store before the verb overrides DAY0_STORE";
    EXPECT_EQ(runDay0({ "--no-record", "runs", "list", "--store", store }).exitCode, 0);

    const std::string missing = scratchDir("runs_missing") + "/none.sqlite";
    const auto empty = runDay0({ "runs", "list", "--store", missing, "--json" });
    EXPECT_EQ(empty.exitCode, 0);
    EXPECT_EQ(empty.json()["total"], 0);
    EXPECT_FALSE(std::filesystem::exists(missing)) << "listing must not create a store";
    const auto show = runDay0({ "runs", "show", "1", "--store", missing });
    EXPECT_EQ(show.exitCode, 2);
    EXPECT_NE(show.err.find("none.sqlite: no run store at this path"), std::string::npos)
        << show.err;
}

TEST(RunsCli, BadInputExitsTwoNamingFileAndProblem)
{
    const std::string dir = scratchDir("runs_bad");
    const std::string garbage = dir + "/runs.sqlite";
    std::ofstream(garbage) << std::string(4096, 'x');
    const auto corrupt = runDay0({ "runs", "list", "--store", garbage });
    EXPECT_EQ(corrupt.exitCode, 2);
    EXPECT_NE(corrupt.err.find("runs.sqlite"), std::string::npos) << corrupt.err;
    EXPECT_NE(corrupt.err.find("not a SQLite database"), std::string::npos) << corrupt.err;
    EXPECT_EQ(readText(garbage), std::string(4096, 'x')) << "a corrupt store is never overwritten";

    const auto bad
        = runDay0({ "runs", "import", kData + "bad_run.json", "--store", dir + "/s.sqlite" });
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("bad_run.json: metrics[1]: 'value' must be a number"), std::string::npos)
        << bad.err;

    const std::string store = importedStore("runs_bad_store");
    const auto kind = runDay0({ "runs", "list", "--kind", "train", "--store", store });
    EXPECT_EQ(kind.exitCode, 2);
    EXPECT_NE(kind.err.find("unknown run kind 'train'"), std::string::npos) << kind.err;
    EXPECT_NE(kind.err.find("listed with --tool train"), std::string::npos) << kind.err;
    const auto since = runDay0({ "runs", "list", "--since", "yesterday", "--store", store });
    EXPECT_EQ(since.exitCode, 2);
    EXPECT_NE(since.err.find("--since: 'yesterday' is not a time"), std::string::npos) << since.err;
    EXPECT_EQ(runDay0({ "runs", "--store", store }).exitCode, 2) << "an action is required";
    const auto ref = runDay0({ "runs", "show", "not-a-run", "--store", store });
    EXPECT_EQ(ref.exitCode, 2);
    EXPECT_NE(ref.err.find("'not-a-run' is not a run reference"), std::string::npos) << ref.err;
}
