#include "mpi_communicator.h"

#include "comm/observer_slot.h"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <thread>

namespace day0::mpi {

namespace {

using comm::CollectiveKind;
using comm::CollectiveObserver;
using comm::ReduceOp;
using comm::steadyNowNs;
using Clock = std::chrono::steady_clock;

std::string mpiErrorText(int code)
{
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    return std::string(text, std::size_t(length));
}

/// The MPI type for element-wise reductions, or MPI_DATATYPE_NULL.
MPI_Datatype reductionType(DType type)
{
    switch (type) {
    case DType::F32:
        return MPI_FLOAT;
    case DType::F64:
        return MPI_DOUBLE;
    case DType::I32:
        return MPI_INT32_T;
    case DType::I64:
        return MPI_INT64_T;
    default:
        return MPI_DATATYPE_NULL;
    }
}

MPI_Op mpiOp(ReduceOp op)
{
    switch (op) {
    case ReduceOp::Sum:
        return MPI_SUM;
    case ReduceOp::Max:
        return MPI_MAX;
    case ReduceOp::Min:
        return MPI_MIN;
    case ReduceOp::Prod:
        return MPI_PROD;
    }
    return MPI_SUM;
}

/// Shared by a world and the groups split from it.
struct Shared {
    comm::ObserverSlot observer;
    MpiOptions options;
    int worldRank = 0;
    int nodeProcesses = 0; ///< the world's processes on this node (MPI_COMM_TYPE_SHARED)
};

class MpiCommunicator final : public comm::Communicator {
public:
    MpiCommunicator(MPI_Comm comm, std::string name, std::shared_ptr<Shared> shared, bool owned)
        : m_comm(comm)
        , m_name(std::move(name))
        , m_shared(std::move(shared))
        , m_owned(owned)
    {
        MPI_Comm_rank(m_comm, &m_rank);
        MPI_Comm_size(m_comm, &m_size);
    }

    ~MpiCommunicator() override
    {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized) {
            return;
        }
        for (auto& pending : m_pendingSends) {
            MPI_Wait(&pending.request, MPI_STATUS_IGNORE);
        }
        if (m_owned) {
            MPI_Comm_free(&m_comm);
        }
    }

    int rank() const override { return m_rank; }
    std::optional<int> processesOnThisNode() const override
    {
        return m_shared->nodeProcesses > 0 ? std::optional<int>(m_shared->nodeProcesses)
                                           : std::nullopt;
    }
    int size() const override { return m_size; }
    std::string name() const override { return m_name; }

    void setObserver(CollectiveObserver observer) override
    {
        m_shared->observer.set(std::move(observer));
    }

