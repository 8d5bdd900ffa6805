// The proof that sharded execution computes what the single-rank engine computes: every plan of
// the matrix on shrunk Llama, Qwen3-MoE and DeepSeek-V3, in-process; plus the fault paths.
#include "checkpoint/sharding.h"
#include "checkpoint/shrink.h"
#include "comm/in_process_communicator.h"
#include "exec/checkpoint_weights.h"
#include "parallel_testkit.h"
#include "profile/cpu_tracer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

using namespace day0;

namespace {

constexpr double kTolerance = 1e-5;

std::filesystem::path scratch() { return test::processScratch("parallel-test"); }

const test::ShrunkModel& shrunk(const std::string& config)
{
    return test::cachedShrunkModel(config, scratch());
}

void proveMatrix(const std::string& config)
{
    const auto& m = shrunk(config);
    const auto plans = test::matrixPlans(m.spec, 8);
    ASSERT_FALSE(plans.empty());
    for (const auto& p : plans) {
        SCOPED_TRACE(p.label());
        Progress progress;
        auto r = parallel::runParallelInProcess(m.spec, *m.weights, test::runOptions(m, p),
            progress, {}, nullptr, {}, { Seconds(30.0) });
        ASSERT_TRUE(r.ok()) << r.error().message;
        ASSERT_EQ(r->sequences.size(), std::size_t(p.layout.dp * p.microBatches));
        auto err = test::compareWithSingleRank(m, r->sequences, test::kMatrixTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, kTolerance);
        EXPECT_EQ(progress.done(), progress.total());
        std::cout << fmt::format("[matrix] {} {}: max rel error {:.2e}\n", config, p.label(), *err);
    }
}

} // namespace

TEST(ParallelProof, LlamaEveryPlanMatchesSingleRank) { proveMatrix("llama-3.1-8b"); }
TEST(ParallelProof, Qwen3MoeEveryPlanMatchesSingleRank) { proveMatrix("qwen3-30b-a3b"); }
TEST(ParallelProof, DeepseekV3EveryPlanMatchesSingleRank) { proveMatrix("deepseek-v3"); }

TEST(ParallelProof, MatrixCoversTheIssuePlans)
{
    const auto& m = shrunk("qwen3-30b-a3b");
    const auto plans = test::matrixPlans(m.spec, 8);
    std::set<std::string> seen;
    for (const auto& p : plans) {
        seen.insert(fmt::format("{}/{}/{}", p.layout.tp, p.layout.pp, p.layout.ep));
    }
    // With pp=2 a stage has dp × tp = 2 ranks (tp=1, tp=2), which ep=4 cannot divide: the two
    // combinations left out of 3 × 2 × 3.
    EXPECT_EQ(seen.size(), 16U);
    EXPECT_FALSE(seen.contains("1/2/4"));
    EXPECT_FALSE(seen.contains("2/2/4"));
    EXPECT_TRUE(seen.contains("4/2/4"));
}

