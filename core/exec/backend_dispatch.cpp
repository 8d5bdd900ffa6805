#include "exec/backend_dispatch.h"

#include "base/units.h"
#include "exec/emulated_ops.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace day0::exec {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

BackendOp attentionOp(const AttentionShape& shape)
{
    if (shape.headDim != shape.valueDim) {
        return BackendOp::AttentionMla;
    }
    return shape.queries == 1 ? BackendOp::AttentionDecode : BackendOp::AttentionPrefill;
}

} // namespace

nlohmann::json dispatchJson(const DispatchReport& report)
{
    nlohmann::json ops = nlohmann::json::array();
    for (const DispatchRow& row : report.ops) {
        ops.push_back({ { "op", backendOpName(row.op) }, { "native_calls", row.nativeCalls },
            { "fallback_calls", row.fallbackCalls }, { "native_seconds", row.nativeSeconds },
            { "fallback_seconds", row.fallbackSeconds }, { "implementation", row.implementation },
            { "fallback_reason", row.fallbackReason } });
    }
    return { { "backend", report.backend }, { "device", report.device }, { "ops", ops },
        { "notes", report.notes } };
}

std::int64_t DispatchReport::nativeCalls() const
{
    std::int64_t n = 0;
    for (const DispatchRow& row : ops) {
        n += row.nativeCalls;
    }
    return n;
}

std::int64_t DispatchReport::fallbackCalls() const
{
    std::int64_t n = 0;
    for (const DispatchRow& row : ops) {
        n += row.fallbackCalls;
    }
    return n;
}

std::string formatDispatch(const DispatchReport& report)
{
    std::string out = fmt::format("backend {} ({}): {} operator calls native, {} on day0-cpu\n",
        report.backend, report.device, report.nativeCalls(), report.fallbackCalls());
    for (const DispatchRow& row : report.ops) {
        std::string where;
        if (row.nativeCalls > 0) {
            where = fmt::format("native {} × ({}; {})", row.nativeCalls,
                formatDuration(Seconds(row.nativeSeconds)), row.implementation);
        }
        if (row.fallbackCalls > 0) {
            where += fmt::format("{}day0-cpu {} × ({}): {}", where.empty() ? "" : "; ",
                row.fallbackCalls, formatDuration(Seconds(row.fallbackSeconds)),
                row.fallbackReason);
        }
        out += fmt::format("  {:<20} {}\n", backendOpName(row.op), where);
    }
    for (const std::string& note : report.notes) {
        out += fmt::format("  note: {}\n", note);
    }
    return out;
}

