#include "comm/in_process_communicator.h"

#include "comm/observer_slot.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace day0::comm {

namespace {

using Clock = std::chrono::steady_clock;

/// State shared by every group of one world: the abort flag and the observer.
struct WorldState {
    std::mutex mutex;
    bool aborted = false;
    std::string abortReason;
    ObserverSlot observer;
    InProcessOptions options;

    void abort(const std::string& reason)
    {
        std::lock_guard lock(mutex);
        if (!aborted) {
            aborted = true;
            abortReason = reason;
        }
    }
    std::optional<std::string> abortedReason()
    {
        std::lock_guard lock(mutex);
        return aborted ? std::optional<std::string>(abortReason) : std::nullopt;
    }
};

/// What one rank brings to a rendezvous.
struct Slot {
    CollectiveKind kind = CollectiveKind::Barrier;
    const void* send = nullptr;
    std::size_t count = 0;
    DType type = DType::U8;
    ReduceOp op = ReduceOp::Sum;
    int root = 0;
    const std::vector<std::size_t>* sendCounts = nullptr;
    const std::vector<std::size_t>* sendDispls = nullptr;
    int color = 0;
    int key = 0;
};

struct GroupState;

/// The outcome of a split for one rank.
struct SplitAssignment {
    std::shared_ptr<GroupState> group;
    int rank = -1;
};

/// One group of ranks: the rendezvous used by collectives and the mailboxes of send/recv.
struct GroupState {
    GroupState(
        std::shared_ptr<WorldState> w, int n, std::string groupName, std::vector<int> worldRanks)
        : world(std::move(w))
        , size(n)
        , name(std::move(groupName))
        , worldRankOf(std::move(worldRanks))
        , slots(std::size_t(n))
        , arrivedFlags(std::size_t(n), false)
        , splitResult(std::size_t(n))
    {
    }

    std::shared_ptr<WorldState> world;
    const int size;
    const std::string name;
    const std::vector<int> worldRankOf;

    std::mutex mutex;
    std::condition_variable cv;
    std::uint64_t generation = 0; ///< number of finished collectives
    bool computing = false; ///< every rank arrived; ranks read each other's buffers
    int arrived = 0;
    int departed = 0;
    std::vector<Slot> slots;
    std::vector<bool> arrivedFlags;
    std::string mismatch; ///< set when the ranks called different collectives
    std::vector<SplitAssignment> splitResult;

    std::map<std::tuple<int, int, int>, std::deque<std::vector<std::byte>>>
        mailbox; ///< (src, dst, tag)
};

std::string rankList(const std::vector<int>& ranks)
{
    return fmt::format("{}", fmt::join(ranks, ", "));
}

class InProcessCommunicator final : public Communicator {
public:
    InProcessCommunicator(std::shared_ptr<GroupState> group, int rank)
        : m_group(std::move(group))
        , m_rank(rank)
    {
    }

    int rank() const override { return m_rank; }
    int size() const override { return m_group->size; }
    std::string name() const override { return m_group->name; }

    void setObserver(CollectiveObserver observer) override
    {
        m_group->world->observer.set(std::move(observer));
    }