TEST(ParallelRun, RecordsCollectivesIntoTraceAndTable)
{
    const auto& m = shrunk("qwen3-30b-a3b");
    test::MatrixPlan p;
    p.layout.tp = 2;
    p.layout.pp = 2;
    p.layout.ep = 2;
    p.microBatches = 2;
    std::vector<std::unique_ptr<profile::CpuTracer>> owned;
    std::vector<profile::CpuTracer*> tracers;
    for (int r = 0; r < 4; ++r) {
        owned.push_back(std::make_unique<profile::CpuTracer>());
        owned.back()->start();
        tracers.push_back(owned.back().get());
    }
    Progress progress;
    parallel::RankProgress perRank;
    auto r = parallel::runParallelInProcess(
        m.spec, *m.weights, test::runOptions(m, p), progress, {}, &perRank, tracers);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(perRank.ranks.size(), 4U);
    for (const auto& rp : perRank.ranks) {
        EXPECT_EQ(rp->done(), test::kMatrixTokens * 2);
    }
    ASSERT_EQ(r->ranks.size(), 4U);
    EXPECT_TRUE(r->machine.measured);
    EXPECT_GT(r->machine.bandwidth, 0.0);
    const auto table = parallel::commTable(r->events, 4, r->machine);
    std::map<std::string, parallel::CommKindRow> byKind;
    for (const auto& row : table) {
        byKind[row.kind] = row;
    }
    ASSERT_TRUE(byKind.contains("all_reduce"));
    ASSERT_TRUE(byKind.contains("all_gather"));
    ASSERT_TRUE(byKind.contains("all_to_all_v"));
    ASSERT_TRUE(byKind.contains("send"));
    ASSERT_TRUE(byKind.contains("recv"));
    // Pipeline hand-offs: prefill hidden states of both micro-batches plus one row per decode
    // step, from the tp ranks of stage 0, plus the tokens sent back.
    const std::int64_t h = m.spec.hiddenSize;
    const auto prompts = test::matrixPrompts(2, m.spec.vocabSize);
    std::int64_t hiddenBytes = 0;
    for (const auto& pr : prompts) {
        hiddenBytes += (std::int64_t(pr.size()) + test::kMatrixTokens - 1) * h * 4;
    }
    const std::int64_t tokenBytes = 2 * (test::kMatrixTokens - 1) * 8;
    EXPECT_EQ(byKind["send"].bytes, 2 * (hiddenBytes + tokenBytes));
    EXPECT_EQ(byKind["recv"].bytes, byKind["send"].bytes);
    EXPECT_GT(byKind["total"].measuredSeconds, 0.0);
    EXPECT_GT(byKind["all_reduce"].predictedSeconds, 0.0);
    // Two ranks per node: each stage is one node, so only pipeline hand-offs leave a node.
    const auto traffic = parallel::nodeTraffic(r->events, p.layout, 2);
    ASSERT_EQ(traffic.size(), 2U);
    EXPECT_EQ(traffic[0].interBytes, byKind["send"].bytes);
    EXPECT_EQ(traffic[1].interBytes, byKind["send"].bytes);
    EXPECT_GT(traffic[0].intraBytes, 0);
    EXPECT_GT(traffic[1].intraBytes, 0);
    for (std::size_t rank = 0; rank < 4; ++rank) {
        auto trace = owned[rank]->toTrace(std::int32_t(rank));
        ASSERT_TRUE(trace.ok());
        std::size_t comm = 0;
        for (const auto& e : r->events) {
            comm += std::size_t(e.rank) == rank ? 1 : 0;
        }
        EXPECT_EQ(owned[rank]->eventCount(), comm) << "rank " << rank;
    }
}

namespace {

/// Runs rank r of a 2-rank tp=2 world with options changed per rank by `tweak`.
Error runMismatched(const std::function<void(int, parallel::ParallelRunOptions&)>& tweak)
{
    const auto& m = shrunk("llama-3.1-8b");
    test::MatrixPlan p;
    p.layout.tp = 2;
    auto base = test::runOptions(m, p);
    parallel::CommRecorder recorder;
    auto outcome = comm::runInProcess(2,
        [&](comm::Communicator& c) -> Result<void> {
            auto o = base;
            tweak(c.rank(), o);
            Progress progress;
            auto r = parallel::runParallelRank(c, m.spec, *m.weights, o, recorder, progress, {});
            if (!r) {
                return r.error();
            }
            return success();
        },
        { Seconds(10.0) });
    EXPECT_FALSE(outcome.ok());
    return outcome.ok() ? Error::internal("no error") : outcome.error();
}

} // namespace

