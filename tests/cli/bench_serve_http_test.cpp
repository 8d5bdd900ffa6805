// day0 bench serve (issue #23), the load generator: goodput under SLOs, chosen percentiles,
// errors by kind, sweeps with their throughput/latency table, ranged and listed lengths, ramp-up,
// and --check against day0 serve (agrees) and against a deliberately batch-dependent endpoint
// (tests/cli/batch_flip_server.cpp), caught at the load level where it starts. Servers run on
// loopback (port 0), bounded in time. Also day0 validate's serving step against that endpoint.
#include "child_process.h"
#include "cli_runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using day0::test::ChildProcess;
using day0::test::runDay0;
using day0::test::scratchDir;
using nlohmann::json;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// `day0 serve` on tiny-llama, or the batch-flip endpoint, and its URL.
struct Endpoint {
    std::unique_ptr<ChildProcess> process;
    std::string url;
    Endpoint(const std::string& exe, const std::vector<std::string>& args, const fs::path& dir)
        : process(std::make_unique<ChildProcess>(exe, args, dir, "server"))
        , url(process->url(std::chrono::seconds(120)))
    {
        EXPECT_FALSE(url.empty()) << process->out() << process->err();
    }
};

Endpoint day0Serve(const fs::path& dir, std::vector<std::string> extra = {})
{
    std::vector<std::string> args { "serve", kTiny, "--port", "0", "-q", "--no-record" };
    args.insert(args.end(), extra.begin(), extra.end());
    return Endpoint(DAY0_CLI_PATH, args, dir);
}

std::vector<std::string> bench(const std::string& url, std::vector<std::string> extra)
{
    std::vector<std::string> args { "bench", "serve", url, "-q", "--no-record" };
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

} // namespace

TEST(BenchServeCli, GoodputPercentilesAndPerUserRates)
{
    const fs::path dir = scratchDir("bench_goodput");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const std::vector<std::string> common { "--num-prompts", "8", "--input-len", "4",
        "--output-len", "4", "--max-concurrency", "2", "--percentiles", "50,90,99.9", "--json" };
    auto args = bench(server.url, common);
    args.insert(args.end(), { "--goodput", "ttft:100000", "tpot:100000" });
    const auto loose = runDay0(args);
    ASSERT_EQ(loose.exitCode, 0) << loose.err;
    const auto j = loose.json();
    EXPECT_EQ(j["goodput_slos"], "ttft:100000 tpot:100000");
    EXPECT_EQ(j["good_requests"], 8);
    EXPECT_NEAR(j["request_goodput"].get<double>(), 8 / j["duration"].get<double>(), 1e-9);
    EXPECT_TRUE(j.contains("p99.9_ttft_ms"));
    EXPECT_TRUE(j.contains("p90_tpot_ms"));
    EXPECT_FALSE(j.contains("p99_ttft_ms"));
    // The mean of 1 / TPOT is at least 1 / the mean TPOT (Jensen), and finite.
    EXPECT_GE(j["mean_tokens_per_s_per_user"].get<double>() * (1 + 1e-9),
        1000.0 / j["mean_tpot_ms"].get<double>());
    EXPECT_LT(j["mean_tokens_per_s_per_user"].get<double>(), 1e12);
    // One objective no request can meet is enough to make none good.
    args = bench(server.url, common);
    args.insert(args.end(), { "--goodput", "ttft:100000,e2el:0.001" });
    const auto strict = runDay0(args);
    ASSERT_EQ(strict.exitCode, 0) << strict.err;
    EXPECT_EQ(strict.json()["good_requests"], 0);
    EXPECT_EQ(strict.json()["request_goodput"], 0.0);
    // Text: the goodput line and the definitions in --help.
    args = bench(server.url, { "--num-prompts", "2", "--goodput", "e2el:100000" });
    const auto text = runDay0(args);
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("Request goodput (req/s) [e2el:100000]:"), std::string::npos)
        << text.out;
    const auto help = runDay0({ "bench", "serve", "--help" });
    EXPECT_NE(help.out.find("only if it meets EVERY given objective"), std::string::npos);
    EXPECT_NE(help.out.find("connection_refused"), std::string::npos);
    const auto bad = runDay0(bench(server.url, { "--goodput", "ttft:fast" }));
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("'ttft:fast'"), std::string::npos) << bad.err;
}

