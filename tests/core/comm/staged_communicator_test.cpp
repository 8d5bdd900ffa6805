// StagedCommunicator over in-process ranks, with a fake "device" in a separate heap area: every
// buffer the inner communicator sees must be fake device memory, every result must equal the
// unwrapped communicator's, and staging failures must name the call and stop every rank.
#include "comm/in_process_communicator.h"
#include "comm/staged_communicator.h"
#include "conformance.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>

using namespace day0;
using namespace day0::comm;

namespace {

/// A copy (or allocation) to fail on purpose.
struct Fault {
    std::string group; ///< communicator name ("world", "pair0")
    int rank = 0;
    enum class What { ToDevice, ToHost, Allocate } what = What::ToDevice;
    int nth = 1; ///< the nth such operation of that rank and group fails
};

/// What one rank's staging did.
struct StagingStats {
    std::atomic<int> allocations { 0 };
    std::atomic<int> releases { 0 };
    std::atomic<int> toDevice { 0 };
    std::atomic<int> toHost { 0 };
    std::atomic<std::int64_t> bytesToDevice { 0 };
    std::atomic<std::int64_t> bytesToHost { 0 };
};

/// "Device" memory: blocks on the heap, filled with garbage, tracked so that any pointer can be
/// checked for being inside one. Shared by all ranks (thread-safe).
class FakeDevice {
public:
    void* allocate(std::size_t bytes)
    {
        auto block = std::make_unique<std::byte[]>(bytes);
        std::memset(block.get(), 0xcd, bytes);
        void* p = block.get();
        std::lock_guard lock(m_mutex);
        m_blocks[p] = { std::move(block), bytes };
        return p;
    }
    void release(void* p)
    {
        std::lock_guard lock(m_mutex);
        m_blocks.erase(p);
    }
    /// Whether [p, p + bytes) lies inside one live block.
    bool contains(const void* p, std::size_t bytes) const
    {
        std::lock_guard lock(m_mutex);
        const auto* b = static_cast<const std::byte*>(p);
        for (const auto& [start, block] : m_blocks) {
            const auto* s = static_cast<const std::byte*>(start);
            if (b >= s && b + bytes <= s + block.second) {
                return true;
            }
        }
        return false;
    }
    std::size_t liveBlocks() const
    {
        std::lock_guard lock(m_mutex);
        return m_blocks.size();
    }

    std::optional<Fault> fault;

    /// The stats of the staging of `group` on `rank`.
    std::shared_ptr<StagingStats> stats(const std::string& group, int rank)
    {
        std::lock_guard lock(m_mutex);
        auto& s = m_stats[fmt::format("{}#{}", group, rank)];
        if (!s) {
            s = std::make_shared<StagingStats>();
        }
        return s;
    }

private:
    mutable std::mutex m_mutex;
    std::map<void*, std::pair<std::unique_ptr<std::byte[]>, std::size_t>> m_blocks;
    std::map<std::string, std::shared_ptr<StagingStats>> m_stats;
};

class FakeStaging final : public DeviceStaging {
public:
    FakeStaging(FakeDevice& device, std::string group, int rank)
        : m_device(device)
        , m_group(std::move(group))
        , m_rank(rank)
        , m_stats(device.stats(m_group, m_rank))
    {
    }

