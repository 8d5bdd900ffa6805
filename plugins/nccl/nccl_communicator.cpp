#include "nccl_communicator.h"

#include "base/file_util.h"
#include "comm/observer_slot.h"
#include "file_store.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

namespace day0::nccl {

namespace {

using comm::CollectiveKind;
using comm::CollectiveObserver;
using comm::ReduceOp;
using comm::steadyNowNs;
using Clock = std::chrono::steady_clock;

std::optional<ncclDataType_t> ncclType(DType type)
{
    switch (type) {
    case DType::F32:
        return ncclFloat32;
    case DType::F64:
        return ncclFloat64;
    case DType::F16:
        return ncclFloat16;
    case DType::BF16:
        return ncclBfloat16;
    case DType::I32:
        return ncclInt32;
    case DType::I64:
        return ncclInt64;
    case DType::I8:
        return ncclInt8;
    case DType::U8:
    case DType::Bool:
        return ncclUint8;
    case DType::U32:
        return ncclUint32;
    case DType::U64:
        return ncclUint64;
    case DType::F8E4M3:
        return ncclFloat8e4m3;
    case DType::F8E5M2:
        return ncclFloat8e5m2;
    default:
        return std::nullopt;
    }
}

ncclRedOp_t ncclOp(ReduceOp op)
{
    switch (op) {
    case ReduceOp::Sum:
        return ncclSum;
    case ReduceOp::Max:
        return ncclMax;
    case ReduceOp::Min:
        return ncclMin;
    case ReduceOp::Prod:
        return ncclProd;
    }
    return ncclSum;
}

class NcclCommunicator;

/// State shared by a world communicator and the groups split from it.
struct Shared {
    std::mutex mutex; ///< guards members
    comm::ObserverSlot observer;
    NcclOptions options;
    int worldRank = 0;
    /// Every communicator of the world on this rank, so that abort() stops them all.
    std::vector<std::weak_ptr<NcclCommunicator>> members;
};

class NcclCommunicator final : public comm::Communicator,
                               public std::enable_shared_from_this<NcclCommunicator> {
public:
    NcclCommunicator(
        ncclComm_t comm, cudaStream_t stream, std::string name, std::shared_ptr<Shared> shared)
        : m_comm(comm)
        , m_stream(stream)
        , m_name(std::move(name))
        , m_shared(std::move(shared))
    {
        ncclCommUserRank(m_comm, &m_rank);
        ncclCommCount(m_comm, &m_size);
    }

    ~NcclCommunicator() override
    {
        if (m_comm) {
            if (m_aborted) {
                ncclCommAbort(m_comm);
            } else {
                ncclCommDestroy(m_comm);
            }
        }
        if (m_barrierScratch) {
            cudaFree(m_barrierScratch);
        }
        cudaStreamDestroy(m_stream);
    }

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    std::string name() const override { return m_name; }
    [[nodiscard]] NcclStream stream() const { return { m_stream, m_shared->options.device }; }

    void setObserver(CollectiveObserver observer) override
    {
        m_shared->observer.set(std::move(observer));
    }

    void abort(const std::string& reason) override
    {
        std::fprintf(stderr, "day0: error: rank %d aborts NCCL communicator %s: %s\n",
            m_shared->worldRank, m_name.c_str(), reason.c_str());
        // The whole job failed: stop every group of this world on this rank, so that peers
        // waiting in any of them see the abort instead of their timeout.
        std::vector<std::shared_ptr<NcclCommunicator>> members;
        {
            std::lock_guard lock(m_shared->mutex);
            for (const auto& weak : m_shared->members) {
                if (auto member = weak.lock()) {
                    members.push_back(std::move(member));
                }
            }
        }
        for (const auto& member : members) {
            member->abortComm(reason);
        }
        abortComm(reason);
    }

    /// Registers this communicator with its world (after construction, for shared_from_this).
    void join()
    {
        std::lock_guard lock(m_shared->mutex);
        m_shared->members.push_back(weak_from_this());
    }

    Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        auto t = ncclType(type);
        DAY0_TRY(checkType(t, type));
        return collective(CollectiveKind::AllReduce, std::int64_t(count) * dtypeSize(type),
            [&] { return ncclAllReduce(send, recv, count, *t, ncclOp(op), m_comm, m_stream); });
    }

    Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        return collective(CollectiveKind::AllGather, std::int64_t(bytes),
            [&] { return ncclAllGather(send, recv, bytes, ncclUint8, m_comm, m_stream); });
    }

    Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override
    {
        auto t = ncclType(type);
        DAY0_TRY(checkType(t, type));
        return collective(CollectiveKind::ReduceScatter,
            std::int64_t(count) * m_size * dtypeSize(type),
            [&] { return ncclReduceScatter(send, recv, count, *t, ncclOp(op), m_comm, m_stream); });
    }

    Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) override
    {
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        const auto ranks = static_cast<std::size_t>(m_size);
        std::vector<std::size_t> counts(ranks, bytes);
        std::vector<std::size_t> displs(ranks);
        for (std::size_t r = 0; r < displs.size(); ++r) {
            displs[r] = r * bytes;
        }
        return exchange(send, counts, displs, recv, counts, displs, 1, CollectiveKind::AllToAll);
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
        return exchange(send, sendCounts, sendDispls, recv, recvCounts, recvDispls,
            std::size_t(dtypeSize(type)), CollectiveKind::AllToAllV);
    }

    Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) override
    {
        if (root < 0 || root >= m_size) {
            return Error::badInput(fmt::format(
                "{}: broadcast root {} is not a rank of {} ranks", m_name, root, m_size));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        return collective(CollectiveKind::Broadcast, m_rank == root ? std::int64_t(bytes) : 0, [&] {
            return ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, m_comm, m_stream);
        });
    }

    Result<void> barrier() override
    {
        // NCCL has no barrier: an all-reduce of one integer on the device serves.
        if (!m_barrierScratch) {
            if (cudaMalloc(&m_barrierScratch, sizeof(int)) != cudaSuccess) {
                return Error::internal(
                    fmt::format("{}: cannot allocate the barrier scratch on the device", m_name));
            }
        }
        return collective(CollectiveKind::Barrier, 0, [&] {
            return ncclAllReduce(
                m_barrierScratch, m_barrierScratch, 1, ncclInt32, ncclSum, m_comm, m_stream);
        });
    }

    Result<std::shared_ptr<comm::Communicator>> split(
        int color, int key, const std::string& groupName) override
    {
        ncclComm_t child = nullptr;
        DAY0_TRY(check(
            ncclCommSplit(m_comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr),
            "split"));
        if (!child) {
            return std::shared_ptr<comm::Communicator>();
        }
        cudaStream_t stream = nullptr;
        if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
            ncclCommDestroy(child);
            return Error::internal(
                fmt::format("{}: cannot create a CUDA stream for the split group", m_name));
        }
        const auto label = groupName.empty() ? fmt::format("{}.{}", m_name, color)
                                             : fmt::format("{}{}", groupName, color);
        auto group = std::make_shared<NcclCommunicator>(child, stream, label, m_shared);
        group->join();
        return std::shared_ptr<comm::Communicator>(std::move(group));
    }

    Result<void> send(const void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        // Stream-ordered: the send is enqueued and the call returns without waiting for the peer.
        // NCCL matches point-to-point calls by order per peer, not by tag; two ranks that both
        // send before they receive must pair up (even ranks send first, odd ranks receive first).
        (void)tag;
        if (peer < 0 || peer >= m_size || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot send to rank {}", m_name, m_rank, peer));
        }
        const auto start = steadyNowNs();
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        DAY0_TRY(check(ncclSend(buffer, bytes, ncclUint8, peer, m_comm, m_stream), "send"));
        record(CollectiveKind::Send, std::int64_t(bytes), start);
        return success();
    }

    Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag) override
    {
        (void)tag;
        if (peer < 0 || peer >= m_size || peer == m_rank) {
            return Error::badInput(
                fmt::format("{}: rank {} cannot receive from rank {}", m_name, m_rank, peer));
        }
        const std::size_t bytes = count * std::size_t(dtypeSize(type));
        return collective(CollectiveKind::Recv, std::int64_t(bytes),
            [&] { return ncclRecv(buffer, bytes, ncclUint8, peer, m_comm, m_stream); });
    }

