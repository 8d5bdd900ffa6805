#include "model/config_sections.h"

#include "base/json_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::model::detail {

using nlohmann::json;

namespace {

std::string nested(const std::string& origin, const std::string& key)
{
    return fmt::format("{} ({})", origin, key);
}

// Which decoder layers are MoE, by each family's own rule (as the HF modeling code decides it).
FfnKind ffnKind(bool moe) { return moe ? FfnKind::Moe : FfnKind::Dense; }

bool deepseekMoeLayer(std::int64_t i, std::int64_t firstDense, std::int64_t frequency)
{
    return i >= firstDense && i % frequency == 0;
}

} // namespace

bool Section::has(const std::string& key) const
{
    if (accounting != nullptr && object.is_object()) {
        accounting->ledger.touch(object, key);
    }
    return object.is_object() && object.contains(key) && !object.at(key).is_null();
}

const json& Section::at(const std::string& key) const
{
    if (accounting != nullptr) {
        accounting->ledger.touch(object, key);
    }
    return object.at(key);
}

std::string Section::pathOf(const std::string& key) const
{
    return path.empty() ? key : path + "." + key;
}

void Section::notModelled(const std::string& key, const std::string& reason) const
{
    if (accounting != nullptr) {
        accounting->ledger.touch(object, key);
        accounting->unmodelled.push_back({ pathOf(key), reason });
    }
}

void Section::touchAll() const
{
    if (accounting != nullptr && object.is_object()) {
        for (const auto& [key, value] : object.items()) {
            accounting->ledger.touch(object, key);
        }
    }
}

Section Section::root(const json& document, const std::string& file, Accounting* accounting)
{
    if (accounting != nullptr) {
        accounting->ledger.openSection(document, "");
    }
    return Section { document, file, accounting, "", file };
}

Section Section::child(const std::string& key) const { return element(at(key), key); }

Section Section::element(const json& value, const std::string& name) const
{
    std::string childPath = pathOf(name);
    if (accounting != nullptr) {
        accounting->ledger.openSection(value, childPath);
    }
    return Section { value, nested(file, childPath), accounting, childPath, file };
}

std::string stringOneOf(JsonReader& reader, const std::string& key,
    std::initializer_list<const char*> modelled, const std::string& fallback)
{
    const std::string value = reader.stringOr(key, fallback);
    if (!reader.ok()) {
        return value;
    }
    std::string list;
    for (const char* m : modelled) {
        if (value == m) {
            return value;
        }
        list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", m);
    }
    reader.fail(
        key, fmt::format("is \"{}\", which Day0 does not model (it models {})", value, list));
    return value;
}

void boolMustBe(JsonReader& reader, const std::string& key, bool modelled)
{
    const bool value = reader.boolOr(key, modelled);
    if (reader.ok() && value != modelled) {
        reader.fail(
            key, fmt::format("is {}, which Day0 does not model (only {})", value, modelled));
    }
}

std::vector<std::string> stringArrayOr(JsonReader& reader, const std::string& key)
{
    std::vector<std::string> out;
    if (!reader.has(key)) {
        return out;
    }
    const auto& array = reader.value(key);
    if (!array.is_array()) {
        reader.fail(key, "must be an array of strings");
        return out;
    }
    for (const auto& item : array) {
        if (!item.is_string()) {
            reader.fail(key, fmt::format("must hold strings, found {}", dumpJson(item)));
            return out;
        }
        out.push_back(item.get<std::string>());
    }
    return out;
}

std::vector<std::int64_t> perLayerInts(
    JsonReader& reader, const std::string& key, std::int64_t count)
{
    if (!reader.has(key)) {
        return {};
    }
    const auto& value = reader.value(key);
    if (value.is_number_integer()) {
        return std::vector<std::int64_t>(
            std::size_t(std::max<std::int64_t>(count, 0)), value.get<std::int64_t>());
    }
    auto out = intArrayOr(reader, key);
    if (reader.ok() && std::int64_t(out.size()) != count) {
        reader.fail(key,
            fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                out.size(), count));
    }
    return out;
}

std::vector<std::int64_t> intArrayOr(JsonReader& reader, const std::string& key)
{
    std::vector<std::int64_t> out;
    if (!reader.has(key)) {
        return out;
    }
    const auto& array = reader.value(key);
    if (!array.is_array()) {
        reader.fail(key, fmt::format("must be an array of integers, found {}", dumpJson(array)));
        return out;
    }
    for (const auto& item : array) {
        if (!item.is_number_integer() || item.get<std::int64_t>() < 0) {
            reader.fail(
                key, fmt::format("must hold non-negative integers, found {}", dumpJson(item)));
            return out;
        }
        out.push_back(item.get<std::int64_t>());
    }
    return out;
}

