#include "comm/in_process_communicator.h"
#include "comm/observer_slot.h"
#include "conformance.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>

using namespace day0;
using namespace day0::comm;

TEST(InProcess, PassesTheConformanceSuite)
{
    for (const int ranks : { 2, 3, 4, 5 }) {
        auto outcome = runInProcess(ranks, [](Communicator& c) { return test::runConformance(c); });
        EXPECT_TRUE(outcome.ok()) << ranks << " ranks: " << outcome.error().message;
    }
}

TEST(InProcess, SendRecvIsMatchedBySourceAndTag)
{
    // Host communicators match by (source, tag): receiving in another order than sent works.
    auto outcome = runInProcess(3, [&](Communicator& c) -> Result<void> {
        const int next = (c.rank() + 1) % c.size();
        const int prev = (c.rank() + c.size() - 1) % c.size();
        const float a[3] = { float(c.rank()), 1, 2 };
        const float b[1] = { float(c.rank() + 100) };
        DAY0_TRY(c.send(b, 1, DType::F32, next, 7));
        DAY0_TRY(c.send(a, 3, DType::F32, next, 5));
        float ra[3] = {};
        float rb[1] = {};
        DAY0_TRY(c.recv(ra, 3, DType::F32, prev, 5));
        DAY0_TRY(c.recv(rb, 1, DType::F32, prev, 7));
        EXPECT_EQ(ra[0], float(prev));
        EXPECT_EQ(rb[0], float(prev + 100));
        return success();
    });
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
}

TEST(InProcess, MismatchedCollectivesFailOnEveryRank)
{
    auto outcome = runInProcess(2, [&](Communicator& c) -> Result<void> {
        float x = 1;
        if (c.rank() == 0) {
            return c.allReduce(&x, &x, 1, DType::F32, ReduceOp::Sum);
        }
        float y[2];
        return c.allGather(&x, y, 1, DType::F32);
    });
    ASSERT_FALSE(outcome.ok());
    EXPECT_NE(
        outcome.error().message.find("rank 1 called all_gather while rank 0 called all_reduce"),
        std::string::npos)
        << outcome.error().message;
}

TEST(InProcess, HungRankTimesOutWithNamedRanks)
{
    InProcessOptions options;
    options.timeout = Seconds(0.3);
    const auto start = std::chrono::steady_clock::now();
    auto outcome = runInProcess(
        3,
        [&](Communicator& c) -> Result<void> {
            if (c.rank() == 2) {
                return success(); // never joins the barrier
            }
            return c.barrier();
        },
        options);
    const double waited
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(outcome.ok());
    EXPECT_NE(outcome.error().message.find("timed out"), std::string::npos)
        << outcome.error().message;
    EXPECT_NE(outcome.error().message.find("ranks not arrived: 2"), std::string::npos)
        << outcome.error().message;
    EXPECT_LT(waited, 5.0);
}

TEST(InProcess, FailingRankStopsTheOthers)
{
    const auto start = std::chrono::steady_clock::now();
    auto outcome = runInProcess(4, [&](Communicator& c) -> Result<void> {
        if (c.rank() == 1) {
            return Error::badInput("rank 1 could not open its shard");
        }
        return c.barrier();
    });
    const double waited
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error().message, "rank 1 could not open its shard");
    EXPECT_LT(waited, 5.0); // far below the 60 s default timeout: the abort woke the others
}

TEST(InProcess, ObserverRecordsEveryCall)
{
    std::mutex mutex;
    std::vector<CollectiveRecord> records;
    auto outcome = runInProcess(
        2,
        [&](Communicator& c) -> Result<void> {
            std::vector<float> v(256, 1.0f);
            DAY0_TRY(c.allReduce(v.data(), v.data(), v.size(), DType::F32, ReduceOp::Sum));
            return c.barrier();
        },
        {},
        [&](const CollectiveRecord& r) {
            std::lock_guard lock(mutex);
            records.push_back(r);
        });
    ASSERT_TRUE(outcome.ok());
    ASSERT_EQ(records.size(), 4u);
    int allReduces = 0;
    for (const auto& r : records) {
        EXPECT_LE(r.startNs, r.endNs);
        if (r.kind == CollectiveKind::AllReduce) {
            ++allReduces;
            EXPECT_EQ(r.bytes, 1024);
            EXPECT_EQ(r.group, "world");
        }
    }
    EXPECT_EQ(allReduces, 2);
}

// The slot every communicator (in-process, MPI, NCCL) reports its calls through.
TEST(ObserverSlot, ReportsEachCallToTheObserverSetLast)
{
    ObserverSlot slot;
    slot.notify(0, 0, CollectiveKind::Barrier, 0, steadyNowNs(), "world"); // no observer: nothing
    std::vector<CollectiveRecord> first;
    std::vector<CollectiveRecord> second;
    slot.set([&](const CollectiveRecord& r) { first.push_back(r); });
    const std::int64_t start = steadyNowNs();
    slot.notify(1, 5, CollectiveKind::AllGather, 4096, start, "tp1");
    const std::int64_t after = steadyNowNs();
    ASSERT_EQ(first.size(), 1u);
    const CollectiveRecord& r = first.front();
    EXPECT_EQ(r.rank, 1);
    EXPECT_EQ(r.worldRank, 5);
    EXPECT_EQ(r.kind, CollectiveKind::AllGather);
    EXPECT_EQ(r.bytes, 4096);
    EXPECT_EQ(r.group, "tp1");
    EXPECT_EQ(r.startNs, start);
    EXPECT_GE(r.endNs, start); // ends when reported, on the same steady clock
    EXPECT_LE(r.endNs, after);
    slot.set([&](const CollectiveRecord& rec) { second.push_back(rec); });
    slot.notify(0, 0, CollectiveKind::Send, 8, steadyNowNs(), "world");
    EXPECT_EQ(first.size(), 1u);
    EXPECT_EQ(second.size(), 1u);
    slot.set({});
    slot.notify(0, 0, CollectiveKind::Recv, 8, steadyNowNs(), "world");
    EXPECT_EQ(second.size(), 1u);
}

TEST(Reduce, RejectsUnsupportedTypes)
{
    std::uint8_t a = 1;
    std::uint8_t b = 2;
    EXPECT_FALSE(reduceInto(&a, &b, 1, DType::BF16, ReduceOp::Sum).ok());
}