    void abort(const std::string& reason) override
    {
        m_group->world->abort(fmt::format("rank {} aborted: {}", worldRank(), reason));
        wakeAll();
    }

    Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        std::vector<std::byte> result(bytes);
        return collective(
            { CollectiveKind::AllReduce, send, count, type, op }, bytes,
            [&](const std::vector<Slot>& slots) -> Result<void> {
                std::memcpy(result.data(), slots[0].send, bytes);
                for (int r = 1; r < size(); ++r) {
                    DAY0_TRY(
                        reduceInto(result.data(), slots[std::size_t(r)].send, count, type, op));
                }
                return success();
            },
            [&] { std::memcpy(recv, result.data(), bytes); });
    }

    Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        std::vector<std::byte> result(bytes * std::size_t(size()));
        return collective(
            { CollectiveKind::AllGather, send, count, type }, bytes,
            [&](const std::vector<Slot>& slots) -> Result<void> {
                for (int r = 0; r < size(); ++r) {
                    std::memcpy(
                        result.data() + bytes * std::size_t(r), slots[std::size_t(r)].send, bytes);
                }
                return success();
            },
            [&] { std::memcpy(recv, result.data(), result.size()); });
    }

    Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        const std::size_t offset = bytes * std::size_t(m_rank);
        std::vector<std::byte> result(bytes);
        return collective(
            { CollectiveKind::ReduceScatter, send, count, type, op }, bytes * std::size_t(size()),
            [&](const std::vector<Slot>& slots) -> Result<void> {
                std::memcpy(
                    result.data(), static_cast<const std::byte*>(slots[0].send) + offset, bytes);
                for (int r = 1; r < size(); ++r) {
                    DAY0_TRY(reduceInto(result.data(),
                        static_cast<const std::byte*>(slots[std::size_t(r)].send) + offset, count,
                        type, op));
                }
                return success();
            },
            [&] { std::memcpy(recv, result.data(), bytes); });
    }

    Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        std::vector<std::byte> result(bytes * std::size_t(size()));
        return collective(
            { CollectiveKind::AllToAll, send, count, type }, bytes * std::size_t(size()),
            [&](const std::vector<Slot>& slots) -> Result<void> {
                for (int r = 0; r < size(); ++r) {
                    std::memcpy(result.data() + bytes * std::size_t(r),
                        static_cast<const std::byte*>(slots[std::size_t(r)].send)
                            + bytes * std::size_t(m_rank),
                        bytes);
                }
                return success();
            },
            [&] { std::memcpy(recv, result.data(), result.size()); });
    }

    Result<void> allToAllV(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        DType type) override
    {
        const auto n = std::size_t(size());
        if (sendCounts.size() != n || sendDispls.size() != n || recvCounts.size() != n
            || recvDispls.size() != n) {
            return Error::badInput(fmt::format(
                "{}: all_to_all_v needs {} counts and displacements per side", name(), n));
        }
        const std::size_t elem = std::size_t(dtypeSize(type));
        std::size_t sendTotal = 0;
        std::size_t recvExtent = 0;
        for (std::size_t r = 0; r < n; ++r) {
            sendTotal += sendCounts[r];
            recvExtent = std::max(recvExtent, recvDispls[r] + recvCounts[r]);
        }
        std::vector<std::byte> result(recvExtent * elem);
        Slot slot { CollectiveKind::AllToAllV, send, 0, type };
        slot.sendCounts = &sendCounts;
        slot.sendDispls = &sendDispls;
        return collective(
            slot, std::int64_t(sendTotal * elem),
            [&](const std::vector<Slot>& slots) -> Result<void> {
                for (std::size_t r = 0; r < n; ++r) {
                    const auto& peer = slots[r];
                    const std::size_t sent = (*peer.sendCounts)[std::size_t(m_rank)];
                    if (sent != recvCounts[r]) {
                        return Error::badInput(
                            fmt::format("{}: all_to_all_v: rank {} sends {} elements to rank {}, "
                                        "which expects {}",
                                name(), r, sent, m_rank, recvCounts[r]));
                    }
                    if (sent == 0) {
                        continue; // an empty send may come with a null buffer
                    }
                    std::memcpy(result.data() + recvDispls[r] * elem,
                        static_cast<const std::byte*>(peer.send)
                            + (*peer.sendDispls)[std::size_t(m_rank)] * elem,
                        sent * elem);
                }
                return success();
            },
            [&] {
                for (std::size_t r = 0; r < n; ++r) {
                    if (recvCounts[r] == 0) {
                        continue;
                    }
                    std::memcpy(static_cast<std::byte*>(recv) + recvDispls[r] * elem,
                        result.data() + recvDispls[r] * elem, recvCounts[r] * elem);
                }
            });
    }

    Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) override
    {
        if (root < 0 || root >= size()) {
            return Error::badInput(fmt::format(
                "{}: broadcast root {} is not a rank of {} ranks", name(), root, size()));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        std::vector<std::byte> result(bytes);
        Slot slot { CollectiveKind::Broadcast, buffer, count, type };
        slot.root = root;
        return collective(
            slot, m_rank == root ? std::int64_t(bytes) : 0,
            [&](const std::vector<Slot>& slots) -> Result<void> {
                std::memcpy(result.data(), slots[std::size_t(root)].send, bytes);
                return success();
            },
            [&] {
                if (m_rank != root) {
                    std::memcpy(buffer, result.data(), bytes);
                }
            });
    }

    Result<void> barrier() override
    {
        return collective(
            { CollectiveKind::Barrier }, 0, [](const std::vector<Slot>&) { return success(); },
            [] {});
    }

    Result<std::shared_ptr<Communicator>> split(
        int color, int key, const std::string& groupName) override
    {
        Slot slot { CollectiveKind::Split };
        slot.color = color;
        slot.key = key;
        SplitAssignment mine;
        auto outcome = collective(
            slot, 0,
            [&](const std::vector<Slot>&) -> Result<void> {
                std::lock_guard lock(m_group->mutex);
                mine = m_group->splitResult[std::size_t(m_rank)];
                return success();
            },
            [] {}, groupName);
        if (!outcome) {
            return outcome.error();
        }
        if (!mine.group) {
            return std::shared_ptr<Communicator>();
        }
        return std::shared_ptr<Communicator>(
            std::make_shared<InProcessCommunicator>(mine.group, mine.rank));
    }

    Result<void> send(const void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        if (peer < 0 || peer >= size() || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot send to rank {}", name(), m_rank, peer));
        }
        const auto start = steadyNowNs();
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        std::vector<std::byte> message(bytes);
        std::memcpy(message.data(), buffer, bytes);
        {
            std::lock_guard lock(m_group->mutex);
            m_group->mailbox[{ m_rank, peer, tag }].push_back(std::move(message));
        }
        m_group->cv.notify_all();
        record(CollectiveKind::Send, std::int64_t(bytes), start);
        return success();
    }

    Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        if (peer < 0 || peer >= size() || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot receive from rank {}", name(), m_rank, peer));
        }
        const auto start = steadyNowNs();
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        const auto key = std::make_tuple(peer, m_rank, tag);
        std::unique_lock lock(m_group->mutex);
        auto ready = [&] {
            auto it = m_group->mailbox.find(key);
            return it != m_group->mailbox.end() && !it->second.empty();
        };
        DAY0_TRY(waitFor(lock, ready, fmt::format("recv from rank {} (tag {})", peer, tag)));
        auto& queue = m_group->mailbox[key];
        auto message = std::move(queue.front());
        queue.pop_front();
        lock.unlock();
        if (message.size() != bytes) {
            return Error::badInput(
                fmt::format("{}: rank {} expected {} bytes from rank {} (tag {}) but got {}",
                    name(), m_rank, bytes, peer, tag, message.size()));
        }
        std::memcpy(buffer, message.data(), bytes);
        record(CollectiveKind::Recv, std::int64_t(bytes), start);
        return success();
    }