private:
    /// Enqueues one call on the stream (`enqueue` returns NCCL's code), waits for it within the
    /// timeout and records it with `bytes`.
    template <typename Enqueue>
    Result<void> collective(CollectiveKind kind, std::int64_t bytes, const Enqueue& enqueue)
    {
        const std::string what = comm::collectiveName(kind);
        const auto start = steadyNowNs();
        DAY0_TRY(check(enqueue(), what.c_str()));
        DAY0_TRY(synchronize(what));
        record(kind, bytes, start);
        return success();
    }

    /// Aborts the NCCL communicator once; later calls fail naming the reason.
    void abortComm(const std::string& reason)
    {
        m_aborted = true;
        if (m_comm) {
            ncclCommAbort(m_comm);
            m_comm = nullptr;
            m_abortReason = reason;
        }
    }

    Result<void> check(ncclResult_t code, const char* what) const
    {
        if (!m_comm) {
            return Error::internal(fmt::format("{}: rank {}: NCCL {} after the communicator was "
                                               "aborted: {}",
                m_name, m_rank, what, m_abortReason));
        }
        if (code == ncclSuccess || code == ncclInProgress) {
            return success();
        }
        return Error::internal(fmt::format("{}: rank {}: NCCL {} failed: {} ({})", m_name, m_rank,
            what, ncclGetErrorString(code), ncclGetLastError(m_comm)));
    }

    Result<void> checkType(const std::optional<ncclDataType_t>& t, DType type) const
    {
        if (!t) {
            return Error::unsupported(
                fmt::format("{}: NCCL cannot reduce {}", m_name, dtypeName(type)));
        }
        return success();
    }

    /// Grouped send/recv pairs: the NCCL way to write all-to-all(v). Sizes are in elements of
    /// `elem` bytes.
    Result<void> exchange(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        std::size_t elem, CollectiveKind kind)
    {
        const auto start = steadyNowNs();
        std::int64_t sent = 0;
        DAY0_TRY(check(ncclGroupStart(), "group start"));
        for (int r = 0; r < m_size; ++r) {
            const auto i = std::size_t(r);
            ncclSend(static_cast<const std::byte*>(send) + sendDispls[i] * elem,
                sendCounts[i] * elem, ncclUint8, r, m_comm, m_stream);
            ncclRecv(static_cast<std::byte*>(recv) + recvDispls[i] * elem, recvCounts[i] * elem,
                ncclUint8, r, m_comm, m_stream);
            sent += std::int64_t(sendCounts[i] * elem);
        }
        DAY0_TRY(check(ncclGroupEnd(), comm::collectiveName(kind).c_str()));
        DAY0_TRY(synchronize(comm::collectiveName(kind)));
        record(kind, sent, start);
        return success();
    }

    /// Waits for the stream, watching NCCL's asynchronous errors and the timeout; a timeout aborts
    /// the communicator so that no rank waits forever.
    Result<void> synchronize(const std::string& what)
    {
        const auto deadline = Clock::now()
            + std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(m_shared->options.timeout.value));
        auto pause = std::chrono::microseconds(1);
        for (;;) {
            const auto status = cudaStreamQuery(m_stream);
            if (status == cudaSuccess) {
                return success();
            }
            if (status != cudaErrorNotReady) {
                return Error::internal(fmt::format("{}: rank {}: CUDA error in {}: {}", m_name,
                    m_rank, what, cudaGetErrorString(status)));
            }
            ncclResult_t async = ncclSuccess;
            ncclCommGetAsyncError(m_comm, &async);
            if (async != ncclSuccess && async != ncclInProgress) {
                m_aborted = true;
                return Error::internal(fmt::format("{}: rank {}: NCCL error in {}: {}", m_name,
                    m_rank, what, ncclGetErrorString(async)));
            }
            if (Clock::now() >= deadline) {
                abortComm(fmt::format("timed out in {}", what));
                return Error::checkFailed(
                    fmt::format("{}: rank {} timed out after {} in {}; communicator aborted",
                        m_name, m_rank, formatDuration(m_shared->options.timeout), what));
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }

    void record(CollectiveKind kind, std::int64_t bytes, std::int64_t start) const
    {
        m_shared->observer.notify(m_rank, m_shared->worldRank, kind, bytes, start, m_name);
    }

    ncclComm_t m_comm;
    cudaStream_t m_stream;
    std::string m_name;
    std::shared_ptr<Shared> m_shared;
    int m_rank = 0;
    int m_size = 1;
    bool m_aborted = false;
    std::string m_abortReason;
    void* m_barrierScratch = nullptr;
};

