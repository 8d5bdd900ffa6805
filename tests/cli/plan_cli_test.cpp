// Golden tests of `day0 plan`: exit codes, the JSON document, the readable report, one-line errors.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

bool oneLine(const std::string& text)
{
    return !text.empty() && text.find('\n') == text.size() - 1;
}

std::string writeFile(const std::string& dir, const std::string& name, const std::string& text)
{
    const auto path = std::filesystem::path(dir) / name;
    std::ofstream(path) << text;
    return path.string();
}

} // namespace

TEST(CliPlan, KimiK2TrainingJson)
{
    const auto r = runDay0(
        { "plan", "kimi-k2", "--cluster", "h200:32x8", "--mode", "train", "--top", "5", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["model"], "kimi-k2");
    EXPECT_EQ(j["world"], 256);
    EXPECT_GT(j["evaluated"].get<std::int64_t>(), 100000);
    EXPECT_GT(j["feasible"].get<std::int64_t>(), 0);
    ASSERT_EQ(j["layouts"].size(), 5u);
    std::int64_t rejected = 0;
    for (const auto& [reason, count] : j["rejected_summary"].items()) {
        EXPECT_FALSE(reason.empty());
        rejected += count.get<std::int64_t>();
    }
    EXPECT_EQ(j["evaluated"].get<std::int64_t>(), j["feasible"].get<std::int64_t>() + rejected);
    EXPECT_TRUE(j["rejected_summary"].contains("tp=16 > 8 GPUs per node"));
    EXPECT_TRUE(j["rejected_summary"].contains("tp=128 does not divide 64 attention heads"));
    double previous = 1e300;
    for (const auto& l : j["layouts"]) {
        for (const char* key :
            { "tp", "pp", "ep", "dp", "cp", "zero", "micro_batch", "max_memory" }) {
            EXPECT_TRUE(l[key].is_number_integer()) << key;
        }
        EXPECT_TRUE(l["recompute"].is_string());
        EXPECT_EQ(
            l["tp"].get<int>() * l["pp"].get<int>() * l["dp"].get<int>() * l["cp"].get<int>(), 256);
        EXPECT_LE(l["max_memory"].get<std::int64_t>(), j["device_memory"].get<std::int64_t>());
        const double tps = l["tokens_per_s"].get<double>();
        EXPECT_LE(tps, previous);
        previous = tps;
        EXPECT_NEAR(tps, 1024.0 * 4096 / l["step_time_s"].get<double>(), 1e-6 * tps);
        const auto& b = l["breakdown"];
        double sum = 0;
        for (const char* key :
            { "compute_s", "tp_s", "ep_s", "cp_s", "pp_s", "dp_s", "bubble_s", "optimizer_s" }) {
            ASSERT_TRUE(b.contains(key)) << key;
            sum += b[key].get<double>();
        }
        EXPECT_NEAR(sum, l["step_time_s"].get<double>(), 1e-9 * sum);
    }
}

TEST(CliPlan, ReadableReportExplainsItself)
{
    const auto r = runDay0(
        { "plan", "kimi-k2", "--cluster", "h200:32x8", "--mode", "train", "--top", "10" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    for (const char* text : { "Model    kimi-k2", "256 × NVIDIA H200",
             "1024 sequences × 4096 tokens", "Fastest 10 layouts", "Where the step time goes",
             "Layout #1:", "Rejected layouts", "> 8 GPUs per node", "over by", "Assumptions:" }) {
        EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
    }
}

TEST(CliPlan, InferenceJsonHasLatencies)
{
    const auto r = runDay0(
        { "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--mode", "infer", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_FALSE(j["layouts"].empty());
    for (const auto& l : j["layouts"]) {
        EXPECT_LE(l["tpot_s"].get<double>(), 0.050);
        EXPECT_GT(l["ttft_s"].get<double>(), 0.0);
        EXPECT_EQ(l["zero"], 0);
        EXPECT_EQ(l["recompute"], "none");
        EXPECT_GE(l["batch"].get<int>(), 1);
    }
}

TEST(CliPlan, APublishedRunsOwnSettingsCanBePinned)
{
    // Every setting a measured run states can be pinned, so that its row of
    // resources/plan/published_measurements.json is reproducible from the CLI.
    const auto r = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:2x8", "--tp", "2",
        "--pp", "2", "--vpp", "2", "--micro-batches", "1", "--recompute", "selective", "--zero",
        "1", "--top", "50", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_FALSE(j["layouts"].empty());
    // Dense training on H100 is held against the held-out NeMo / Megatron-Bridge runs.
    const std::string bar = j["time_error"]["text"];
    EXPECT_EQ(bar.rfind("±", 0), 0U) << bar;
    EXPECT_NE(bar.find("comparable published measurements: "), std::string::npos) << bar;
    EXPECT_NE(bar.find("mb2511-llama3-8b-h100"), std::string::npos) << bar;
    EXPECT_NE(bar.find("; h100-sxm, training, dense)"), std::string::npos) << bar;
    EXPECT_GT(j["time_error"]["mean_abs_error"].get<double>(), 0.0);
    for (const auto& l : j["layouts"]) {
        // Every time figure carries its error bar, narrowed to the runs that use the layout's
        // parallel dimensions (tp+pp: the two Llama3-70B runs; tp+pp+cp: the 405B runs and
        // NeMo's 70B with CP2).
        const auto& own = l["time_error"];
        ASSERT_TRUE(own.contains("text")) << l.dump();
        const std::string dims = l["cp"].get<int>() > 1 ? "tp+pp+cp" : "tp+pp";
        EXPECT_NE(own["text"].get<std::string>().find("h100-sxm, training, dense, " + dims + ")"),
            std::string::npos)
            << own["text"];
        for (const auto& id : own["cases"]) {
            EXPECT_NE(
                std::find(j["time_error"]["cases"].begin(), j["time_error"]["cases"].end(), id),
                j["time_error"]["cases"].end())
                << id;
        }
        EXPECT_EQ(l["tp"], 2);
        EXPECT_EQ(l["pp"], 2);
        EXPECT_EQ(l["vpp"], 2);
        EXPECT_EQ(l["micro_batch"], 1);
        EXPECT_EQ(l["recompute"], "selective");
        EXPECT_EQ(l["zero"], 1);
    }
}

TEST(CliPlan, NodeDedupShortensAnExpertDispatchThatLeavesTheNode)
{
    // deepseek-v3-pretraining of resources/plan/published_measurements.json: EP 64 over 8
    // nodes of H800s, the all-to-all overlapped as DualPipe does; with node-limited dispatch a
    // token crosses IB about 3.2 times instead of 7, and the exposed all-to-all goes.
    auto run = [](bool dedup) {
        std::vector<std::string> args { "plan", "deepseek-v3", "--cluster", "h800:256x8", "--tp",
            "1", "--pp", "16", "--ep", "64", "--micro-batches", "1", "--recompute", "none",
            "--zero", "1", "--weights", "fp8", "--ep-comm-overlap", "--seq", "4096",
            "--global-batch", "15360", "--top", "1", "--json" };
        if (dedup) {
            args.push_back("--ep-node-dedup");
        }
        const auto r = runDay0(args);
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return r.json();
    };
    const auto rank = run(false);
    const auto node = run(true);
    ASSERT_EQ(rank["layouts"].size(), 1U);
    ASSERT_EQ(node["layouts"].size(), 1U);
    EXPECT_EQ(node["layouts"][0]["plan"], rank["layouts"][0]["plan"]);
    EXPECT_LT(node["layouts"][0]["step_time_s"].get<double>(),
        0.8 * rank["layouts"][0]["step_time_s"].get<double>());
    auto says = [](const nlohmann::json& j, const std::string& what) {
        for (const auto& n : j["notes"]) {
            if (n.get<std::string>().find(what) != std::string::npos) {
                return true;
            }
        }
        return false;
    };
    EXPECT_TRUE(says(node, "a token sent once per node it reaches (--ep-node-dedup)"));
    EXPECT_TRUE(says(rank, "one copy per routed expert (--ep-node-dedup sends one per node)"));
}

TEST(CliPlan, AServingRowOfThePublishedTableIsReproducedFromTheCommandLine)
{
    // trtllm-llama31-8b-h100-tp1-128-2048 of resources/plan/published_measurements.json:
    // TensorRT-LLM's 22,714 output tokens/s for Llama 3.1 8B in FP8 on one H100, prompt 128,
    // output 2048. --context 1152 is what a sequence holds on average (its prompt and half its
    // output), as a runtime that admits against what sequences hold sizes its batch; the table's
    // own estimate models TensorRT-LLM's default admission, which reserves whole requests.
    const auto r = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x1", "--mode", "infer",
        "--weights", "fp8", "--kv", "fp8", "--prompt", "128", "--output", "2048", "--context",
        "1152", "--tpot-ms", "1000", "--top", "1", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["layouts"].size(), 1U);
    const auto& l = j["layouts"][0];
    EXPECT_EQ(l["plan"], "tp=1,pp=1,dp=1,weights=fp8,kv=fp8");
    EXPECT_NEAR(l["tokens_per_s"].get<double>(), 22714.0, 0.12 * 22714.0);
    EXPECT_NE(j["time_error"]["text"].get<std::string>().find("h100-sxm, inference, dense"),
        std::string::npos);

    // FP8 GEMMs make the same pinned training layout faster; a dtype that is not one is refused.
    auto step = [](const char* weights) {
        const auto t = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--tp", "1",
            "--pp", "1", "--cp", "1", "--micro-batches", "1", "--zero", "1", "--recompute", "none",
            "--weights", weights, "--top", "1", "--json" });
        EXPECT_EQ(t.exitCode, 0) << t.err;
        return t.json()["layouts"][0]["step_time_s"].get<double>();
    };
    EXPECT_LT(step("fp8"), 0.9 * step("bf16"));
    const auto bad
        = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--kv", "int3" });
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("--kv: "), std::string::npos) << bad.err;
}

TEST(CliPlan, TheEstimateStandsBesideTheMeasuredStepsOfTheUsersOwnTrace)
{
    // Two ranks of one job (tests/data/profile: HTA's sampled_rank-0/1), ProfilerStep#551 and
    // #552 on each: median (607904 + 622928) / 2 µs.
    const std::string dir = std::string(DAY0_TEST_DATA_DIR) + "/profile/";
    const auto r = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--top", "1",
        "--measured-trace", dir + "hta_sampled_rank-0.json.gz", "--measured-trace",
        dir + "hta_sampled_rank-1.json.gz", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    const auto& m = j["measured"];
    EXPECT_NEAR(m["step_time_s"].get<double>(), 0.615416, 1e-9);
    EXPECT_EQ(m["steps"], 4);
    const double estimate = j["layouts"][0]["step_time_s"].get<double>();
    EXPECT_DOUBLE_EQ(m["estimate_s"].get<double>(), estimate);
    EXPECT_NEAR(m["error"].get<double>(), (estimate - 0.615416) / 0.615416, 1e-9);

    const auto text = runDay0({ "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8", "--top", "1",
        "--measured-trace", dir + "hta_sampled_rank-0.json.gz" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("Measured (" + dir
                  + "hta_sampled_rank-0.json.gz): median 0.6151 s "
                    "over 2 ProfilerStep ranges (1 rank); layout #1 is estimated at "),
        std::string::npos)
        << text.out;

    // A trace without steps, a missing file and a serving plan are refused, exit 2, one line.
    for (const auto& args : std::vector<std::vector<std::string>> {
             { "--measured-trace", dir + "hta_simple_add_rank0.json.gz" },
             { "--measured-trace", dir + "missing.json" },
             { "--measured-trace", dir + "hta_sampled_rank-0.json.gz", "--mode", "infer" } }) {
        std::vector<std::string> all { "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x8" };
        all.insert(all.end(), args.begin(), args.end());
        const auto bad = runDay0(all);
        EXPECT_EQ(bad.exitCode, 2) << args[1];
        EXPECT_NE(bad.err.find("--measured-trace"), std::string::npos) << bad.err;
    }
}

TEST(CliPlan, NothingFitsExitsOne)
{
    const auto r = runDay0({ "plan", "llama-3.1-405b", "--cluster", "l40s:1x1" });
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_NE(r.out.find("No layout fits"), std::string::npos) << r.out;
    const auto j = runDay0({ "plan", "llama-3.1-405b", "--cluster", "l40s:1x1", "--json" });
    EXPECT_EQ(j.exitCode, 1);
    EXPECT_EQ(j.json()["feasible"], 0);
    EXPECT_TRUE(j.json()["layouts"].empty());
}

TEST(CliPlan, BadInputIsExitTwoWithOneLine)
{
    const auto dir = scratchDir("plan_bad");
    const std::string malformed = writeFile(dir, "malformed.json", "{ \"model_type\": ");
    const std::string unknown = writeFile(dir, "unknown.json", R"({"model_type": "not_a_family"})");
    struct Case {
        std::vector<std::string> args;
        const char* expected;
    };
    const std::vector<Case> cases = {
        { { "plan", "kimi-k2", "--cluster", "h300:4x8" }, "unknown device 'h300'" },
        { { "plan", "kimi-k2", "--cluster", "h200:4y8" }, "h200:4y8" },
        { { "plan", "kimi-k2", "--cluster", dir + "/missing.json" }, "missing.json" },
        { { "plan", dir + "/no-such-model", "--cluster", "h200:1x8" }, "no-such-model" },
        { { "plan", malformed, "--cluster", "h200:1x8" }, "malformed" },
        { { "plan", unknown, "--cluster", "h200:1x8" }, "not_a_family" },
        { { "plan", "kimi-k2", "--cluster", "h200:1x8", "--mode", "serve" }, "--mode 'serve'" },
        { { "plan", "kimi-k2", "--cluster", "h200:1x8", "--recompute", "some" },
            "--recompute 'some'" },
        { { "plan", "kimi-k2", "--cluster", "h200:1x8", "--vpp", "0" }, "--vpp 0" },
    };
    for (const auto& c : cases) {
        const auto r = runDay0(c.args);
        EXPECT_EQ(r.exitCode, 2) << c.expected << ": " << r.err;
        EXPECT_TRUE(oneLine(r.err)) << r.err;
        EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST(CliPlan, ClusterFileWithMixedLinks)
{
    const auto dir = scratchDir("plan_cluster");
    const std::string cluster = writeFile(dir, "mixed.json", R"({
        "device": "h200", "nodes": [ { "count": 2 }, { "count": 2, "inter_node": { "bandwidth_gbs": 12.5 } } ] })");
    const auto r
        = runDay0({ "plan", "llama-3.1-70b", "--cluster", cluster, "--json", "--top", "3" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["world"], 32);
    bool noted = false;
    for (const auto& n : j["notes"]) {
        noted = noted || n.get<std::string>().find("mixed scale-out links") != std::string::npos;
    }
    EXPECT_TRUE(noted);
}

TEST(CliPlan, ServingHoldsWhatTheRuntimeAdmits)
{
    const auto base
        = std::vector<std::string> { "plan", "llama-3.1-8b", "--cluster", "h100-sxm:1x1", "--mode",
              "infer", "--prompt", "1000", "--output", "1000", "--tpot-ms", "1000000", "--json" };
    auto run = [&](std::vector<std::string> extra) {
        auto args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return runDay0(args);
    };
    const auto r = run({});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto l = r.json()["layouts"][0];
    EXPECT_EQ(l["batch"], l["admitted"]);
    EXPECT_EQ(l["admitted_bound"], "kv_pool");
    // The pool holds the admitted sequences and not one more.
    const double pool = l["kv_pool_per_rank"].get<double>();
    const double each = l["kv_per_sequence_per_rank"].get<double>();
    EXPECT_LE(l["admitted"].get<double>() * each, pool);
    EXPECT_GT((l["admitted"].get<double>() + 1) * each, pool);
    // Reserving half the output admits more; a smaller KV share admits fewer; a cap caps.
    const auto lax = run({ "--scheduler", "max_utilization" });
    ASSERT_EQ(lax.exitCode, 0) << lax.err;
    EXPECT_GT(lax.json()["layouts"][0]["admitted"].get<int>(), l["admitted"].get<int>());
    const auto small = run({ "--kv-cache-fraction", "0.5" });
    ASSERT_EQ(small.exitCode, 0) << small.err;
    EXPECT_LT(small.json()["layouts"][0]["admitted"].get<int>(), l["admitted"].get<int>());
    const auto capped = run({ "--max-batch", "5" });
    ASSERT_EQ(capped.exitCode, 0) << capped.err;
    EXPECT_EQ(capped.json()["layouts"][0]["batch"], 5);
    EXPECT_EQ(capped.json()["layouts"][0]["admitted_bound"], "max_batch");
    // Bad settings are refused by name.
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>> {
             { "--scheduler", "fcfs" }, { "--kv-cache-fraction", "0" },
             { "--kv-cache-fraction", "1.5" }, { "--max-batch", "0" } }) {
        const auto bad = run({ flag, value });
        EXPECT_EQ(bad.exitCode, 2) << flag << " " << value;
        EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
    }
}