namespace {

// One RoPE object: `rope_scaling`, `rope_parameters`, or one layer type's entry of a
// per-layer-type `rope_parameters`. Its base and rotated share go to `theta` and `partial`.
Result<void> readRopeObject(const Section& section, RopeScaling& s, double& theta, double& partial)
{
    JsonReader r = section.reader();
    s.type = r.stringOr("rope_type", r.stringOr("type", "default"));
    s.factor = r.numberOr("factor", 1.0);
    s.lowFreqFactor = r.numberOr("low_freq_factor", s.lowFreqFactor);
    s.highFreqFactor = r.numberOr("high_freq_factor", s.highFreqFactor);
    s.originalMaxPositions = r.intOr("original_max_position_embeddings", 0);
    s.betaFast = r.numberOr("beta_fast", s.betaFast);
    s.betaSlow = r.numberOr("beta_slow", s.betaSlow);
    s.mscale = r.numberOr("mscale", s.mscale);
    s.mscaleAllDim = r.numberOr("mscale_all_dim", s.mscaleAllDim);
    s.mropeSection = intArrayOr(r, "mrope_section");
    s.mropeInterleaved = r.boolOr("mrope_interleaved", false);
    s.truncate = r.boolOr("truncate", true);
    s.alpha = r.numberOr("alpha", s.alpha);
    // transformers 5 moved rope_theta (and Qwen3.5 partial_rotary_factor) into
    // rope_parameters.
    theta = r.numberOr("rope_theta", theta);
    partial = r.numberOr("partial_rotary_factor", partial);
    if (r.ok() && s.factor <= 0.0) {
        r.fail("factor", fmt::format("must be positive, found {}", s.factor));
    }
    if (r.ok() && (partial <= 0.0 || partial > 1.0)) {
        r.fail("partial_rotary_factor", "must be in (0, 1]");
    }
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

// transformers 5 per-layer-type form (Gemma-3/4): {"full_attention": {...},
// "sliding_attention": {...}}, one RoPE object per layer type.
bool perLayerTypeRope(const json& rope)
{
    return rope.contains("full_attention") || rope.contains("sliding_attention");
}

Result<void> readPerLayerTypeRope(const Section& params, ModelSpec& spec)
{
    JsonReader r = params.reader();
    for (const auto& [type, value] : params.object.items()) {
        if (type != "full_attention" && type != "sliding_attention") {
            r.fail(type,
                "is a layer type Day0 does not model in rope_parameters (it models "
                "\"full_attention\" and \"sliding_attention\")");
            return r.error();
        }
        if (!value.is_object()) {
            r.fail(type, fmt::format("must be an object, found {}", dumpJson(value)));
            return r.error();
        }
    }
    const double base = spec.ropeTheta;
    if (params.has("full_attention")) {
        spec.partialRotaryFactor = 1.0;
        DAY0_TRY(readRopeObject(params.child("full_attention"), spec.ropeScaling, spec.ropeTheta,
            spec.partialRotaryFactor));
    }
    if (params.has("sliding_attention")) {
        LocalRope local;
        local.theta = base;
        DAY0_TRY(readRopeObject(params.child("sliding_attention"), local.scaling, local.theta,
            local.partialRotaryFactor));
        spec.slidingRope = local;
    }
    return success();
}

} // namespace

Result<void> readRope(const Section& text, ModelSpec& spec)
{
    JsonReader reader = text.reader();
    spec.ropeTheta = reader.numberOr("rope_theta", spec.ropeTheta);
    spec.partialRotaryFactor = reader.numberOr("partial_rotary_factor", 1.0);
    if (!reader.ok()) {
        return reader.error();
    }
    std::string key;
    for (const char* candidate : { "rope_scaling", "rope_parameters" }) {
        if (text.has(candidate)) {
            key = candidate;
            break;
        }
    }
    if (!key.empty()) {
        const auto& rope = text.at(key);
        if (!rope.is_object()) {
            reader.fail(key, fmt::format("must be an object or null, found {}", dumpJson(rope)));
            return reader.error();
        }
        if (perLayerTypeRope(rope)) {
            DAY0_TRY(readPerLayerTypeRope(text.child(key), spec));
        } else {
            DAY0_TRY(readRopeObject(
                text.child(key), spec.ropeScaling, spec.ropeTheta, spec.partialRotaryFactor));
        }
    }
    if (spec.partialRotaryFactor <= 0.0 || spec.partialRotaryFactor > 1.0) {
        reader.fail("partial_rotary_factor", "must be in (0, 1]");
        return reader.error();
    }
    return success();
}

Result<void> readMla(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    MlaSpec& m = spec.mla;
    m.qLoraRank = r.intOr("q_lora_rank", 0);
    m.kvLoraRank = r.requirePositive("kv_lora_rank");
    m.qkNopeHeadDim = r.requirePositive("qk_nope_head_dim");
    m.qkRopeHeadDim = r.requirePositive("qk_rope_head_dim");
    m.vHeadDim = r.requirePositive("v_head_dim");
    m.indexerHeads = r.intOr("index_n_heads", 0);
    m.indexerHeadDim = r.intOr("index_head_dim", 0);
    m.indexerTopK = r.intOr("index_topk", 0);
    m.indexerRopeInterleave = r.boolOr("indexer_rope_interleave", false);
    m.ropeInterleave = r.boolOr("rope_interleave", true);
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
    if (m.indexerHeads > 0) {
        for (auto* layers : { &spec.layers, &spec.mtpLayers }) {
            for (auto& layer : *layers) {
                layer.mixer = MixerKind::SparseMla;
            }
        }
    }
    return success();
}

namespace {

Result<void> readDeepseekMoe(JsonReader& r, ModelSpec& spec)
{
    if (!r.has("n_routed_experts")) {
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
        spec.layers[std::size_t(i)].ffn = ffnKind(deepseekMoeLayer(i, firstDense, frequency));
    }
    for (std::int64_t i = 0; i < spec.numMtpLayers; ++i) {
        spec.mtpLayers[std::size_t(i)].ffn
            = ffnKind(deepseekMoeLayer(spec.numLayers + i, firstDense, frequency));
    }
    spec.moe = moe;
    return success();
}

Result<void> readQwenMoe(JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.normTopkProb = r.boolOr("norm_topk_prob", spec.family != Family::Qwen2Moe);
    const std::int64_t shared = r.intOr("shared_expert_intermediate_size", 0);
    const std::int64_t step = r.intOr("decoder_sparse_step", 1);
    const auto mlpOnly = intArrayOr(r, "mlp_only_layers");
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
        spec.layers[std::size_t(i)].ffn = ffnKind(!dense && (i + 1) % step == 0);
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
        layer.ffn = FfnKind::Moe;
    }
    spec.moe = moe;
    return success();
}

Result<void> readLlama4Moe(JsonReader& r, ModelSpec& spec)
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
    auto moeLayers = intArrayOr(r, "moe_layers");
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
    if (!r.has("moe_layers")) {
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
        spec.layers[std::size_t(layer)].ffn = FfnKind::Moe;
    }
    spec.moe = moe;
    return success();
}

} // namespace

