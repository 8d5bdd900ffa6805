#include "exec/precision.h"

#include "numerics/float_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace day0::exec {

namespace {

constexpr std::array<std::pair<std::string_view, PrecisionMode>, 26> kAliases { {
    { "fp64", PrecisionMode::F64 },
    { "f64", PrecisionMode::F64 },
    { "float64", PrecisionMode::F64 },
    { "double", PrecisionMode::F64 },
    { "fp32", PrecisionMode::F32 },
    { "f32", PrecisionMode::F32 },
    { "float32", PrecisionMode::F32 },
    { "float", PrecisionMode::F32 },
    { "bf16", PrecisionMode::BF16 },
    { "bfloat16", PrecisionMode::BF16 },
    { "fp16", PrecisionMode::F16 },
    { "f16", PrecisionMode::F16 },
    { "float16", PrecisionMode::F16 },
    { "half", PrecisionMode::F16 },
    { "fp8", PrecisionMode::F8E4M3 },
    { "fp8-e4m3", PrecisionMode::F8E4M3 },
    { "e4m3", PrecisionMode::F8E4M3 },
    { "fp8-e5m2", PrecisionMode::F8E5M2 },
    { "e5m2", PrecisionMode::F8E5M2 },
    { "int8", PrecisionMode::Int8 },
    { "w8a16", PrecisionMode::Int8 },
    { "nvfp4", PrecisionMode::Nvfp4 },
    { "mxfp4", PrecisionMode::Mxfp4 },
    { "int4", PrecisionMode::Int4G128 },
    { "int4-g128", PrecisionMode::Int4G128 },
    { "int4-g32", PrecisionMode::Int4G32 },
} };

std::string lower(std::string_view s)
{
    std::string out(s);
    std::transform(
        out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
}

std::vector<std::string_view> splitList(std::string_view s)
{
    std::vector<std::string_view> out;
    while (!s.empty()) {
        const auto comma = s.find(',');
        const auto item = s.substr(0, comma);
        if (!item.empty()) {
            out.push_back(item);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        s.remove_prefix(comma + 1);
    }
    return out;
}

float formatMax(DType t) { return float(numerics::formatInfo(t).maxFinite); }

/// Largest |v| of a span: 0 when empty; NaNs are passed over, infinities kept.
float amaxOf(std::span<const float> values)
{
    float amax = 0.0f;
    for (const float v : values) {
        amax = std::max(amax, std::fabs(v));
    }
    return amax;
}

/// Modes that quantise the projections only (the rest runs in bf16).
bool isQuantised(PrecisionMode m)
{
    return m == PrecisionMode::F8E4M3 || m == PrecisionMode::F8E5M2 || m == PrecisionMode::Int8
        || m == PrecisionMode::Nvfp4 || m == PrecisionMode::Mxfp4 || m == PrecisionMode::Int4G128
        || m == PrecisionMode::Int4G32;
}

/// NVFP4 of one row of `cols` values: an E4M3 scale per 16 (amax / 6, relative to the tensor's
/// fp32 scale `global`), E2M1 values (NVIDIA ModelOpt's nvfp4 quantiser; the layout cuBLAS and
/// the serving engines' FP4 GEMMs read).
void nvfp4Row(std::span<float> row, float global)
{
    constexpr std::size_t kGroup = 16;
    for (std::size_t c0 = 0; c0 < row.size(); c0 += kGroup) {
        const auto block = row.subspan(c0, std::min(kGroup, row.size() - c0));
        const float amax = amaxOf(block);
        const float scale = numerics::roundToFormat(amax / 6.0f / global, DType::F8E4M3) * global;
        for (float& v : block) {
            v = scale > 0.0f ? numerics::roundToE2m1(v / scale) * scale : 0.0f;
        }
    }
}

/// Symmetric int4 of one row in groups of `group`: scale = amax / 7.5 (half of the 15 steps
/// from -8 to 7), values rounded to nearest even and clamped to [-8, 7] (compressed-tensors'
/// calculate_qparams and quantize for a symmetric int group strategy).
void int4Row(std::span<float> row, std::size_t group)
{
    for (std::size_t c0 = 0; c0 < row.size(); c0 += group) {
        const auto block = row.subspan(c0, std::min(group, row.size() - c0));
        const float amax = amaxOf(block);
        if (amax == 0.0f || !std::isfinite(amax)) {
            continue;
        }
        const float scale = std::max(amax / 7.5f, std::numeric_limits<float>::epsilon());
        for (float& v : block) {
            v = std::clamp(std::nearbyint(v / scale), -8.0f, 7.0f) * scale;
        }
    }
}

/// MXFP4 of one row: per 32 values a shared power of two 2^(⌊log2 amax⌋ − 2) (E2M1's largest
/// exponent is 2), values over 6 × scale saturating (OCP MX v1.0 §6.3).
void mxfp4Row(std::span<float> row)
{
    constexpr std::size_t kGroup = 32;
    for (std::size_t c0 = 0; c0 < row.size(); c0 += kGroup) {
        const auto block = row.subspan(c0, std::min(kGroup, row.size() - c0));
        const float amax = amaxOf(block);
        if (amax == 0.0f || !std::isfinite(amax)) {
            continue;
        }
        const int e = std::clamp(int(std::floor(std::log2(amax))) - 2, -127, 127);
        const float scale = std::ldexp(1.0f, e);
        for (float& v : block) {
            v = numerics::roundToE2m1(v / scale) * scale;
        }
    }
}

/// Scales `values` so that their amax lands on the format's largest value, rounds, scales back.
void scaledRound(std::span<float> values, DType format)
{
    const float amax = amaxOf(values);
    if (amax == 0.0f || !std::isfinite(amax)) {
        numerics::roundToFormat(values, format);
        return;
    }
    const float scale = amax / formatMax(format);
    for (float& v : values) {
        v = numerics::roundToFormat(v / scale, format) * scale;
    }
}

} // namespace

std::string_view precisionName(PrecisionMode mode)
{
    switch (mode) {
    case PrecisionMode::F64:
        return "fp64";
    case PrecisionMode::F32:
        return "fp32";
    case PrecisionMode::BF16:
        return "bf16";
    case PrecisionMode::F16:
        return "fp16";
    case PrecisionMode::F8E4M3:
        return "fp8";
    case PrecisionMode::F8E5M2:
        return "fp8-e5m2";
    case PrecisionMode::Int8:
        return "int8";
    case PrecisionMode::Nvfp4:
        return "nvfp4";
    case PrecisionMode::Mxfp4:
        return "mxfp4";
    case PrecisionMode::Int4G128:
        return "int4";
    case PrecisionMode::Int4G32:
        return "int4-g32";
    }
    return "?";
}

std::string_view fp8ScalingName(Fp8Scaling scaling)
{
    switch (scaling) {
    case Fp8Scaling::PerTensor:
        return "tensor";
    case Fp8Scaling::Block:
        return "block";
    case Fp8Scaling::Channel:
        return "channel";
    }
    return "?";
}

Result<Fp8Scaling> parseFp8Scaling(std::string_view text)
{
    for (const auto s : { Fp8Scaling::PerTensor, Fp8Scaling::Block, Fp8Scaling::Channel }) {
        if (fp8ScalingName(s) == lower(text)) {
            return s;
        }
    }
    return Error::badInput(fmt::format("--fp8-scaling '{}': expected tensor (one scale per tensor, "
                                       "vLLM's dynamic fp8), block (128×128 weights, per-token "
                                       "128-channel activations: DeepSeek-V3) or channel (per "
                                       "output channel weights, per-token activations: "
                                       "FP8_DYNAMIC)",
        text));
}

Result<PrecisionMode> parsePrecision(std::string_view text)
{
    const std::string s = lower(text);
    for (const auto& [alias, mode] : kAliases) {
        if (alias == s) {
            return mode;
        }
    }
    if (s == "w4a16") {
        return Error::badInput(fmt::format("precision '{}' is ambiguous: int4 (int4 weights, a "
                                           "scale per 128 inputs), int4-g32 (a scale per 32) or "
                                           "mxfp4 (E2M1 weights, a power-of-two scale per 32)",
            text));
    }
    if (s == "fp4" || s == "e2m1" || s == "w4a4") {
        // Two FP4 recipes differ in what they scale and whether activations are FP4 too.
        return Error::badInput(fmt::format("precision '{}' is ambiguous: nvfp4 (weights and "
                                           "activations E2M1, an E4M3 scale per 16) or mxfp4 "
                                           "(weights E2M1 with a power-of-two scale per 32, "
                                           "activations bf16)",
            text));
    }
    return Error::badInput(fmt::format(
        "unknown precision '{}' (fp64, fp32, bf16, fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, int4, "
        "int4-g32)",
        text));
}

DType precisionDType(PrecisionMode mode)
{
    switch (mode) {
    case PrecisionMode::F64:
        return DType::F64;
    case PrecisionMode::F32:
        return DType::F32;
    case PrecisionMode::BF16:
        return DType::BF16;
    case PrecisionMode::F16:
        return DType::F16;
    case PrecisionMode::F8E4M3:
        return DType::F8E4M3;
    case PrecisionMode::F8E5M2:
        return DType::F8E5M2;
    case PrecisionMode::Int8:
        return DType::I8;
    case PrecisionMode::Nvfp4:
    case PrecisionMode::Mxfp4:
        return DType::F4E2M1;
    case PrecisionMode::Int4G128:
    case PrecisionMode::Int4G32:
        return DType::I4;
    }
    return DType::F32;
}

DType activationDType(PrecisionMode mode)
{
    switch (mode) {
    case PrecisionMode::F64:
        return DType::F64;
    case PrecisionMode::F32:
        return DType::F32;
    case PrecisionMode::F16:
        return DType::F16;
    default:
        return DType::BF16;
    }
}

PrecisionMode PrecisionPlan::modeFor(numerics::OpKind kind, int layer) const
{
    if (layer >= 0) {
        const auto it = perLayer.find(layer);
        if (it != perLayer.end()) {
            return it->second;
        }
    }
    const auto it = perOpKind.find(kind);
    if (it != perOpKind.end()) {
        return it->second;
    }
    // fp8, int8 and fp4 quantise the projections only: published FP8, W8A16, NVFP4 and MXFP4
    // checkpoints keep the embedding, the norms, the router and lm_head in bf16, and so do the
    // engines that run them.
    if (isQuantised(base) && kind != numerics::OpKind::Linear) {
        return PrecisionMode::BF16;
    }
    return base;
}

std::string PrecisionPlan::describe() const
{
    std::vector<std::string> parts;
    for (const auto& [kind, mode] : perOpKind) {
        parts.push_back(fmt::format("{}={}", numerics::opKindName(kind), precisionName(mode)));
    }
    for (const auto& [layer, mode] : perLayer) {
        parts.push_back(fmt::format("layer {}={}", layer, precisionName(mode)));
    }
    if (base == PrecisionMode::F8E4M3 || base == PrecisionMode::F8E5M2) {
        parts.push_back(fp8Scaling == Fp8Scaling::Block ? "block scales"
                : fp8Scaling == Fp8Scaling::Channel     ? "per-channel/per-token scales"
                                                        : "per-tensor scales");
    }
    if (stateMode) {
        parts.push_back(fmt::format("state={}", precisionName(*stateMode)));
    }
    if (parts.empty()) {
        return std::string(precisionName(base));
    }
    return fmt::format("{} ({})", precisionName(base), fmt::join(parts, ", "));
}

namespace {

std::string modeRecipe(PrecisionMode mode, Fp8Scaling scaling)
{
    constexpr std::string_view kHalf
        = "weights and every GEMM input stored in {0}, fp32 accumulation, GEMM outputs and "
          "biases in {0}; RMSNorm statistics in fp32, its normalised output and the weight "
          "product stored in {0}; RoPE with cos and sin in {0}, each product and the sum "
          "rounded; attention scores and probabilities stored in {0}, softmax in fp32; the "
          "gated activation and its product in {0}; residual stream, KV cache and logits in {0} "
          "(HF/PyTorch eager in {0})";
    switch (mode) {
    case PrecisionMode::F64:
        return "fp64 throughout (the reference)";
    case PrecisionMode::F32:
        return "fp32 throughout (the reference)";
    case PrecisionMode::BF16:
        return fmt::format(fmt::runtime(kHalf), "bf16");
    case PrecisionMode::F16:
        return fmt::format(fmt::runtime(kHalf), "fp16");
    case PrecisionMode::F8E4M3:
    case PrecisionMode::F8E5M2:
        return fmt::format("the projections' GEMM inputs in {} with {}, fp32 accumulation; "
                           "embedding, norms, attention, activations and lm_head as the bf16 "
                           "recipe",
            mode == PrecisionMode::F8E4M3 ? "fp8 e4m3" : "fp8 e5m2",
            scaling == Fp8Scaling::Block
                ? "block scales (weights 128×128, activations per token and 128 channels; "
                  "DeepSeek-V3's recipe)"
                : scaling == Fp8Scaling::Channel
                ? "dynamic scales per weight output channel and per activation token "
                  "(llm-compressor's FP8_DYNAMIC, as vLLM and SGLang run it)"
                : "one dynamic scale per tensor, amax / max finite (vLLM's online fp8)");
    case PrecisionMode::Int8:
        return "the projections' weights in int8, symmetric per output channel; activations "
               "and everything else as the bf16 recipe";
    case PrecisionMode::Nvfp4:
        return "the projections' weights and GEMM inputs in NVFP4: E2M1 values, an E4M3 scale "
               "per 16 along the reduction, an fp32 scale per tensor (amax / (6 · 448)); "
               "activation scales dynamic (ModelOpt's static input scales need calibration "
               "data); fp32 accumulation, bf16 outputs; embedding, norms, attention, "
               "activations and lm_head as the bf16 recipe (ModelOpt's NVFP4 recipe as "
               "TensorRT-LLM, vLLM and SGLang serve it)";
    case PrecisionMode::Int4G128:
    case PrecisionMode::Int4G32:
        return fmt::format("the projections' weights in int4, symmetric, one scale per {} inputs "
                           "along the reduction (amax / 7.5, round to nearest even, clamp to "
                           "[-8, 7]: compressed-tensors' pack-quantized int4{}); GEMM inputs in "
                           "bf16, fp32 accumulation (W4A16, as vLLM's Marlin kernels serve it); "
                           "everything else as the bf16 recipe",
            mode == PrecisionMode::Int4G32 ? 32 : 128,
            mode == PrecisionMode::Int4G32 ? ", Kimi-K2-Thinking's and Kimi-K2.5's group"
                                           : ", llm-compressor's W4A16 preset");
    case PrecisionMode::Mxfp4:
        return "the projections' weights in MXFP4: E2M1 values, a power-of-two (E8M0) scale "
               "per 32 along the reduction, 2^(floor(log2 amax) − 2) as OCP MX v1.0 sets it; "
               "GEMM inputs in bf16, fp32 accumulation (W4A16, as vLLM serves gpt-oss on "
               "Hopper); everything else as the bf16 recipe";
    }
    return std::string(precisionName(mode));
}

} // namespace

std::string precisionRecipe(const PrecisionPlan& plan)
{
    std::string recipe = modeRecipe(plan.base, plan.fp8Scaling);
    if (!plan.perOpKind.empty() || !plan.perLayer.empty()) {
        recipe += fmt::format("; except where the plan says otherwise: {}", plan.describe());
    }
    if (plan.stateMode) {
        // recurrent_state.h: where the serving kernels store the state.
        recipe += fmt::format("; the recurrent state (Gated DeltaNet, Mamba-2 SSM) stored in {} "
                              "after every step, its update computed in fp32 (vLLM's "
                              "mamba_ssm_cache_dtype); conv windows in the activation dtype",
            precisionName(*plan.stateMode));
    }
    return recipe;
}

Result<PrecisionPlan> parsePrecisionPlan(
    std::string_view base, std::string_view ops, std::string_view layers)
{
    PrecisionPlan plan;
    auto b = parsePrecision(base.empty() ? "fp32" : base);
    if (!b) {
        return b.error();
    }
    plan.base = *b;
    const auto checkMix = [&](PrecisionMode m, std::string_view item) -> Result<void> {
        if ((m == PrecisionMode::F64) != (plan.base == PrecisionMode::F64)) {
            return Error::badInput(fmt::format(
                "'{}': fp64 runs everything in double and cannot be mixed with other precisions",
                item));
        }
        return success();
    };
    for (const auto item : splitList(ops)) {
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            return Error::badInput(
                fmt::format("'{}': expected <op kind>=<precision>, e.g. attention=fp32", item));
        }
        const auto kind = numerics::parseOpKind(lower(item.substr(0, eq)));
        if (!kind) {
            return Error::badInput(fmt::format(
                "'{}': unknown op kind (embedding, norm, linear, attention, mlp, router, logits)",
                item));
        }
        auto m = parsePrecision(item.substr(eq + 1));
        if (!m) {
            return m.error();
        }
        DAY0_TRY(checkMix(*m, item));
        plan.perOpKind[*kind] = *m;
    }
    for (const auto item : splitList(layers)) {
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            return Error::badInput(
                fmt::format("'{}': expected <layer>[-<layer>]=<precision>, e.g. 12=fp32", item));
        }
        const std::string range(item.substr(0, eq));
        int first = 0;
        int last = 0;
        const auto dash = range.find('-');
        try {
            first = std::stoi(range.substr(0, dash));
            last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
        } catch (const std::exception&) {
            return Error::badInput(
                fmt::format("'{}': layer must be a number or a range a-b", item));
        }
        if (first < 0 || last < first) {
            return Error::badInput(fmt::format("'{}': invalid layer range", item));
        }
        auto m = parsePrecision(item.substr(eq + 1));
        if (!m) {
            return m.error();
        }
        DAY0_TRY(checkMix(*m, item));
        for (int l = first; l <= last; ++l) {
            plan.perLayer[l] = *m;
        }
    }
    return plan;
}