    void abort(const std::string& reason) override
    {
        std::fprintf(stderr, "day0: error: rank %d aborts the job: %s\n", m_shared->worldRank,
            reason.c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }

    Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        const auto mpiType = reductionType(type);
        DAY0_TRY(checkReducible(mpiType, type));
        DAY0_TRY(checkCount(count, "all_reduce"));
        DAY0_TRY(checkCall(CollectiveKind::AllReduce, count, type));
        const void* in = send == recv ? MPI_IN_PLACE : send;
        return collective(
            CollectiveKind::AllReduce, std::int64_t(count) * dtypeSize(type), [&](MPI_Request* r) {
                return MPI_Iallreduce(in, recv, int(count), mpiType, mpiOp(op), m_comm, r);
            });
    }

    Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(checkCount(bytes, "all_gather"));
        DAY0_TRY(checkCall(CollectiveKind::AllGather, count, type));
        return collective(CollectiveKind::AllGather, std::int64_t(bytes), [&](MPI_Request* r) {
            return MPI_Iallgather(
                send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, m_comm, r);
        });
    }

    Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        const auto mpiType = reductionType(type);
        DAY0_TRY(checkReducible(mpiType, type));
        DAY0_TRY(checkCount(count, "reduce_scatter"));
        DAY0_TRY(checkCall(CollectiveKind::ReduceScatter, count, type));
        return collective(CollectiveKind::ReduceScatter,
            std::int64_t(count) * m_size * dtypeSize(type), [&](MPI_Request* r) {
                return MPI_Ireduce_scatter_block(
                    send, recv, int(count), mpiType, mpiOp(op), m_comm, r);
            });
    }

    Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(checkCount(bytes, "all_to_all"));
        DAY0_TRY(checkCall(CollectiveKind::AllToAll, count, type));
        return collective(
            CollectiveKind::AllToAll, std::int64_t(bytes) * m_size, [&](MPI_Request* r) {
                return MPI_Ialltoall(
                    send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, m_comm, r);
            });
    }

    Result<void> allToAllV(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        DType type) override
    {
        const auto n = std::size_t(m_size);
        if (sendCounts.size() != n || sendDispls.size() != n || recvCounts.size() != n
            || recvDispls.size() != n) {
            return Error::badInput(fmt::format(
                "{}: all_to_all_v needs {} counts and displacements per side", m_name, n));
        }
        const auto elem = std::size_t(dtypeSize(type));
        std::vector<int> sc(n), sd(n), rc(n), rd(n);
        std::int64_t sent = 0;
        for (std::size_t i = 0; i < n; ++i) {
            for (const auto v : { sendCounts[i] * elem, sendDispls[i] * elem, recvCounts[i] * elem,
                     recvDispls[i] * elem }) {
                DAY0_TRY(checkCount(v, "all_to_all_v"));
            }
            sc[i] = int(sendCounts[i] * elem);
            sd[i] = int(sendDispls[i] * elem);
            rc[i] = int(recvCounts[i] * elem);
            rd[i] = int(recvDispls[i] * elem);
            sent += sc[i];
        }
        DAY0_TRY(checkCall(CollectiveKind::AllToAllV, 0, type));
        return collective(CollectiveKind::AllToAllV, sent, [&](MPI_Request* r) {
            return MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(),
                MPI_BYTE, m_comm, r);
        });
    }

    Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) override
    {
        if (root < 0 || root >= m_size) {
            return Error::badInput(fmt::format(
                "{}: broadcast root {} is not a rank of {} ranks", m_name, root, m_size));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(checkCount(bytes, "broadcast"));
        DAY0_TRY(checkCall(CollectiveKind::Broadcast, count, type));
        return collective(CollectiveKind::Broadcast, m_rank == root ? std::int64_t(bytes) : 0,
            [&](MPI_Request* r) {
                return MPI_Ibcast(buffer, int(bytes), MPI_BYTE, root, m_comm, r);
            });
    }

    Result<void> barrier() override
    {
        DAY0_TRY(checkCall(CollectiveKind::Barrier, 0, DType::U8));
        return collective(
            CollectiveKind::Barrier, 0, [&](MPI_Request* r) { return MPI_Ibarrier(m_comm, r); });
    }

    Result<std::shared_ptr<comm::Communicator>> split(
        int color, int key, const std::string& groupName) override
    {
        // MPI_Comm_split blocks without a timeout; a barrier that honours the timeout first
        // turns a rank that never arrives into an error instead of a hang.
        {
            MPI_Request request;
            DAY0_TRY(check(MPI_Ibarrier(m_comm, &request), "split"));
            DAY0_TRY(waitFor(request, "split"));
        }
        MPI_Comm child = MPI_COMM_NULL;
        DAY0_TRY(
            check(MPI_Comm_split(m_comm, color < 0 ? MPI_UNDEFINED : color, key, &child), "split"));
        if (child == MPI_COMM_NULL) {
            return std::shared_ptr<comm::Communicator>();
        }
        const auto label = groupName.empty() ? fmt::format("{}.{}", m_name, color)
                                             : fmt::format("{}{}", groupName, color);
        return std::shared_ptr<comm::Communicator>(
            std::make_shared<MpiCommunicator>(child, label, m_shared, true));
    }

    Result<void> send(const void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        if (peer < 0 || peer >= m_size || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot send to rank {}", m_name, m_rank, peer));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(checkCount(bytes, "send"));
        const auto start = steadyNowNs();
        reapSends();
        // The copy lets the caller reuse its buffer at once, as the interface promises.
        auto& pending = m_pendingSends.emplace_back();
        pending.data.assign(
            static_cast<const std::byte*>(buffer), static_cast<const std::byte*>(buffer) + bytes);
        DAY0_TRY(check(MPI_Isend(pending.data.data(), int(bytes), MPI_BYTE, peer, tag, m_comm,
                           &pending.request),
            "send"));
        record(CollectiveKind::Send, std::int64_t(bytes), start);
        return success();
    }

    Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        if (peer < 0 || peer >= m_size || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot receive from rank {}", m_name, m_rank, peer));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(checkCount(bytes, "recv"));
        const auto start = steadyNowNs();
        MPI_Request request;
        DAY0_TRY(
            check(MPI_Irecv(buffer, int(bytes), MPI_BYTE, peer, tag, m_comm, &request), "recv"));
        MPI_Status status;
        DAY0_TRY(waitFor(request, fmt::format("recv from rank {} (tag {})", peer, tag), &status));
        int received = 0;
        MPI_Get_count(&status, MPI_BYTE, &received);
        if (std::size_t(received) != bytes) {
            return Error::badInput(
                fmt::format("{}: rank {} expected {} bytes from rank {} (tag {}) but got {}",
                    m_name, m_rank, bytes, peer, tag, received));
        }
        record(CollectiveKind::Recv, std::int64_t(bytes), start);
        return success();
    }

private:
    struct PendingSend {
        std::vector<std::byte> data;
        MPI_Request request = MPI_REQUEST_NULL;
    };

    /// Posts one non-blocking collective (`post` starts it on a request and returns MPI's code),
    /// waits for it within the timeout and records it with `bytes`.
    template <typename Post>
    Result<void> collective(CollectiveKind kind, std::int64_t bytes, const Post& post)
    {
        const std::string what = comm::collectiveName(kind);
        const auto start = steadyNowNs();
        MPI_Request request;
        DAY0_TRY(check(post(&request), what.c_str()));
        DAY0_TRY(waitFor(request, what));
        record(kind, bytes, start);
        return success();
    }

    Result<void> check(int code, const char* what) const
    {
        if (code == MPI_SUCCESS) {
            return success();
        }
        return Error::internal(fmt::format(
            "{}: rank {}: MPI {} failed: {}", m_name, m_rank, what, mpiErrorText(code)));
    }

    Result<void> checkCount(std::size_t value, const char* what) const
    {
        if (value > std::size_t(INT_MAX)) {
            return Error::unsupported(
                fmt::format("{}: {} of {} bytes exceeds MPI's 2 GiB count limit; split the call",
                    m_name, what, value));
        }
        return success();
    }

    Result<void> checkReducible(MPI_Datatype mpiType, DType type) const
    {
        if (mpiType == MPI_DATATYPE_NULL) {
            return Error::unsupported(
                fmt::format("{}: reduction over {} is not supported (F32, F64, I32, I64 are)",
                    m_name, dtypeName(type)));
        }
        return success();
    }

    /// With checkCalls on, every rank compares (kind, count, dtype) with the others first.
    Result<void> checkCall(CollectiveKind kind, std::size_t count, DType type)
    {
        if (!m_shared->options.checkCalls) {
            return success();
        }
        const std::int64_t signature
            = (std::int64_t(kind) << 56) ^ (std::int64_t(type) << 48) ^ std::int64_t(count);
        std::int64_t bounds[2] = { signature, -signature };
        MPI_Request request;
        DAY0_TRY(
            check(MPI_Iallreduce(MPI_IN_PLACE, bounds, 2, MPI_INT64_T, MPI_MAX, m_comm, &request),
                "call check"));
        DAY0_TRY(waitFor(request, "call check"));
        if (bounds[0] != signature || -bounds[1] != signature) {
            return Error::badInput(
                fmt::format("{}: ranks disagree on the call: rank {} called {} with {} × {}",
                    m_name, m_rank, comm::collectiveName(kind), count, dtypeName(type)));
        }
        return success();
    }

    /// Polls a request until it completes or the timeout passes.
    Result<void> waitFor(
        MPI_Request& request, const std::string& what, MPI_Status* status = MPI_STATUS_IGNORE)
    {
        const auto deadline = Clock::now()
            + std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(m_shared->options.timeout.value));
        int done = 0;
        auto pause = std::chrono::microseconds(1);
        for (;;) {
            DAY0_TRY(check(MPI_Test(&request, &done, status), what.c_str()));
            if (done) {
                return success();
            }
            if (Clock::now() >= deadline) {
                return Error::checkFailed(fmt::format("{}: rank {} timed out after {} in {}",
                    m_name, m_rank, formatDuration(m_shared->options.timeout), what));
            }
            // Spin briefly for latency, then back off so idle ranks do not burn a core.
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(2000));
        }
    }

    void reapSends()
    {
        for (auto it = m_pendingSends.begin(); it != m_pendingSends.end();) {
            int done = 0;
            MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
            it = done ? m_pendingSends.erase(it) : std::next(it);
        }
    }

    void record(CollectiveKind kind, std::int64_t bytes, std::int64_t start) const
    {
        m_shared->observer.notify(m_rank, m_shared->worldRank, kind, bytes, start, m_name);
    }

    MPI_Comm m_comm;
    std::string m_name;
    std::shared_ptr<Shared> m_shared;
    bool m_owned = false;
    int m_rank = 0;
    int m_size = 1;
    std::list<PendingSend> m_pendingSends;
};

