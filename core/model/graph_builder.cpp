#include "model/graph_builder.h"

#include <algorithm>
#include <string_view>

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

// fnmatch-style match of a whole name: '*' any run of characters, '?' one character.
bool globMatch(std::string_view name, std::string_view pattern)
{
    std::size_t n = 0;
    std::size_t p = 0;
    std::size_t star = std::string_view::npos;
    std::size_t resume = 0;
    while (n < name.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
            ++n;
            ++p;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            resume = n;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            n = ++resume;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') {
        ++p;
    }
    return p == pattern.size();
}

} // namespace

bool excludedByPattern(const std::string& module, const std::string& pattern, bool regex)
{
    if (regex) {
        // HF quantizers (gpt-oss mxfp4 modules_to_not_convert): re.match of the entry, anchored
        // at the start, against the module path (which also covers its children).
        try {
            const std::regex re(pattern, std::regex::ECMAScript);
            return std::regex_search(module, re, std::regex_constants::match_continuous);
        } catch (const std::regex_error&) {
            return module == pattern;
        }
    }
    // ModelOpt exclude_modules / ignore: shell wildcards on the module or one of its parents,
    // or the entry naming the module's last components ("lm_head" for "language_model.lm_head").
    if (globMatch(module, pattern)) {
        return true;
    }
    for (std::size_t dot = module.find('.'); dot != std::string::npos;
         dot = module.find('.', dot + 1)) {
        if (globMatch(std::string_view(module).substr(0, dot), pattern)
            || globMatch(std::string_view(module).substr(dot + 1), pattern)) {
            return true;
        }
    }
    return false;
}

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
    const ModelSpec& spec = m_graph.spec;
    if (moe && spec.moe) {
        // The block's own top-k and expert count (Hunyuan lists them per layer).
        const LayerSpec* pattern = nullptr;
        if (kind == BlockKind::Decoder && layer >= 0 && std::size_t(layer) < spec.layers.size()) {
            pattern = &spec.layers[std::size_t(layer)];
        } else if (kind == BlockKind::Mtp && layer >= spec.numLayers
            && std::size_t(layer - spec.numLayers) < spec.mtpLayers.size()) {
            pattern = &spec.mtpLayers[std::size_t(layer - spec.numLayers)];
        }
        block.topK = pattern != nullptr && pattern->topK > 0 ? pattern->topK : spec.moe->topK;
        block.numExperts = spec.moe->numExperts;
    }
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
    const bool regex = q->scheme == QuantScheme::Mxfp4;
    for (const auto& pattern : q->excludePatterns) {
        if (excludedByPattern(module, pattern, regex)) {
            return false;
        }
    }
    return std::none_of(m_ignore.begin(), m_ignore.end(),
        [&](const std::regex& re) { return std::regex_search(module, re); });
}

