// The CPU reference behind the Backend interface: the engine's float kernels with the rounding
// of the target precision emulated, as `day0 run` computes them.
#include "exec/backend.h"
#include "exec/emulated_ops.h"
#include "numerics/dtype_convert.h"

#include <fmt/format.h>

namespace day0::exec {

namespace {

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "day0-cpu"; }
    std::string device() const override { return "host CPU (OpenBLAS)"; }
    bool supports(BackendOp) const override { return true; }
    std::string implementation(BackendOp op) const override
    {
        return op == BackendOp::Linear ? "native (OpenBLAS GEMM)" : "native";
    }

    Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode) override
    {
        DAY0_TRY(exec::embedding<float>(ids, table, vocab, dim, out));
        roundActivations({ out, std::size_t(std::int64_t(ids.size()) * dim) }, mode);
        return success();
    }

    Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps,
        PrecisionMode mode) override
    {
        const auto n = std::size_t(rows * dim);
        if (residual == nullptr) {
            emulatedRmsNorm(x, w, y, rows, dim, eps, mode);
            return success();
        }
        std::vector<float> sum(x, x + n);
        addInPlace<float>(sum.data(), residual, std::int64_t(n));
        roundActivations(sum, mode);
        if (residualOut != nullptr) {
            std::copy(sum.begin(), sum.end(), residualOut);
        }
        emulatedRmsNorm(sum.data(), w, y, rows, dim, eps, mode);
        return success();
    }

    Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling) override
    {
        emulatedLinear(x, w, nullptr, y, rows, in, out, mode, scaling);
        return success();
    }

    Result<void> rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
        std::span<const std::int64_t> positions, const Rope& table,
        std::span<const std::int64_t> positions3, PrecisionMode mode) override
    {
        emulatedRope(x, tokens, heads, headDim, positions, table, positions3, mode);
        return success();
    }

    Result<void> attention(const float* q, const float* k, const float* v, float* out,
        const AttentionShape& shape, PrecisionMode mode) override
    {
        emulatedAttention(q, k, v, out, shape, mode);
        return success();
    }

    Result<void> gatedActivation(
        float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode) override
    {
        emulatedGatedActivation(gate, up, n, act, mode);
        return success();
    }

    Result<Routing> route(const float* logits, std::int64_t tokens, const RouterConfig& config,
        const float* bias) override
    {
        return routeFloat(logits, tokens, config, bias);
    }

    Result<void> permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
        const Routing& routing, std::int64_t numExperts, float* permuted,
        std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow) override
    {
        return permuteRows(x, tokens, dim, routing, numExperts, permuted, offsets, sourceRow);
    }

    Result<void> dequantFp8Block(const std::uint8_t* bytes, const float* scales, std::int64_t rows,
        std::int64_t cols, std::int64_t block, float* out) override
    {
        if (block <= 0) {
            return Error::badInput("dequantFp8Block: block size must be positive");
        }
        const std::int64_t blockCols = (cols + block - 1) / block;
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const float s = scales[(r / block) * blockCols + c / block];
                out[r * cols + c] = numerics::e4m3ToFloat(bytes[r * cols + c]) * s;
            }
        }
        return success();
    }
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace day0::exec
