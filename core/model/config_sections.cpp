#include "model/config_sections.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::model::detail {

using nlohmann::json;

namespace {

std::string nested(const std::string& origin, const std::string& key)
{
    return fmt::format("{} ({})", origin, key);
}

bool present(const json& object, const std::string& key)
{
    return object.is_object() && object.contains(key) && !object.at(key).is_null();
}

std::vector<std::string> stringArray(const json& object, JsonReader& reader, const std::string& key)
{
    std::vector<std::string> out;
    if (!present(object, key)) {
        return out;
    }
    const auto& array = object.at(key);
    if (!array.is_array()) {
        reader.fail(key, "must be an array of strings");
        return out;
    }
    for (const auto& item : array) {
        if (!item.is_string()) {
            reader.fail(key, fmt::format("must hold strings, found {}", item.dump()));
            return out;
        }
        out.push_back(item.get<std::string>());
    }
    return out;
}

// Which decoder layers are MoE, by each family's own rule (as the HF modeling code decides it).
bool deepseekMoeLayer(std::int64_t i, std::int64_t firstDense, std::int64_t frequency)
{
    return i >= firstDense && i % frequency == 0;
}

} // namespace

std::vector<std::int64_t> intArrayOr(const json& object, JsonReader& reader, const std::string& key)
{
    std::vector<std::int64_t> out;
    if (!present(object, key)) {
        return out;
    }
    const auto& array = object.at(key);
    if (!array.is_array()) {
        reader.fail(key, fmt::format("must be an array of integers, found {}", array.dump()));
        return out;
    }
    for (const auto& item : array) {
        if (!item.is_number_integer() || item.get<std::int64_t>() < 0) {
            reader.fail(key, fmt::format("must hold non-negative integers, found {}", item.dump()));
            return out;
        }
        out.push_back(item.get<std::int64_t>());
    }
    return out;
}

