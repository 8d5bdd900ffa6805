// A backend plugin that runs on the host, to test `day0 run --backend` end to end without a GPU:
// its own fp32 kernels (double accumulation, so its results differ from day0-cpu's in the last
// bits) for the operators its manifest declares; it declines emulated precisions and attention
// with a window or chunk (Unsupported), so those fall back to day0-cpu; it has no rope, router
// or permutation, so the engine never offers them. DAY0_HOSTSIM_FAIL=<op name> makes that
// operator fail like a lost device. DAY0_HOSTSIM_FLIP=MIN-MAX:WIDTH makes it batch-dependent, as a
// GEMM whose kernel changes with the row count: a linear of WIDTH outputs (the head) over MIN to
// MAX rows (a batched decode step, not a prefill of more rows) ranks each row's next output above
// its largest, so greedy picks move by one token.
#include "exec/backend.h"
#include "extend/plugin_api.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace day0;
using namespace day0::exec;

class HostSimBackend final : public Backend {
public:
    std::string name() const override { return "hostsim"; }
    std::string device() const override { return "host simulation (test plugin)"; }
    bool supports(BackendOp op) const override
    {
        switch (op) {
        case BackendOp::Embedding:
        case BackendOp::RmsNorm:
        case BackendOp::RmsNormResidual:
        case BackendOp::Linear:
        case BackendOp::AttentionPrefill:
        case BackendOp::AttentionDecode:
        case BackendOp::GatedActivation:
            return true;
        default:
            return false;
        }
    }
    std::string implementation(BackendOp op) const override
    {
        return fmt::format("hostsim {} (fp32, double accumulation)", backendOpName(op));
    }

    Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode) override
    {
        DAY0_TRY(check(BackendOp::Embedding, mode));
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || ids[i] >= vocab) {
                return Error::badInput(
                    fmt::format("hostsim embedding: id {} outside [0, {})", ids[i], vocab));
            }
            std::copy_n(table + ids[i] * dim, dim, out + std::int64_t(i) * dim);
        }
        return success();
    }

    Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps,
        PrecisionMode mode) override
    {
        DAY0_TRY(check(residual ? BackendOp::RmsNormResidual : BackendOp::RmsNorm, mode));
        std::vector<float> row(static_cast<std::size_t>(dim));
        for (std::int64_t r = 0; r < rows; ++r) {
            double squares = 0.0;
            for (std::int64_t c = 0; c < dim; ++c) {
                float v = x[r * dim + c];
                if (residual != nullptr) {
                    v += residual[r * dim + c];
                }
                row[std::size_t(c)] = v;
                squares += double(v) * v;
            }
            const double inv = 1.0 / std::sqrt(squares / double(dim) + eps);
            for (std::int64_t c = 0; c < dim; ++c) {
                if (residualOut != nullptr) {
                    residualOut[r * dim + c] = row[std::size_t(c)];
                }
                y[r * dim + c] = float(double(row[std::size_t(c)]) * inv * w[c]);
            }
        }
        return success();
    }

    Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling) override
    {
        DAY0_TRY(check(BackendOp::Linear, mode));
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t o = 0; o < out; ++o) {
                double sum = 0.0;
                for (std::int64_t i = 0; i < in; ++i) {
                    sum += double(x[r * in + i]) * w[o * in + i];
                }
                y[r * out + o] = float(sum);
            }
        }
        flipIfBatched(y, rows, out);
        return success();
    }

    Result<void> attention(const float* q, const float* k, const float* v, float* out,
        const AttentionShape& s, PrecisionMode mode) override
    {
        DAY0_TRY(
            check(s.queries == 1 ? BackendOp::AttentionDecode : BackendOp::AttentionPrefill, mode));
        if (s.window > 0 || s.chunk > 0 || !s.causal || s.headDim != s.valueDim || !s.sinks.empty()
            || !s.selectedKeys.empty()) {
            return Error::unsupported("hostsim attention: plain causal attention only");
        }
        const std::int64_t qStride = s.qStride > 0 ? s.qStride : s.heads * s.headDim;
        const std::int64_t kStride = s.kStride > 0 ? s.kStride : s.kvHeads * s.headDim;
        const std::int64_t vStride = s.vStride > 0 ? s.vStride : s.kvHeads * s.valueDim;
        const std::int64_t group = s.heads / s.kvHeads;
        std::vector<double> p(std::size_t(s.keys));
        for (std::int64_t i = 0; i < s.queries; ++i) {
            const std::int64_t last = s.keys - s.queries + i; // its own position
            for (std::int64_t h = 0; h < s.heads; ++h) {
                const float* qi = q + i * qStride + h * s.headDim;
                const std::int64_t kvh = h / group;
                double best = -INFINITY;
                for (std::int64_t j = 0; j <= last; ++j) {
                    const float* kj = k + j * kStride + kvh * s.headDim;
                    double dot = 0.0;
                    for (std::int64_t d = 0; d < s.headDim; ++d) {
                        dot += double(qi[d]) * kj[d];
                    }
                    p[std::size_t(j)] = dot * s.scale;
                    best = std::max(best, p[std::size_t(j)]);
                }
                double total = 0.0;
                for (std::int64_t j = 0; j <= last; ++j) {
                    p[std::size_t(j)] = std::exp(p[std::size_t(j)] - best);
                    total += p[std::size_t(j)];
                }
                float* o = out + (i * s.heads + h) * s.valueDim;
                for (std::int64_t d = 0; d < s.valueDim; ++d) {
                    double acc = 0.0;
                    for (std::int64_t j = 0; j <= last; ++j) {
                        acc += p[std::size_t(j)] * v[j * vStride + kvh * s.valueDim + d];
                    }
                    o[d] = float(acc / total);
                }
            }
        }
        return success();
    }

    Result<void> gatedActivation(
        float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode) override
    {
        DAY0_TRY(check(BackendOp::GatedActivation, mode));
        if (act != Activation::Silu) {
            return Error::unsupported("hostsim gated activation: SiLU only");
        }
        for (std::int64_t i = 0; i < n; ++i) {
            const double g = gate[i];
            gate[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
        }
        return success();
    }

private:
    /// DAY0_HOSTSIM_FLIP's batch dependence (see the top of the file).
    static void flipIfBatched(float* y, std::int64_t rows, std::int64_t out)
    {
        const char* flip = std::getenv("DAY0_HOSTSIM_FLIP");
        long long low = 0;
        long long high = 0;
        long long width = 0;
        if (flip == nullptr || std::sscanf(flip, "%lld-%lld:%lld", &low, &high, &width) != 3
            || rows < low || rows > high || out != width) {
            return;
        }
        for (std::int64_t r = 0; r < rows; ++r) {
            float* row = y + r * out;
            std::int64_t best = 0;
            for (std::int64_t o = 1; o < out; ++o) {
                best = row[o] > row[best] ? o : best;
            }
            row[(best + 1) % out] = row[best] + 1.0f;
        }
    }

    /// The injected failure, and the precisions this backend computes.
    Result<void> check(BackendOp op, PrecisionMode mode) const
    {
        if (const char* fail = std::getenv("DAY0_HOSTSIM_FAIL");
            fail && backendOpName(op) == fail) {
            return Error::internal(fmt::format("hostsim: {} failed (injected)", fail));
        }
        if (mode != PrecisionMode::F32) {
            return Error::unsupported(
                fmt::format("hostsim computes fp32 only, not {}", precisionName(mode)));
        }
        return success();
    }
};

void* create(const char*, char*, std::size_t)
{
    return new std::shared_ptr<Backend>(std::make_shared<HostSimBackend>());
}

void destroy(void* object) { delete static_cast<std::shared_ptr<Backend>*>(object); }

} // namespace

DAY0_DECLARE_PLUGIN("hostsim", "backend", "0.1", &create, &destroy)