void roundActivations(std::span<float> values, PrecisionMode mode)
{
    if (mode == PrecisionMode::F64 || mode == PrecisionMode::F32) {
        return;
    }
    numerics::roundToFormat(values, activationDType(mode));
}

void roundGemmInput(std::span<float> values, std::int64_t rows, std::int64_t cols,
    PrecisionMode mode, Fp8Scaling scaling, bool isWeight)
{
    switch (mode) {
    case PrecisionMode::F64:
    case PrecisionMode::F32:
        return;
    case PrecisionMode::BF16:
    case PrecisionMode::F16:
        numerics::roundToFormat(values, precisionDType(mode));
        return;
    case PrecisionMode::Int8:
        if (isWeight) {
            for (std::int64_t r = 0; r < rows; ++r) {
                numerics::fakeQuantInt8(values.subspan(std::size_t(r * cols), std::size_t(cols)));
            }
        } else {
            numerics::roundToFormat(values, DType::BF16);
        }
        return;
    case PrecisionMode::Nvfp4: {
        // Weights and activations alike; the tensor scale puts the largest block scale at
        // E4M3's largest value.
        const float amax = amaxOf(values);
        if (amax == 0.0f || !std::isfinite(amax)) {
            return;
        }
        const float global = amax / (6.0f * 448.0f);
        for (std::int64_t r = 0; r < rows; ++r) {
            nvfp4Row(values.subspan(std::size_t(r * cols), std::size_t(cols)), global);
        }
        return;
    }
    case PrecisionMode::Int4G128:
    case PrecisionMode::Int4G32:
    case PrecisionMode::Mxfp4:
        // W4A16: 4-bit weights in groups along each row, bf16 activations.
        if (!isWeight) {
            numerics::roundToFormat(values, DType::BF16);
            return;
        }
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto row = values.subspan(std::size_t(r * cols), std::size_t(cols));
            if (mode == PrecisionMode::Mxfp4) {
                mxfp4Row(row);
            } else {
                int4Row(row, mode == PrecisionMode::Int4G32 ? 32 : 128);
            }
        }
        return;
    case PrecisionMode::F8E4M3:
    case PrecisionMode::F8E5M2: {
        const DType format = precisionDType(mode);
        if (scaling == Fp8Scaling::PerTensor) {
            scaledRound(values, format);
            return;
        }
        if (scaling == Fp8Scaling::Channel) {
            // A weight's rows are its output channels, an activation's rows its tokens.
            for (std::int64_t r = 0; r < rows; ++r) {
                scaledRound(values.subspan(std::size_t(r * cols), std::size_t(cols)), format);
            }
            return;
        }
        constexpr std::int64_t kBlock = 128;
        const std::int64_t rowBlock = isWeight ? kBlock : 1;
        std::vector<float> block;
        for (std::int64_t r0 = 0; r0 < rows; r0 += rowBlock) {
            const std::int64_t r1 = std::min(rows, r0 + rowBlock);
            for (std::int64_t c0 = 0; c0 < cols; c0 += kBlock) {
                const std::int64_t c1 = std::min(cols, c0 + kBlock);
                block.clear();
                for (std::int64_t r = r0; r < r1; ++r) {
                    block.insert(block.end(), values.begin() + r * cols + c0,
                        values.begin() + r * cols + c1);
                }
                scaledRound(block, format);
                std::size_t i = 0;
                for (std::int64_t r = r0; r < r1; ++r) {
                    std::copy_n(
                        block.begin() + std::ptrdiff_t(i), c1 - c0, values.begin() + r * cols + c0);
                    i += std::size_t(c1 - c0);
                }
            }
        }
        return;
    }
    }
}

} // namespace day0::exec