void finalizeAtExit()
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        MPI_Finalize();
    }
}

} // namespace

Result<std::shared_ptr<comm::Communicator>> createMpiWorld(const MpiOptions& options)
{
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
        if (code != MPI_SUCCESS) {
            return Error::internal(fmt::format("MPI_Init_thread failed: {}", mpiErrorText(code)));
        }
        if (provided < MPI_THREAD_SERIALIZED) {
            return Error::unsupported("the MPI library does not provide MPI_THREAD_SERIALIZED");
        }
        std::atexit(finalizeAtExit);
    }
    // Errors come back as codes so that each is reported with the call that failed.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    auto shared = std::make_shared<Shared>();
    shared->options = options;
    MPI_Comm_rank(MPI_COMM_WORLD, &shared->worldRank);
    // The processes that share this node's memory, counted once while every process is here
    // (collective over the world, like MPI_Init).
    MPI_Comm node = MPI_COMM_NULL;
    if (const int code
        = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        code != MPI_SUCCESS) {
        return Error::internal(fmt::format(
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed: {}", mpiErrorText(code)));
    }
    MPI_Comm_size(node, &shared->nodeProcesses);
    MPI_Comm_free(&node);
    return std::shared_ptr<comm::Communicator>(
        std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, "world", std::move(shared), false));
}

} // namespace day0::mpi