    Result<void*> allocate(std::size_t bytes) override
    {
        if (bytes == 0) {
            return Error::internal("fake device: zero-byte allocation");
        }
        if (faulty(Fault::What::Allocate, ++m_stats->allocations)) {
            return Error::internal(fmt::format("fake device: out of memory for {} bytes", bytes));
        }
        return m_device.allocate(bytes);
    }
    void release(void* device) noexcept override
    {
        ++m_stats->releases;
        m_device.release(device);
    }
    Result<void> copyToDevice(void* device, const void* host, std::size_t bytes) override
    {
        if (!m_device.contains(device, bytes) || m_device.contains(host, 1)) {
            return Error::internal("fake device: copy to device outside device memory");
        }
        if (faulty(Fault::What::ToDevice, ++m_stats->toDevice)) {
            return Error::internal("injected copy-to-device failure");
        }
        m_stats->bytesToDevice += std::int64_t(bytes);
        std::memcpy(device, host, bytes);
        return success();
    }
    Result<void> copyToHost(void* host, const void* device, std::size_t bytes) override
    {
        if (!m_device.contains(device, bytes) || m_device.contains(host, 1)) {
            return Error::internal("fake device: copy to host outside device memory");
        }
        if (faulty(Fault::What::ToHost, ++m_stats->toHost)) {
            return Error::internal("injected copy-to-host failure");
        }
        m_stats->bytesToHost += std::int64_t(bytes);
        std::memcpy(host, device, bytes);
        return success();
    }

private:
    [[nodiscard]] bool faulty(Fault::What what, int nth) const
    {
        const auto& f = m_device.fault;
        return f && f->what == what && f->group == m_group && f->rank == m_rank && f->nth == nth;
    }

    FakeDevice& m_device;
    std::string m_group;
    int m_rank;
    std::shared_ptr<StagingStats> m_stats;
};

/// Forwards to a host communicator after checking that every buffer is fake device memory of
/// the size the call needs: proves the staged wrapper never hands a host pointer down.
class DeviceOnlyCommunicator final : public Communicator {
public:
    DeviceOnlyCommunicator(std::shared_ptr<Communicator> inner, FakeDevice& device)
        : m_inner(std::move(inner))
        , m_device(device)
    {
    }
    [[nodiscard]] int rank() const override { return m_inner->rank(); }
    [[nodiscard]] int size() const override { return m_inner->size(); }
    [[nodiscard]] std::string name() const override { return m_inner->name(); }

    Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        DAY0_TRY(check("all_reduce", { { send, count }, { recv, count } }, type));
        return m_inner->allReduce(send, recv, count, type, op);
    }
    Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) override
    {
        DAY0_TRY(check("all_gather", { { send, count }, { recv, count * n() } }, type));
        return m_inner->allGather(send, recv, count, type);
    }
    Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        DAY0_TRY(check("reduce_scatter", { { send, count * n() }, { recv, count } }, type));
        return m_inner->reduceScatter(send, recv, count, type, op);
    }
    Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) override
    {
        DAY0_TRY(check("all_to_all", { { send, count * n() }, { recv, count * n() } }, type));
        return m_inner->allToAll(send, recv, count, type);
    }
    Result<void> allToAllV(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        DType type) override
    {
        for (std::size_t i = 0; i < sendCounts.size(); ++i) {
            const auto* s = static_cast<const std::byte*>(send) + sendDispls[i] * elem(type);
            auto* r = static_cast<std::byte*>(recv) + recvDispls[i] * elem(type);
            DAY0_TRY(check("all_to_all_v",
                { { s, std::max<std::size_t>(sendCounts[i], 1) },
                    { r, std::max<std::size_t>(recvCounts[i], 1) } },
                type));
        }
        return m_inner->allToAllV(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, type);
    }
    Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) override
    {
        DAY0_TRY(check("broadcast", { { buffer, count } }, type));
        return m_inner->broadcast(buffer, count, type, root);
    }
    Result<void> send(const void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        DAY0_TRY(check("send", { { buffer, count } }, type));
        return m_inner->send(buffer, count, type, peer, tag);
    }
    Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        DAY0_TRY(check("recv", { { buffer, count } }, type));
        return m_inner->recv(buffer, count, type, peer, tag);
    }
    Result<void> barrier() override { return m_inner->barrier(); }
    Result<std::shared_ptr<Communicator>> split(
        int color, int key, const std::string& name) override
    {
        auto child = m_inner->split(color, key, name);
        DAY0_TRY(child);
        if (!*child) {
            return std::shared_ptr<Communicator>();
        }
        return std::shared_ptr<Communicator>(
            std::make_shared<DeviceOnlyCommunicator>(*child, m_device));
    }
    void setObserver(CollectiveObserver observer) override
    {
        m_inner->setObserver(std::move(observer));
    }
    void abort(const std::string& reason) override { m_inner->abort(reason); }

