// `day0 run --plan`: the sharded run on in-process ranks, its JSON and its errors.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

using day0::test::runDay0;
namespace fs = std::filesystem;

namespace {

std::string shrunkMoe()
{
    static const std::string dir = [] {
        const std::string d = (fs::path(day0::test::scratchDir("run_plan_cli")) / "moe").string();
        const auto r = runDay0(
            { "shrink", "qwen3-30b-a3b", "--out", d, "--force", "--layers", "2", "--hidden", "64",
                "--heads", "4", "--experts", "8", "--vocab", "250", "-q", "--no-record" });
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return d;
    }();
    return dir;
}

} // namespace

TEST(RunPlanCli, ShardedRunMatchesTheSingleRankTokensAndReportsCommunication)
{
    const std::string ckpt = shrunkMoe();
    const auto single = runDay0(
        { "run", ckpt, "--ids", "3,1,4,1,5", "--tokens", "3", "--json", "-q", "--no-record" });
    ASSERT_EQ(single.exitCode, 0) << single.err;
    const auto planned = runDay0({ "run", ckpt, "--plan", "tp=2,pp=2,ep=2", "--micro-batches", "2",
        "--ids", "3,1,4,1,5;2,7,1", "--tokens", "3", "--json", "-q", "--no-record" });
    ASSERT_EQ(planned.exitCode, 0) << planned.err;
    const auto j = planned.json();
    EXPECT_EQ(j["plan"], "tp=2,pp=2,ep=2,dp=1,etp=1,mb=2");
    EXPECT_EQ(j["ranks_mode"], "in-process");
    EXPECT_EQ(j["communicator"], "in-process");
    ASSERT_EQ(j["sequences"].size(), 2U);
    EXPECT_EQ(j["sequences"][0]["generated"], single.json()["target"]["generated"]);
    EXPECT_EQ(j["ranks"].size(), 4U);
    std::map<std::string, nlohmann::json> comm;
    for (const auto& row : j["communication"]) {
        comm[row["kind"].get<std::string>()] = row;
    }
    for (const char* kind :
        { "all_reduce", "all_gather", "all_to_all_v", "send", "recv", "total" }) {
        ASSERT_TRUE(comm.contains(kind)) << kind;
        EXPECT_GT(comm[kind]["calls"].get<int>(), 0) << kind;
    }
    EXPECT_GT(comm["total"]["measured_seconds_per_rank"].get<double>(), 0.0);
    EXPECT_TRUE(j["machine"]["measured"].get<bool>());
    EXPECT_GT(comm["total"]["model_seconds_per_rank"].get<double>(), 0.0);
    EXPECT_TRUE(j["run_id"].is_null()) << "--no-record";
}

TEST(RunPlanCli, StreamedRanksGiveTheSameTokensWithinTheirBudget)
{
    // Each rank streams its slice a layer at a time (parallel/rank_stream.h): the tokens are the
    // unstreamed plan's, each rank reports what it read, and the budget is each rank's share.
    const std::string ckpt = shrunkMoe();
    const std::vector<std::string> base { "run", ckpt, "--plan", "tp=2,ep=2", "--ids",
        "3,1,4,1,5;2,7,1", "--tokens", "3", "--json", "-q", "--no-record" };
    const auto whole = runDay0(base);
    ASSERT_EQ(whole.exitCode, 0) << whole.err;
    auto args = base;
    args.insert(args.end(), { "--stream", "--memory-budget", "64M" });
    const auto streamed = runDay0(args);
    ASSERT_EQ(streamed.exitCode, 0) << streamed.err;
    const auto w = whole.json();
    const auto s = streamed.json();
    EXPECT_EQ(s["sequences"], w["sequences"]);
    // The node's budget shared by its two in-process ranks, and said how.
    EXPECT_EQ(s["rank_memory_budget"].get<std::uint64_t>(), std::uint64_t(32) << 20);
    EXPECT_NE(s["memory_budget_basis"].get<std::string>().find("64.0 MiB / 2 in-process ranks"),
        std::string::npos)
        << s["memory_budget_basis"];
    ASSERT_EQ(s["ranks"].size(), 2U);
    for (std::size_t r = 0; r < 2; ++r) {
        EXPECT_EQ(w["ranks"][r]["stream_bytes_read"].get<std::int64_t>(), 0);
        EXPECT_GT(s["ranks"][r]["stream_bytes_read"].get<std::int64_t>(), 0);
        // What a streamed rank holds at once: one phase, less than its whole slice.
        EXPECT_LT(s["ranks"][r]["weight_bytes"].get<std::int64_t>(),
            w["ranks"][r]["weight_bytes"].get<std::int64_t>());
    }

    // Text: the table says what each rank held and read.
    args.erase(std::find(args.begin(), args.end(), "--json"));
    const auto text = runDay0(args);
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("weights held"), std::string::npos) << text.out;
    EXPECT_NE(
        text.out.find("streamed: each rank read its weights a layer at a time"), std::string::npos)
        << text.out;

    // A budget too small for one layer's share is refused before a weight is read; a budget
    // without --stream is refused as it is for a single rank.
    args = base;
    args.insert(args.end(), { "--stream", "--memory-budget", "1K" });
    const auto tiny = runDay0(args);
    EXPECT_NE(tiny.exitCode, 0);
    EXPECT_NE(tiny.err.find("budget"), std::string::npos) << tiny.err;
    args = base;
    args.insert(args.end(), { "--memory-budget", "64M" });
    const auto alone = runDay0(args);
    EXPECT_EQ(alone.exitCode, 2) << alone.err;
    EXPECT_NE(alone.err.find("add --stream"), std::string::npos) << alone.err;
}