Result<void> readRope(const json& text, const std::string& origin, ModelSpec& spec)
{
    JsonReader reader(text, origin);
    spec.ropeTheta = reader.numberOr("rope_theta", spec.ropeTheta);
    spec.partialRotaryFactor = reader.numberOr("partial_rotary_factor", 1.0);
    if (!reader.ok()) {
        return reader.error();
    }
    if (spec.partialRotaryFactor <= 0.0 || spec.partialRotaryFactor > 1.0) {
        reader.fail("partial_rotary_factor", "must be in (0, 1]");
        return reader.error();
    }
    std::string key;
    for (const char* candidate : { "rope_scaling", "rope_parameters" }) {
        if (present(text, candidate)) {
            key = candidate;
            break;
        }
    }
    if (key.empty()) {
        return success();
    }
    const auto& rope = text.at(key);
    if (!rope.is_object()) {
        reader.fail(key, fmt::format("must be an object or null, found {}", rope.dump()));
        return reader.error();
    }
    JsonReader r(rope, nested(origin, key));
    RopeScaling& s = spec.ropeScaling;
    s.type = r.stringOr("rope_type", r.stringOr("type", "default"));
    s.factor = r.numberOr("factor", 1.0);
    s.lowFreqFactor = r.numberOr("low_freq_factor", s.lowFreqFactor);
    s.highFreqFactor = r.numberOr("high_freq_factor", s.highFreqFactor);
    s.originalMaxPositions = r.intOr("original_max_position_embeddings", 0);
    s.betaFast = r.numberOr("beta_fast", s.betaFast);
    s.betaSlow = r.numberOr("beta_slow", s.betaSlow);
    s.mscale = r.numberOr("mscale", s.mscale);
    s.mscaleAllDim = r.numberOr("mscale_all_dim", s.mscaleAllDim);
    s.mropeSection = intArrayOr(rope, r, "mrope_section");
    // transformers 5 moved rope_theta into rope_parameters.
    spec.ropeTheta = r.numberOr("rope_theta", spec.ropeTheta);
    if (r.ok() && s.factor <= 0.0) {
        r.fail("factor", fmt::format("must be positive, found {}", s.factor));
    }
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

Result<void> readQuantization(const json& quantization, const std::string& origin, ModelSpec& spec)
{
    JsonReader r(quantization, origin);
    const std::string method = r.stringOr("quant_method", "");
    if (!r.ok()) {
        return r.error();
    }
    QuantizationSpec q;
    q.method = method;
    if (method == "fp8") {
        q.scheme = QuantScheme::BlockFp8;
        const std::string fmtName = r.stringOr("fmt", "e4m3");
        if (fmtName == "e4m3") {
            q.weightDtype = DType::F8E4M3;
        } else if (fmtName == "e5m2") {
            q.weightDtype = DType::F8E5M2;
        } else {
            r.fail("fmt", fmt::format(R"(must be "e4m3" or "e5m2", found "{}")", fmtName));
        }
        const auto block = intArrayOr(quantization, r, "weight_block_size");
        if (r.ok() && !present(quantization, "weight_block_size")) {
            spec.warnings.push_back(fmt::format("{}: FP8 without 'weight_block_size' (per-tensor "
                                                "scales) is not modelled; weights are listed "
                                                "unquantised",
                origin));
            return success();
        }
        if (r.ok() && (block.size() != 2 || block[0] <= 0 || block[1] <= 0)) {
            r.fail("weight_block_size", "must be two positive integers");
        }
        if (r.ok()) {
            q.blockRows = block[0];
            q.blockCols = block[1];
        }
        q.skippedModules = stringArray(quantization, r, "modules_to_not_convert");
        for (auto& name : stringArray(quantization, r, "ignored_layers")) {
            q.skippedModules.push_back(std::move(name));
        }
        q.format = r.stringOr("scale_fmt", "");
    } else if (method == "compressed-tensors") {
        q.scheme = QuantScheme::PackedInt;
        q.format = r.stringOr("format", "");
        const json* weights = nullptr;
        if (present(quantization, "config_groups")
            && quantization.at("config_groups").is_object()) {
            for (const auto& [name, group] : quantization.at("config_groups").items()) {
                if (group.is_object() && present(group, "weights")) {
                    weights = &group.at("weights");
                    break;
                }
            }
        }
        if (!r.ok()) {
            return r.error();
        }
        if (q.format != "pack-quantized" || weights == nullptr || !weights->is_object()) {
            spec.warnings.push_back(fmt::format("{}: compressed-tensors format '{}' is not "
                                                "modelled; weights are listed unquantised",
                origin, q.format));
            return success();
        }
        JsonReader w(*weights, nested(origin, "config_groups.weights"));
        q.bits = static_cast<std::int32_t>(w.intOr("num_bits", 4));
        q.groupSize = w.intOr("group_size", 0);
        const std::string type = w.stringOr("type", "int");
        if (w.ok() && (type != "int" || (q.bits != 4 && q.bits != 8))) {
            w.fail("num_bits",
                fmt::format("{}-bit {} weights are not supported (int4, int8)", q.bits, type));
        }
        if (w.ok() && q.groupSize <= 0) {
            w.fail("group_size", "must be a positive integer for group quantisation");
        }
        if (!w.ok()) {
            return w.error();
        }
        q.weightDtype = DType::I32;
        q.scaleSuffix = "weight_scale";
        for (auto& entry : stringArray(quantization, r, "ignore")) {
            if (entry.rfind("re:", 0) == 0) {
                q.ignorePatterns.push_back(entry.substr(3));
            } else {
                q.skippedModules.push_back(std::move(entry));
            }
        }
    } else {
        spec.warnings.push_back(fmt::format("{}: quant_method '{}' is not modelled; weights are "
                                            "listed unquantised at {}",
            origin, method, dtypeName(spec.dtype)));
        return success();
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.quantization = std::move(q);
    return success();
}

Result<void> readMla(const json& text, const std::string& origin, ModelSpec& spec)
{
    JsonReader r(text, origin);
    MlaSpec& m = spec.mla;
    m.qLoraRank = r.intOr("q_lora_rank", 0);
    m.kvLoraRank = r.requirePositive("kv_lora_rank");
    m.qkNopeHeadDim = r.requirePositive("qk_nope_head_dim");
    m.qkRopeHeadDim = r.requirePositive("qk_rope_head_dim");
    m.vHeadDim = r.requirePositive("v_head_dim");
    m.indexerHeads = r.intOr("index_n_heads", 0);
    m.indexerHeadDim = r.intOr("index_head_dim", 0);
    m.indexerTopK = r.intOr("index_topk", 0);
    if (r.ok() && m.qLoraRank < 0) {
        r.fail("q_lora_rank", "must be a positive integer or null");
    }
    if (r.ok() && (m.indexerHeads > 0) != (m.indexerHeadDim > 0)) {
        r.fail("index_head_dim", "and 'index_n_heads' must be given together");
    }
    if (r.ok() && m.indexerHeads > 0 && m.qLoraRank == 0) {
        r.fail("q_lora_rank", "must be set when the sparse-attention indexer is used");
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.attention = AttentionKind::MLA;
    spec.headDim = m.qkNopeHeadDim + m.qkRopeHeadDim;
    return success();
}

namespace {

Result<void> readDeepseekMoe(const json& text, JsonReader& r, ModelSpec& spec)
{
    if (!present(text, "n_routed_experts")) {
        return success(); // DeepSeek configs with n_routed_experts null are dense
    }
    MoeSpec moe;
    moe.numExperts = r.requirePositive("n_routed_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.numSharedExperts = r.intOr("n_shared_experts", 0);
    moe.sharedIntermediate = moe.numSharedExperts * moe.expertIntermediate;
    const std::string scoring
        = r.stringOr("scoring_func", spec.family == Family::DeepseekV2 ? "softmax" : "sigmoid");
    moe.scoring = scoring == "sigmoid" ? RouterScoring::Sigmoid : RouterScoring::Softmax;
    const std::string topkMethod = r.stringOr("topk_method", "");
    // DeepseekV3TopkRouter and Glm4MoeTopkRouter always register e_score_correction_bias; V2
    // has it only with noaux_tc.
    moe.expertScoreBias = spec.family == Family::DeepseekV2
        ? topkMethod == "noaux_tc"
        : (topkMethod.empty() || topkMethod == "noaux_tc");
    moe.normTopkProb = r.boolOr("norm_topk_prob", spec.family != Family::DeepseekV2);
    moe.routedScalingFactor = r.numberOr("routed_scaling_factor", 1.0);
    moe.numGroups = r.intOr("n_group", 1);
    moe.topkGroup = r.intOr("topk_group", 1);
    const std::int64_t firstDense = r.intOr("first_k_dense_replace", 0);
    // GLM-4.5 has no moe_layer_freq: every layer from first_k_dense_replace on is MoE.
    const std::int64_t frequency = r.intOr("moe_layer_freq", 1);
    if (!r.ok()) {
        return r.error();
    }
    if (scoring != "sigmoid" && scoring != "softmax") {
        r.fail(
            "scoring_func", fmt::format(R"(must be "sigmoid" or "softmax", found "{}")", scoring));
    } else if (moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'n_routed_experts' ({})", moe.topK, moe.numExperts));
    } else if (moe.numSharedExperts < 0) {
        r.fail("n_shared_experts", "must not be negative");
    } else if (firstDense < 0 || firstDense > spec.numLayers) {
        r.fail("first_k_dense_replace",
            fmt::format(
                "({}) must be between 0 and num_hidden_layers ({})", firstDense, spec.numLayers));
    } else if (frequency <= 0) {
        r.fail("moe_layer_freq", "must be a positive integer");
    } else if (moe.numGroups <= 0 || moe.numExperts % moe.numGroups != 0) {
        r.fail("n_group",
            fmt::format("({}) must divide 'n_routed_experts' ({})", moe.numGroups, moe.numExperts));
    }
    if (!r.ok()) {
        return r.error();
    }
    for (std::int64_t i = 0; i < spec.numLayers; ++i) {
        spec.layers[std::size_t(i)].moe = deepseekMoeLayer(i, firstDense, frequency);
    }
    for (std::int64_t i = 0; i < spec.numMtpLayers; ++i) {
        spec.mtpLayers[std::size_t(i)].moe
            = deepseekMoeLayer(spec.numLayers + i, firstDense, frequency);
    }
    spec.moe = moe;
    return success();
}

Result<void> readQwenMoe(const json& text, JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.normTopkProb = r.boolOr("norm_topk_prob", spec.family != Family::Qwen2Moe);
    const std::int64_t shared = r.intOr("shared_expert_intermediate_size", 0);
    const std::int64_t step = r.intOr("decoder_sparse_step", 1);
    const auto mlpOnly = intArrayOr(text, r, "mlp_only_layers");
    if (!r.ok()) {
        return r.error();
    }
    if (moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_experts' ({})", moe.topK, moe.numExperts));
    } else if (step <= 0) {
        r.fail("decoder_sparse_step", "must be a positive integer");
    } else if (shared < 0) {
        r.fail("shared_expert_intermediate_size", "must not be negative");
    }
    for (const auto layer : mlpOnly) {
        if (r.ok() && layer >= spec.numLayers) {
            r.fail("mlp_only_layers",
                fmt::format("holds layer {} but the model has {} layers", layer, spec.numLayers));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    if (spec.family == Family::Qwen2Moe && shared > 0) {
        // Qwen2-MoE: one shared expert with a sigmoid gate (`shared_expert_gate`).
        moe.numSharedExperts = 1;
        moe.sharedIntermediate = shared;
        moe.sharedExpertGate = true;
    } else if (shared > 0) {
        spec.warnings.push_back(fmt::format("{}: 'shared_expert_intermediate_size' is {} but "
                                            "{} has no shared expert; ignored",
            r.origin(), shared, familyName(spec.family)));
    }
    moe.packedExperts = spec.family == Family::Qwen3VlMoe;
    for (std::int64_t i = 0; i < spec.numLayers; ++i) {
        const bool dense = std::find(mlpOnly.begin(), mlpOnly.end(), i) != mlpOnly.end();
        spec.layers[std::size_t(i)].moe = !dense && (i + 1) % step == 0;
    }
    spec.moe = moe;
    return success();
}

Result<void> readMixtralMoe(JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_local_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = spec.intermediateSize;
    moe.normTopkProb = true;
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_local_experts' ({})", moe.topK, moe.numExperts));
    }
    if (!r.ok()) {
        return r.error();
    }
    for (auto& layer : spec.layers) {
        layer.moe = true;
    }
    spec.moe = moe;
    return success();
}

Result<void> readLlama4Moe(const json& text, JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_local_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    // Llama4TextMoe: routed experts and the one shared expert are `intermediate_size` wide; dense
    // layers use `intermediate_size_mlp`.
    moe.expertIntermediate = r.requirePositive("intermediate_size");
    moe.numSharedExperts = 1;
    moe.sharedIntermediate = moe.expertIntermediate;
    moe.scoring = RouterScoring::Sigmoid;
    moe.packedExperts = true;
    const std::int64_t step = r.intOr("interleave_moe_layer_step", 1);
    auto moeLayers = intArrayOr(text, r, "moe_layers");
    if (r.ok() && step <= 0) {
        r.fail("interleave_moe_layer_step", "must be a positive integer");
    }
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_local_experts' ({})", moe.topK, moe.numExperts));
    }
    if (!r.ok()) {
        return r.error();
    }
    if (!present(text, "moe_layers")) {
        for (std::int64_t i = step - 1; i < spec.numLayers; i += step) {
            moeLayers.push_back(i);
        }
    }
    for (const auto layer : moeLayers) {
        if (layer >= spec.numLayers) {
            r.fail("moe_layers",
                fmt::format("holds layer {} but the model has {} layers", layer, spec.numLayers));
            return r.error();
        }
        spec.layers[std::size_t(layer)].moe = true;
    }
    spec.moe = moe;
    return success();
}

} // namespace

Result<void> readMoe(const json& text, const std::string& origin, ModelSpec& spec)
{
    JsonReader r(text, origin);
    switch (spec.family) {
    case Family::DeepseekV2:
    case Family::DeepseekV3:
    case Family::Glm4Moe:
        return readDeepseekMoe(text, r, spec);
    case Family::Qwen2Moe:
    case Family::Qwen3Moe:
    case Family::Qwen3VlMoe:
        return readQwenMoe(text, r, spec);
    case Family::Mixtral:
        return readMixtralMoe(r, spec);
    case Family::Llama4:
        return readLlama4Moe(text, r, spec);
    default:
        return success();
    }
}

Result<void> readVision(
    const json& vision, const std::string& origin, const std::string& kind, ModelSpec& spec)
{
    if (!vision.is_object()) {
        return Error::badInput(fmt::format("{}: 'vision_config' must be an object", origin));
    }
    JsonReader r(vision, nested(origin, "vision_config"));
    VisionSpec v;
    v.kind = kind;
    if (kind == "moonvit") {
        v.depth = r.requirePositive("vt_num_hidden_layers");
        v.hiddenSize = r.requirePositive("vt_hidden_size");
        v.intermediateSize = r.requirePositive("vt_intermediate_size");
        v.numHeads = r.requirePositive("vt_num_attention_heads");
        v.patchSize = r.intOr("patch_size", 14);
        v.temporalPatchSize = 1; // MoonViT embeds patches with a Conv2d
        const auto merge = intArrayOr(vision, r, "merge_kernel_size");
        if (r.ok() && (merge.size() != 2 || merge[0] != merge[1] || merge[0] <= 0)) {
            r.fail("merge_kernel_size", "must be a square kernel such as [2, 2]");
        }
        v.spatialMergeSize = merge.empty() ? 2 : merge[0];
        v.posEmbHeight = r.intOr("init_pos_emb_height", 64);
        v.posEmbWidth = r.intOr("init_pos_emb_width", 64);
        v.outHiddenSize = r.intOr("text_hidden_size", spec.hiddenSize);
        v.hiddenAct = r.stringOr("projector_hidden_act", "gelu");
    } else if (kind == "qwen2_vl") {
        v.depth = r.requirePositive("depth");
        v.hiddenSize = r.requirePositive("embed_dim");
        v.intermediateSize = v.hiddenSize * r.intOr("mlp_ratio", 4);
        v.numHeads = r.requirePositive("num_heads");
        v.outHiddenSize = r.intOr("hidden_size", spec.hiddenSize);
        v.hiddenAct = r.stringOr("hidden_act", "quick_gelu");
    } else {
        v.depth = r.requirePositive("depth");
        v.hiddenSize = r.requirePositive("hidden_size");
        v.intermediateSize = r.requirePositive("intermediate_size");
        v.numHeads = r.requirePositive("num_heads");
        v.outHiddenSize = r.intOr("out_hidden_size", spec.hiddenSize);
        v.hiddenAct = r.stringOr("hidden_act", kind == "qwen2_5_vl" ? "silu" : "gelu_pytorch_tanh");
        v.fullAttentionBlocks = intArrayOr(vision, r, "fullatt_block_indexes");
        v.windowSize = r.intOr("window_size", 0);
        v.numPositionEmbeddings = r.intOr("num_position_embeddings", 0);
        v.deepstackIndexes = intArrayOr(vision, r, "deepstack_visual_indexes");
    }
    if (kind != "moonvit") {
        v.patchSize = r.intOr("patch_size", 14);
        v.temporalPatchSize = r.intOr("temporal_patch_size", 2);
        v.spatialMergeSize = r.intOr("spatial_merge_size", 2);
    }
    v.inChannels = r.intOr("in_channels", r.intOr("in_chans", 3));
    if (r.ok() && v.hiddenSize % v.numHeads != 0) {
        r.fail("num_heads",
            fmt::format("({}) must divide the vision width ({})", v.numHeads, v.hiddenSize));
    }
    if (r.ok()
        && (v.patchSize <= 0 || v.temporalPatchSize <= 0 || v.spatialMergeSize <= 0
            || v.inChannels <= 0 || v.outHiddenSize <= 0)) {
        r.fail("patch_size", "and the other patch/merge sizes must be positive");
    }
    if (r.ok() && kind == "qwen3_vl" && v.numPositionEmbeddings <= 0) {
        r.fail("num_position_embeddings", "must be a positive integer");
    }
    for (const auto index : v.deepstackIndexes) {
        if (r.ok() && index >= v.depth) {
            r.fail("deepstack_visual_indexes",
                fmt::format("holds block {} but the tower has {} blocks", index, v.depth));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.vision = std::move(v);
    return success();
}

Result<void> readLayerPattern(const json& text, const std::string& origin, ModelSpec& spec)
{
    JsonReader r(text, origin);
    const std::int64_t window = present(text, "sliding_window") ? r.intOr("sliding_window", 0) : 0;
    switch (spec.family) {
    case Family::Mistral:
    case Family::Mixtral:
        for (auto& layer : spec.layers) {
            layer.slidingWindow = window;
        }
        break;
    case Family::Qwen2:
    case Family::Qwen2Moe:
    case Family::Qwen3:
    case Family::Qwen3Moe:
    case Family::Qwen2Vl:
    case Family::Qwen25Vl:
        // Qwen2 modeling: layers from max_window_layers on use the window when enabled.
        if (r.boolOr("use_sliding_window", false) && window > 0) {
            const std::int64_t from = r.intOr("max_window_layers", 0);
            for (std::int64_t i = from; i < spec.numLayers; ++i) {
                spec.layers[std::size_t(i)].slidingWindow = window;
            }
        }
        break;
    case Family::Llama4: {
        // Llama4TextConfig: no_rope_layers[i] == 1 means layer i uses RoPE (and chunked
        // attention); by default every no_rope_layer_interval-th layer is NoPE.
        auto noRope = intArrayOr(text, r, "no_rope_layers");
        const std::int64_t interval = r.intOr("no_rope_layer_interval", 4);
        const std::int64_t chunk = r.intOr("attention_chunk_size", 8192);
        if (r.ok() && interval <= 0) {
            r.fail("no_rope_layer_interval", "must be a positive integer");
        }
        if (r.ok() && !noRope.empty() && std::int64_t(noRope.size()) < spec.numLayers) {
            r.fail("no_rope_layers",
                fmt::format("has {} entries for {} layers", noRope.size(), spec.numLayers));
        }
        if (!r.ok()) {
            return r.error();
        }
        for (std::int64_t i = 0; i < spec.numLayers; ++i) {
            const bool rope
                = noRope.empty() ? (i + 1) % interval != 0 : noRope[std::size_t(i)] != 0;
            spec.layers[std::size_t(i)].rope = rope;
            spec.layers[std::size_t(i)].attentionChunk = rope ? chunk : 0;
        }
        break;
    }
    default:
        break;
    }
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

} // namespace day0::model::detail