private:
    [[nodiscard]] std::size_t n() const { return std::size_t(size()); }
    static std::size_t elem(DType type) { return std::size_t(dtypeSize(type)); }
    Result<void> check(const char* call,
        std::initializer_list<std::pair<const void*, std::size_t>> buffers, DType type) const
    {
        for (const auto& [p, count] : buffers) {
            if (!m_device.contains(p, std::max<std::size_t>(count, 1) * elem(type))) {
                return Error::internal(fmt::format("{}: rank {} got a buffer of {} elements "
                                                   "that is not device memory",
                    call, rank(), count));
            }
        }
        return success();
    }

    std::shared_ptr<Communicator> m_inner;
    FakeDevice& m_device;
};

/// A non-owning handle on a communicator that outlives its use (runInProcess's).
std::shared_ptr<Communicator> borrow(Communicator& c) { return { std::shared_ptr<void>(), &c }; }

StagingFactory fakeFactory(FakeDevice& device)
{
    return [&device](Communicator& inner) -> Result<std::unique_ptr<DeviceStaging>> {
        return std::unique_ptr<DeviceStaging>(
            std::make_unique<FakeStaging>(device, inner.name(), inner.rank()));
    };
}

/// Wraps runInProcess's host communicator as a device-only one, staged.
std::shared_ptr<Communicator> staged(Communicator& host, FakeDevice& device)
{
    auto wrapped = StagedCommunicator::create(
        std::make_shared<DeviceOnlyCommunicator>(borrow(host), device), fakeFactory(device));
    EXPECT_TRUE(wrapped.ok()) << wrapped.error().message;
    return *wrapped;
}