TEST(BenchServeCli, ErrorsAreCountedByKind)
{
    const fs::path dir = scratchDir("bench_errors");
    fs::create_directories(dir / "slow");
    // A slow endpoint (the flip server never flips here) and a 1 s read timeout: every request
    // waits 2 s for its whole answer.
    Endpoint slow(
        DAY0_FLIP_SERVER_PATH, { kTiny, "--flip-above", "1000", "--step-ms", "700" }, dir / "slow");
    ASSERT_FALSE(slow.url.empty());
    const auto timedOut = runDay0(bench(slow.url,
        { "--num-prompts", "2", "--output-len", "3", "--warmup", "0", "--timeout", "1",
            "--json" }));
    EXPECT_EQ(timedOut.exitCode, 1) << timedOut.err;
    EXPECT_EQ(timedOut.json()["errors"]["timeout"], 2) << timedOut.out;
    EXPECT_NE(timedOut.err.find("request 1: timeout"), std::string::npos) << timedOut.err;
    // A full queue: one running, one waiting, six sent at once.
    fs::create_directories(dir / "full");
    auto full = day0Serve(dir / "full", { "--max-running", "1", "--max-queue", "1" });
    ASSERT_FALSE(full.url.empty());
    const auto rejected = runDay0(bench(
        full.url, { "--num-prompts", "6", "--output-len", "200", "--input-len", "4", "--json" }));
    EXPECT_EQ(rejected.exitCode, 1) << rejected.err;
    const auto j = rejected.json();
    EXPECT_GE(j["errors"].value("http_429", 0), 1) << j["errors"];
    EXPECT_EQ(j["errors"].value("http_429", 0), j["failed"].get<int>());
    // A stream with an event that is not JSON.
    fs::create_directories(dir / "bad");
    Endpoint bad(
        DAY0_FLIP_SERVER_PATH, { kTiny, "--flip-above", "1000", "--bad-event" }, dir / "bad");
    ASSERT_FALSE(bad.url.empty());
    const auto malformed = runDay0(
        bench(bad.url, { "--num-prompts", "2", "--output-len", "3", "--warmup", "0", "--json" }));
    EXPECT_EQ(malformed.exitCode, 1) << malformed.err;
    EXPECT_EQ(malformed.json()["errors"]["malformed_stream"], 2) << malformed.out;
    EXPECT_NE(malformed.err.find("not a JSON object"), std::string::npos) << malformed.err;
}

TEST(BenchServeCli, CheckRefusesAnEndpointThatSendsNoTokenIds)
{
    const fs::path dir = scratchDir("bench_check_text");
    Endpoint text(DAY0_FLIP_SERVER_PATH, { kTiny, "--flip-above", "1000", "--text-only" }, dir);
    ASSERT_FALSE(text.url.empty());
    const auto r
        = runDay0(bench(text.url, { "--check", kTiny, "--num-prompts", "2", "--output-len", "3" }));
    EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("sent no choices[0].token_ids"), std::string::npos) << r.err;
    // Without --check the same endpoint is measured as any other.
    const auto plain = runDay0(bench(text.url, { "--num-prompts", "2", "--output-len", "3" }));
    EXPECT_EQ(plain.exitCode, 0) << plain.err;
}