/// Makes `device` current, or says why it cannot be used. Every rank calls it before the id
/// rendezvous: on a machine without a usable device all ranks then fail at once, instead of
/// the others waiting for rank 0's id, or rank 0 waiting in ncclCommInitRank for them.
Result<void> useDevice(int device)
{
    if (auto reason = cudaUnavailableReason()) {
        return Error::unsupported(*reason);
    }
    if (const auto status = cudaSetDevice(device); status != cudaSuccess) {
        return Error::badInput(
            fmt::format("cannot use CUDA device {}: {}", device, cudaGetErrorString(status)));
    }
    return success();
}

Result<std::shared_ptr<comm::Communicator>> initialise(
    const ncclUniqueId& id, int rank, int size, const NcclOptions& options)
{
    cudaStream_t stream = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        return Error::internal("cannot create a CUDA stream for NCCL");
    }
    ncclComm_t comm = nullptr;
    if (const auto code = ncclCommInitRank(&comm, size, id, rank); code != ncclSuccess) {
        cudaStreamDestroy(stream);
        return Error::internal(
            fmt::format("rank {}: ncclCommInitRank over {} ranks failed: {} ({})", rank, size,
                ncclGetErrorString(code), ncclGetLastError(nullptr)));
    }
    auto shared = std::make_shared<Shared>();
    shared->options = options;
    shared->worldRank = rank;
    auto world = std::make_shared<NcclCommunicator>(comm, stream, "nccl", shared);
    world->join();
    return std::shared_ptr<comm::Communicator>(std::move(world));
}

} // namespace

