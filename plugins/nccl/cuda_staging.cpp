#include "cuda_staging.h"

#include "nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace day0::nccl {

namespace {

using Clock = std::chrono::steady_clock;

std::string cudaFailure(const char* call, cudaError_t status)
{
    return fmt::format(
        "{} failed: {} ({})", call, cudaGetErrorString(status), cudaGetErrorName(status));
}

/// DeviceStaging on one NCCL communicator's stream and device.
class CudaStaging final : public comm::DeviceStaging {
public:
    CudaStaging(NcclStream stream, Seconds timeout)
        : m_stream(stream)
        , m_timeout(timeout)
    {
    }

    Result<void*> allocate(std::size_t bytes) override
    {
        if (const auto status = cudaSetDevice(m_stream.device); status != cudaSuccess) {
            return Error::internal(cudaFailure("cudaSetDevice", status));
        }
        void* p = nullptr;
        // Stream-ordered: no device-wide synchronisation (cudaMalloc/cudaFree would wait for a
        // pending send whose receiver may itself be waiting for this rank).
        if (const auto status = cudaMallocAsync(&p, bytes, m_stream.stream);
            status != cudaSuccess) {
            return Error::internal(fmt::format("device {}: {} of {}", m_stream.device,
                cudaFailure("cudaMallocAsync", status), formatBytes(Bytes(std::int64_t(bytes)))));
        }
        return p;
    }

    void release(void* device) noexcept override { cudaFreeAsync(device, m_stream.stream); }

    Result<void> copyToDevice(void* device, const void* host, std::size_t bytes) override
    {
        if (const auto status
            = cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, m_stream.stream);
            status != cudaSuccess) {
            return Error::internal(cudaFailure("cudaMemcpyAsync (host to device)", status));
        }
        // The caller may change its host buffer as soon as this returns.
        return wait("cudaMemcpyAsync (host to device)", bytes);
    }

    Result<void> copyToHost(void* host, const void* device, std::size_t bytes) override
    {
        if (const auto status
            = cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, m_stream.stream);
            status != cudaSuccess) {
            return Error::internal(cudaFailure("cudaMemcpyAsync (device to host)", status));
        }
        return wait("cudaMemcpyAsync (device to host)", bytes);
    }

private:
    /// Polls the stream until the copy (and what was queued before it) finished, or the timeout.
    Result<void> wait(const char* call, std::size_t bytes) const
    {
        const auto deadline = Clock::now()
            + std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(m_timeout.value));
        auto pause = std::chrono::microseconds(1);
        for (;;) {
            const auto status = cudaStreamQuery(m_stream.stream);
            if (status == cudaSuccess) {
                return success();
            }
            if (status != cudaErrorNotReady) {
                return Error::internal(
                    fmt::format("{} of {}: {}", call, formatBytes(Bytes(std::int64_t(bytes))),
                        cudaFailure("cudaStreamQuery", status)));
            }
            if (Clock::now() >= deadline) {
                return Error::checkFailed(fmt::format(
                    "{} of {} did not finish within {} (an earlier call on the stream is still "
                    "waiting for its peer)",
                    call, formatBytes(Bytes(std::int64_t(bytes))), formatDuration(m_timeout)));
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(500));
        }
    }

    NcclStream m_stream;
    Seconds m_timeout;
};

} // namespace

comm::StagingFactory cudaStagingFactory(Seconds timeout)
{
    return [timeout](comm::Communicator& inner) -> Result<std::unique_ptr<comm::DeviceStaging>> {
        const auto stream = ncclStreamOf(inner);
        if (!stream) {
            return Error::internal(fmt::format(
                "{} is not an NCCL communicator; CUDA staging needs its stream", inner.name()));
        }
        return std::unique_ptr<comm::DeviceStaging>(
            std::make_unique<CudaStaging>(*stream, timeout));
    };
}

Result<std::shared_ptr<comm::Communicator>> stageOnHost(
    std::shared_ptr<comm::Communicator> nccl, Seconds timeout)
{
    return comm::StagedCommunicator::create(std::move(nccl), cudaStagingFactory(timeout));
}

} // namespace day0::nccl
