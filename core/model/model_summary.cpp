#include "model/model_summary.h"

#include <fmt/format.h>

namespace day0::model {

using nlohmann::json;

namespace {

std::string joined(const std::vector<std::int64_t>& values)
{
    std::string out;
    for (const auto v : values) {
        out += (out.empty() ? "" : ", ") + std::to_string(v);
    }
    return out;
}

std::string attentionLine(const ModelSpec& s)
{
    if (s.attention == AttentionKind::MLA) {
        const MlaSpec& m = s.mla;
        std::string line
            = fmt::format("MLA: {} heads, q_lora {}, kv_lora {}, qk {}+{} (nope+rope), v {}",
                s.numHeads, m.qLoraRank > 0 ? std::to_string(m.qLoraRank) : "none", m.kvLoraRank,
                m.qkNopeHeadDim, m.qkRopeHeadDim, m.vHeadDim);
        if (m.indexerHeads > 0) {
            line += fmt::format("; sparse indexer {} heads × {}, top-{}", m.indexerHeads,
                m.indexerHeadDim, m.indexerTopK);
        }
        return line;
    }
    std::string line = fmt::format("{}: {} heads, {} KV heads, head_dim {}",
        attentionKindName(s.attention), s.numHeads, s.numKvHeads, s.headDim);
    if (s.qkNorm) {
        line += ", QK-norm";
    }
    if (s.qkNormAcrossHeads) {
        line += ", QK-norm over all heads";
    }
    if (s.qkL2Norm) {
        line += ", QK L2-norm";
    }
    if (s.attentionBias) {
        line += s.attentionOutputBias ? ", q/k/v/o bias" : ", q/k/v bias";
    }
    if (s.partialRotaryFactor < 1.0) {
        line += fmt::format(", RoPE on {:g} of the head", s.partialRotaryFactor);
    }
    std::int64_t window = 0;
    std::int64_t chunk = 0;
    std::int64_t nope = 0;
    for (const auto& layer : s.layers) {
        window = std::max(window, layer.slidingWindow);
        chunk = std::max(chunk, layer.attentionChunk);
        nope += layer.rope ? 0 : 1;
    }
    if (window > 0) {
        line += fmt::format(", sliding window {}", window);
    }
    if (chunk > 0) {
        line += fmt::format(", chunked attention {} on RoPE layers, {} NoPE layers", chunk, nope);
    }
    return line;
}

std::string expertsLine(const MoeSpec& m)
{
    std::string line
        = fmt::format("{} routed (top-{}, width {})", m.numExperts, m.topK, m.expertIntermediate);
    if (m.sharedIntermediate > 0) {
        line += fmt::format(", {} shared (width {}{})",
            std::max<std::int64_t>(m.numSharedExperts, 1), m.sharedIntermediate,
            m.sharedExpertGate ? ", gated" : "");
    }
    line += m.scoring == RouterScoring::Sigmoid ? ", sigmoid router" : ", softmax router";
    if (m.expertScoreBias) {
        line += " with score-correction bias";
    }
    if (m.numGroups > 1) {
        line += fmt::format(", {} groups (top-{})", m.numGroups, m.topkGroup);
    }
    if (m.routedScalingFactor != 1.0) {
        line += fmt::format(", scaling {:g}", m.routedScalingFactor);
    }
    if (m.packedExperts) {
        line += ", fused expert tensors";
    }
    return line;
}

std::string ropeLine(const ModelSpec& s)
{
    const RopeScaling& r = s.ropeScaling;
    std::string line = s.ropeTheta == double(std::int64_t(s.ropeTheta))
        ? fmt::format("θ {}", std::int64_t(s.ropeTheta))
        : fmt::format("θ {:g}", s.ropeTheta);
    if (r.type == "default") {
        return line;
    }
    line += ", " + r.type;
    if (r.factor != 1.0) {
        line += fmt::format(" ×{:g}", r.factor);
    }
    if (r.type == "llama3") {
        line += fmt::format(" (low/high freq {:g}/{:g})", r.lowFreqFactor, r.highFreqFactor);
    } else if (r.type == "yarn") {
        line += fmt::format(" (β fast/slow {:g}/{:g}, mscale {:g}/{:g})", r.betaFast, r.betaSlow,
            r.mscale, r.mscaleAllDim);
    }
    if (r.originalMaxPositions > 0) {
        line += fmt::format(", original context {}", r.originalMaxPositions);
    }
    if (!r.mropeSection.empty()) {
        line += " sections [" + joined(r.mropeSection) + "]";
    }
    return line;
}

std::string quantizationLine(const QuantizationSpec& q)
{
    if (q.scheme == QuantScheme::BlockFp8) {
        return fmt::format("{} weights, {}×{} blocks with F32 {}{}", dtypeName(q.weightDtype),
            q.blockRows, q.blockCols, q.scaleSuffix,
            q.skippedModules.empty() ? ""
                                     : fmt::format(", {} modules kept", q.skippedModules.size()));
    }
    return fmt::format(
        "INT{} packed ({}), groups of {} with {}", q.bits, q.format, q.groupSize, q.scaleSuffix);
}

std::string visionLine(const VisionSpec& v)
{
    std::string line = fmt::format("{}: {} blocks, width {}, {} heads, MLP {}, patch {}", v.kind,
        v.depth, v.hiddenSize, v.numHeads, v.intermediateSize, v.patchSize);
    if (v.temporalPatchSize > 1) {
        line += fmt::format("×{} frames", v.temporalPatchSize);
    }
    line += fmt::format(
        ", merge {}×{} → {}", v.spatialMergeSize, v.spatialMergeSize, v.outHiddenSize);
    if (!v.deepstackIndexes.empty()) {
        line += ", deepstack after blocks " + joined(v.deepstackIndexes);
    }
    return line;
}

json componentJson(const ParameterCounts& c)
{
    json out = json::object();
    for (const auto& entry : c.byComponent) {
        out[componentName(entry.component)]
            = { { "total", entry.total }, { "active", entry.active } };
    }
    return out;
}

} // namespace

std::vector<SummaryLine> describeArchitecture(const ModelSpec& s)
{
    std::vector<SummaryLine> lines;
    std::string family = familyName(s.family);
    if (s.modelType != family) {
        family += fmt::format(" (model_type {})", s.modelType.empty() ? "none" : s.modelType);
    }
    if (!s.architecture.empty()) {
        family += ", " + s.architecture;
    }
    lines.push_back({ "family", family });
    std::string layers = fmt::format("{} decoder layers", s.numLayers);
    if (s.moe) {
        layers
            += fmt::format(" ({} dense, {} MoE)", s.numLayers - s.numMoeLayers(), s.numMoeLayers());
    }
    if (s.numMtpLayers > 0) {
        layers += fmt::format(" + {} MTP", s.numMtpLayers);
    }
    lines.push_back({ "layers", layers });
    lines.push_back({ "hidden",
        fmt::format("{}, dense MLP {}, vocab {}, context {}", s.hiddenSize, s.intermediateSize,
            s.vocabSize, s.maxPositions) });
    lines.push_back({ "attention", attentionLine(s) });
    lines.push_back({ "experts", s.moe ? expertsLine(*s.moe) : "none (dense)" });
    lines.push_back({ "RoPE", ropeLine(s) });
    lines.push_back({ "vision", s.vision ? visionLine(*s.vision) : "none" });
    lines.push_back(
        { "quantization", s.quantization ? quantizationLine(*s.quantization) : "none" });
    lines.push_back({ "weights",
        fmt::format("{}, embeddings {}, norm eps {:g}, {}", dtypeName(s.dtype),
            s.tieEmbeddings ? "tied" : "untied", s.normEps, s.hiddenAct) });
    return lines;
}

json inspectJson(const LayerGraph& graph, const ParameterCounts& c)
{
    const ModelSpec& s = graph.spec;
    json out;
    out["name"] = s.name;
    out["model_type"] = s.modelType;
    out["family"] = familyName(s.family);
    out["architecture"] = s.architecture;
    out["num_layers"] = s.numLayers;
    out["num_moe_layers"] = s.numMoeLayers();
    out["num_mtp_layers"] = s.numMtpLayers;
    out["hidden_size"] = s.hiddenSize;
    out["intermediate_size"] = s.intermediateSize;
    out["vocab_size"] = s.vocabSize;
    out["num_heads"] = s.numHeads;
    out["num_kv_heads"] = s.numKvHeads;
    out["head_dim"] = s.headDim;
    out["attention"] = attentionKindName(s.attention);
    out["max_position_embeddings"] = s.maxPositions;
    out["dtype"] = std::string(dtypeName(s.dtype));
    out["tie_embeddings"] = s.tieEmbeddings;
    out["rope"] = { { "type", s.ropeScaling.type }, { "theta", s.ropeTheta },
        { "factor", s.ropeScaling.factor } };
    if (s.attention == AttentionKind::MLA) {
        out["mla"] = { { "q_lora_rank", s.mla.qLoraRank }, { "kv_lora_rank", s.mla.kvLoraRank },
            { "qk_nope_head_dim", s.mla.qkNopeHeadDim },
            { "qk_rope_head_dim", s.mla.qkRopeHeadDim }, { "v_head_dim", s.mla.vHeadDim } };
    }
    if (s.moe) {
        const MoeSpec& m = *s.moe;
        out["moe"] = { { "experts", m.numExperts }, { "top_k", m.topK },
            { "expert_intermediate_size", m.expertIntermediate },
            { "shared_experts",
                m.sharedIntermediate > 0 ? std::max<std::int64_t>(m.numSharedExperts, 1) : 0 },
            { "shared_intermediate_size", m.sharedIntermediate },
            { "scoring", m.scoring == RouterScoring::Sigmoid ? "sigmoid" : "softmax" } };
    } else {
        out["moe"] = nullptr;
    }
    if (s.vision) {
        out["vision_tower"] = { { "kind", s.vision->kind }, { "depth", s.vision->depth },
            { "hidden_size", s.vision->hiddenSize }, { "num_heads", s.vision->numHeads } };
    } else {
        out["vision_tower"] = nullptr;
    }
    if (s.quantization) {
        const auto& q = *s.quantization;
        out["quantization"] = { { "method", q.method },
            { "scheme", q.scheme == QuantScheme::BlockFp8 ? "block_fp8" : "packed_int" },
            { "weight_dtype", std::string(dtypeName(q.weightDtype)) } };
    } else {
        out["quantization"] = nullptr;
    }
    out["params"] = { { "total", c.total }, { "active", c.active }, { "embedding", c.embedding },
        { "lm_head", c.lmHead }, { "mtp", c.mtp }, { "vision", c.vision },
        { "active_without_embedding", c.activeWithoutEmbedding }, { "main_model", c.mainModel },
        { "by_component", componentJson(c) } };
    out["tensors"] = c.tensors;
    out["checkpoint_bytes"] = c.bytes;
    out["warnings"] = s.warnings;
    return out;
}

} // namespace day0::model
