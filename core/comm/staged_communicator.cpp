#include "comm/staged_communicator.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::comm {

namespace {

std::size_t bytesOf(std::size_t count, DType type) { return count * std::size_t(dtypeSize(type)); }

/// A run of elements that is contiguous both on the host and in the packed device area.
struct CopyRun {
    std::size_t host = 0; ///< element offset in the host buffer
    std::size_t device = 0; ///< element offset in the packed device area
    std::size_t count = 0;
};

/// The copies between the host blocks (counts[i] elements at displs[i]) and a device area that
/// holds them packed in rank order; neighbouring blocks (the usual prefix-sum layout) merge into
/// one copy. Host gaps between blocks are never touched.
std::vector<CopyRun> packedRuns(
    const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs)
{
    std::vector<CopyRun> runs;
    std::size_t packed = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (counts[i] == 0) {
            continue;
        }
        if (!runs.empty() && runs.back().host + runs.back().count == displs[i]) {
            runs.back().count += counts[i];
        } else {
            runs.push_back({ displs[i], packed, counts[i] });
        }
        packed += counts[i];
    }
    return runs;
}

/// Offsets of the blocks in the packed device area (prefix sums of counts).
std::vector<std::size_t> packedDispls(const std::vector<std::size_t>& counts)
{
    std::vector<std::size_t> displs(counts.size());
    std::size_t packed = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        displs[i] = packed;
        packed += counts[i];
    }
    return displs;
}

std::size_t total(const std::vector<std::size_t>& counts)
{
    std::size_t sum = 0;
    for (const auto c : counts) {
        sum += c;
    }
    return sum;
}

} // namespace

Result<std::shared_ptr<Communicator>> StagedCommunicator::create(
    std::shared_ptr<Communicator> inner, StagingFactory factory)
{
    if (!inner || !factory) {
        return Error::internal("a staged communicator needs an inner communicator and a staging");
    }
    auto staging = factory(*inner);
    if (!staging) {
        return staging.error().withContext(
            fmt::format("{}: rank {}: device staging", inner->name(), inner->rank()));
    }
    return std::shared_ptr<Communicator>(std::make_shared<StagedCommunicator>(
        std::move(inner), std::move(factory), std::move(*staging)));
}

StagedCommunicator::StagedCommunicator(std::shared_ptr<Communicator> inner, StagingFactory factory,
    std::unique_ptr<DeviceStaging> staging)
    : m_inner(std::move(inner))
    , m_factory(std::move(factory))
    , m_staging(std::move(staging))
{
}

StagedCommunicator::~StagedCommunicator()
{
    for (auto* scratch : { &m_in, &m_out }) {
        if (scratch->data) {
            m_staging->release(scratch->data);
        }
    }
}

Error StagedCommunicator::fail(const Error& error, CollectiveKind kind)
{
    const auto message = fmt::format("{}: rank {}: {}: {}", m_inner->name(), m_inner->rank(),
        collectiveName(kind), error.message);
    // The other ranks may already wait inside the call (or will, in the next one): abort so
    // they fail now instead of at their timeout.
    m_inner->abort(message);
    return { error.code, message };
}

Result<void> StagedCommunicator::reserve(Scratch& scratch, std::size_t bytes, CollectiveKind kind)
{
    // Zero-byte calls still enter the collective; they get a valid (unused) pointer.
    const std::size_t need = std::max<std::size_t>(bytes, 1);
    if (need <= scratch.capacity) {
        return success();
    }
    // Grow by half at least, so that slowly rising sizes do not reallocate on every call.
    constexpr std::size_t kAlign = 256;
    std::size_t capacity = std::max(need, scratch.capacity + scratch.capacity / 2);
    capacity = (capacity + kAlign - 1) / kAlign * kAlign;
    if (scratch.data) {
        m_staging->release(scratch.data);
        scratch = {};
    }
    auto data = m_staging->allocate(capacity);
    if (!data) {
        return fail(data.error(), kind);
    }
    scratch = { *data, capacity };
    return success();
}

