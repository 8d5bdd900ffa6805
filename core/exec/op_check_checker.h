#pragma once

// Internal to core/exec: the operator checks of `day0 opcheck`. Each check computes one operator
// on random inputs in fp64 (the reference) and in the target precision (on the backend under
// test, or the CPU reference where the backend declines it) and adds a row with the error and
// its verdict. op_check.cpp walks a model's operators through it.

#include "base/result.h"
#include "exec/backend.h"
#include "exec/op_check.h"
#include "exec/precision.h"
#include "exec/rope.h"
#include "model/model_spec.h"
#include "numerics/tolerance.h"

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace day0::exec::detail {

/// The rows of one opcheck run, one check at a time.
class OpChecker {
    using OpKind = numerics::OpKind;

public:
    OpChecker(const model::ModelSpec& spec, const OpCheckOptions& options)
        : m_spec(spec)
        , m_options(options)
        , m_rng(options.seed)
    {
    }

    std::vector<double> random(std::int64_t n, double scale = 1.0, double offset = 0.0);

    static std::vector<float> toFloat(const std::vector<double>& v);

    /// Adds the row of `target` judged against `reference`; returns it (to add to it).
    OpCheckRow& add(std::string op, std::string shape, OpKind kind, PrecisionMode mode,
        std::string implementation, const std::vector<double>& reference,
        const std::vector<float>& target);

    PrecisionMode mode(OpKind kind) const { return m_options.target.modeFor(kind, 0); }

    /// True when the target of `op` is computed by the backend under test.
    bool onBackend(BackendOp op) const;

    /// The row's implementation text: the backend's, or the CPU's with the fallback named.
    std::string implementation(BackendOp op, const std::string& cpu) const;

    /// Keeps the first backend failure; runOpCheck reports it after the step.
    void keep(Result<void> status);
    Result<void> status() const { return m_status; }

    void embedding();

    void rmsNormOp(const std::string& name, std::int64_t rows, std::int64_t dim,
        const std::string& implementation);

    /// The decoder layer's fused "residual add + RMSNorm" (only with a backend under test: the
    /// CPU reference composes it of add and rms_norm).
    void rmsNormResidualOp(std::int64_t rows, std::int64_t dim);

    void linearOp(const std::string& name, std::int64_t in, std::int64_t out, OpKind kind);

    void rope(const Rope& table, std::int64_t heads, std::int64_t dim, std::string label = {},
        bool multi = false);

    /// The DSA indexer's scores (dsa_indexer.cpp) in the target against fp64, and how many
    /// queries' top-k selections that moves; returns the fp64 selection.
    std::vector<std::int64_t> dsaIndexerOp(std::int64_t heads, std::int64_t dim, std::int64_t topK);

    /// MiniMax-M3's MSA block selection (msa.h) from target-rounded index q/k against fp64: the
    /// kept block ids of every query and index head; returns the keys of index head 0's fp64
    /// selection, for an attention row.
    std::vector<std::int64_t> msaSelectionOp(
        std::int64_t heads, std::int64_t dim, std::int64_t blockSize, std::int64_t topK);

    void attentionOp(std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
        std::int64_t valueDim, double scale, const std::string& name,
        const std::string& implementation, bool causal = true, std::int64_t chunk = 0,
        std::int64_t window = 0, bool sinks = false, std::span<const std::int64_t> selected = {});

    /// Llama-4's weightless QK norm over [tokens × heads, headDim].
    void unitNormOp(std::int64_t heads, std::int64_t dim,
        const std::string& name = "qk_norm (weightless RMS, per head)");

    /// Gemma's final logit soft-capping, cap · tanh(x / cap), on logits spread past the cap so
    /// that the tanh bends them.
    void softCapOp(std::int64_t vocab, double cap);

    /// Llama-4 NoPE layers' query temperature, at positions that straddle a floor_scale step.
    void temperatureOp(std::int64_t heads, std::int64_t dim);

    void gatedActivation(std::int64_t inter, Activation act, std::string name = {});

    /// gpt-oss's clamped SwiGLU, (clamp(up, ±limit) + 1) · g·σ(1.702·g) with g = min(gate,
    /// limit), on inputs spread past the limit so that the clamps are exercised.
    void clampedSwiglu(std::int64_t inter, double limit);

    void layerNormOp(const std::string& name, std::int64_t rows, std::int64_t dim, double eps);

    void activationOp(std::int64_t width, Activation act, const std::string& name);

    void router(const std::string& name);

    /// The Gated DeltaNet operators (op_check_delta.cpp): the conv, the q/k L2 norm, the delta
    /// rule in both forms, the gated norm; with `outputGate`, the attention's sigmoid gate.
    void gatedDeltaNetOps(const model::LinearAttentionSpec& la, bool outputGate);
    /// Kimi-Linear's KDA operators (op_check_kda.cpp): the per-channel delta rule in both forms
    /// and the sigmoid-gated o_norm (the conv and L2 norm are Gated DeltaNet's rows).
    void kimiDeltaOps(const model::LinearAttentionSpec& la);
    /// Kimi-K3's SiTU-GLU (op_check_kda.cpp), on gates and ups spread past β and β_lin so that
    /// the tanh bounds bend them.
    void situGluOp(std::int64_t inter);
    /// Kimi-K3's attention-residual mix (op_check_kda.cpp) over `blocks` sealed blocks and the
    /// partial sum, as the engine's stream rounds them.
    void attnResOp(std::int64_t blocks);
    /// Nemotron-H's Mamba-2 operators (mamba2.h; op_check_mamba2.cpp): the conv1d + SiLU with
    /// its carried state, dt's softplus, the SSD scan in its chunked and recurrent forms (each
    /// against the fp64 recurrence) and the gated group RMSNorm; and the relu2 activation.
    void mamba2Ops();
    /// DeepSeek-V4's operators (op_check_deepseek_v4.cpp): the hyper-connection maps, collapse
    /// and expand, the compressors, the Lightning indexer, each kind of layer's attention, the
    /// grouped output projection, the sqrtsoftplus and hash routers and the clamped SwiGLU
    /// expert, each the engine's own code in the target plan against fp64.
    void deepseekV4Ops();
    void relu2Op(std::int64_t width, const std::string& name);

    std::vector<OpCheckRow> take() { return std::move(m_rows); }

private:
    const model::ModelSpec& m_spec;
    const OpCheckOptions& m_options;
    std::mt19937 m_rng;
    std::vector<OpCheckRow> m_rows;
    std::unique_ptr<Backend> m_cpu = makeCpuBackend();
    Result<void> m_status = success();
};

} // namespace day0::exec::detail
