#include "model/model_summary.h"

#include "model/cache_footprint.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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
    line += m.scoring == RouterScoring::Sigmoid    ? ", sigmoid router"
        : m.scoring == RouterScoring::SqrtSoftplus ? ", sqrt-softplus router"
                                                   : ", softmax router";
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
        return fmt::format("{} weights, {}×{} blocks with {} {}{}", dtypeName(q.weightDtype),
            q.blockRows, q.blockCols, dtypeName(q.scaleDtype), q.scaleSuffix,
            q.skippedModules.empty() ? ""
                                     : fmt::format(", {} modules kept", q.skippedModules.size()));
    }
    std::string line;
    switch (q.scheme) {
    case QuantScheme::PackedInt:
        line = fmt::format("INT{} packed ({}), groups of {} with {}", q.bits, q.format, q.groupSize,
            q.scaleSuffix);
        break;
    case QuantScheme::Mxfp4:
        line = "MXFP4 fused experts (E2M1 blocks of 32, E8M0 scales)";
        break;
    case QuantScheme::PackedMxfp4:
        line = "MXFP4 (compressed-tensors mxfp4-pack-quantized, E8M0 scale per 32)";
        break;
    case QuantScheme::Nvfp4:
        line = fmt::format(
            "NVFP4 (E2M1, E4M3 scale per {}, F32 global and input scales)", q.groupSize);
        break;
    case QuantScheme::Fp8PerTensor:
        line = "FP8 E4M3 with per-tensor F32 weight and input scales";
        break;
    default:
        line = quantSchemeName(q.scheme);
        break;
    }
    line += fmt::format(" [{}, {}]", q.method, q.source);
    if (q.expertScheme) {
        line += fmt::format("; routed experts {}", quantSchemeName(*q.expertScheme));
    }
    if (q.kvCacheDtype) {
        line += fmt::format("; KV cache {}", dtypeName(*q.kvCacheDtype));
    }
    return line;
}

std::string visionLine(const VisionSpec& v)
{
    std::string line = fmt::format("{}: {} blocks, width {}, {} heads, MLP {}, patch {}", v.kind,
        v.depth, v.hiddenSize, v.numHeads, v.intermediateSize, v.patchSize);
    if (v.temporalPatchSize > 1) {
        line += fmt::format("×{} frames", v.temporalPatchSize);
    }
    if (v.poolingKernel > 0) {
        line += fmt::format(", pool {}×{} → {}", v.poolingKernel, v.poolingKernel, v.outHiddenSize);
    } else {
        line += fmt::format(
            ", merge {}×{} → {}", v.spatialMergeSize, v.spatialMergeSize, v.outHiddenSize);
    }
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

// The storage of one weight tensor in words, from its dtype, packing and the checkpoint's
// quantisation scheme.
std::string formatOf(const TensorSpec& t, const ModelSpec& spec)
{
    const auto& q = spec.quantization;
    const bool quantised = q.has_value()
        && (t.dtype == DType::U8 || t.dtype == DType::I8 || t.dtype == DType::I32
            || t.dtype == DType::F8E4M3 || t.dtype == DType::F8E5M2)
        && t.kind == TensorKind::Weight;
    if (!quantised) {
        std::string name(dtypeName(t.dtype));
        std::transform(name.begin(), name.end(), name.begin(),
            [](unsigned char c) { return char(std::tolower(c)); });
        return name;
    }
    const QuantScheme scheme = t.isExpert() && q->expertScheme ? *q->expertScheme : q->scheme;
    switch (scheme) {
    case QuantScheme::BlockFp8:
        return fmt::format("fp8 {}, {}×{} block scales ({})",
            t.dtype == DType::F8E5M2 ? "e5m2" : "e4m3", q->blockRows, q->blockCols,
            dtypeName(q->scaleDtype));
    case QuantScheme::PackedInt:
        return fmt::format("int{} packed in int32, groups of {}", q->bits, q->groupSize);
    case QuantScheme::Mxfp4:
    case QuantScheme::PackedMxfp4:
        return "mxfp4 (e2m1, e8m0 scale per 32)";
    case QuantScheme::Nvfp4:
        return fmt::format("nvfp4 (e2m1, e4m3 scale per {}, f32 global scale)", q->groupSize);
    case QuantScheme::Fp8PerTensor:
        return "fp8 e4m3, per-tensor scale";
    case QuantScheme::Fp4Block:
        return fmt::format("fp4 e2m1 (e8m0 scale per {})", q->expertGroupSize);
    }
    return "?";
}

} // namespace