/// Runs every kind of call with seeded random data and returns each call's output, so that a
/// staged run can be compared with a plain one bit for bit.
Result<std::vector<std::vector<float>>> everyCall(Communicator& c)
{
    const auto n = std::size_t(c.size());
    const auto r = std::size_t(c.rank());
    std::mt19937 rng(unsigned(1234 + r));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto random = [&](std::size_t count) {
        std::vector<float> v(count);
        for (auto& x : v) {
            x = dist(rng);
        }
        return v;
    };
    std::vector<std::vector<float>> outputs;
    auto in = random(37);
    std::vector<float> out(37, 0.0f);
    DAY0_TRY(c.allReduce(in.data(), out.data(), out.size(), DType::F32, ReduceOp::Sum));
    outputs.push_back(out);
    DAY0_TRY(c.allReduce(in.data(), in.data(), in.size(), DType::F32, ReduceOp::Max));
    outputs.push_back(in);
    auto async = c.allReduceAsync(out.data(), out.data(), out.size(), DType::F32, ReduceOp::Min);
    DAY0_TRY(async->wait());
    outputs.push_back(out);

    auto mine = random(5);
    std::vector<float> gathered(5 * n);
    DAY0_TRY(c.allGather(mine.data(), gathered.data(), 5, DType::F32));
    outputs.push_back(gathered);
    auto full = random(3 * n);
    std::vector<float> slice(3);
    DAY0_TRY(c.reduceScatter(full.data(), slice.data(), 3, DType::F32, ReduceOp::Sum));
    outputs.push_back(slice);
    auto blocks = random(4 * n);
    std::vector<float> exchanged(4 * n);
    DAY0_TRY(c.allToAll(blocks.data(), exchanged.data(), 4, DType::F32));
    outputs.push_back(exchanged);

    // Variable all-to-all with blocks in reverse rank order, gaps between them on both sides,
    // and an empty block from every rank to rank 0: the gaps must keep their sentinel.
    std::vector<std::size_t> sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
    std::size_t sendEnd = 0;
    std::size_t recvEnd = 0;
    for (std::size_t k = n; k-- > 0;) {
        sendCounts[k] = k == 0 ? 0 : (r + k) % 3 + 1;
        sendDispls[k] = sendEnd + 1;
        sendEnd = sendDispls[k] + sendCounts[k];
        recvCounts[k] = r == 0 ? 0 : (k + r) % 3 + 1;
        recvDispls[k] = recvEnd + 2;
        recvEnd = recvDispls[k] + recvCounts[k];
    }
    auto varSend = random(sendEnd);
    std::vector<float> varRecv(recvEnd + 1, -7.5f);
    DAY0_TRY(c.allToAllV(varSend.data(), sendCounts, sendDispls, varRecv.data(), recvCounts,
        recvDispls, DType::F32));
    outputs.push_back(varRecv);

    auto value = random(9);
    DAY0_TRY(c.broadcast(value.data(), value.size(), DType::F32, int(n) - 1));
    outputs.push_back(value);

    // A ring: even ranks send first, odd ranks receive first (a pairing every backend supports).
    const int next = (c.rank() + 1) % c.size();
    const int prev = (c.rank() + c.size() - 1) % c.size();
    auto token = random(6);
    std::vector<float> got(6);
    if (c.rank() % 2 == 0) {
        DAY0_TRY(c.send(token.data(), token.size(), DType::F32, next, 3));
        DAY0_TRY(c.recv(got.data(), got.size(), DType::F32, prev, 3));
    } else {
        DAY0_TRY(c.recv(got.data(), got.size(), DType::F32, prev, 3));
        DAY0_TRY(c.send(token.data(), token.size(), DType::F32, next, 3));
    }
    outputs.push_back(got);
    DAY0_TRY(c.barrier());

    // A group of the odd and one of the even ranks.
    auto group = c.split(c.rank() % 2, -c.rank(), "parity");
    DAY0_TRY(group);
    auto part = random(11);
    DAY0_TRY((*group)->allReduce(part.data(), part.data(), part.size(), DType::F32, ReduceOp::Sum));
    outputs.push_back(part);
    std::vector<float> groupGathered(2 * std::size_t((*group)->size()));
    DAY0_TRY((*group)->allGather(part.data(), groupGathered.data(), 2, DType::F32));
    outputs.push_back(groupGathered);
    return outputs;
}

/// everyCall on `ranks` in-process ranks, plain or staged; outputs by rank.
std::vector<std::vector<std::vector<float>>> everyCallOn(int ranks, FakeDevice* device)
{
    std::vector<std::vector<std::vector<float>>> byRank(static_cast<std::size_t>(ranks));
    auto outcome = runInProcess(ranks, [&](Communicator& host) -> Result<void> {
        auto c = device ? staged(host, *device) : borrow(host);
        auto outputs = everyCall(*c);
        DAY0_TRY(outputs);
        byRank[std::size_t(host.rank())] = std::move(*outputs);
        return success();
    });
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
    return byRank;
}

} // namespace

TEST(StagedCommunicator, PassesTheConformanceSuiteOnDeviceBuffers)
{
    for (const int ranks : { 2, 3, 4 }) {
        FakeDevice device;
        auto outcome = runInProcess(ranks, [&](Communicator& host) -> Result<void> {
            auto c = staged(host, device);
            return test::runConformance(*c);
        });
        EXPECT_TRUE(outcome.ok()) << ranks << " ranks: " << outcome.error().message;
        EXPECT_EQ(device.liveBlocks(), 0U) << "scratch freed with the communicators";
    }
}

