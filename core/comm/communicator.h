#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "base/units.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace day0::comm {

/// Element-wise reduction of a collective.
enum class ReduceOp { Sum, Max, Min, Prod };

/// The kind of a communication call, for records and error messages.
enum class CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    AllToAllV,
    Broadcast,
    Send,
    Recv,
    Barrier,
    Split,
};

/// "all_reduce", "all_gather", ... (NCCL-style names, as traces show them).
std::string collectiveName(CollectiveKind kind);

/// One finished communication call as seen by one rank: what the trace and the measured-vs-model
/// table are built from.
struct CollectiveRecord {
    int rank = 0; ///< rank in the communicator that ran it
    int worldRank = 0; ///< rank in the world communicator
    CollectiveKind kind = CollectiveKind::Barrier;
    std::int64_t bytes = 0; ///< payload this rank contributed (send side)
    std::int64_t startNs = 0; ///< steady-clock time the call began
    std::int64_t endNs = 0;
    std::string group; ///< communicator name ("world", "tp0", ...)
};

/// Receives a record after every call; must be thread-safe (ranks may run on several threads).
using CollectiveObserver = std::function<void(const CollectiveRecord&)>;

/// A completion handle for an asynchronous call.
class Request {
public:
    virtual ~Request() = default;
    /// Blocks until the call finished; returns its outcome.
    virtual Result<void> wait() = 0;
};

/// Collective and point-to-point communication among the ranks of a group. One object per rank;
/// calls on one object come from one thread at a time. Buffers are typed by DType; reductions
/// support F32, F64, I32 and I64. Every call either completes on all ranks or fails on all with an
/// error that names the rank and the call (a rank that fails or hangs stops the others within the
/// communicator's timeout).
class Communicator {
public:
    virtual ~Communicator() = default;

    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    /// Name for records and messages ("world", "tp0", ...).
    [[nodiscard]] virtual std::string name() const = 0;

    /// recv[i] = op over ranks of send[i]; send may equal recv (in place).
    virtual Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
        = 0;
    /// recv = concat over ranks of send (count elements each; recv holds size()*count).
    virtual Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) = 0;
    /// recv = slice rank() (count elements) of the reduction of send (size()*count elements).
    virtual Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
        = 0;
    /// Block j of send (count elements) goes to rank j; block i of recv comes from rank i.
    virtual Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) = 0;
    /// Variable-size all-to-all: counts and displacements in elements, one per rank.
    virtual Result<void> allToAllV(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        DType type)
        = 0;
    /// Copies root's buffer to every rank.
    virtual Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) = 0;
    /// Sends to `peer`; matched by (source, tag) on the receiver. Does not wait for the receiver.
    virtual Result<void> send(
        const void* buffer, std::size_t count, DType type, int peer, int tag = 0)
        = 0;
    /// Receives exactly `count` elements from `peer` with `tag`.
    virtual Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag = 0)
        = 0;
    /// Waits until every rank arrived.
    virtual Result<void> barrier() = 0;
    /// Collective: ranks with the same `color` form a new communicator, ordered by (key, rank).
    /// A negative color returns nullptr (the rank joins no group). `name` labels the new group.
    virtual Result<std::shared_ptr<Communicator>> split(int color, int key, const std::string& name)
        = 0;

    /// How many processes of this job run on this rank's node, as the transport knows it (MPI:
    /// the size of MPI_COMM_TYPE_SHARED of the world); nullopt where it cannot tell (the
    /// default).
    [[nodiscard]] virtual std::optional<int> processesOnThisNode() const { return std::nullopt; }

    /// Asynchronous all-reduce; the default runs it at once and returns a finished request.
    virtual std::unique_ptr<Request> allReduceAsync(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op);

    /// Installs an observer called after every call on this communicator (and groups split from
    /// it).
    virtual void setObserver(CollectiveObserver observer) = 0;

    /// Marks the job failed with `reason`: every pending and later call on every rank returns an
    /// error naming this rank and the reason, instead of waiting forever.
    virtual void abort(const std::string& reason) = 0;
};

/// Applies `op` element-wise: acc[i] = op(acc[i], in[i]). Unsupported types return an error.
Result<void> reduceInto(void* acc, const void* in, std::size_t count, DType type, ReduceOp op);

} // namespace day0::comm