std::vector<LayerCell> layerPattern(const ModelSpec& spec)
{
    std::vector<LayerCell> out;
    auto add = [&](const LayerSpec& l, std::int64_t index, bool mtp) {
        LayerCell c;
        c.index = index;
        c.mtp = mtp;
        c.mixer = l.mixer;
        c.ffn = l.ffn;
        c.window = l.slidingWindow > 0 ? l.slidingWindow : l.attentionChunk;
        c.compressRatio = l.compressRatio;
        c.heads = spec.headsOf(l);
        c.kvHeads = spec.kvHeadsOf(l);
        c.ffnWidth = l.ffn == FfnKind::Dense ? spec.ffnWidthOf(l) : 0;
        c.topK = spec.topKOf(l);
        c.hashRouted = l.hashRouted;
        out.push_back(c);
    };
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        add(spec.layers[i], std::int64_t(i), false);
    }
    for (std::size_t i = 0; i < spec.mtpLayers.size(); ++i) {
        add(spec.mtpLayers[i], spec.numLayers + std::int64_t(i), true);
    }
    return out;
}

char mixerLetter(MixerKind kind)
{
    switch (kind) {
    case MixerKind::Attention:
        return 'A';
    case MixerKind::Sliding:
        return 'S';
    case MixerKind::Chunked:
        return 'C';
    case MixerKind::SparseMla:
        return 'D';
    case MixerKind::Compressed:
        return 'Z';
    case MixerKind::BlockSparse:
        return 'B';
    case MixerKind::GatedDeltaNet:
        return 'G';
    case MixerKind::KimiDelta:
        return 'K';
    case MixerKind::Mamba2:
        return 'M';
    case MixerKind::Linear:
        return 'L';
    case MixerKind::None:
        return '-';
    }
    return '?';
}

std::string patternLine(const ModelSpec& spec)
{
    // Kinds with counts, in order of first appearance.
    std::vector<std::pair<std::string, int>> kinds;
    std::string letters;
    for (const auto& l : spec.layers) {
        std::string name = mixerKindName(l.mixer);
        if (l.mixer == MixerKind::Sliding || l.mixer == MixerKind::Chunked) {
            name += fmt::format("({})", l.slidingWindow > 0 ? l.slidingWindow : l.attentionChunk);
        } else if (l.mixer == MixerKind::Compressed) {
            name += l.compressRatio > 0 ? fmt::format("(1:{})", l.compressRatio) : "(window)";
        }
        auto it = std::find_if(
            kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == name; });
        if (it == kinds.end()) {
            kinds.emplace_back(name, 1);
        } else {
            ++it->second;
        }
        letters += mixerLetter(l.mixer);
        if (l.mixer == MixerKind::Compressed && l.compressRatio > 0) {
            letters.back() = l.compressRatio == 4 ? 'Z' : 'H';
        }
    }
    std::string line;
    for (const auto& [name, n] : kinds) {
        line += fmt::format("{}{} ×{}", line.empty() ? "" : ", ", name, n);
    }
    // The shortest unit that repeats over the whole pattern, if one does.
    std::string compact = letters;
    for (std::size_t p = 1; p * 2 <= letters.size(); ++p) {
        if (letters.size() % p != 0) {
            continue;
        }
        bool repeats = true;
        for (std::size_t i = p; i < letters.size() && repeats; ++i) {
            repeats = letters[i] == letters[i - p];
        }
        if (repeats) {
            compact = fmt::format("({})×{}", letters.substr(0, p), letters.size() / p);
            break;
        }
    }
    if (kinds.size() > 1) {
        line += "; " + compact;
    }
    int dense = 0;
    int moe = 0;
    int none = 0;
    int linear = 0;
    for (const auto& l : spec.layers) {
        dense += l.ffn == FfnKind::Dense ? 1 : 0;
        moe += l.ffn == FfnKind::Moe ? 1 : 0;
        none += l.ffn == FfnKind::None ? 1 : 0;
        linear += l.ffn == FfnKind::Linear ? 1 : 0;
    }
    std::string ffn;
    for (const auto& [name, n] : std::initializer_list<std::pair<const char*, int>> {
             { "dense", dense }, { "MoE", moe }, { "linear", linear }, { "no FFN", none } }) {
        if (n > 0) {
            ffn += fmt::format("{}{} {}", ffn.empty() ? "" : ", ", n, name);
        }
    }
    return line + " | feed-forward: " + ffn;
}