TEST(StagedCommunicator, EveryCallGivesTheUnwrappedResult)
{
    for (const int ranks : { 2, 3, 4 }) {
        const auto plain = everyCallOn(ranks, nullptr);
        FakeDevice device;
        const auto viaDevice = everyCallOn(ranks, &device);
        ASSERT_EQ(plain.size(), viaDevice.size());
        for (std::size_t r = 0; r < plain.size(); ++r) {
            ASSERT_EQ(plain[r].size(), 11U) << "rank " << r;
            ASSERT_EQ(plain[r].size(), viaDevice[r].size()) << "rank " << r;
            for (std::size_t call = 0; call < plain[r].size(); ++call) {
                EXPECT_EQ(plain[r][call], viaDevice[r][call])
                    << ranks << " ranks, rank " << r << ", call " << call;
            }
        }
        // The sentinel gaps of the variable all-to-all stayed untouched.
        EXPECT_EQ(viaDevice[1][6].front(), -7.5f);
        EXPECT_EQ(viaDevice[1][6].back(), -7.5f);
    }
}

TEST(StagedCommunicator, ReusesItsScratchAndCopiesOnlyWhatMoves)
{
    FakeDevice device;
    auto outcome = runInProcess(2, [&](Communicator& host) -> Result<void> {
        auto c = staged(host, device);
        std::vector<double> v(1000, 1.0);
        std::vector<double> w(1000);
        for (int i = 0; i < 10; ++i) {
            const std::size_t count = 1000 - std::size_t(i) * 50; // shrinking: no reallocation
            DAY0_TRY(c->allReduce(v.data(), v.data(), count, DType::F64, ReduceOp::Sum));
            DAY0_TRY(c->allReduce(v.data(), w.data(), count, DType::F64, ReduceOp::Sum));
        }
        DAY0_TRY(c->broadcast(v.data(), 10, DType::F64, 0));
        return success();
    });
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    for (const int rank : { 0, 1 }) {
        const auto s = device.stats("world", rank);
        EXPECT_EQ(s->allocations.load(), 2) << "one input and one output area, reused";
        EXPECT_EQ(s->releases.load(), 2);
        // 20 all-reduces: one copy in and one out each; the broadcast: in on the root only,
        // out on the others only.
        EXPECT_EQ(s->toDevice.load(), 20 + (rank == 0 ? 1 : 0)) << "rank " << rank;
        EXPECT_EQ(s->toHost.load(), 20 + (rank == 1 ? 1 : 0)) << "rank " << rank;
    }
}

TEST(StagedCommunicator, PassesRankNameRecordsAndSplitsThrough)
{
    FakeDevice device;
    std::mutex mutex;
    std::vector<CollectiveRecord> records;
    auto outcome = runInProcess(
        4,
        [&](Communicator& host) -> Result<void> {
            auto c = staged(host, device);
            EXPECT_EQ(c->rank(), host.rank());
            EXPECT_EQ(c->size(), 4);
            EXPECT_EQ(c->name(), host.name());
            auto group = c->split(host.rank() < 2 ? 0 : 1, host.rank(), "tp");
            DAY0_TRY(group);
            EXPECT_NE(dynamic_cast<StagedCommunicator*>(group->get()), nullptr);
            EXPECT_EQ((*group)->size(), 2);
            auto x = float(host.rank());
            DAY0_TRY((*group)->allReduce(&x, &x, 1, DType::F32, ReduceOp::Sum));
            EXPECT_EQ(x, host.rank() < 2 ? 1.0f : 5.0f);
            auto none = c->split(-1, 0, "nobody");
            DAY0_TRY(none);
            EXPECT_EQ(*none, nullptr);
            return success();
        },
        {},
        [&](const CollectiveRecord& r) {
            std::lock_guard lock(mutex);
            records.push_back(r);
        });
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    int groupReduces = 0;
    for (const auto& r : records) {
        if (r.kind == CollectiveKind::AllReduce) {
            ++groupReduces;
            EXPECT_EQ(r.bytes, 4);
            EXPECT_NE(r.group, "world");
        }
    }
    EXPECT_EQ(groupReduces, 4);
    // The groups' calls went through their own stagings.
    for (const auto* group : { "tp0", "tp1" }) {
        for (const int rank : { 0, 1 }) {
            EXPECT_EQ(device.stats(group, rank)->toDevice.load(), 1) << group << " rank " << rank;
        }
    }
}