private:
    int worldRank() const { return m_group->worldRankOf[std::size_t(m_rank)]; }

    void wakeAll() { m_group->cv.notify_all(); }

    void record(CollectiveKind kind, std::int64_t bytes, std::int64_t start) const
    {
        m_group->world->observer.notify(m_rank, worldRank(), kind, bytes, start, m_group->name);
    }

    /// Waits on the group's condition until `pred`, the world's abort or the timeout. Polls the
    /// abort flag in short slices because an abort may be raised from another group.
    template <typename Pred>
    Result<void> waitFor(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what)
    {
        const auto deadline = Clock::now()
            + std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(m_group->world->options.timeout.value));
        while (!pred()) {
            if (auto reason = m_group->world->abortedReason()) {
                return Error::checkFailed(
                    fmt::format("{}: rank {} stopped in {}: {}", name(), m_rank, what, *reason));
            }
            if (Clock::now() >= deadline) {
                return timeoutError(what);
            }
            m_group->cv.wait_for(lock, std::chrono::milliseconds(20));
        }
        return success();
    }

    Error timeoutError(const std::string& what)
    {
        std::vector<int> missing;
        for (int r = 0; r < size(); ++r) {
            if (!m_group->arrivedFlags[std::size_t(r)]) {
                missing.push_back(r);
            }
        }
        const auto message = fmt::format("{}: rank {} timed out after {} in {}{}", name(), m_rank,
            formatDuration(m_group->world->options.timeout), what,
            missing.empty() ? std::string()
                            : fmt::format("; ranks not arrived: {}", rankList(missing)));
        m_group->world->abort(message);
        m_group->cv.notify_all();
        return Error::checkFailed(message);
    }

    /// Called by the last rank to arrive: checks that every rank called the same thing and
    /// prepares split results.
    void onAllArrived(const std::string& groupName)
    {
        auto& g = *m_group;
        const Slot& first = g.slots[0];
        for (int r = 1; r < g.size && g.mismatch.empty(); ++r) {
            const Slot& s = g.slots[std::size_t(r)];
            if (s.kind != first.kind) {
                g.mismatch = fmt::format("rank {} called {} while rank 0 called {}", r,
                    collectiveName(s.kind), collectiveName(first.kind));
            } else if (s.count != first.count || s.type != first.type || s.op != first.op
                || s.root != first.root) {
                g.mismatch = fmt::format("{}: rank {} passed {} × {} (root {}) while rank 0 "
                                         "passed {} × {} (root {})",
                    collectiveName(s.kind), r, s.count, dtypeName(s.type), s.root, first.count,
                    dtypeName(first.type), first.root);
            }
        }
        if (first.kind == CollectiveKind::Split && g.mismatch.empty()) {
            std::map<int, std::vector<std::pair<int, int>>> byColor; // color -> (key, rank)
            for (int r = 0; r < g.size; ++r) {
                const auto& s = g.slots[std::size_t(r)];
                if (s.color >= 0) {
                    byColor[s.color].emplace_back(s.key, r);
                }
            }
            std::fill(g.splitResult.begin(), g.splitResult.end(), SplitAssignment {});
            for (auto& [color, members] : byColor) {
                std::sort(members.begin(), members.end());
                std::vector<int> worldRanks;
                for (const auto& m : members) {
                    worldRanks.push_back(g.worldRankOf[std::size_t(m.second)]);
                }
                auto group = std::make_shared<GroupState>(g.world, int(members.size()),
                    groupName.empty() ? fmt::format("{}.{}", g.name, color)
                                      : fmt::format("{}{}", groupName, color),
                    worldRanks);
                for (std::size_t i = 0; i < members.size(); ++i) {
                    g.splitResult[std::size_t(members[i].second)] = { group, int(i) };
                }
            }
        }
        g.computing = true;
    }

    /// The two-phase rendezvous every collective uses: (1) every rank posts its slot and waits
    /// for all; (2) each computes its result from the others' send buffers into a private
    /// buffer; (3) every rank waits until all finished reading, so no send buffer changes under
    /// a reader; (4) each copies its result into its receive buffer (which may alias its send
    /// buffer).
    template <typename Compute, typename Deliver>
    Result<void> collective(Slot slot, std::int64_t bytes, Compute compute, Deliver deliver,
        const std::string& groupName = {})
    {
        const auto start = steadyNowNs();
        auto& g = *m_group;
        const auto what = collectiveName(slot.kind);
        std::unique_lock lock(g.mutex);
        // Wait until the previous collective has fully drained.
        DAY0_TRY(waitFor(
            lock, [&] { return !g.computing; }, what));
        const auto generation = g.generation;
        g.slots[std::size_t(m_rank)] = slot;
        g.arrivedFlags[std::size_t(m_rank)] = true;
        if (++g.arrived == g.size) {
            onAllArrived(groupName);
            g.cv.notify_all();
        }
        DAY0_TRY(waitFor(
            lock, [&] { return g.computing && g.generation == generation; }, what));
        const std::string mismatch = g.mismatch;
        std::vector<Slot> slots = g.slots;
        lock.unlock();

        Result<void> outcome = mismatch.empty()
            ? compute(slots)
            : Result<void>(
                Error::badInput(fmt::format("{}: ranks disagree: {}", g.name, mismatch)));

        lock.lock();
        if (++g.departed == g.size) {
            g.computing = false;
            g.arrived = 0;
            g.departed = 0;
            g.mismatch.clear();
            std::fill(g.arrivedFlags.begin(), g.arrivedFlags.end(), false);
            ++g.generation;
            g.cv.notify_all();
        } else {
            DAY0_TRY(waitFor(
                lock, [&] { return g.generation != generation; }, what));
        }
        lock.unlock();
        if (!outcome) {
            return outcome;
        }
        deliver();
        record(slot.kind, bytes, start);
        return success();
    }

    std::shared_ptr<GroupState> m_group;
    int m_rank;
};

} // namespace