std::vector<WeightFormat> weightFormats(const LayerGraph& graph)
{
    std::map<std::pair<Component, std::string>, WeightFormat> groups;
    for (const auto& block : graph.blocks) {
        // Scales belong to the weight they follow (same module stem).
        std::string lastFormat;
        for (const auto& t : block.tensors) {
            if (t.kind == TensorKind::Scale || t.kind == TensorKind::Metadata) {
                if (!lastFormat.empty()) {
                    groups[{ t.component, lastFormat }].bytes += t.bytes();
                }
                continue;
            }
            lastFormat = formatOf(t, graph.spec);
            auto& g = groups[{ t.component, lastFormat }];
            g.component = t.component;
            g.format = lastFormat;
            g.params += t.params();
            g.bytes += t.bytes();
        }
    }
    std::vector<WeightFormat> out;
    for (auto& [key, g] : groups) {
        out.push_back(std::move(g));
    }
    std::stable_sort(out.begin(), out.end(), [](const WeightFormat& a, const WeightFormat& b) {
        return a.component != b.component ? a.component < b.component : a.params > b.params;
    });
    return out;
}

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
    if (!s.layers.empty()) {
        lines.push_back({ "layer pattern", patternLine(s) });
    }
    lines.push_back({ "hidden",
        fmt::format("{}, dense MLP {}, vocab {}, context {}", s.hiddenSize, s.intermediateSize,
            s.vocabSize, s.maxPositions) });
    lines.push_back({ "attention", attentionLine(s) });
    lines.push_back({ "experts", s.moe ? expertsLine(*s.moe) : "none (dense)" });
    lines.push_back({ "RoPE", ropeLine(s) });
    lines.push_back({ "vision", s.vision ? visionLine(*s.vision) : "none" });
    if (s.audio) {
        const AudioSpec& a = *s.audio;
        lines.push_back({ "audio",
            fmt::format("{}: {} conformer layers, width {}, {} heads → {}", a.kind, a.depth,
                a.hiddenSize, a.numHeads, a.outputSize) });
    }
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
            { "scoring",
                m.scoring == RouterScoring::Sigmoid            ? "sigmoid"
                    : m.scoring == RouterScoring::SqrtSoftplus ? "sqrtsoftplus"
                                                               : "softmax" } };
    } else {
        out["moe"] = nullptr;
    }
    if (s.vision) {
        out["vision_tower"] = { { "kind", s.vision->kind }, { "depth", s.vision->depth },
            { "hidden_size", s.vision->hiddenSize }, { "num_heads", s.vision->numHeads } };
    } else {
        out["vision_tower"] = nullptr;
    }
    if (s.audio) {
        out["audio_tower"] = { { "kind", s.audio->kind }, { "depth", s.audio->depth },
            { "hidden_size", s.audio->hiddenSize }, { "num_heads", s.audio->numHeads } };
    }
    if (s.quantization) {
        const auto& q = *s.quantization;
        out["quantization"] = { { "method", q.method }, { "scheme", quantSchemeName(q.scheme) },
            { "weight_dtype", std::string(dtypeName(q.weightDtype)) }, { "source", q.source } };
        if (q.expertScheme) {
            out["quantization"]["expert_scheme"] = quantSchemeName(*q.expertScheme);
        }
        if (q.kvCacheDtype) {
            out["quantization"]["kv_cache_dtype"] = std::string(dtypeName(*q.kvCacheDtype));
        }
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
    out["notes"] = s.notes;
    json ignored = json::array();
    for (const auto& key : s.ignored) {
        ignored.push_back({ { "path", key.path }, { "reason", key.reason } });
    }
    out["partial"] = s.partial;
    out["ignored_keys"] = ignored;
    json layers = json::array();
    json kinds = json::object();
    for (const auto& cell : layerPattern(s)) {
        json l { { "index", cell.index }, { "mixer", mixerKindName(cell.mixer) },
            { "ffn", ffnKindName(cell.ffn) } };
        if (cell.mtp) {
            l["mtp"] = true;
        }
        if (cell.window > 0) {
            l["window"] = cell.window;
        }
        if (cell.compressRatio > 0) {
            l["compress_ratio"] = cell.compressRatio;
        }
        if (cell.hashRouted) {
            l["hash_routed"] = true;
        }
        if (!cell.mtp) {
            const std::string kind = mixerKindName(cell.mixer);
            kinds[kind] = kinds.value(kind, 0) + 1;
        }
        layers.push_back(std::move(l));
    }
    out["layers"] = layers;
    out["layer_kinds"] = kinds;
    json formats = json::array();
    for (const auto& f : weightFormats(graph)) {
        formats.push_back({ { "component", componentName(f.component) }, { "format", f.format },
            { "params", f.params }, { "bytes", f.bytes } });
    }
    out["weight_formats"] = formats;
    // KV / state of one sequence, per layer kind, at BF16 KV.
    json cache = json::array();
    for (const auto& k : cacheByKind(s, double(std::max<std::int64_t>(s.maxPositions, 1)), 2.0)) {
        cache.push_back({ { "mixer", mixerKindName(k.kind) }, { "layers", k.layers },
            { "bytes_per_token", k.bytesPerToken }, { "fixed_bytes", k.fixedBytes } });
    }
    out["cache_bf16"] = cache;
    return out;
}

} // namespace day0::model
