#pragma once

#include "base/result.h"
#include "exec/attention.h"
#include "exec/ops.h"
#include "exec/precision.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "model/model_spec.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace day0::exec {

/// The operators a backend may implement. A backend declares the ones it runs natively; every
/// other one falls back to the CPU reference (day0-cpu).
enum class BackendOp {
    Embedding, ///< "embedding": row gather
    RmsNorm, ///< "rms_norm"
    RmsNormResidual, ///< "rms_norm_residual": residual add fused into the norm
    Linear, ///< "linear": GEMM with the HF [out, in] weight layout
    Rope, ///< "rope": default, linear, dynamic, llama3, YaRN; rotate-half or interleaved pairs
    RopeMulti, ///< "rope_mrope": multimodal (t, h, w) rotary positions
    AttentionPrefill, ///< "attention_prefill": causal MHA/GQA/MQA over many queries
    AttentionDecode, ///< "attention_decode": one query per sequence over a KV cache
    AttentionMla, ///< "attention_mla": multi-head latent attention (q/k width ≠ v width)
    GatedActivation, ///< "gated_activation": SwiGLU / GeGLU
    RouterSoftmax, ///< "router_softmax": softmax top-k routing
    RouterSigmoid, ///< "router_sigmoid_group": sigmoid + bias, group-limited top-k
    MoePermute, ///< "moe_permute": tokens grouped by expert
    Fp8BlockDequant, ///< "fp8_block_dequant": e4m3 weights with 128×128 block scales
};

/// How many BackendOps there are.
inline constexpr std::size_t kBackendOpCount = 14;

/// Every BackendOp, in declaration order.
std::span<const BackendOp> allBackendOps();
/// The op's stable name ("rms_norm_residual"), as plugin manifests list it.
std::string_view backendOpName(BackendOp op);
/// The BackendOp with this name, if any.
std::optional<BackendOp> backendOpFromName(std::string_view name);

/// A compute backend: the operators of the engine on host buffers, computed on the backend's
/// device in the given precision (inputs are already rounded to it; outputs come back as float).
/// Operators a backend does not implement return an Unsupported error naming it, so a caller can
/// fall back to the CPU reference. A backend is used from one thread at a time.
///
/// Weights (linear's `w`, the norms' `w`, the embedding table) are host buffers that stay
/// unchanged at the same address until releaseWeights(): a backend may keep device copies of
/// them keyed by address and size, and must drop them there. The engine releases them when the
/// forward pass that owns its rounded weights ends.
class Backend {
public:
    virtual ~Backend();

    /// "day0-cpu", "cuda".
    [[nodiscard]] virtual std::string name() const = 0;
    /// The device it runs on, in words ("NVIDIA H200, sm_90, 139.8 GiB").
    [[nodiscard]] virtual std::string device() const = 0;
    /// True when `op` runs natively on this backend.
    [[nodiscard]] virtual bool supports(BackendOp op) const = 0;
    /// How `op` is implemented ("native (cuBLAS bf16, fp32 accumulate)").
    [[nodiscard]] virtual std::string implementation(BackendOp op) const;
    /// The weights passed so far may change or be freed from now on: drop any device copies.
    virtual void releaseWeights();

    /// out[i, :] = table[ids[i], :].
    virtual Result<void> embedding(std::span<const std::int64_t> ids, const float* table,
        std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode);
    /// y = rmsnorm(x + residual) · w; when `residual` is given, the sum is also written to
    /// `residualOut` (the next residual stream). `residual`/`residualOut` may be null.
    virtual Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps, PrecisionMode mode);
    /// y[rows, out] = x[rows, in] · w[out, in]ᵀ; `w` is already rounded for `mode`.
    virtual Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling);
    /// Rotates x[tokens, heads, headDim] in place (see applyRope; `positions3` for M-RoPE).
    virtual Result<void> rope(float* x, std::int64_t tokens, std::int64_t heads,
        std::int64_t headDim, std::span<const std::int64_t> positions, const Rope& table,
        std::span<const std::int64_t> positions3, PrecisionMode mode);
    /// Causal attention (see exec::attention); prefill, decode (queries == 1) and MLA shapes.
    virtual Result<void> attention(const float* q, const float* k, const float* v, float* out,
        const AttentionShape& shape, PrecisionMode mode);
    /// gate <- act(gate) · up.
    virtual Result<void> gatedActivation(
        float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode);
    /// Top-k routing of router logits [tokens, experts] (see exec::route); `bias` may be null.
    virtual Result<Routing> route(
        const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias);
    /// Groups the rows of x[tokens, dim] by expert: `permuted` gets tokens × k rows, expert by
    /// expert (token order inside), `offsets` numExperts + 1 row offsets and `sourceRow` the
    /// token of each permuted row.
    virtual Result<void> permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
        const Routing& routing, std::int64_t numExperts, float* permuted,
        std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow);
    /// out[rows, cols] = e4m3(bytes) · scales[row / block, col / block].
    virtual Result<void> dequantFp8Block(const std::uint8_t* bytes, const float* scales,
        std::int64_t rows, std::int64_t cols, std::int64_t block, float* out);

protected:
    /// The error of an operator this backend does not implement.
    [[nodiscard]] Error notImplemented(BackendOp op) const;
};

/// The CPU reference as a backend: the engine's float kernels with emulated rounding.
std::unique_ptr<Backend> makeCpuBackend();

/// One operator a model needs, where it is used, and whether a backend runs it natively.
struct CoverageRow {
    BackendOp op = BackendOp::Linear;
    std::string use; ///< "q/k/v/o, MLP and lm_head GEMMs"
    bool native = false;
    std::string implementation; ///< the backend's description, or "fallback: day0-cpu"
};

/// The operators `spec` needs (each once), with where they are used.
std::vector<std::pair<BackendOp, std::string>> requiredOps(const model::ModelSpec& spec);

/// Native versus fallback for every operator `spec` needs, on a backend that declares `native`
/// (from its manifest; computable without loading it or having its device).
std::vector<CoverageRow> backendCoverage(
    const model::ModelSpec& spec, std::span<const BackendOp> native);

/// The same from a live backend (its own implementation strings).
std::vector<CoverageRow> backendCoverage(const model::ModelSpec& spec, const Backend& backend);

} // namespace day0::exec
