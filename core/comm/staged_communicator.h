#pragma once

#include "comm/communicator.h"

#include <cstddef>
#include <functional>
#include <memory>

namespace day0::comm {

/// Memory of another space (a GPU's) as seen from the host: what StagedCommunicator needs to
/// move a call's buffers in and out. One object per communicator, used from that communicator's
/// thread only. Copies must be ordered after the inner communicator's earlier calls on the same
/// memory (e.g. enqueued on its stream) and must have finished when they return, so the host
/// buffer may change and the device scratch may be reused at once.
class DeviceStaging {
public:
    virtual ~DeviceStaging() = default;

    /// Allocates `bytes` (> 0) of device memory. The error names the device and the size.
    virtual Result<void*> allocate(std::size_t bytes) = 0;
    /// Frees memory from allocate(); never fails.
    virtual void release(void* device) noexcept = 0;
    /// Copies `bytes` from the host to the device.
    virtual Result<void> copyToDevice(void* device, const void* host, std::size_t bytes) = 0;
    /// Copies `bytes` from the device to the host.
    virtual Result<void> copyToHost(void* host, const void* device, std::size_t bytes) = 0;
};

/// Makes the staging of a communicator whose buffers are device pointers: called once for the
/// wrapped communicator and once for every group split from it (a stream-ordered staging binds
/// to that group's stream).
using StagingFactory = std::function<Result<std::unique_ptr<DeviceStaging>>(Communicator& inner)>;

/// A Communicator on host buffers over one on device buffers (e.g. NCCL): every call copies its
/// host inputs into device scratch, runs the inner call there and copies the outputs back.
/// The scratch (one input and one output area) grows to the largest call and is then reused.
/// Rank, size, name, records (the inner communicator's), observer and abort pass through; groups
/// split from it are staged too. A failed copy aborts the inner communicator (so no other rank
/// waits for this one) and returns an error naming the group, the rank and the call.
/// Same threading as the inner communicator: calls on one object from one thread at a time.
class StagedCommunicator final : public Communicator {
public:
    /// Wraps `inner`, making its staging with `factory`.
    static Result<std::shared_ptr<Communicator>> create(
        std::shared_ptr<Communicator> inner, StagingFactory factory);

    StagedCommunicator(std::shared_ptr<Communicator> inner, StagingFactory factory,
        std::unique_ptr<DeviceStaging> staging);
    ~StagedCommunicator() override;
    StagedCommunicator(const StagedCommunicator&) = delete;
    StagedCommunicator& operator=(const StagedCommunicator&) = delete;

    [[nodiscard]] int rank() const override { return m_inner->rank(); }
    [[nodiscard]] int size() const override { return m_inner->size(); }
    [[nodiscard]] std::string name() const override { return m_inner->name(); }
    /// The wrapped device communicator.
    [[nodiscard]] Communicator& inner() const { return *m_inner; }

    Result<void> allReduce(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override;
    Result<void> allGather(const void* send, void* recv, std::size_t count, DType type) override;
    Result<void> reduceScatter(
        const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override;
    Result<void> allToAll(const void* send, void* recv, std::size_t count, DType type) override;
    Result<void> allToAllV(const void* send, const std::vector<std::size_t>& sendCounts,
        const std::vector<std::size_t>& sendDispls, void* recv,
        const std::vector<std::size_t>& recvCounts, const std::vector<std::size_t>& recvDispls,
        DType type) override;
    Result<void> broadcast(void* buffer, std::size_t count, DType type, int root) override;
    Result<void> send(
        const void* buffer, std::size_t count, DType type, int peer, int tag = 0) override;
    Result<void> recv(void* buffer, std::size_t count, DType type, int peer, int tag = 0) override;
    Result<void> barrier() override;
    Result<std::shared_ptr<Communicator>> split(
        int color, int key, const std::string& name) override;

    void setObserver(CollectiveObserver observer) override;
    void abort(const std::string& reason) override;

private:
    /// One growable device area.
    struct Scratch {
        void* data = nullptr;
        std::size_t capacity = 0;
    };

    /// Makes `scratch` hold at least `bytes`.
    Result<void> reserve(Scratch& scratch, std::size_t bytes, CollectiveKind kind);
    Result<void> toDevice(void* device, const void* host, std::size_t bytes, CollectiveKind kind);
    Result<void> toHost(void* host, const void* device, std::size_t bytes, CollectiveKind kind);
    /// Aborts the inner communicator with a staging failure and returns it with its context.
    Error fail(const Error& error, CollectiveKind kind);

    std::shared_ptr<Communicator> m_inner;
    StagingFactory m_factory;
    std::unique_ptr<DeviceStaging> m_staging;
    Scratch m_in;
    Scratch m_out;
};

} // namespace day0::comm