Result<void> StagedCommunicator::toDevice(
    void* device, const void* host, std::size_t bytes, CollectiveKind kind)
{
    if (bytes == 0) {
        return success();
    }
    if (auto copied = m_staging->copyToDevice(device, host, bytes); !copied) {
        return fail(copied.error(), kind);
    }
    return success();
}

Result<void> StagedCommunicator::toHost(
    void* host, const void* device, std::size_t bytes, CollectiveKind kind)
{
    if (bytes == 0) {
        return success();
    }
    if (auto copied = m_staging->copyToHost(host, device, bytes); !copied) {
        return fail(copied.error(), kind);
    }
    return success();
}

Result<void> StagedCommunicator::allReduce(
    const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
{
    constexpr auto kKind = CollectiveKind::AllReduce;
    const auto bytes = bytesOf(count, type);
    DAY0_TRY(reserve(m_in, bytes, kKind));
    void* in = m_in.data;
    DAY0_TRY(toDevice(in, send, bytes, kKind));
    // In place on the host: in place on the device too (half the scratch, no extra traffic).
    void* out = in;
    if (send != recv) {
        DAY0_TRY(reserve(m_out, bytes, kKind));
        out = m_out.data;
    }
    DAY0_TRY(m_inner->allReduce(in, out, count, type, op));
    return toHost(recv, out, bytes, kKind);
}

Result<void> StagedCommunicator::allGather(
    const void* send, void* recv, std::size_t count, DType type)
{
    constexpr auto kKind = CollectiveKind::AllGather;
    const auto bytes = bytesOf(count, type);
    const auto gathered = bytes * std::size_t(size());
    DAY0_TRY(reserve(m_in, bytes, kKind));
    void* in = m_in.data;
    DAY0_TRY(reserve(m_out, gathered, kKind));
    void* out = m_out.data;
    // Separate areas, so a host `send` that lies inside `recv` is read before recv is written.
    DAY0_TRY(toDevice(in, send, bytes, kKind));
    DAY0_TRY(m_inner->allGather(in, out, count, type));
    return toHost(recv, out, gathered, kKind);
}

Result<void> StagedCommunicator::reduceScatter(
    const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
{
    constexpr auto kKind = CollectiveKind::ReduceScatter;
    const auto bytes = bytesOf(count, type);
    const auto full = bytes * std::size_t(size());
    DAY0_TRY(reserve(m_in, full, kKind));
    void* in = m_in.data;
    DAY0_TRY(reserve(m_out, bytes, kKind));
    void* out = m_out.data;
    DAY0_TRY(toDevice(in, send, full, kKind));
    DAY0_TRY(m_inner->reduceScatter(in, out, count, type, op));
    return toHost(recv, out, bytes, kKind);
}

Result<void> StagedCommunicator::allToAll(
    const void* send, void* recv, std::size_t count, DType type)
{
    constexpr auto kKind = CollectiveKind::AllToAll;
    const auto all = bytesOf(count, type) * std::size_t(size());
    DAY0_TRY(reserve(m_in, all, kKind));
    void* in = m_in.data;
    DAY0_TRY(reserve(m_out, all, kKind));
    void* out = m_out.data;
    DAY0_TRY(toDevice(in, send, all, kKind));
    DAY0_TRY(m_inner->allToAll(in, out, count, type));
    return toHost(recv, out, all, kKind);
}

Result<void> StagedCommunicator::allToAllV(const void* send,
    const std::vector<std::size_t>& sendCounts, const std::vector<std::size_t>& sendDispls,
    void* recv, const std::vector<std::size_t>& recvCounts,
    const std::vector<std::size_t>& recvDispls, DType type)
{
    constexpr auto kKind = CollectiveKind::AllToAllV;
    const auto n = std::size_t(size());
    if (sendCounts.size() != n || sendDispls.size() != n || recvCounts.size() != n
        || recvDispls.size() != n) {
        return fail(
            Error::badInput(
                fmt::format("needs {} counts and displacements per side, got {}/{} to send and "
                            "{}/{} to receive",
                    n, sendCounts.size(), sendDispls.size(), recvCounts.size(), recvDispls.size())),
            kKind);
    }
    // Both sides are packed on the device: only the blocks travel, and the host's gaps between
    // receive blocks stay as they were.
    const auto elem = std::size_t(dtypeSize(type));
    DAY0_TRY(reserve(m_in, total(sendCounts) * elem, kKind));
    void* in = m_in.data;
    DAY0_TRY(reserve(m_out, total(recvCounts) * elem, kKind));
    void* out = m_out.data;
    for (const auto& run : packedRuns(sendCounts, sendDispls)) {
        DAY0_TRY(toDevice(static_cast<std::byte*>(in) + run.device * elem,
            static_cast<const std::byte*>(send) + run.host * elem, run.count * elem, kKind));
    }
    DAY0_TRY(m_inner->allToAllV(
        in, sendCounts, packedDispls(sendCounts), out, recvCounts, packedDispls(recvCounts), type));
    for (const auto& run : packedRuns(recvCounts, recvDispls)) {
        DAY0_TRY(toHost(static_cast<std::byte*>(recv) + run.host * elem,
            static_cast<const std::byte*>(out) + run.device * elem, run.count * elem, kKind));
    }
    return success();
}

Result<void> StagedCommunicator::broadcast(void* buffer, std::size_t count, DType type, int root)
{
    constexpr auto kKind = CollectiveKind::Broadcast;
    const auto bytes = bytesOf(count, type);
    DAY0_TRY(reserve(m_in, bytes, kKind));
    void* data = m_in.data;
    // Only the root's data goes in and only the others' comes out.
    if (rank() == root) {
        DAY0_TRY(toDevice(data, buffer, bytes, kKind));
    }
    DAY0_TRY(m_inner->broadcast(data, count, type, root));
    if (rank() != root) {
        DAY0_TRY(toHost(buffer, data, bytes, kKind));
    }
    return success();
}

Result<void> StagedCommunicator::send(
    const void* buffer, std::size_t count, DType type, int peer, int tag)
{
    constexpr auto kKind = CollectiveKind::Send;
    const auto bytes = bytesOf(count, type);
    DAY0_TRY(reserve(m_in, bytes, kKind));
    void* data = m_in.data;
    DAY0_TRY(toDevice(data, buffer, bytes, kKind));
    // The inner send may still read the scratch after it returns; the staging's ordering rule
    // keeps the next copy into it behind the send.
    return m_inner->send(data, count, type, peer, tag);
}

Result<void> StagedCommunicator::recv(
    void* buffer, std::size_t count, DType type, int peer, int tag)
{
    constexpr auto kKind = CollectiveKind::Recv;
    const auto bytes = bytesOf(count, type);
    DAY0_TRY(reserve(m_out, bytes, kKind));
    void* data = m_out.data;
    DAY0_TRY(m_inner->recv(data, count, type, peer, tag));
    return toHost(buffer, data, bytes, kKind);
}

Result<void> StagedCommunicator::barrier() { return m_inner->barrier(); }

Result<std::shared_ptr<Communicator>> StagedCommunicator::split(
    int color, int key, const std::string& name)
{
    auto child = m_inner->split(color, key, name);
    if (!child) {
        return child.error();
    }
    if (!*child) {
        return std::shared_ptr<Communicator>();
    }
    return create(std::move(*child), m_factory);
}

void StagedCommunicator::setObserver(CollectiveObserver observer)
{
    m_inner->setObserver(std::move(observer));
}

void StagedCommunicator::abort(const std::string& reason) { m_inner->abort(reason); }

} // namespace day0::comm
