#include "exec/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace day0::exec {

namespace {

struct OpName {
    BackendOp op;
    std::string_view name;
};

constexpr std::array kOpNames {
    OpName { BackendOp::Embedding, "embedding" },
    OpName { BackendOp::RmsNorm, "rms_norm" },
    OpName { BackendOp::RmsNormResidual, "rms_norm_residual" },
    OpName { BackendOp::Linear, "linear" },
    OpName { BackendOp::Rope, "rope" },
    OpName { BackendOp::RopeMulti, "rope_mrope" },
    OpName { BackendOp::AttentionPrefill, "attention_prefill" },
    OpName { BackendOp::AttentionDecode, "attention_decode" },
    OpName { BackendOp::AttentionMla, "attention_mla" },
    OpName { BackendOp::GatedActivation, "gated_activation" },
    OpName { BackendOp::RouterSoftmax, "router_softmax" },
    OpName { BackendOp::RouterSigmoid, "router_sigmoid_group" },
    OpName { BackendOp::MoePermute, "moe_permute" },
    OpName { BackendOp::Fp8BlockDequant, "fp8_block_dequant" },
};

static_assert(kOpNames.size() == kBackendOpCount);

constexpr std::array kAllOps = [] {
    std::array<BackendOp, kOpNames.size()> ops {};
    for (std::size_t i = 0; i < kOpNames.size(); ++i) {
        ops[i] = kOpNames[i].op;
    }
    return ops;
}();

} // namespace

std::span<const BackendOp> allBackendOps() { return kAllOps; }

std::string_view backendOpName(BackendOp op)
{
    for (const auto& n : kOpNames) {
        if (n.op == op) {
            return n.name;
        }
    }
    return "unknown";
}

std::optional<BackendOp> backendOpFromName(std::string_view name)
{
    for (const auto& n : kOpNames) {
        if (n.name == name) {
            return n.op;
        }
    }
    return std::nullopt;
}

Backend::~Backend() = default;

std::string Backend::implementation(BackendOp op) const
{
    return supports(op) ? "native" : fmt::format("fallback: day0-cpu ({} lacks it)", name());
}

void Backend::releaseWeights() { }

Error Backend::notImplemented(BackendOp op) const
{
    return Error::unsupported(
        fmt::format("backend '{}' does not implement {}", name(), backendOpName(op)));
}

Result<void> Backend::embedding(
    std::span<const std::int64_t>, const float*, std::int64_t, std::int64_t, float*, PrecisionMode)
{
    return notImplemented(BackendOp::Embedding);
}

Result<void> Backend::rmsNorm(const float*, const float* residual, const float*, float*, float*,
    std::int64_t, std::int64_t, double, PrecisionMode)
{
    return notImplemented(residual ? BackendOp::RmsNormResidual : BackendOp::RmsNorm);
}

Result<void> Backend::linear(const float*, const float*, float*, std::int64_t, std::int64_t,
    std::int64_t, PrecisionMode, Fp8Scaling)
{
    return notImplemented(BackendOp::Linear);
}

Result<void> Backend::rope(float*, std::int64_t, std::int64_t, std::int64_t,
    std::span<const std::int64_t>, const Rope&, std::span<const std::int64_t> positions3,
    PrecisionMode)
{
    return notImplemented(positions3.empty() ? BackendOp::Rope : BackendOp::RopeMulti);
}

Result<void> Backend::attention(
    const float*, const float*, const float*, float*, const AttentionShape& shape, PrecisionMode)
{
    if (shape.headDim != shape.valueDim) {
        return notImplemented(BackendOp::AttentionMla);
    }
    return notImplemented(
        shape.queries == 1 ? BackendOp::AttentionDecode : BackendOp::AttentionPrefill);
}

Result<void> Backend::gatedActivation(float*, const float*, std::int64_t, Activation, PrecisionMode)
{
    return notImplemented(BackendOp::GatedActivation);
}

Result<Routing> Backend::route(const float*, std::int64_t, const RouterConfig& config, const float*)
{
    return notImplemented(config.scoring == model::RouterScoring::Sigmoid
            ? BackendOp::RouterSigmoid
            : BackendOp::RouterSoftmax);
}