void GraphBuilder::quantizedLinear(const std::string& module, std::int64_t out, std::int64_t in,
    const LinearOptions& o, QuantScheme scheme, std::int64_t groupSize)
{
    const ModelSpec& spec = m_graph.spec;
    const auto& q = *spec.quantization;
    const ParallelRole scalar = ParallelRole::Replicated;
    switch (scheme) {
    case QuantScheme::BlockFp8:
        // DeepSeek-V3 README_WEIGHTS / inference/kernel.py: an [M, N] F8 weight carries a
        // scale of [ceil(M/128), ceil(N/128)] (e.g. kv_a_proj_with_mqa [576, 7168] → [5, 56]
        // in the published R1 checkpoint): F32 `weight_scale_inv`, or DeepSeek-V4's F8_E8M0
        // `scale`.
        tensor(module + ".weight", { out, in }, q.weightDtype, o.role, o.component,
            TensorKind::Weight, o.expert);
        tensor(module + "." + q.scaleSuffix,
            { ceilDiv(out, q.blockRows), ceilDiv(in, q.blockCols) }, q.scaleDtype, o.role,
            o.component, TensorKind::Scale, o.expert);
        break;
    case QuantScheme::PackedInt: {
        // compressed-tensors pack-quantized (Kimi-K2.5): `weight_packed` I32 [out, in·bits/32],
        // `weight_scale` [out, in/group] at the model dtype, `weight_shape` I32 [2] (published
        // checkpoint: down_proj [7168, 2048] → packed [7168, 256], scale [7168, 64]).
        const std::int32_t perWord = 32 / q.bits;
        tensor(module + ".weight_packed", { out, ceilDiv(in, perWord) }, DType::I32, o.role,
            o.component, TensorKind::Weight, o.expert);
        m_block->tensors.back().packFactor = perWord;
        tensor(module + ".weight_scale", { out, ceilDiv(in, groupSize) }, spec.dtype, o.role,
            o.component, TensorKind::Scale, o.expert);
        tensor(module + ".weight_shape", { 2 }, DType::I32, scalar, o.component,
            TensorKind::Metadata, o.expert);
        break;
    }
    case QuantScheme::PackedMxfp4:
        // compressed-tensors mxfp4-pack-quantized (Kimi-K3 experts): two E2M1 per byte, even
        // column in the low nibble; one E8M0 scale (uint8) per 32 inputs; no weight_shape.
        tensor(module + ".weight_packed", { out, ceilDiv(in, 2) }, DType::U8, o.role, o.component,
            TensorKind::Weight, o.expert);
        m_block->tensors.back().packFactor = 2;
        tensor(module + ".weight_scale", { out, ceilDiv(in, 32) }, DType::U8, o.role, o.component,
            TensorKind::Scale, o.expert);
        break;
    case QuantScheme::Nvfp4:
        // ModelOpt NVFP4 (nvfp4_tensor.py): U8 [out, in/2] two E2M1 per byte (element 2k low),
        // F8_E4M3 block scale per 16 inputs, F32 scalar global scale and input scale.
        tensor(module + ".weight", { out, ceilDiv(in, 2) }, DType::U8, o.role, o.component,
            TensorKind::Weight, o.expert);
        m_block->tensors.back().packFactor = 2;
        tensor(module + ".weight_scale", { out, ceilDiv(in, groupSize) }, DType::F8E4M3, o.role,
            o.component, TensorKind::Scale, o.expert);
        tensor(module + ".weight_scale_2", {}, DType::F32, scalar, o.component, TensorKind::Scale,
            o.expert);
        tensor(module + ".input_scale", {}, DType::F32, scalar, o.component, TensorKind::Scale,
            o.expert);
        break;
    case QuantScheme::Fp8PerTensor:
        // ModelOpt FP8: F8_E4M3 weight, F32 scalar weight and input scales.
        tensor(module + ".weight", { out, in }, DType::F8E4M3, o.role, o.component,
            TensorKind::Weight, o.expert);
        tensor(module + ".weight_scale", {}, DType::F32, scalar, o.component, TensorKind::Scale,
            o.expert);
        tensor(module + ".input_scale", {}, DType::F32, scalar, o.component, TensorKind::Scale,
            o.expert);
        break;
    case QuantScheme::Fp4Block:
        // DeepSeek-V4 FP4 experts: I8 [out, in/2] (two E2M1 per byte, even column low), one
        // F8_E8M0 `scale` per 32 inputs.
        tensor(module + ".weight", { out, ceilDiv(in, 2) }, DType::I8, o.role, o.component,
            TensorKind::Weight, o.expert);
        m_block->tensors.back().packFactor = 2;
        tensor(module + ".scale", { out, ceilDiv(in, groupSize) }, DType::F8E8M0, o.role,
            o.component, TensorKind::Scale, o.expert);
        break;
    case QuantScheme::Mxfp4:
        // gpt-oss stores only its fused experts as MXFP4 (blocks and scales, added by the
        // family); a Linear module stays unquantised.
        tensor(module + ".weight", { out, in }, spec.dtype, o.role, o.component, TensorKind::Weight,
            o.expert);
        break;
    }
}

void GraphBuilder::linear(
    const std::string& module, std::int64_t out, std::int64_t in, const LinearOptions& o)
{
    const ModelSpec& spec = m_graph.spec;
    // Kimi-K3: the ignore list leaves Linear modules to the rule that the checkpoint keeps in
    // BF16; only the routed experts are quantised.
    const bool expertsOnly = spec.quantization && spec.quantization->routedExpertsOnly;
    const bool quantized = o.quantizable && (!expertsOnly || o.expert >= 0)
        && (o.quantized >= 0 ? o.quantized == 1 : quantizes(module));
    if (!quantized) {
        tensor(module + ".weight", { out, in }, spec.dtype, o.role, o.component, TensorKind::Weight,
            o.expert);
    } else {
        const auto& q = *spec.quantization;
        const bool expertScheme = o.expert >= 0 && q.expertScheme.has_value();
        quantizedLinear(module, out, in, o, expertScheme ? *q.expertScheme : q.scheme,
            expertScheme ? q.expertGroupSize : q.groupSize);
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
