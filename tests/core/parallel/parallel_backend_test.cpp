// Sharded runs on compute backends: each rank computes its float operators on its own backend
// object (operators it declines fall back to the CPU), the result is the CPU run's bit for bit,
// every rank's native and fallback calls are gathered, and a rank whose backend cannot be made
// fails the run naming the rank.
#include "checkpoint/sharding.h"
#include "parallel_testkit.h"
#include "scripted_backend.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

using namespace day0;
using exec::BackendOp;
using exec::testing::ScriptedBackend;

namespace {

const test::ShrunkModel& deepseek()
{
    static const test::ShrunkModel model = [] {
        const auto dir = std::filesystem::temp_directory_path()
            / fmt::format("day0-parallel-backend-test-{}", ::getpid());
        auto m = test::makeShrunkModel("deepseek-v3", dir);
        EXPECT_TRUE(m.ok()) << m.error().message;
        return std::move(*m);
    }();
    return model;
}

parallel::ParallelRunOptions options(const test::ShrunkModel& m, const std::string& plan)
{
    parallel::ParallelRunOptions o;
    o.layout = *checkpoint::parseShardLayout(plan);
    o.prompts = test::matrixPrompts(o.layout.dp, m.spec.vocabSize);
    o.newTokens = 3;
    o.checkpointId = m.checkpointId;
    return o;
}

Result<parallel::ParallelRunResult> run(
    const test::ShrunkModel& m, const parallel::ParallelRunOptions& o)
{
    Progress progress;
    return parallel::runParallelInProcess(
        m.spec, *m.weights, o, progress, {}, nullptr, {}, { Seconds(20.0) });
}

} // namespace

TEST(ParallelBackend, EveryRankRunsOnItsOwnBackendAndMatchesTheCpuRunBitForBit)
{
    const auto& m = deepseek();
    const std::string plan = "tp=2,pp=2,ep=2";
    auto cpu = run(m, options(m, plan));
    ASSERT_TRUE(cpu.ok()) << cpu.error().message;
    EXPECT_TRUE(cpu->dispatch.ops.empty());

    std::atomic<int> made = 0;
    std::mutex mutex;
    std::vector<std::shared_ptr<ScriptedBackend>> backends;
    auto o = options(m, plan);
    o.backendFor = [&](int) -> Result<std::shared_ptr<exec::Backend>> {
        ++made;
        // MLA attention declined: it falls back on every rank.
        auto b = std::make_shared<ScriptedBackend>(std::set { BackendOp::AttentionMla });
        const std::lock_guard lock(mutex);
        backends.push_back(b);
        return std::shared_ptr<exec::Backend>(b);
    };
    auto on = run(m, o);
    ASSERT_TRUE(on.ok()) << on.error().message;
    EXPECT_EQ(made.load(), 4);
    for (const auto& b : backends) {
        EXPECT_EQ(b->releases, 1) << "each rank's forward released its weights once";
    }
    ASSERT_EQ(on->sequences.size(), cpu->sequences.size());
    for (std::size_t s = 0; s < on->sequences.size(); ++s) {
        EXPECT_EQ(on->sequences[s].generated, cpu->sequences[s].generated);
        EXPECT_EQ(on->sequences[s].logits, cpu->sequences[s].logits) << "sequence " << s;
    }
    EXPECT_EQ(on->dispatch.backend, "scripted");
    ASSERT_EQ(on->ranks.size(), 4U);
    for (const auto& r : on->ranks) {
        EXPECT_GT(r.nativeCalls, 0) << "rank " << r.rank;
        EXPECT_GT(r.fallbackCalls, 0) << "rank " << r.rank; // its MLA attention
    }
    bool sawMla = false;
    for (const auto& row : on->dispatch.ops) {
        if (row.op == BackendOp::AttentionMla) {
            sawMla = true;
            EXPECT_EQ(row.nativeCalls, 0);
            EXPECT_EQ(row.fallbackReason, "scripted declines attention_mla");
        }
    }
    EXPECT_TRUE(sawMla);
}

TEST(ParallelBackend, ARankWithoutItsBackendFailsTheRunNamingIt)
{
    const auto& m = deepseek();
    auto o = options(m, "tp=2,ep=2");
    o.backendFor = [](int rank) -> Result<std::shared_ptr<exec::Backend>> {
        if (rank == 1) {
            return Error::unsupported("no CUDA device: device 1 is not present");
        }
        return std::shared_ptr<exec::Backend>(std::make_shared<ScriptedBackend>());
    };
    auto r = run(m, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("rank 1: backend: no CUDA device"), std::string::npos)
        << r.error().message;
}

TEST(ParallelBackend, ABackendFailingMidRunStopsEveryRank)
{
    const auto& m = deepseek();
    auto o = options(m, "tp=2");
    o.backendFor = [](int rank) -> Result<std::shared_ptr<exec::Backend>> {
        return std::shared_ptr<exec::Backend>(rank == 0
                ? std::make_shared<ScriptedBackend>(std::set<BackendOp> {}, BackendOp::Linear)
                : std::make_shared<ScriptedBackend>());
    };
    auto r = run(m, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("backend scripted: linear: device lost"), std::string::npos)
        << r.error().message;
}

TEST(ParallelBackend, RecurrentLayersOnTheHostAreNamedInTheDispatchReport)
{
    // Kimi-Linear's KDA layers have no Backend operator beyond their projections: a sharded run
    // on a backend says that its host computed them, as the single-rank run does.
    const auto dir = std::filesystem::temp_directory_path()
        / fmt::format("day0-parallel-backend-kimi-{}", ::getpid());
    auto m = test::makeShrunkHybrid("kimi-linear-48b-a3b", dir);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto o = options(*m, "tp=2");
    o.backendFor = [](int) -> Result<std::shared_ptr<exec::Backend>> {
        return std::shared_ptr<exec::Backend>(std::make_shared<ScriptedBackend>());
    };
    auto r = run(*m, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& notes = r->dispatch.notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
        return note.find("KDA") != std::string::npos
            && note.find("on the host CPU") != std::string::npos;
    })) << fmt::format("{}", fmt::join(notes, "; "));
    std::filesystem::remove_all(dir);
}