TEST(ParallelFaults, DifferentPlansAreNamedAtStart)
{
    const Error e = runMismatched([](int rank, parallel::ParallelRunOptions& o) {
        if (rank == 1) {
            o.layout.tp = 1;
            o.layout.dp = 2;
        }
    });
    EXPECT_NE(e.message.find("rank 1 was started with plan 'tp=1,pp=1,ep=1,dp=2,etp=1,mb=1' but "
                             "rank 0 with 'tp=2,pp=1,ep=1,dp=1,etp=2,mb=1'"),
        std::string::npos)
        << e.message;
}

TEST(ParallelFaults, DifferentCheckpointsAreNamedAtStart)
{
    const Error e = runMismatched([](int rank, parallel::ParallelRunOptions& o) {
        if (rank == 1) {
            o.checkpointId = "0123abcd";
        }
    });
    EXPECT_NE(e.message.find("rank 1 was started with checkpoint '0123abcd'"), std::string::npos)
        << e.message;
}

namespace {

Error runFaulty(double delay)
{
    const auto& m = shrunk("qwen3-30b-a3b");
    test::MatrixPlan p;
    p.layout.tp = 1;
    p.layout.dp = 4;
    p.layout.ep = 4; // expert 7 lives on rank 3 only
    test::FaultyWeights weights(*m.weights, "model.layers.0.mlp.experts.7.up_proj.weight", delay);
    Progress progress;
    auto r = parallel::runParallelInProcess(
        m.spec, weights, test::runOptions(m, p), progress, {}, nullptr, {}, { Seconds(0.5) });
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error::internal("no error") : r.error();
}

} // namespace

