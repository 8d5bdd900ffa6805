#pragma once

#include "day0_kernels.h"
#include "device_pool.h"
#include "exec/backend.h"
#include "gemm_plan.h"
#include "resident_weights.h"
#include "tap_logic.h"

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace day0::cuda {

/// Why CUDA cannot run here ("no CUDA device: cudaGetDeviceCount: CUDA driver version is
/// insufficient ..."), or nullopt when device `device` exists.
std::optional<std::string> cudaUnavailableReason(int device = 0);

/// A tap read on the device: statistics always, the full tensor only when selected.
struct DeviceTap {
    numerics::TensorStats stats;
    std::optional<std::vector<float>> values;
};

/// The exec::Backend of one CUDA device: cuBLAS/cuBLASLt GEMMs and the kernels of kernels/, on
/// one stream, with device memory from a caching pool. Host buffers in and out (each call
/// uploads, runs and downloads, which is what opcheck measures); one thread at a time.
class CudaBackend final : public exec::Backend {
public:
    /// Opens `device`: errors start with "no CUDA device:" when there is no usable GPU. Weights
    /// stay resident on the device up to `weightCacheBytes` (default: half the free memory).
    static Result<std::unique_ptr<CudaBackend>> create(
        int device, std::optional<std::size_t> weightCacheBytes = std::nullopt);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    std::string device() const override { return m_description; }
    bool supports(exec::BackendOp op) const override;
    std::string implementation(exec::BackendOp op) const override;
    void releaseWeights() override;

    Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, exec::PrecisionMode mode) override;
    Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps,
        exec::PrecisionMode mode) override;
    Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, exec::PrecisionMode mode,
        exec::Fp8Scaling scaling) override;
    Result<void> rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
        std::span<const std::int64_t> positions, const exec::Rope& table,
        std::span<const std::int64_t> positions3, exec::PrecisionMode mode) override;
    Result<void> attention(const float* q, const float* k, const float* v, float* out,
        const exec::AttentionShape& shape, exec::PrecisionMode mode) override;
    Result<void> gatedActivation(float* gate, const float* up, std::int64_t n, exec::Activation act,
        exec::PrecisionMode mode) override;
    Result<exec::Routing> route(const float* logits, std::int64_t tokens,
        const exec::RouterConfig& config, const float* bias) override;
    Result<void> permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
        const exec::Routing& routing, std::int64_t numExperts, float* permuted,
        std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow) override;
    Result<void> dequantFp8Block(const std::uint8_t* bytes, const float* scales, std::int64_t rows,
        std::int64_t cols, std::int64_t block, float* out) override;

    /// Statistics of a device tensor computed on the device; the values are copied to the host
    /// only when `selection` asks for `capture`.
    Result<DeviceTap> tap(const std::string& capture, const void* data, kernels::Store store,
        std::int64_t count, const TapSelection& selection);

    [[nodiscard]] DevicePool& pool() { return *m_pool; }
    [[nodiscard]] const ResidentWeights& residentWeights() const { return *m_weights; }
    [[nodiscard]] cudaStream_t stream() const { return m_stream; }

    struct Handles;

private:
    CudaBackend() = default;

    /// A pool block released when it goes out of scope.
    class Buffer {
    public:
        Buffer(DevicePool* pool, void* p)
            : m_pool(pool)
            , m_p(p)
        {
        }
        Buffer(Buffer&& o) noexcept
            : m_pool(o.m_pool)
            , m_p(std::exchange(o.m_p, nullptr))
        {
        }
        Buffer(const Buffer&) = delete;
        Buffer& operator=(const Buffer&) = delete;
        Buffer& operator=(Buffer&&) = delete;
        ~Buffer()
        {
            if (m_p) {
                (void)m_pool->release(m_p);
            }
        }
        template <typename T = void> T* get() const { return static_cast<T*>(m_p); }
        /// Hands the block over (to the resident weights); the buffer no longer frees it.
        void* take() { return std::exchange(m_p, nullptr); }

    private:
        DevicePool* m_pool;
        void* m_p;
    };

    /// A weight on the device: its resident copy, or a temporary upload when it is larger than
    /// the whole cache.
    struct DeviceWeight {
        const void* p = nullptr;
        std::optional<Buffer> temporary;
    };
    Result<DeviceWeight> weightOnDevice(const float* host, std::int64_t n, kernels::Store store);
    Result<Buffer> alloc(std::size_t bytes);
    Result<Buffer> uploadBytes(const void* host, std::size_t bytes);
    /// Host floats → a device buffer in `store`.
    Result<Buffer> upload(const float* host, std::int64_t n, kernels::Store store);
    /// A device buffer in `store` → host floats; synchronises the stream.
    Result<void> download(const void* device, std::int64_t n, kernels::Store store, float* host);
    Result<void> check(cudaError_t status, const char* what) const;
    Result<void> synchronize(const char* what);
    Result<void> linearFp8(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, bool e5m2);

    int m_device = 0;
    int m_smMajor = 0;
    int m_smMinor = 0;
    std::string m_description;
    cudaStream_t m_stream = nullptr;
    std::unique_ptr<Handles> m_handles;
    std::unique_ptr<DevicePool> m_pool;
    std::unique_ptr<ResidentWeights> m_weights; ///< blocks of m_pool; destroyed before it
};

/// The activation store of a precision mode (bf16 for the fp8/int8 modes' activations).
kernels::Store storeFor(exec::PrecisionMode mode);

} // namespace day0::cuda
