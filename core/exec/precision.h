#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "numerics/tolerance.h"

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace day0::exec {

/// The arithmetic an op runs in.
enum class PrecisionMode {
    F64, ///< reference: everything in double
    F32, ///< reference: everything in float
    BF16, ///< emulated: inputs, weights and outputs rounded to bf16, fp32 accumulation
    F16, ///< emulated fp16, as bf16
    F8E4M3, ///< emulated fp8 e4m3fn GEMM inputs (scaled), bf16 activations elsewhere
    F8E5M2, ///< emulated fp8 e5m2 GEMM inputs (scaled), bf16 activations elsewhere
    Int8, ///< emulated int8 per-output-channel weights, bf16 activations
    /// Emulated NVFP4 (NVIDIA ModelOpt's W4A4 recipe, served by TensorRT-LLM, vLLM and SGLang on
    /// Blackwell): the projections' weights and inputs in E2M1 with an E4M3 scale per 16
    /// values along the reduction and an fp32 scale per tensor; bf16 elsewhere.
    Nvfp4,
    /// Emulated MXFP4 weights (gpt-oss's and Kimi-K3's published experts; W4A16 as vLLM serves
    /// them on Hopper): the projections' weights in E2M1 with a power-of-two (E8M0) scale per 32
    /// values along the reduction, their inputs in bf16; bf16 elsewhere.
    Mxfp4,
    /// Emulated int4 weight-only (W4A16), symmetric with one scale per 128 inputs along the
    /// reduction: llm-compressor's W4A16 preset (compressed-tensors pack-quantized), as vLLM's
    /// Marlin kernels serve it; bf16 elsewhere.
    Int4G128,
    /// As Int4G128 with one scale per 32 inputs: the group of Kimi-K2-Thinking's and Kimi-K2.5's
    /// int4 quantisation-aware-trained experts.
    Int4G32,
};

/// "fp64", "fp32", "bf16", "fp16", "fp8", "fp8-e5m2", "int8", "nvfp4", "mxfp4", "int4",
/// "int4-g32".
std::string_view precisionName(PrecisionMode mode);
/// Parses precisionName's spellings and common aliases (float32, bfloat16, e4m3, ...).
Result<PrecisionMode> parsePrecision(std::string_view text);
/// The dtype a tolerance table keys this mode by (F64, F32, BF16, F16, F8E4M3, F8E5M2, I8;
/// F4E2M1 for both FP4 recipes, I4 for both int4 groupings).
DType precisionDType(PrecisionMode mode);
/// The dtype activations are stored in between ops under this mode (F32 for the references).
DType activationDType(PrecisionMode mode);

/// How fp8 tensors are scaled before rounding.
enum class Fp8Scaling {
    PerTensor, ///< one scale per tensor: amax / max-finite (vLLM's dynamic fp8, W8A8 per tensor)
    Block, ///< weights per 128×128 block, activations per token and 128 channels (DeepSeek-V3)
    /// Weights per output channel, activations per token, both dynamic (llm-compressor's
    /// FP8_DYNAMIC checkpoints, as vLLM and SGLang run them)
    Channel,
};

/// "tensor", "block", "channel".
std::string_view fp8ScalingName(Fp8Scaling scaling);
/// Parses fp8ScalingName's spellings; the error lists them.
Result<Fp8Scaling> parseFp8Scaling(std::string_view text);

/// Which precision every op of a run uses: a base mode, overrides per op kind (attention,
/// router, ...) and per decoder layer (a layer override wins over an op-kind override). With an
/// fp8 or int8 base only the projections (op kind Linear) are quantised; embedding, norms,
/// attention, activations, router and lm_head run in bf16 unless overridden, as in published
/// FP8 / W8A16 checkpoints.
struct PrecisionPlan {
    PrecisionMode base = PrecisionMode::F32;
    std::map<numerics::OpKind, PrecisionMode> perOpKind;
    std::map<int, PrecisionMode> perLayer;
    Fp8Scaling fp8Scaling = Fp8Scaling::PerTensor;
    /// The dtype the recurrent layers' state (Gated DeltaNet, Mamba-2 SSM state) is stored in
    /// after each step, as vLLM's mamba_ssm_cache_dtype: F32, BF16 or F16 (recurrent_state.h);
    /// nullopt: kept in the compute type.
    std::optional<PrecisionMode> stateMode;

    /// The mode of an op of `kind` in decoder layer `layer` (-1 outside layers).
    [[nodiscard]] PrecisionMode modeFor(numerics::OpKind kind, int layer) const;
    /// True when the whole run is the fp64 reference.
    [[nodiscard]] bool isF64() const { return base == PrecisionMode::F64; }
    /// "bf16", or "bf16 (attention=fp32, layer 12=fp32)".
    [[nodiscard]] std::string describe() const;
};

/// What a plan rounds where, as one sentence a report prints: its base mode's recipe, that of
/// the frameworks it emulates (HF/PyTorch eager for bf16 and fp16; FP8 / W8A16 checkpoints'
/// projections for fp8 and int8, bf16 elsewhere), then the overrides that replace it.
std::string precisionRecipe(const PrecisionPlan& plan);

/// Parses the plan of `day0 run`: `base` ("bf16"), `ops` ("attention=fp32,router=fp32") and
/// `layers` ("12=fp32,13-15=bf16"). Errors name the bad item. fp64 cannot be mixed with others.
Result<PrecisionPlan> parsePrecisionPlan(
    std::string_view base, std::string_view ops = {}, std::string_view layers = {});

/// Emulates storing values in `mode`'s activation format: rounds in place (no-op for the
/// references). For fp8 modes this is the bf16 activation format.
void roundActivations(std::span<float> values, PrecisionMode mode);

/// Emulates a GEMM input in `mode`: rounds `rows × cols` values in place to the GEMM input format
/// (bf16, fp16; fp8 with per-tensor or per-row-block scales; int8 only for weights: per-row
/// symmetric quantisation). `isWeight` selects weight or activation scaling.
void roundGemmInput(std::span<float> values, std::int64_t rows, std::int64_t cols,
    PrecisionMode mode, Fp8Scaling scaling, bool isWeight);

} // namespace day0::exec
