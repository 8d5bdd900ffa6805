#include "comm/in_process_communicator.h"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <mutex>
#include <numeric>

using namespace day0;
using namespace day0::comm;


TEST(InProcess, AllReduceSumsInPlaceAcrossRanks)
{
    constexpr int kRanks = 4;
    std::vector<std::vector<float>> results(kRanks);
    auto outcome = runInProcess(kRanks, [&](Communicator& c) -> Result<void> {
        std::vector<float> v(1000);
        std::iota(v.begin(), v.end(), float(c.rank()));
        DAY0_TRY(c.allReduce(v.data(), v.data(), v.size(), DType::F32, ReduceOp::Sum));
        results[std::size_t(c.rank())] = v;
        return success();
    });
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    for (const auto& v : results) {
        for (std::size_t i = 0; i < v.size(); ++i) {
            // sum over r of (i + r) = 4i + 6
            ASSERT_FLOAT_EQ(v[i], float(4 * i + 6));
        }
    }
}

TEST(InProcess, GatherScatterAllToAllAndBroadcast)
{
    constexpr int kRanks = 3;
    auto outcome = runInProcess(kRanks, [&](Communicator& c) -> Result<void> {
        const double me = c.rank();
        std::vector<double> gathered(kRanks * 2);
        const double mine[2] = { me, me + 10 };
        DAY0_TRY(c.allGather(mine, gathered.data(), 2, DType::F64));
        for (int r = 0; r < kRanks; ++r) {
            EXPECT_EQ(gathered[std::size_t(2 * r)], r);
            EXPECT_EQ(gathered[std::size_t(2 * r + 1)], r + 10);
        }
        // reduce-scatter: each rank contributes [0,1,2,...,5] * (rank+1); rank r gets slice r.
        std::vector<std::int64_t> full(kRanks * 2);
        for (std::size_t i = 0; i < full.size(); ++i) {
            full[i] = std::int64_t(i) * (c.rank() + 1);
        }
        std::int64_t slice[2] = {};
        DAY0_TRY(c.reduceScatter(full.data(), slice, 2, DType::I64, ReduceOp::Sum));
        EXPECT_EQ(slice[0], std::int64_t(2 * c.rank()) * 6);
        EXPECT_EQ(slice[1], std::int64_t(2 * c.rank() + 1) * 6);
        // all-to-all: block j of rank i holds 100*i + j.
        std::vector<std::int32_t> send(kRanks), recv(kRanks);
        for (int j = 0; j < kRanks; ++j) {
            send[std::size_t(j)] = 100 * c.rank() + j;
        }
        DAY0_TRY(c.allToAll(send.data(), recv.data(), 1, DType::I32));
        for (int i = 0; i < kRanks; ++i) {
            EXPECT_EQ(recv[std::size_t(i)], 100 * i + c.rank());
        }
        float value = c.rank() == 2 ? 42.0f : -1.0f;
        DAY0_TRY(c.broadcast(&value, 1, DType::F32, 2));
        EXPECT_EQ(value, 42.0f);
        return success();
    });
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
}

TEST(InProcess, AllToAllVMovesUnevenBlocks)
{
    // Rank r sends (r + j + 1) elements to rank j, each equal to 10*r + j.
    constexpr int kRanks = 3;
    auto outcome = runInProcess(kRanks, [&](Communicator& c) -> Result<void> {
        const auto r = std::size_t(c.rank());
        std::vector<std::size_t> sendCounts(kRanks), sendDispls(kRanks), recvCounts(kRanks),
            recvDispls(kRanks);
        std::vector<float> send;
        for (std::size_t j = 0; j < kRanks; ++j) {
            sendCounts[j] = r + j + 1;
            sendDispls[j] = send.size();
            send.insert(send.end(), sendCounts[j], float(10 * r + j));
        }
        std::size_t total = 0;
        for (std::size_t i = 0; i < kRanks; ++i) {
            recvCounts[i] = i + r + 1;
            recvDispls[i] = total;
            total += recvCounts[i];
        }
        std::vector<float> recv(total);
        DAY0_TRY(c.allToAllV(
            send.data(), sendCounts, sendDispls, recv.data(), recvCounts, recvDispls, DType::F32));
        for (std::size_t i = 0; i < kRanks; ++i) {
            for (std::size_t k = 0; k < recvCounts[i]; ++k) {
                EXPECT_EQ(recv[recvDispls[i] + k], float(10 * i + r));
            }
        }
        return success();
    });
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
}

TEST(InProcess, SendRecvIsMatchedBySourceAndTag)
{
    auto outcome = runInProcess(2, [&](Communicator& c) -> Result<void> {
        if (c.rank() == 0) {
            const float a[3] = { 1, 2, 3 };
            const float b[1] = { 9 };
            DAY0_TRY(c.send(b, 1, DType::F32, 1, 7));
            DAY0_TRY(c.send(a, 3, DType::F32, 1, 5));
        } else {
            float a[3] = {};
            float b[1] = {};
            DAY0_TRY(c.recv(a, 3, DType::F32, 0, 5));
            DAY0_TRY(c.recv(b, 1, DType::F32, 0, 7));
            EXPECT_EQ(a[2], 3.0f);
            EXPECT_EQ(b[0], 9.0f);
        }
        return success();
    });
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
}

TEST(InProcess, SplitFormsGroupsThatCommunicateIndependently)
{
    // 4 ranks as tp=2 × dp=2: TP groups {0,1}, {2,3}; DP groups {0,2}, {1,3}.
    auto outcome = runInProcess(4, [&](Communicator& c) -> Result<void> {
        auto tp = c.split(c.rank() / 2, c.rank(), "tp");
        DAY0_TRY(tp);
        auto dp = c.split(c.rank() % 2, c.rank(), "dp");
        DAY0_TRY(dp);
        EXPECT_EQ((*tp)->size(), 2);
        EXPECT_EQ((*tp)->rank(), c.rank() % 2);
        EXPECT_EQ((*dp)->rank(), c.rank() / 2);
        std::int64_t v = c.rank();
        DAY0_TRY((*tp)->allReduce(&v, &v, 1, DType::I64, ReduceOp::Sum));
        EXPECT_EQ(v, c.rank() < 2 ? 1 : 5);
        std::int64_t w = c.rank();
        DAY0_TRY((*dp)->allReduce(&w, &w, 1, DType::I64, ReduceOp::Max));
        EXPECT_EQ(w, c.rank() % 2 == 0 ? 2 : 3);
        auto none = c.split(c.rank() == 0 ? -1 : 0, 0, "odd");
        DAY0_TRY(none);
        EXPECT_EQ(*none == nullptr, c.rank() == 0);
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

TEST(Reduce, RejectsUnsupportedTypes)
{
    std::uint8_t a = 1;
    std::uint8_t b = 2;
    EXPECT_FALSE(reduceInto(&a, &b, 1, DType::BF16, ReduceOp::Sum).ok());
}