namespace detail {

BackendDispatch::BackendDispatch(Backend* backend)
    : m_backend(backend)
{
    for (const BackendOp op : allBackendOps()) {
        m_rows[std::size_t(op)].op = op;
    }
}

template <typename Call> bool BackendDispatch::tryBackend(BackendOp op, Call&& call)
{
    m_pendingReason.clear();
    if (m_backend == nullptr) {
        return false;
    }
    if (!m_backend->supports(op)) {
        m_pendingReason = fmt::format("not implemented by {}", m_backend->name());
        return false;
    }
    const auto started = Clock::now();
    Result<void> done = call(*m_backend);
    if (done) {
        DispatchRow& row = m_rows[std::size_t(op)];
        ++row.nativeCalls;
        row.nativeSeconds += secondsSince(started);
        if (row.implementation.empty()) {
            row.implementation = m_backend->implementation(op);
        }
        return true;
    }
    if (done.error().code == ErrorCode::Unsupported) {
        m_pendingReason = done.error().message; // declined for this shape: the CPU computes it
        return false;
    }
    m_pendingReason = "the backend failed";
    if (!m_error) {
        m_error = done.error().withContext(
            fmt::format("backend {}: {}", m_backend->name(), backendOpName(op)));
    }
    return false;
}

void BackendDispatch::fellBack(BackendOp op, Clock::time_point started)
{
    if (m_backend == nullptr) {
        return;
    }
    DispatchRow& row = m_rows[std::size_t(op)];
    ++row.fallbackCalls;
    row.fallbackSeconds += secondsSince(started);
    if (row.fallbackReason.empty()) {
        row.fallbackReason = m_pendingReason;
    }
}

void BackendDispatch::hostOnly(const std::string& what)
{
    if (m_backend == nullptr) {
        return;
    }
    const std::string note
        = fmt::format("{} computed on the host CPU (not a backend operator)", what);
    if (std::find(m_notes.begin(), m_notes.end(), note) == m_notes.end()) {
        m_notes.push_back(note);
    }
}

DispatchReport BackendDispatch::report() const
{
    DispatchReport r;
    if (m_backend == nullptr) {
        const auto cpu = makeCpuBackend();
        r.backend = cpu->name();
        r.device = cpu->device();
        return r;
    }
    r.backend = m_backend->name();
    r.device = m_backend->device();
    for (const DispatchRow& row : m_rows) {
        if (row.nativeCalls + row.fallbackCalls > 0) {
            r.ops.push_back(row);
        }
    }
    r.notes = m_notes;
    return r;
}

Result<void> BackendDispatch::embedding(std::span<const std::int64_t> ids, const float* table,
    std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode)
{
    if (tryBackend(BackendOp::Embedding,
            [&](Backend& b) { return b.embedding(ids, table, vocab, dim, out, mode); })) {
        return success();
    }
    const auto started = Clock::now();
    DAY0_TRY(exec::embedding<float>(ids, table, vocab, dim, out));
    roundActivations({ out, ids.size() * std::size_t(dim) }, mode);
    fellBack(BackendOp::Embedding, started);
    return success();
}

void BackendDispatch::rmsNorm(const float* x, const float* w, float* y, std::int64_t rows,
    std::int64_t dim, double eps, PrecisionMode mode)
{
    if (tryBackend(BackendOp::RmsNorm, [&](Backend& b) {
            return b.rmsNorm(x, nullptr, w, y, nullptr, rows, dim, eps, mode);
        })) {
        return;
    }
    const auto started = Clock::now();
    emulatedRmsNorm(x, w, y, rows, dim, eps, mode);
    fellBack(BackendOp::RmsNorm, started);
}

void BackendDispatch::addRmsNorm(const float* x, float* residual, const float* w, float* y,
    std::int64_t rows, std::int64_t dim, double eps, PrecisionMode mode)
{
    if (tryBackend(BackendOp::RmsNormResidual, [&](Backend& b) {
            return b.rmsNorm(x, residual, w, y, residual, rows, dim, eps, mode);
        })) {
        return;
    }
    const auto started = Clock::now();
    addInPlace(residual, x, rows * dim);
    roundActivations({ residual, std::size_t(rows * dim) }, mode);
    emulatedRmsNorm(residual, w, y, rows, dim, eps, mode);
    fellBack(BackendOp::RmsNormResidual, started);
}

void BackendDispatch::linear(const float* x, const float* w, const float* bias, float* y,
    std::int64_t rows, std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling)
{
    if (tryBackend(BackendOp::Linear,
            [&](Backend& b) { return b.linear(x, w, y, rows, in, out, mode, scaling); })) {
        if (bias != nullptr) {
            // The interface's GEMM has no bias epilogue: the rounded bias is added here, so in
            // an emulated precision the output is rounded twice (at most one unit apart).
            std::vector<float> b(bias, bias + out);
            roundActivations(b, mode);
            for (std::int64_t r = 0; r < rows; ++r) {
                addInPlace(y + r * out, b.data(), out);
            }
            roundActivations({ y, std::size_t(rows * out) }, mode);
            const std::string note = "linear bias added on the host after the backend's GEMM";
            if (std::find(m_notes.begin(), m_notes.end(), note) == m_notes.end()) {
                m_notes.push_back(note);
            }
        }
        return;
    }
    const auto started = Clock::now();
    emulatedLinear(x, w, bias, y, rows, in, out, mode, scaling);
    fellBack(BackendOp::Linear, started);
}

void BackendDispatch::rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& table,
    std::span<const std::int64_t> positions3, PrecisionMode mode)
{
    const BackendOp op = positions3.empty() ? BackendOp::Rope : BackendOp::RopeMulti;
    if (tryBackend(op, [&](Backend& b) {
            return b.rope(x, tokens, heads, headDim, positions, table, positions3, mode);
        })) {
        return;
    }
    const auto started = Clock::now();
    emulatedRope(x, tokens, heads, headDim, positions, table, positions3, mode);
    fellBack(op, started);
}

void BackendDispatch::attention(const float* q, const float* k, const float* v, float* out,
    const AttentionShape& shape, PrecisionMode mode)
{
    const BackendOp op = attentionOp(shape);
    if (tryBackend(op, [&](Backend& b) { return b.attention(q, k, v, out, shape, mode); })) {
        return;
    }
    const auto started = Clock::now();
    emulatedAttention(q, k, v, out, shape, mode);
    fellBack(op, started);
}

void BackendDispatch::gatedActivation(
    float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode)
{
    if (tryBackend(BackendOp::GatedActivation,
            [&](Backend& b) { return b.gatedActivation(gate, up, n, act, mode); })) {
        return;
    }
    const auto started = Clock::now();
    emulatedGatedActivation(gate, up, n, act, mode);
    fellBack(BackendOp::GatedActivation, started);
}

Routing BackendDispatch::route(
    const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias)
{
    const BackendOp op = config.scoring == model::RouterScoring::Sigmoid ? BackendOp::RouterSigmoid
                                                                         : BackendOp::RouterSoftmax;
    Routing routing;
    if (tryBackend(op, [&](Backend& b) -> Result<void> {
            auto r = b.route(logits, tokens, config, bias);
            if (!r) {
                return r.error();
            }
            routing = std::move(*r);
            return success();
        })) {
        return routing;
    }
    const auto started = Clock::now();
    routing = routeFloat(logits, tokens, config, bias);
    fellBack(op, started);
    return routing;
}

void BackendDispatch::permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
    const Routing& routing, std::int64_t numExperts, std::vector<float>& permuted,
    std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow)
{
    permuted.resize(routing.experts.size() * std::size_t(dim));
    if (tryBackend(BackendOp::MoePermute, [&](Backend& b) {
            return b.permuteTokens(
                x, tokens, dim, routing, numExperts, permuted.data(), offsets, sourceRow);
        })) {
        return;
    }
    const auto started = Clock::now();
    auto done
        = permuteRows(x, tokens, dim, routing, numExperts, permuted.data(), offsets, sourceRow);
    if (!done && !m_error) {
        m_error = done.error();
    }
    fellBack(BackendOp::MoePermute, started);
}

} // namespace detail

} // namespace day0::exec