Result<void> readMoe(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    switch (spec.family) {
    case Family::DeepseekV2:
    case Family::DeepseekV3:
    case Family::Glm4Moe:
    case Family::GlmMoeDsa:
        return readDeepseekMoe(r, spec);
    case Family::Qwen2Moe:
    case Family::Qwen3Moe:
    case Family::Qwen3VlMoe:
        return readQwenMoe(r, spec);
    case Family::Mixtral:
        return readMixtralMoe(r, spec);
    case Family::Llama4:
        return readLlama4Moe(r, spec);
    default:
        return success();
    }
}

void setWindow(LayerSpec& layer, std::int64_t window)
{
    layer.slidingWindow = window;
    layer.mixer = window > 0 ? MixerKind::Sliding : MixerKind::Attention;
}

Result<void> readLayerPattern(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    // Only the families that use sliding_window read it: for the generic decoder (and Llama) it
    // would be structure they do not model.
    const auto window = [&] { return r.intOr("sliding_window", 0); };
    switch (spec.family) {
    case Family::Mistral:
    case Family::Mixtral:
        for (auto& layer : spec.layers) {
            setWindow(layer, window());
        }
        break;
    case Family::Qwen2:
    case Family::Qwen2Moe:
    case Family::Qwen3:
    case Family::Qwen3Moe:
    case Family::Qwen2Vl:
    case Family::Qwen25Vl: {
        // Qwen2 modeling: layers from max_window_layers on use the window when enabled.
        // max_window_layers is read either way: without use_sliding_window it changes nothing.
        const std::int64_t from = r.intOr("max_window_layers", 0);
        const std::int64_t w = window();
        if (r.boolOr("use_sliding_window", false) && w > 0) {
            for (std::int64_t i = from; i < spec.numLayers; ++i) {
                setWindow(spec.layers[std::size_t(i)], w);
            }
        }
        break;
    }
    case Family::Llama4: {
        // Llama4TextConfig: no_rope_layers[i] == 1 means layer i uses RoPE (and chunked
        // attention); by default every no_rope_layer_interval-th layer is NoPE.
        auto noRope = intArrayOr(r, "no_rope_layers");
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
            LayerSpec& layer = spec.layers[std::size_t(i)];
            layer.rope = rope;
            layer.attentionChunk = rope ? chunk : 0;
            layer.mixer = layer.attentionChunk > 0 ? MixerKind::Chunked : MixerKind::Attention;
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