TEST(RunPlanCli, BudgetPerRankIsEachRanksOwn)
{
    // --memory-budget-per-rank: each rank holds up to the size given, not a share of it; the
    // tokens are the same.
    const std::string ckpt = shrunkMoe();
    const std::vector<std::string> base { "run", ckpt, "--plan", "tp=2,ep=2", "--ids", "3,1,4",
        "--tokens", "2", "--stream", "--json", "-q", "--no-record" };
    auto args = base;
    args.insert(args.end(), { "--memory-budget-per-rank", "64M" });
    const auto own = runDay0(args);
    ASSERT_EQ(own.exitCode, 0) << own.err;
    const auto j = own.json();
    EXPECT_EQ(j["rank_memory_budget"].get<std::uint64_t>(), std::uint64_t(64) << 20);
    EXPECT_NE(j["memory_budget_basis"].get<std::string>().find("--memory-budget-per-rank"),
        std::string::npos)
        << j["memory_budget_basis"];
    const auto shared = runDay0(base);
    ASSERT_EQ(shared.exitCode, 0) << shared.err;
    EXPECT_EQ(j["sequences"], shared.json()["sequences"]);

    // Text: the budget line at the end, and before the run starts (progress, on stderr).
    args.erase(std::find(args.begin(), args.end(), "--json"));
    args.erase(std::find(args.begin(), args.end(), "-q"));
    const auto text = runDay0(args);
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(
        text.out.find("budget: each rank within 64.0 MiB (64.0 MiB per rank"), std::string::npos)
        << text.out;
    EXPECT_NE(text.err.find("streaming: each rank within 64.0 MiB (64.0 MiB per rank "
                            "(--memory-budget-per-rank))"),
        std::string::npos)
        << text.err;

    // Both meanings at once, without --stream, or without --plan: bad input, by name.
    args = base;
    args.insert(args.end(), { "--memory-budget-per-rank", "64M", "--memory-budget", "64M" });
    const auto both = runDay0(args);
    EXPECT_EQ(both.exitCode, 2) << both.err;
    EXPECT_NE(both.err.find("give one"), std::string::npos) << both.err;
    args = { "run", ckpt, "--plan", "tp=2,ep=2", "--ids", "3,1,4", "--memory-budget-per-rank",
        "64M", "-q", "--no-record" };
    const auto unstreamed = runDay0(args);
    EXPECT_EQ(unstreamed.exitCode, 2) << unstreamed.err;
    EXPECT_NE(unstreamed.err.find("add --stream"), std::string::npos) << unstreamed.err;
    args = { "run", ckpt, "--ids", "3,1,4", "--stream", "--memory-budget-per-rank", "64M", "-q",
        "--no-record" };
    const auto single = runDay0(args);
    EXPECT_EQ(single.exitCode, 2) << single.err;
    EXPECT_NE(single.err.find("--memory-budget-per-rank"), std::string::npos) << single.err;
}