Result<void> Backend::permuteTokens(const float*, std::int64_t, std::int64_t, const Routing&,
    std::int64_t, float*, std::vector<std::int64_t>&, std::vector<std::int64_t>&)
{
    return notImplemented(BackendOp::MoePermute);
}

Result<void> Backend::dequantFp8Block(
    const std::uint8_t*, const float*, std::int64_t, std::int64_t, std::int64_t, float*)
{
    return notImplemented(BackendOp::Fp8BlockDequant);
}

std::vector<std::pair<BackendOp, std::string>> requiredOps(const model::ModelSpec& spec)
{
    std::vector<std::pair<BackendOp, std::string>> ops;
    const bool mla = spec.attention == model::AttentionKind::MLA;
    ops.emplace_back(BackendOp::Embedding, "model.embed_tokens");
    ops.emplace_back(BackendOp::RmsNorm,
        mla ? "model.norm, MLA q/kv latent norms"
            : (spec.qkNorm ? "model.norm, q/k norms per head" : "model.norm"));
    ops.emplace_back(BackendOp::RmsNormResidual, "residual add + norm of every decoder layer");
    ops.emplace_back(BackendOp::Linear,
        mla ? "MLA projections, MLP/expert and lm_head GEMMs"
            : "q/k/v/o, MLP/expert and lm_head GEMMs");
    const bool mrope = spec.ropeScaling.type == "mrope" || !spec.ropeScaling.mropeSection.empty();
    ops.emplace_back(mrope ? BackendOp::RopeMulti : BackendOp::Rope,
        fmt::format(
            "{} rotary, {}", spec.ropeScaling.type, mla ? "interleaved pairs" : "rotate-half"));
    if (mla) {
        ops.emplace_back(BackendOp::AttentionMla, "self_attn (prefill and decode)");
    } else {
        const char* kind = spec.numKvHeads == spec.numHeads ? "MHA"
            : spec.numKvHeads == 1                          ? "MQA"
                                                            : "GQA";
        ops.emplace_back(BackendOp::AttentionPrefill, fmt::format("self_attn prefill ({})", kind));
        ops.emplace_back(BackendOp::AttentionDecode, fmt::format("self_attn decode ({})", kind));
    }
    ops.emplace_back(BackendOp::GatedActivation, fmt::format("mlp act ({})", spec.hiddenAct));
    if (spec.moe) {
        if (spec.moe->scoring == model::RouterScoring::Sigmoid) {
            ops.emplace_back(BackendOp::RouterSigmoid,
                fmt::format("mlp.gate (sigmoid{}, top-{})",
                    spec.moe->numGroups > 1 ? ", group-limited" : "", spec.moe->topK));
        } else {
            ops.emplace_back(BackendOp::RouterSoftmax,
                fmt::format("mlp.gate (softmax, top-{})", spec.moe->topK));
        }
        ops.emplace_back(BackendOp::MoePermute,
            fmt::format("token dispatch to {} experts", spec.moe->numExperts));
    }
    if (spec.quantization && spec.quantization->scheme == model::QuantScheme::BlockFp8) {
        ops.emplace_back(BackendOp::Fp8BlockDequant,
            fmt::format("FP8 weights, {}×{} block scales", spec.quantization->blockRows,
                spec.quantization->blockCols));
    }
    return ops;
}

std::vector<CoverageRow> backendCoverage(
    const model::ModelSpec& spec, std::span<const BackendOp> native)
{
    std::vector<CoverageRow> rows;
    for (auto& [op, use] : requiredOps(spec)) {
        CoverageRow row;
        row.op = op;
        row.use = std::move(use);
        row.native = std::find(native.begin(), native.end(), op) != native.end();
        row.implementation = row.native ? "native" : "fallback: day0-cpu";
        rows.push_back(std::move(row));
    }
    return rows;
}

std::vector<CoverageRow> backendCoverage(const model::ModelSpec& spec, const Backend& backend)
{
    std::vector<CoverageRow> rows;
    for (auto& [op, use] : requiredOps(spec)) {
        CoverageRow row;
        row.op = op;
        row.use = std::move(use);
        row.native = backend.supports(op);
        row.implementation = row.native ? backend.implementation(op) : "fallback: day0-cpu";
        rows.push_back(std::move(row));
    }
    return rows;
}

} // namespace day0::exec
