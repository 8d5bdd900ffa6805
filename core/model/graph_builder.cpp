#include "model/graph_builder.h"

#include <algorithm>

namespace day0::model::detail {

namespace {

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool isVisionKind(BlockKind kind)
{
    return kind == BlockKind::VisionPatchEmbed || kind == BlockKind::VisionBlock
        || kind == BlockKind::VisionMerger;
}

ParallelRole biasRole(ParallelRole weightRole)
{
    // A column-parallel bias is split with the output; a row-parallel bias is added once after
    // the reduction, so every rank holds it whole.
    return weightRole == ParallelRole::ColumnParallel ? ParallelRole::ColumnParallel
                                                      : ParallelRole::Replicated;
}

} // namespace

GraphBuilder::GraphBuilder(const ModelSpec& spec)
{
    m_graph.spec = spec;
    if (spec.quantization) {
        for (const auto& pattern : spec.quantization->ignorePatterns) {
            // compressed-tensors matches "re:" entries with Python's re.match: anchored at the
            // start of the module name only.
            m_ignore.emplace_back(
                "^(?:" + pattern + ")", std::regex::ECMAScript | std::regex::optimize);
        }
    }
}

void GraphBuilder::begin(std::string anchor, BlockKind kind, std::int32_t layer, bool moe)
{
    Block block;
    block.anchor = std::move(anchor);
    block.kind = kind;
    block.layer = layer;
    block.moe = moe;
    m_graph.blocks.push_back(std::move(block));
    m_block = &m_graph.blocks.back();
}

Component GraphBuilder::componentFor(Component requested) const
{
    if (m_block->kind == BlockKind::Mtp) {
        return Component::Mtp;
    }
    if (isVisionKind(m_block->kind)) {
        return Component::Vision;
    }
    return requested;
}

void GraphBuilder::tensor(std::string name, std::vector<std::int64_t> shape, DType dtype,
    ParallelRole role, Component component, TensorKind kind, std::int32_t expert,
    std::int64_t packedExperts)
{
    TensorSpec t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.role = role;
    t.component = componentFor(component);
    t.kind = kind;
    t.layer = m_block->layer;
    t.expert = expert;
    t.packedExperts = packedExperts;
    m_block->tensors.push_back(std::move(t));
}

bool GraphBuilder::quantizes(const std::string& module) const
{
    const auto& q = m_graph.spec.quantization;
    if (!q || isVisionKind(m_block->kind)) {
        return false;
    }
    for (const auto& skipped : q->skippedModules) {
        // Entries name modules exactly ("model.layers.0.mlp.gate") or by their last components
        // ("lm_head" also covers "language_model.lm_head").
        if (module == skipped
            || (module.size() > skipped.size()
                && module.compare(module.size() - skipped.size(), skipped.size(), skipped) == 0
                && module[module.size() - skipped.size() - 1] == '.')) {
            return false;
        }
    }
    return std::none_of(m_ignore.begin(), m_ignore.end(),
        [&](const std::regex& re) { return std::regex_search(module, re); });
}

void GraphBuilder::linear(
    const std::string& module, std::int64_t out, std::int64_t in, const LinearOptions& o)
{
    const ModelSpec& spec = m_graph.spec;
    const bool quantized
        = o.quantizable && (o.quantized >= 0 ? o.quantized == 1 : quantizes(module));
    if (!quantized) {
        tensor(module + ".weight", { out, in }, spec.dtype, o.role, o.component, TensorKind::Weight,
            o.expert);
    } else if (spec.quantization->scheme == QuantScheme::BlockFp8) {
        // DeepSeek-V3 README_WEIGHTS / inference/kernel.py: an [M, N] F8 weight carries an F32
        // `weight_scale_inv` of [ceil(M/128), ceil(N/128)] (e.g. kv_a_proj_with_mqa [576, 7168]
        // → [5, 56] in the published R1 checkpoint).
        const auto& q = *spec.quantization;
        tensor(module + ".weight", { out, in }, q.weightDtype, o.role, o.component,
            TensorKind::Weight, o.expert);
        tensor(module + "." + q.scaleSuffix,
            { ceilDiv(out, q.blockRows), ceilDiv(in, q.blockCols) }, DType::F32, o.role,
            o.component, TensorKind::Scale, o.expert);
    } else {
        // compressed-tensors pack-quantized (Kimi-K2.5): `weight_packed` I32 [out, in·bits/32],
        // `weight_scale` [out, in/group] at the model dtype, `weight_shape` I32 [2] (published
        // checkpoint: down_proj [7168, 2048] → packed [7168, 256], scale [7168, 64]).
        const auto& q = *spec.quantization;
        const std::int32_t perWord = 32 / q.bits;
        tensor(module + ".weight_packed", { out, ceilDiv(in, perWord) }, DType::I32, o.role,
            o.component, TensorKind::Weight, o.expert);
        m_block->tensors.back().packFactor = perWord;
        tensor(module + ".weight_scale", { out, ceilDiv(in, q.groupSize) }, spec.dtype, o.role,
            o.component, TensorKind::Scale, o.expert);
        tensor(module + ".weight_shape", { 2 }, DType::I32, ParallelRole::Replicated, o.component,
            TensorKind::Metadata, o.expert);
    }
    if (o.bias) {
        tensor(module + ".bias", { out }, spec.dtype, biasRole(o.role), o.component,
            TensorKind::Bias, o.expert);
    }
}

void GraphBuilder::norm(const std::string& module, std::int64_t width, bool layerNorm)
{
    const DType dtype = m_graph.spec.dtype;
    tensor(module + ".weight", { width }, dtype, ParallelRole::Replicated, Component::Norm);
    if (layerNorm) {
        tensor(module + ".bias", { width }, dtype, ParallelRole::Replicated, Component::Norm,
            TensorKind::Bias);
    }
}

} // namespace day0::model::detail