std::optional<NcclStream> ncclStreamOf(const comm::Communicator& comm)
{
    if (const auto* nccl = dynamic_cast<const NcclCommunicator*>(&comm)) {
        return nccl->stream();
    }
    return std::nullopt;
}

std::optional<std::string> cudaUnavailableReason()
{
    int count = 0;
    const auto status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        return fmt::format("no CUDA device: cudaGetDeviceCount: {} ({})",
            cudaGetErrorString(status), cudaGetErrorName(status));
    }
    if (count == 0) {
        return std::string("no CUDA device: the driver reports no GPU");
    }
    return std::nullopt;
}

Result<std::shared_ptr<comm::Communicator>> createNcclCommunicator(
    comm::Communicator& bootstrap, const NcclOptions& options)
{
    DAY0_TRY(useDevice(options.device));
    ncclUniqueId id {};
    if (bootstrap.rank() == 0) {
        if (const auto code = ncclGetUniqueId(&id); code != ncclSuccess) {
            return Error::internal(
                fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(code)));
        }
    }
    DAY0_TRY(bootstrap.broadcast(&id, sizeof id, DType::U8, 0));
    return initialise(id, bootstrap.rank(), bootstrap.size(), options);
}

Result<std::shared_ptr<comm::Communicator>> createNcclCommunicatorFromFile(
    const std::filesystem::path& idFile, int rank, int size, const NcclOptions& options)
{
    if (rank < 0 || rank >= size) {
        return Error::badInput(
            fmt::format("NCCL bootstrap: rank {} is not in [0, {})", rank, size));
    }
    DAY0_TRY(useDevice(options.device));
    ncclUniqueId id {};
    if (rank == 0) {
        if (const auto code = ncclGetUniqueId(&id); code != ncclSuccess) {
            return Error::internal(
                fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(code)));
        }
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
        DAY0_TRY(publishBlob(idFile, std::vector<std::uint8_t>(bytes, bytes + sizeof id), size));
    } else {
        FileStoreOptions store;
        store.timeout = options.timeout;
        // An id file older than this process (less the launch skew a launcher may add) was left
        // by an earlier run: wait for rank 0 to replace it instead of joining a dead clique.
        store.notBefore = std::filesystem::file_time_type::clock::now()
            - std::chrono::duration_cast<std::filesystem::file_time_type::duration>(
                std::chrono::duration<double>(options.launchSkew.value));
        auto blob = waitForBlob(idFile, sizeof id, size, store);
        if (!blob) {
            return blob.error().withContext(fmt::format("NCCL bootstrap of rank {}", rank));
        }
        std::memcpy(&id, blob->data(), sizeof id);
    }
    return initialise(id, rank, size, options);
}

} // namespace day0::nccl