TEST(RunPlanCli, RecordsTheRunWithItsPlanAndCommunication)
{
    const std::string ckpt = shrunkMoe();
    const std::string store = day0::test::scratchDir("run_plan_record") + "/runs.sqlite";
    const auto r = runDay0({ "run", ckpt, "--plan", "tp=2,ep=2", "--ids", "3,1,4", "--tokens", "2",
        "--json", "-q", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    ASSERT_TRUE(r.json()["run_id"].is_number_integer()) << r.out.substr(0, 300);
    const auto show = runDay0({ "runs", "show", std::to_string(r.json()["run_id"].get<int>()),
        "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    EXPECT_EQ(run["kind"], "run");
    EXPECT_EQ(run["plan"], r.json()["plan"]);
    std::map<std::string, double> metrics;
    for (const auto& m : run["metrics"]) {
        metrics[m["name"].get<std::string>()] = m["value"].get<double>();
    }
    EXPECT_EQ(run["properties"]["ranks"], "in-process");
    EXPECT_EQ(run["properties"]["communicator"], "in-process");
    EXPECT_EQ(metrics["world_size"], 2.0);
    EXPECT_GT(metrics["comm.all_reduce.calls"], 0.0);
    EXPECT_GT(metrics["comm.total.bytes"], 0.0);
}

TEST(RunPlanCli, TableAndTraceInText)
{
    const std::string ckpt = shrunkMoe();
    const std::string trace
        = (fs::path(day0::test::scratchDir("run_plan_cli_trace")) / "comm.json").string();
    const auto r = runDay0({ "run", ckpt, "--plan", "tp=2", "--ids", "1,2,3", "--tokens", "2",
        "--comm-trace", trace, "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("measured/model"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("all_reduce"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("measured figures"), std::string::npos) << r.out;
    const auto imported = runDay0({ "trace", "import", trace, "--json", "-q", "--no-record" });
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_GT(imported.json()["by_category"]["communication"].get<int>(), 0);
    // One process per rank in the exported trace.
    std::ifstream in(trace);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("rank 0: day0"), std::string::npos);
    EXPECT_NE(text.find("rank 1: day0"), std::string::npos);
}

TEST(RunPlanCli, PlanThatDoesNotSplitIsBadInput)
{
    const std::string ckpt = shrunkMoe();
    const auto r = runDay0({ "run", ckpt, "--plan", "tp=3", "--ids", "1,2", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("tp=3 does not divide the 4 attention heads"), std::string::npos) << r.err;
}

TEST(RunPlanCli, ContextParallelismIsRefusedNotDropped)
{
    // cp was silently dropped on the way to the executor, which then ran without it.
    const std::string ckpt = shrunkMoe();
    const auto r
        = runDay0({ "run", ckpt, "--plan", "tp=2,cp=2", "--ids", "1,2", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(
        r.err.find("cp=2: the executor does not run context parallelism yet"), std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(RunPlanCli, NcclNeedsMpiProcesses)
{
    // NCCL runs one process per GPU; threads of one process cannot each own a device here.
    const std::string ckpt = shrunkMoe();
    const auto r = runDay0(
        { "run", ckpt, "--plan", "tp=2", "--ids", "1,2", "--comm", "nccl", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(
        r.err.find("--comm nccl needs one process per GPU: run under mpirun"), std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(RunPlanCli, UnknownCommunicatorIsBadInput)
{
    const std::string ckpt = shrunkMoe();
    for (const char* ranks : { "in-process", "mpi" }) {
        // Rejected before any MPI start-up, so this runs without mpirun for --ranks mpi too.
        const auto r = runDay0({ "run", ckpt, "--plan", "tp=2", "--ids", "1,2", "--ranks", ranks,
            "--comm", "gloo", "-q", "--no-record" });
        EXPECT_EQ(r.exitCode, 2) << ranks << ": " << r.err;
        EXPECT_NE(r.err.find("--comm must be 'mpi' or 'nccl', not 'gloo'"), std::string::npos)
            << r.err;
    }
}