TEST(BenchServeCli, SweepGivesARowPerLevelAndTheThroughputLatencyTable)
{
    const fs::path dir = scratchDir("bench_sweep");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const auto r = runDay0(bench(server.url,
        { "--sweep", "concurrency=1,4", "--num-prompts", "4", "--input-len", "3", "--output-len",
            "3", "--request-rate", "500", "--json" }));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 2U);
    EXPECT_EQ(levels[0]["level"], "concurrency=1 rate=500 3→3 tok");
    EXPECT_EQ(levels[1]["max_concurrency"], 4);
    // A sweep keeps the other flags: both levels at 500 req/s.
    EXPECT_EQ(levels[0]["request_rate"], 500.0);
    EXPECT_EQ(levels[1]["request_rate"], 500.0);
    const auto text = runDay0(bench(server.url,
        { "--sweep", "rate=200,inf", "--num-prompts", "3", "--input-len", "3", "--output-len",
            "3" }));
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("per level"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("throughput vs latency"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("tok/s/user (mean)"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("rate=200 3→3 tok"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("unlimited 3→3 tok"), std::string::npos) << text.out;
    const auto both = runDay0(bench(server.url, { "--sweep", "rate=1", "--stages", "rate=2" }));
    EXPECT_EQ(both.exitCode, 2);
    const auto badSweep = runDay0(bench(server.url, { "--sweep", "batch=1,2" }));
    EXPECT_EQ(badSweep.exitCode, 2);
    EXPECT_NE(badSweep.err.find("'batch=1'"), std::string::npos) << badSweep.err;
}

TEST(BenchServeCli, LengthsRangedOrFromAFileAndRampedArrivals)
{
    const fs::path dir = scratchDir("bench_lengths");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const auto ranged = runDay0(bench(server.url,
        { "--num-prompts", "12", "--input-len", "8", "--input-range", "0.5", "--output-len", "2",
            "--ramp-up", "linear", "--ramp-start", "50", "--ramp-end", "400", "--json" }));
    ASSERT_EQ(ranged.exitCode, 0) << ranged.err;
    const auto j = ranged.json();
    EXPECT_EQ(j["ramp_up"], "linear");
    std::set<std::int64_t> seen;
    std::int64_t total = 0;
    double lastSend = -1;
    for (const auto& q : j["requests"]) {
        const auto len = q["input_len"].get<std::int64_t>();
        EXPECT_GE(len, 4);
        EXPECT_LE(len, 12);
        seen.insert(len);
        total += len;
        EXPECT_GE(q["sent_at"].get<double>(), lastSend);
        lastSend = q["sent_at"].get<double>();
    }
    EXPECT_GT(seen.size(), 2U) << "the lengths were not drawn";
    EXPECT_EQ(j["total_input_tokens"], total);
    EXPECT_GT(lastSend, 0.0) << "a ramp from 50 req/s spreads the sends";
    std::ofstream(dir / "lengths.txt") << "# input output\n3 2\n5 4\n";
    const auto listed = runDay0(bench(server.url,
        { "--num-prompts", "3", "--lengths-file", (dir / "lengths.txt").string(), "--json" }));
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    const auto reqs = listed.json()["requests"];
    EXPECT_EQ(reqs[0]["input_len"], 3);
    EXPECT_EQ(reqs[1]["input_len"], 5);
    EXPECT_EQ(reqs[2]["input_len"], 3);
    EXPECT_EQ(listed.json()["total_output_tokens"], 2 + 4 + 2);
    const auto rampAndRate = runDay0(bench(server.url,
        { "--ramp-up", "linear", "--ramp-start", "5", "--ramp-end", "9", "--sweep", "rate=1,2" }));
    EXPECT_EQ(rampAndRate.exitCode, 2);
    EXPECT_NE(rampAndRate.err.find("contradicts"), std::string::npos) << rampAndRate.err;
    const auto noRamp = runDay0(bench(server.url, { "--ramp-start", "5" }));
    EXPECT_EQ(noRamp.exitCode, 2);
    EXPECT_NE(noRamp.err.find("--ramp-up"), std::string::npos) << noRamp.err;
}

TEST(BenchServeCli, CheckAgreesWithDay0ServesGreedyTokens)
{
    const fs::path dir = scratchDir("bench_check_ok");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const auto r = runDay0(bench(server.url,
        { "--check", kTiny, "--num-prompts", "6", "--input-len", "5", "--output-len", "6",
            "--max-concurrency", "3", "--json" }));
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto c = r.json()["check"];
    EXPECT_EQ(c["checked"], 6);
    EXPECT_EQ(c["diverged"], 0);
    EXPECT_EQ(c["logprobs_compared"], 6);
    // Three requests at once decode as one batched step (one GEMM over their rows) while the
    // reference decodes one row at a time (GEMV): the same sums in another order, so the
    // log-probabilities agree to fp32 rounding, not bit for bit. The tokens are equal (above).
    EXPECT_LE(c["max_logprob_delta"].get<double>(), 1e-5);
}

TEST(BenchServeCli, CheckCatchesABatchDependentEndpointAtTheLevelWhereItStarts)
{
    const fs::path dir = scratchDir("bench_check_flip");
    // Right while at most 2 requests are in flight, one token off at every step beyond.
    Endpoint flip(DAY0_FLIP_SERVER_PATH, { kTiny, "--flip-above", "2", "--step-ms", "5" }, dir);
    ASSERT_FALSE(flip.url.empty());
    const auto r = runDay0(bench(flip.url,
        { "--check", kTiny, "--stages", "concurrency=1,concurrency=2,concurrency=8",
            "--num-prompts", "8", "--input-len", "4", "--output-len", "8", "--json" }));
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 3U);
    EXPECT_EQ(levels[0]["check"]["diverged"], 0);
    EXPECT_EQ(levels[1]["check"]["diverged"], 0);
    EXPECT_EQ(levels[0]["check"]["checked"], 8);
    EXPECT_GT(levels[2]["check"]["diverged"].get<int>(), 0) << levels[2]["check"];
    const auto first = levels[2]["check"]["first_divergence"];
    EXPECT_EQ(first["kind"], "token");
    EXPECT_EQ(first["got"].get<std::int64_t>(), (first["expected"].get<std::int64_t>() + 1) % 256);
    EXPECT_NE(r.err.find("level 3 (concurrency=8 4→8 tok):"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("level 1 ("), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("level 2 ("), std::string::npos) << r.err;
}

TEST(BenchServeCli, ValidatesServingStepFailsAtTheLevelWhereAnEndpointDiverges)
{
    // day0 validate's serving step against the batch-dependent endpoint serving the same
    // weights: right at concurrency 1, caught at 4; the step fails, naming the level, exit 1.
    const fs::path dir = scratchDir("validate_serve_flip");
    fs::copy(kTiny, dir / "ck", fs::copy_options::recursive);
    const auto manifest
        = runDay0({ "verify", (dir / "ck").string(), "--write-manifest", "--no-record" });
    ASSERT_EQ(manifest.exitCode, 0) << manifest.err;
    Endpoint flip(DAY0_FLIP_SERVER_PATH, { kTiny, "--flip-above", "2", "--step-ms", "5" }, dir);
    ASSERT_FALSE(flip.url.empty());
    const auto r = runDay0({ "validate", (dir / "ck").string(), "--work", (dir / "work").string(),
        "--plan", "tp=2", "--serve-url", flip.url, "--serve-concurrency", "1", "4",
        "--serve-requests", "8", "--json", "--no-record" });
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    const auto j = r.json();
    nlohmann::json serving;
    for (const auto& s : j["steps"]) {
        if (s["id"] == "serving") {
            serving = s;
        }
    }
    ASSERT_TRUE(serving.is_object()) << j.dump();
    EXPECT_EQ(serving["status"], "failed");
    const auto reason = serving["reason"].get<std::string>();
    EXPECT_NE(reason.find("concurrency=4 "), std::string::npos) << reason;
    EXPECT_NE(reason.find("diverge"), std::string::npos) << reason;
    EXPECT_EQ(reason.find("concurrency=1 "), std::string::npos) << reason;
    EXPECT_EQ(serving["metrics"]["c1_diverged"].get<double>(), 0.0);
    EXPECT_GT(serving["metrics"]["c4_diverged"].get<double>(), 0.0);
    // The steps before it passed: only serving fails the validation.
    for (const auto& s : j["steps"]) {
        if (s["id"] != "serving" && s["id"] != "multi_rank") {
            EXPECT_EQ(s["status"], "passed") << s.dump();
        }
    }
}

TEST(BenchServeCli, PlanPrintsThePlannersTtftAndTpotBesideTheMeasuredOnes)
{
    const fs::path dir = scratchDir("bench_plan");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const auto r = runDay0(bench(server.url,
        { "--plan", "tp=1", "--plan-model", kTiny, "--cluster", "h100-sxm:1x1", "--sweep",
            "concurrency=1,4", "--num-prompts", "4", "--input-len", "6", "--output-len", "5",
            "--json" }));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto levels = r.json()["stages"];
    ASSERT_EQ(levels.size(), 2U);
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& p = levels[i]["plan"];
        EXPECT_EQ(p["batch"], i == 0 ? 1 : 4);
        EXPECT_EQ(p["layout"], "tp=1,pp=1,dp=1");
        EXPECT_GT(p["ttft_ms"].get<double>(), 0.0);
        EXPECT_GT(p["tpot_ms"].get<double>(), 0.0);
        EXPECT_EQ(p["measured_ttft_ms"], levels[i]["mean_ttft_ms"]);
        EXPECT_NEAR(p["tpot_error"].get<double>(),
            (p["tpot_ms"].get<double>() - p["measured_tpot_ms"].get<double>())
                / p["measured_tpot_ms"].get<double>(),
            1e-12);
    }
    // Four sequences a step read the weights once: a step costs more than one sequence's, less
    // than four.
    const double t1 = levels[0]["plan"]["tpot_ms"].get<double>();
    const double t4 = levels[1]["plan"]["tpot_ms"].get<double>();
    EXPECT_GT(t4, t1);
    EXPECT_LT(t4, 4 * t1);
    const auto text = runDay0(bench(server.url,
        { "--plan", "tp=1", "--plan-model", kTiny, "--num-prompts", "2", "--output-len", "3" }));
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("predicted ms"), std::string::npos) << text.out;
    const auto noModel = runDay0(bench(server.url, { "--plan", "tp=1", "--num-prompts", "1" }));
    EXPECT_EQ(noModel.exitCode, 2);
    EXPECT_NE(noModel.err.find("--plan-model"), std::string::npos) << noModel.err;
    const auto tooBig = runDay0(bench(server.url,
        { "--plan", "tp=2", "--plan-model", kTiny, "--num-prompts", "1", "--output-len", "2" }));
    EXPECT_EQ(tooBig.exitCode, 2);
    EXPECT_NE(tooBig.err.find("--plan"), std::string::npos) << tooBig.err;
    const auto training = runDay0(bench(
        server.url, { "--plan", "tp=1,zero=1", "--plan-model", kTiny, "--num-prompts", "1" }));
    EXPECT_EQ(training.exitCode, 2);
    EXPECT_NE(training.err.find("training keys"), std::string::npos) << training.err;
}