TEST(StagedCommunicator, FailedCopyNamesTheCallAndStopsEveryRank)
{
    struct Case {
        Fault fault;
        std::string expected;
    };
    auto fault = [](std::string group, int rank, Fault::What what, int nth) {
        Fault f;
        f.group = std::move(group);
        f.rank = rank;
        f.what = what;
        f.nth = nth;
        return f;
    };
    std::vector<Case> cases;
    cases.push_back({ fault("world", 1, Fault::What::ToDevice, 2),
        "world: rank 1: all_gather: injected copy-to-device failure" });
    cases.push_back({ fault("world", 2, Fault::What::ToHost, 1),
        "world: rank 2: all_reduce: injected copy-to-host failure" });
    cases.push_back({ fault("world", 0, Fault::What::Allocate, 3),
        "world: rank 0: all_to_all: fake device: out of memory" });
    cases.push_back({ fault("pair0", 1, Fault::What::ToDevice, 1),
        "pair0: rank 1: all_reduce: injected copy-to-device failure" });
    for (const auto& k : cases) {
        FakeDevice device;
        device.fault = k.fault;
        InProcessOptions options;
        options.timeout = Seconds(30.0);
        const auto started = std::chrono::steady_clock::now();
        auto outcome = runInProcess(
            3,
            [&](Communicator& host) -> Result<void> {
                auto c = staged(host, device);
                std::vector<float> v(8, 1.0f);
                std::vector<float> w(24);
                std::vector<float> big(300);
                DAY0_TRY(c->allReduce(v.data(), w.data(), 8, DType::F32, ReduceOp::Sum));
                DAY0_TRY(c->allGather(v.data(), w.data(), 8, DType::F32));
                // Larger than the first areas: the third allocation.
                DAY0_TRY(c->allToAll(big.data(), big.data(), 100, DType::F32));
                auto pair = c->split(host.rank() / 2, 0, "pair");
                DAY0_TRY(pair);
                DAY0_TRY((*pair)->allReduce(v.data(), v.data(), 8, DType::F32, ReduceOp::Sum));
                return c->barrier();
            },
            options);
        const double waited
            = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        ASSERT_FALSE(outcome.ok()) << k.expected;
        EXPECT_NE(outcome.error().message.find(k.expected), std::string::npos)
            << outcome.error().message;
        EXPECT_LT(waited, 10.0) << "the abort, not the 30 s timeout, stopped the other ranks";
    }
}

TEST(StagedCommunicator, RejectsMismatchedVariableCounts)
{
    FakeDevice device;
    auto outcome = runInProcess(2, [&](Communicator& host) -> Result<void> {
        auto c = staged(host, device);
        float x[4] = {};
        const std::vector<std::size_t> two { 1, 1 };
        const std::vector<std::size_t> one { 1 };
        return c->allToAllV(x, two, { 0, 1 }, x, one, { 0 }, DType::F32);
    });
    ASSERT_FALSE(outcome.ok());
    EXPECT_NE(outcome.error().message.find("all_to_all_v: needs 2 counts and displacements"),
        std::string::npos)
        << outcome.error().message;
    EXPECT_EQ(outcome.error().code, ErrorCode::BadInput);
}

TEST(StagedCommunicator, FactoryFailureNamesTheCommunicator)
{
    auto world = createInProcessWorld(1);
    auto wrapped = StagedCommunicator::create(
        world[0], [](Communicator&) -> Result<std::unique_ptr<DeviceStaging>> {
            return Error::unsupported("no CUDA device");
        });
    ASSERT_FALSE(wrapped.ok());
    EXPECT_EQ(wrapped.error().message, "world: rank 0: device staging: no CUDA device");
}
