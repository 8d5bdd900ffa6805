#include "comm/communicator.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace day0::comm {

namespace {

/// A request whose outcome is already known.
class FinishedRequest final : public Request {
public:
    explicit FinishedRequest(Result<void> outcome)
        : m_outcome(std::move(outcome))
    {
    }
    Result<void> wait() override { return m_outcome; }

private:
    Result<void> m_outcome;
};

template <typename T> void reduceTyped(T* acc, const T* in, std::size_t count, ReduceOp op)
{
    switch (op) {
    case ReduceOp::Sum:
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] += in[i];
        }
        break;
    case ReduceOp::Prod:
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] *= in[i];
        }
        break;
    case ReduceOp::Max:
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] = std::max(acc[i], in[i]);
        }
        break;
    case ReduceOp::Min:
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] = std::min(acc[i], in[i]);
        }
        break;
    }
}

} // namespace

std::string collectiveName(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce:
        return "all_reduce";
    case CollectiveKind::AllGather:
        return "all_gather";
    case CollectiveKind::ReduceScatter:
        return "reduce_scatter";
    case CollectiveKind::AllToAll:
        return "all_to_all";
    case CollectiveKind::AllToAllV:
        return "all_to_all_v";
    case CollectiveKind::Broadcast:
        return "broadcast";
    case CollectiveKind::Send:
        return "send";
    case CollectiveKind::Recv:
        return "recv";
    case CollectiveKind::Barrier:
        return "barrier";
    case CollectiveKind::Split:
        return "split";
    }
    return "unknown";
}

Result<void> reduceInto(void* acc, const void* in, std::size_t count, DType type, ReduceOp op)
{
    switch (type) {
    case DType::F32:
        reduceTyped(static_cast<float*>(acc), static_cast<const float*>(in), count, op);
        return success();
    case DType::F64:
        reduceTyped(static_cast<double*>(acc), static_cast<const double*>(in), count, op);
        return success();
    case DType::I32:
        reduceTyped(
            static_cast<std::int32_t*>(acc), static_cast<const std::int32_t*>(in), count, op);
        return success();
    case DType::I64:
        reduceTyped(
            static_cast<std::int64_t*>(acc), static_cast<const std::int64_t*>(in), count, op);
        return success();
    default:
        return Error::unsupported(fmt::format(
            "reduction over {} is not supported (F32, F64, I32, I64 are)", dtypeName(type)));
    }
}

std::unique_ptr<Request> Communicator::allReduceAsync(
    const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
{
    return std::make_unique<FinishedRequest>(allReduce(send, recv, count, type, op));
}

} // namespace day0::comm
