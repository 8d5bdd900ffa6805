// The head-aware split rules of the recurrent mixers (sharding_heads.h).
#include "checkpoint/sharding_heads.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::checkpoint::detail {

namespace {

bool endsWithAny(const std::string& s, std::initializer_list<const char*> suffixes)
{
    return std::any_of(
        suffixes.begin(), suffixes.end(), [&](const char* x) { return s.ends_with(x); });
}

} // namespace

/// The row parts of the fused projections and convolutions of the recurrent mixers, each split
/// evenly over the TP ranks, as vLLM shards them: Qwen3.5's in_proj_qkv and the Gated DeltaNet's
/// conv1d (q | k | v channels; vllm/model_executor/models/qwen3_next.py, Qwen3NextGatedDeltaNet,
/// whose conv1d and projections are split by key and value heads), and the Mamba-2 in_proj
/// (z | x | B | C | dt) and conv1d (x | B | C; vllm/model_executor/layers/mamba/mamba_mixer2.py,
/// MambaMixer2, which splits heads and groups of B and C). Empty for any other tensor. Errors
/// name the tensor and the head count TP does not divide: a part that divides evenly is not
/// enough, every rank must hold whole heads and groups.
Result<std::vector<std::int64_t>> recurrentParts(
    const model::ModelSpec& spec, const std::string& name, int tp)
{
    std::vector<std::int64_t> none;
    const auto check = [&](std::int64_t count, const char* what) -> Result<void> {
        if (count % tp != 0) {
            return Error::badInput(
                fmt::format("tensor '{}': tp={} does not divide the {} {}", name, tp, count, what));
        }
        return success();
    };
    const bool gdn = spec.linearAttention && name.find(".linear_attn.") != std::string::npos
        && (spec.family == model::Family::Qwen3Next || spec.family == model::Family::Qwen35
            || spec.family == model::Family::Qwen35Moe);
    if (gdn) {
        const auto& la = *spec.linearAttention;
        DAY0_TRY(check(la.keyHeads, "linear-attention key heads (linear_num_key_heads)"));
        DAY0_TRY(check(la.valueHeads, "linear-attention value heads (linear_num_value_heads)"));
        const std::int64_t keyDim = la.keyHeads * la.keyHeadDim;
        if (name.ends_with(".in_proj_qkv.weight") || name.ends_with(".conv1d.weight")) {
            return std::vector<std::int64_t> { keyDim, keyDim, la.valueHeads * la.valueHeadDim };
        }
        return none;
    }
    const bool mamba = spec.mamba && spec.family == model::Family::NemotronH
        && name.find(".mixer.") != std::string::npos
        && (name.find(".in_proj.") != std::string::npos
            || name.find(".conv1d.") != std::string::npos
            || endsWithAny(
                name, { ".dt_bias", ".A_log", ".D", ".norm.weight", ".out_proj.weight" }));
    if (mamba) {
        const auto& m = *spec.mamba;
        DAY0_TRY(check(m.numHeads, "Mamba-2 heads (mamba_num_heads)"));
        // The gated norm normalises over each group (MambaMixer2's RMSNormGated with
        // group_size = intermediate / n_groups): only whole groups per rank keep it local.
        DAY0_TRY(check(m.numGroups, "Mamba-2 groups of B and C (n_groups)"));
        const std::int64_t bc = m.numGroups * m.stateSize;
        if (name.find(".in_proj.") != std::string::npos) {
            return std::vector<std::int64_t> { m.inner(), m.inner(), bc, bc, m.numHeads };
        }
        if (name.find(".conv1d.") != std::string::npos) {
            return std::vector<std::int64_t> { m.inner(), bc, bc };
        }
    }
    return none;
}