std::vector<std::shared_ptr<Communicator>> createInProcessWorld(int size, InProcessOptions options)
{
    auto world = std::make_shared<WorldState>();
    world->options = options;
    std::vector<int> ranks(std::size_t(std::max(size, 0)));
    for (int r = 0; r < size; ++r) {
        ranks[std::size_t(r)] = r;
    }
    auto group = std::make_shared<GroupState>(world, size, "world", ranks);
    std::vector<std::shared_ptr<Communicator>> comms;
    for (int r = 0; r < size; ++r) {
        comms.push_back(std::make_shared<InProcessCommunicator>(group, r));
    }
    return comms;
}

Result<void> runInProcess(int size, const std::function<Result<void>(Communicator&)>& fn,
    InProcessOptions options, CollectiveObserver observer)
{
    if (size <= 0) {
        return Error::badInput(
            fmt::format("in-process world needs at least one rank, got {}", size));
    }
    auto comms = createInProcessWorld(size, options);
    if (observer) {
        comms[0]->setObserver(std::move(observer));
    }
    std::vector<std::optional<Error>> errors(static_cast<std::size_t>(size));
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
        threads.emplace_back([&, r] {
            Result<void> outcome = success();
            try {
                outcome = fn(*comms[std::size_t(r)]);
            } catch (const std::exception& e) {
                outcome = Error::internal(fmt::format("rank {} threw: {}", r, e.what()));
            }
            if (!outcome) {
                errors[std::size_t(r)] = outcome.error();
                comms[std::size_t(r)]->abort(outcome.error().message);
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    // Report the root cause: the first rank whose own error is not a consequence of an abort.
    for (const auto& e : errors) {
        if (e && e->message.find("aborted:") == std::string::npos
            && e->message.find("stopped in") == std::string::npos) {
            return *e;
        }
    }
    for (const auto& e : errors) {
        if (e) {
            return *e;
        }
    }
    return success();
}

} // namespace day0::comm