TEST(ParallelFaults, FailingRankStopsTheOthers)
{
    const auto t0 = std::chrono::steady_clock::now();
    const Error e = runFaulty(0.0);
    EXPECT_NE(e.message.find("rank 3"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("disk error"), std::string::npos) << e.message;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(ParallelFaults, HangingRankStopsTheOthersWithinTheTimeout)
{
    const Error e = runFaulty(2.0);
    EXPECT_NE(e.message.find("timed out after"), std::string::npos) << e.message;
}

namespace {

/// Shards `m` with core/checkpoint for the plan, then runs every rank from its own rank file.
void proveFromShardFolder(const std::string& config, const test::MatrixPlan& p)
{
    SCOPED_TRACE(config + " " + p.label());
    const auto& m = shrunk(config);
    const auto out = scratch()
        / fmt::format("{}-shards-{}-{}-{}", config, p.layout.tp, p.layout.pp, p.layout.ep);
    Progress progress;
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    ASSERT_TRUE(parallel::isShardFolder(out));
    auto folder = parallel::openShardFolder(out, p.layout);
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    auto o = test::runOptions(m, p);
    o.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
    auto r = parallel::runParallelInProcess(m.spec, *folder->ranks[0], o, progress, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto err = test::compareWithSingleRank(m, r->sequences, test::kMatrixTokens);
    ASSERT_TRUE(err.ok()) << err.error().message;
    EXPECT_LE(*err, kTolerance);
    // The rank files hold exactly the slices an in-memory run cuts from the full checkpoint.
    auto inMemory
        = parallel::runParallelInProcess(m.spec, *m.weights, test::runOptions(m, p), progress, {});
    ASSERT_TRUE(inMemory.ok()) << inMemory.error().message;
    ASSERT_EQ(inMemory->ranks.size(), r->ranks.size());
    for (std::size_t i = 0; i < r->ranks.size(); ++i) {
        EXPECT_EQ(r->ranks[i].weightBytes, inMemory->ranks[i].weightBytes) << "rank " << i;
    }
    for (std::size_t i = 0; i < r->sequences.size(); ++i) {
        EXPECT_EQ(r->sequences[i].logits, inMemory->sequences[i].logits) << "sequence " << i;
    }

    auto other = p;
    other.layout.tp = p.layout.tp == 1 ? 2 : 1;
    auto wrong = parallel::openShardFolder(out, other.layout);
    ASSERT_FALSE(wrong.ok());
    EXPECT_NE(wrong.error().message.find("the shards were written for"), std::string::npos)
        << wrong.error().message;
}

} // namespace

TEST(ParallelShards, RanksLoadOnlyTheirRankFilesOfADay0ShardFolder)
{
    test::MatrixPlan moe;
    moe.layout.tp = 2;
    moe.layout.pp = 2;
    moe.layout.ep = 2;
    moe.microBatches = 2;
    proveFromShardFolder("qwen3-30b-a3b", moe);
    proveFromShardFolder("deepseek-v3", moe);
    test::MatrixPlan dense;
    dense.layout.tp = 4;
    proveFromShardFolder("llama-3.1-8b", dense);
}

TEST(ParallelSequence, SequenceParallelismMatchesPlainTensorParallelismAndSplitsItsCollectives)
{
    const auto& m = shrunk("deepseek-v3");
    for (const char* plan : { "tp=2,ep=2", "tp=4,pp=2" }) {
        SCOPED_TRACE(plan);
        const auto base = *checkpoint::parseShardLayout(plan);
        auto withSp = *checkpoint::parseShardLayout(std::string(plan) + ",sp=on");
        ASSERT_TRUE(withSp.sp);
        Result<parallel::ParallelRunResult> runs[2]
            = { Error::internal("not run"), Error::internal("not run") };
        for (int i = 0; i < 2; ++i) {
            test::MatrixPlan p;
            p.layout = i == 0 ? base : withSp;
            p.microBatches = p.layout.pp;
            Progress progress;
            runs[i] = parallel::runParallelInProcess(m.spec, *m.weights, test::runOptions(m, p),
                progress, {}, nullptr, {}, { Seconds(30.0) });
            ASSERT_TRUE(runs[i].ok()) << runs[i].error().message;
        }
        const auto& plain = *runs[0];
        const auto& sp = *runs[1];
        ASSERT_EQ(plain.sequences.size(), sp.sequences.size());
        for (std::size_t s = 0; s < sp.sequences.size(); ++s) {
            EXPECT_EQ(sp.sequences[s].generated, plain.sequences[s].generated);
            // Reduce-scatter sums the same partials in the same order as all-reduce.
            EXPECT_EQ(sp.sequences[s].logits, plain.sequences[s].logits) << "sequence " << s;
        }
        auto err = test::compareWithSingleRank(m, sp.sequences, test::kMatrixTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, kTolerance);
        const auto count = [](const parallel::ParallelRunResult& r, comm::CollectiveKind kind) {
            return std::count_if(r.events.begin(), r.events.end(),
                [&](const parallel::CommEvent& e) { return e.kind == kind; });
        };
        // The TP all-reduces of the residual stream become reduce-scatters, and each
        // column-parallel region starts with an all-gather.
        EXPECT_EQ(count(plain, comm::CollectiveKind::ReduceScatter), 0);
        EXPECT_GT(count(sp, comm::CollectiveKind::ReduceScatter), 0);
        EXPECT_LT(count(sp, comm::CollectiveKind::AllReduce),
            count(plain, comm::CollectiveKind::AllReduce));
        EXPECT_GT(count(sp, comm::CollectiveKind::AllGather),
            count(plain, comm::CollectiveKind::AllGather));
        // Pipeline sends carry only this rank's share of the tokens.
        std::int64_t plainSend = 0;
        std::int64_t spSend = 0;
        for (const auto& e : plain.events) {
            plainSend += e.kind == comm::CollectiveKind::Send ? e.bytes : 0;
        }
        for (const auto& e : sp.events) {
            spSend += e.kind == comm::CollectiveKind::Send ? e.bytes : 0;
        }
        if (base.pp > 1) {
            EXPECT_LT(spSend, plainSend);
        }
        EXPECT_NE(parallel::layoutString(withSp, 1).find("sp=on"), std::string::npos);
    }
}
