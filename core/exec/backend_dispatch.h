#pragma once

// Internal to core/exec: the float operators of a forward pass, computed on a compute backend
// (exec::Backend) when one is set, else on the CPU reference. An operator the backend does not
// implement, or declines for a shape (an Unsupported error), falls back to the CPU reference and
// is counted as such, so a run can say which of its operators ran where.

#include "base/result.h"
#include "exec/backend.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace day0::exec {

/// How one operator ran during a run on a backend.
struct DispatchRow {
    BackendOp op = BackendOp::Linear;
    std::int64_t nativeCalls = 0; ///< calls the backend computed
    std::int64_t fallbackCalls = 0; ///< calls computed by the CPU reference instead
    double nativeSeconds = 0.0; ///< wall time of the native calls (uploads and downloads included)
    double fallbackSeconds = 0.0;
    std::string implementation; ///< the backend's description of the op
    std::string fallbackReason; ///< why the first fallback happened ("not implemented by ...")
};

/// Where a run's operators ran: the backend, its device and one row per operator used.
struct DispatchReport {
    std::string backend; ///< "day0-cpu", "cuda"
    std::string device;
    std::vector<DispatchRow> ops; ///< in BackendOp order, only operators that were called
    /// Short notes on what the host did around the backend ("bias added on the host after the
    /// backend's GEMM").
    std::vector<std::string> notes;

    /// Calls the backend computed, over every operator.
    [[nodiscard]] std::int64_t nativeCalls() const;
    /// Calls that fell back to the CPU reference, over every operator.
    [[nodiscard]] std::int64_t fallbackCalls() const;
};

/// {"backend", "device", "ops": [{"op", "native_calls", "fallback_calls", "native_seconds",
/// "fallback_seconds", "implementation", "fallback_reason"}], "notes"}.
nlohmann::json dispatchJson(const DispatchReport& report);

/// One line per operator ("linear  native 212 calls (12.1 ms)  cuBLAS bf16 ..."), for terminals.
std::string formatDispatch(const DispatchReport& report);

namespace detail {

/// The float operators of one forward pass. Without a backend each operator is the CPU
/// reference's emulated kernel (bit for bit what the engine computes); with one, each call goes
/// to the backend first. A backend error other than Unsupported is kept (the first one) and the
/// operator is still computed on the CPU so the buffers stay defined; callers check error() at
/// their step boundaries and stop there.
class BackendDispatch {
public:
    explicit BackendDispatch(Backend* backend = nullptr);

    /// The first failure of the backend, naming it and the operator.
    [[nodiscard]] const std::optional<Error>& error() const { return m_error; }
    /// The report of every call so far (empty op list without a backend).
    [[nodiscard]] DispatchReport report() const;

    /// out[i, :] = table[ids[i], :], rounded to `mode`.
    Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode);
    /// y = rmsnorm(x) · w (emulatedRmsNorm); x may equal y.
    void rmsNorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t dim,
        double eps, PrecisionMode mode);
    /// residual <- round(residual + x); y = rmsnorm(residual) · w: the residual add of a decoder
    /// layer fused with the next norm, both in `mode`.
    void addRmsNorm(const float* x, float* residual, const float* w, float* y, std::int64_t rows,
        std::int64_t dim, double eps, PrecisionMode mode);
    /// y = x · wᵀ + bias (emulatedLinear); `w` already rounded for `mode`, `bias` may be null.
    void linear(const float* x, const float* w, const float* bias, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling);
    /// Rotates x[tokens, heads, headDim] in place, then rounds it to `mode`.
    void rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
        std::span<const std::int64_t> positions, const Rope& table,
        std::span<const std::int64_t> positions3, PrecisionMode mode);
    /// Causal attention with scores and probabilities rounded in `mode`, output rounded.
    void attention(const float* q, const float* k, const float* v, float* out,
        const AttentionShape& shape, PrecisionMode mode);
    /// gate <- act(gate) · up (emulatedGatedActivation).
    void gatedActivation(
        float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode);
    /// Top-k routing of float router logits; `bias` may be null.
    Routing route(
        const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias);
    /// Records, once, that the host computed an operator the Backend interface does not have
    /// (Nemotron-H's Mamba-2 convolution, scan and gated norm); nothing without a backend.
    void hostOnly(const std::string& what);
    /// Rows of x grouped by expert (see Backend::permuteTokens).
    void permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
        const Routing& routing, std::int64_t numExperts, std::vector<float>& permuted,
        std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow);

private:
    using Clock = std::chrono::steady_clock;
    /// True when the backend computed the op (and counted it); false when the caller computes
    /// the CPU fallback (counted by fellBack).
    template <typename Call> bool tryBackend(BackendOp op, Call&& call);
    void fellBack(BackendOp op, Clock::time_point started);

    /// The backend, released (releaseWeights) when the dispatch that used it ends; moving
    /// hands it over.
    class BackendRef {
    public:
        explicit BackendRef(Backend* backend = nullptr)
            : m_p(backend)
        {
        }
        BackendRef(BackendRef&& other) noexcept
            : m_p(std::exchange(other.m_p, nullptr))
        {
        }
        BackendRef& operator=(BackendRef&& other) noexcept
        {
            if (this != &other) {
                reset();
                m_p = std::exchange(other.m_p, nullptr);
            }
            return *this;
        }
        BackendRef(const BackendRef&) = delete;
        BackendRef& operator=(const BackendRef&) = delete;
        ~BackendRef() { reset(); }
        Backend* operator->() const { return m_p; }
        Backend& operator*() const { return *m_p; }
        bool operator==(std::nullptr_t) const { return m_p == nullptr; }

    private:
        void reset()
        {
            if (m_p != nullptr) {
                m_p->releaseWeights();
                m_p = nullptr;
            }
        }
        Backend* m_p;
    };

    BackendRef m_backend;
    std::array<DispatchRow, kBackendOpCount> m_rows {};
    std::string m_pendingReason; ///< the backend's Unsupported message of the current call
    std::vector<std::string> m_notes;
    std::optional<Error> m_error;
};

} // namespace detail

} // namespace day0::exec