TEST(BenchServeCli, EachBenchIsARunWithAMetricPerLevelAndRunsCompareGivesDeltas)
{
    const fs::path dir = scratchDir("bench_record");
    auto server = day0Serve(dir);
    ASSERT_FALSE(server.url.empty());
    const std::string store = (dir / "runs.sqlite").string();
    const auto benchInto = [&](const std::string& seed, bool record) {
        std::vector<std::string> args { "bench", "serve", server.url, "-q", "--store", store,
            "--sweep", "concurrency=1,2", "--num-prompts", "3", "--input-len", "3", "--output-len",
            "3", "--seed", seed, "--goodput", "ttft:100000", "--json" };
        if (!record) {
            args.emplace_back("--no-record");
        }
        return runDay0(args);
    };
    const auto a = benchInto("1", true);
    const auto b = benchInto("2", true);
    ASSERT_EQ(a.exitCode, 0) << a.err;
    ASSERT_EQ(b.exitCode, 0) << b.err;
    ASSERT_TRUE(a.json()["run_id"].is_number_integer()) << a.out.substr(0, 200);
    const auto idA = std::to_string(a.json()["run_id"].get<int>());
    const auto idB = std::to_string(b.json()["run_id"].get<int>());
    const auto show = runDay0({ "runs", "show", idA, "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    std::map<std::string, double> metrics;
    for (const auto& m : run["metrics"]) {
        metrics[m["name"].get<std::string>()]
            = m["value"].is_number() ? m["value"].get<double>() : -1;
    }
    const auto levels = a.json()["stages"];
    EXPECT_EQ(metrics.at("bench_l1_completed"), 3);
    EXPECT_DOUBLE_EQ(metrics.at("bench_l2_mean_ttft_ms"), levels[1]["mean_ttft_ms"].get<double>());
    EXPECT_DOUBLE_EQ(
        metrics.at("bench_l1_output_throughput"), levels[0]["output_throughput"].get<double>());
    EXPECT_DOUBLE_EQ(
        metrics.at("bench_l2_request_goodput"), levels[1]["request_goodput"].get<double>());
    EXPECT_TRUE(metrics.count("bench_l1_p99_tpot_ms"));
    EXPECT_NE(run.dump().find("concurrency=2"), std::string::npos);
    EXPECT_NE(run.dump().find("\"bench\""), std::string::npos);
    const auto compare = runDay0({ "runs", "compare", idA, idB, "--json", "--store", store });
    ASSERT_EQ(compare.exitCode, 0) << compare.err;
    bool found = false;
    const auto deltas = compare.json()["metrics"];
    for (const auto& m : deltas) {
        if (m["name"] == "bench_l2_mean_ttft_ms") {
            found = true;
            EXPECT_NEAR(m["delta"].get<double>(),
                b.json()["stages"][1]["mean_ttft_ms"].get<double>()
                    - levels[1]["mean_ttft_ms"].get<double>(),
                1e-9);
        }
    }
    EXPECT_TRUE(found) << compare.out.substr(0, 500);
    // Level by level, as the runs panel compares two benches.
    const auto benchLevels = compare.json()["bench_levels"]["levels"];
    ASSERT_EQ(benchLevels.size(), 2u) << compare.out.substr(0, 500);
    EXPECT_EQ(benchLevels[1]["level"], 2);
    EXPECT_NE(
        benchLevels[1]["label_a"].get<std::string>().find("concurrency=2"), std::string::npos);
    bool levelFound = false;
    for (const auto& q : benchLevels[1]["quantities"]) {
        if (q["name"] == "mean_ttft_ms") {
            levelFound = true;
            EXPECT_DOUBLE_EQ(q["a"].get<double>(), levels[1]["mean_ttft_ms"].get<double>());
            EXPECT_DOUBLE_EQ(
                q["b"].get<double>(), b.json()["stages"][1]["mean_ttft_ms"].get<double>());
        }
    }
    EXPECT_TRUE(levelFound);
    // --no-record: no run, and the store keeps two.
    const auto c = benchInto("3", false);
    ASSERT_EQ(c.exitCode, 0) << c.err;
    EXPECT_TRUE(c.json()["run_id"].is_null());
    const auto list = runDay0({ "runs", "list", "--json", "--store", store });
    ASSERT_EQ(list.exitCode, 0) << list.err;
    EXPECT_NE(list.out.find(idB), std::string::npos);
    EXPECT_EQ(list.json()["runs"].size(), 2U) << list.out.substr(0, 300);
}