/// The slice of a Kimi Delta Attention tensor (Kimi-Linear's KDA layers), as vLLM's
/// KimiDeltaAttention (vllm/model_executor/layers/kda.py) shards it: the heads split over the TP
/// ranks, q/k/v_proj, their short convs, f_b_proj, g_b_proj (or the full-rank g_proj), b_proj and
/// dt_bias column-parallel, A_log [1, 1, heads, 1] by head along dim 2 (its sharded_weight_loader
/// (2)), f_a_proj, g_a_proj and o_norm replicated, o_proj row-parallel. Nullopt for any tensor
/// the generic rules handle; the error names linear_attn_config.num_heads when TP does not divide
/// the heads (a channel split that divides evenly is not enough: the decay, β, the state and the
/// gated norm are per head).
Result<std::optional<TensorSlice>> kdaSlice(
    const model::ModelSpec& spec, const model::TensorSpec& t, int tp, int r)
{
    const bool kda = spec.linearAttention && spec.family == model::Family::KimiLinear
        && t.layer >= 0 && std::size_t(t.layer) < spec.layers.size()
        && spec.layers[std::size_t(t.layer)].mixer == model::MixerKind::KimiDelta
        && t.name.find(".self_attn.") != std::string::npos;
    if (!kda) {
        return std::optional<TensorSlice>();
    }
    const std::int64_t heads = spec.linearAttention->valueHeads;
    const bool aLog = t.name.ends_with(".A_log") && t.shape.size() == 4;
    if ((t.role != model::ParallelRole::Replicated || aLog) && heads % tp != 0) {
        return Error::badInput(fmt::format("tensor '{}': tp={} does not divide the {} KDA heads "
                                           "(linear_attn_config.num_heads)",
            t.name, tp, heads));
    }
    if (!aLog) {
        return std::optional<TensorSlice>();
    }
    const std::int64_t per = heads / tp;
    TensorSlice slice;
    slice.dims.push_back({ 2, { { per * r, per * (r + 1) } } });
    return std::optional<TensorSlice>(slice);
}

Result<void> deepseekV4Split(const model::ModelSpec& spec, const model::TensorSpec& t, int tp)
{
    if (spec.family != model::Family::DeepseekV4 || !spec.compressedAttention
        || t.name.find(".attn.") == std::string::npos
        || t.name.find(".indexer.") != std::string::npos) {
        return success();
    }
    const bool grouped
        = t.name.ends_with(".attn.wo_a.weight") || t.name.ends_with(".attn.wo_b.weight");
    const bool headed
        = t.name.ends_with(".attn.wq_b.weight") || t.name.ends_with(".attn.attn_sink");
    const std::int64_t groups = spec.compressedAttention->oGroups;
    if (grouped && groups % tp != 0) {
        return Error::badInput(
            fmt::format("tensor '{}': tp={} does not divide the {} output groups (o_groups)",
                t.name, tp, groups));
    }
    if ((grouped || headed) && spec.numHeads % tp != 0) {
        return Error::badInput(fmt::format("tensor '{}': tp={} does not divide the {} attention "
                                           "heads (num_attention_heads)",
            t.name, tp, spec.numHeads));
    }
    return success();
}

Result<TensorSlice> deepseekV4ScaleSlice(const model::ModelSpec& spec,
    const model::TensorSpec& weight, const model::TensorSpec& scale, const TensorSlice& weightSlice)
{
    if (!spec.quantization || weight.shape.size() != 2) {
        return Error::badInput(
            fmt::format("tensor '{}': a block scale of the 2-D weight '{}' of a quantised config",
                scale.name, weight.name));
    }
    const auto& q = *spec.quantization;
    // FP4 experts: I8 codes [out, in/2], a scale per group inputs = group/2 bytes of a row.
    const bool fp4 = weight.dtype == DType::I8;
    const std::int64_t group = q.expertGroupSize > 0 ? q.expertGroupSize : 32;
    const std::int64_t blocks[2] = { fp4 ? 1 : q.blockRows, fp4 ? group / 2 : q.blockCols };
    TensorSlice out;
    for (const auto& d : weightSlice.dims) {
        const std::int64_t block = blocks[d.dim == 0 ? 0 : 1];
        const std::int64_t extent = weight.shape[std::size_t(d.dim)];
        DimSlice blocksOf { d.dim, {} };
        for (const auto& [a, b] : d.ranges) {
            if (a % block != 0 || (b % block != 0 && b != extent)) {
                return Error::badInput(fmt::format(
                    "tensor '{}': this split gives a rank its {} [{}, {}) of {}, which cuts a "
                    "{} of its scale '{}'; choose a tp/etp that splits it on block boundaries",
                    weight.name,
                    d.dim == 0 ? "rows"
                        : fp4  ? "packed columns"
                               : "columns",
                    a, b, extent,
                    fp4 ? fmt::format("{}-input group", group)
                        : fmt::format("{} x {} block", q.blockRows, q.blockCols),
                    scale.name));
            }
            blocksOf.ranges.emplace_back(a / block, (b + block - 1) / block);
        }
        out.dims.push_back(std::move(blocksOf));
    }
    return out;
}

} // namespace day0::checkpoint::detail
