#pragma once

// A test backend: the CPU reference behind exec::Backend, which declines chosen operators
// (Unsupported, as a device backend does for a shape or mode it lacks), fails one like a lost
// device, leaves some undeclared, and counts the calls that reach it.

#include "exec/backend.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace day0::exec::testing {

class ScriptedBackend final : public Backend {
public:
    explicit ScriptedBackend(std::set<BackendOp> declined = {},
        std::optional<BackendOp> failing = std::nullopt, std::set<BackendOp> undeclared = {})
        : m_cpu(makeCpuBackend())
        , m_declined(std::move(declined))
        , m_failing(failing)
        , m_undeclared(std::move(undeclared))
    {
    }
    std::string name() const override { return "scripted"; }
    std::string device() const override { return "test device"; }
    bool supports(BackendOp op) const override { return !m_undeclared.contains(op); }
    std::string implementation(BackendOp op) const override
    {
        return fmt::format("scripted {}", backendOpName(op));
    }

    Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode) override
    {
        DAY0_TRY(gate(BackendOp::Embedding));
        return m_cpu->embedding(ids, table, vocab, dim, out, mode);
    }
    Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps,
        PrecisionMode mode) override
    {
        DAY0_TRY(gate(residual != nullptr ? BackendOp::RmsNormResidual : BackendOp::RmsNorm));
        return m_cpu->rmsNorm(x, residual, w, y, residualOut, rows, dim, eps, mode);
    }
    Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling) override
    {
        DAY0_TRY(gate(BackendOp::Linear));
        return m_cpu->linear(x, w, y, rows, in, out, mode, scaling);
    }
    Result<void> rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
        std::span<const std::int64_t> positions, const Rope& table,
        std::span<const std::int64_t> positions3, PrecisionMode mode) override
    {
        DAY0_TRY(gate(positions3.empty() ? BackendOp::Rope : BackendOp::RopeMulti));
        return m_cpu->rope(x, tokens, heads, headDim, positions, table, positions3, mode);
    }
    Result<void> attention(const float* q, const float* k, const float* v, float* out,
        const AttentionShape& shape, PrecisionMode mode) override
    {
        DAY0_TRY(gate(shape.headDim != shape.valueDim ? BackendOp::AttentionMla
                : shape.queries == 1                  ? BackendOp::AttentionDecode
                                                      : BackendOp::AttentionPrefill));
        return m_cpu->attention(q, k, v, out, shape, mode);
    }
    Result<void> gatedActivation(
        float* gate_, const float* up, std::int64_t n, Activation act, PrecisionMode mode) override
    {
        DAY0_TRY(gate(BackendOp::GatedActivation));
        return m_cpu->gatedActivation(gate_, up, n, act, mode);
    }
    Result<Routing> route(const float* logits, std::int64_t tokens, const RouterConfig& config,
        const float* bias) override
    {
        DAY0_TRY(gate(config.scoring == model::RouterScoring::Sigmoid ? BackendOp::RouterSigmoid
                                                                      : BackendOp::RouterSoftmax));
        return m_cpu->route(logits, tokens, config, bias);
    }
    Result<void> permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
        const Routing& routing, std::int64_t numExperts, float* permuted,
        std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow) override
    {
        DAY0_TRY(gate(BackendOp::MoePermute));
        return m_cpu->permuteTokens(
            x, tokens, dim, routing, numExperts, permuted, offsets, sourceRow);
    }

    void releaseWeights() override { ++releases; }

    std::map<BackendOp, int> calls; ///< calls that reached the backend, declined or not
    int releases = 0; ///< releaseWeights() calls

private:
    Result<void> gate(BackendOp op)
    {
        ++calls[op];
        if (m_failing == op) {
            return Error::internal("device lost");
        }
        if (m_declined.contains(op)) {
            return Error::unsupported(fmt::format("scripted declines {}", backendOpName(op)));
        }
        return success();
    }

    std::unique_ptr<Backend> m_cpu;
    std::set<BackendOp> m_declined;
    std::optional<BackendOp> m_failing;
    std::set<BackendOp> m_undeclared;
};

} // namespace day0::exec::testing
