// Gemma 4 (`gemma4` multimodal wrapper, `gemma4_text` text-only): the config reader.
//
// Where the facts come from (research note gemma4_hunyuan.md (not in the repository), Part A):
// - huggingface/transformers src/transformers/models/gemma4/configuration_gemma4.py
//   @ 008e574391258935f3ecc3035c882e73bbcac419 (Gemma4TextConfig / Gemma4VisionConfig /
//   Gemma4AudioConfig defaults, layer_types default and last-layer rule, global_head_dim
//   default 512, hidden_size_per_layer_input default 256, use_bidirectional_attention "all"
//   rewriting sliding_window to sw // 2 + 1);
// - modeling_gemma4.py @ 0246b4f3335464614ef1de66531f9131a44ec801 (per-layer head dim and KV
//   heads of full layers, attention_k_eq_v, KV-shared layers, double-wide MLPs, the MoE block
//   beside the dense MLP, the vision tower's hard-coded bias-free Linears);
// - the real configs in tests/data/model/configs/frontier*/ (ai-dynamo/aiconfigurator
//   @ 095f58a51c4ca8e61b66ec108d86f223f8d559ce) and the E2B values of the research doc (A2.5),
//   checked against the tensor dump of google/gemma-4-E2B-it.
// The graph is in family_gemma4_graph.cpp.

#include "model/config_families.h"

#include <fmt/format.h>

namespace day0::model::detail {

namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kFull = "full_attention";

// A key written as null (HF then sees None) rather than left out (HF then uses the default).
bool presentButNull(const Section& section, const std::string& key)
{
    (void)section.has(key);
    return section.object.contains(key) && section.object.at(key).is_null();
}

// A positive integer, or the class default when the key is absent or null.
std::int64_t positiveOr(JsonReader& r, const std::string& key, std::int64_t fallback)
{
    return r.has(key) ? r.requirePositive(key) : fallback;
}

// The towers repeat the checkpoint dtype; one stored in another dtype is not modelled.
void checkTowerDtype(const Section& tower, const ModelSpec& spec)
{
    JsonReader r = tower.reader();
    const std::string name = r.stringOr("dtype", r.stringOr("torch_dtype", ""));
    const auto dtype = parseDTypeLoose(name);
    if (!name.empty() && dtype && *dtype != spec.dtype) {
        tower.notModelled("dtype",
            fmt::format("a tower stored as {} beside {} text weights is not modelled", name,
                dtypeName(spec.dtype)));
    }
}

// layer_types: one entry per layer; absent, every sixth layer is full. HF forces the last
// layer to full attention.
Result<std::vector<bool>> readFullLayers(JsonReader& r, ModelSpec& spec)
{
    const std::int64_t n = spec.numLayers;
    std::vector<bool> full(std::size_t(n), false);
    if (!r.has("layer_types")) {
        for (std::int64_t i = 0; i < n; ++i) {
            full[std::size_t(i)] = (i + 1) % 6 == 0;
        }
    } else {
        const auto types = stringArrayOr(r, "layer_types");
        if (r.ok() && std::int64_t(types.size()) != n) {
            r.fail("layer_types",
                fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                    types.size(), n));
        }
        for (std::size_t i = 0; r.ok() && i < types.size(); ++i) {
            if (types[i] != kSliding && types[i] != kFull) {
                r.fail("layer_types",
                    fmt::format("entry {} is \"{}\", which Day0 does not model (it models \"{}\" "
                                "and \"{}\")",
                        i, types[i], kSliding, kFull));
            }
            full[i] = types[i] == kFull;
        }
        if (!r.ok()) {
            return r.error();
        }
    }
    if (n > 0 && !full.back()) {
        spec.warnings.push_back(fmt::format("{}: layer_types ends with a sliding layer; read as "
                                            "full attention, as transformers forces it",
            r.origin()));
        full.back() = true;
    }
    return full;
}

Result<void> readGemma4Moe(JsonReader& r, ModelSpec& spec)
{
    const bool enabled = r.boolOr("enable_moe_block", false);
    // Read whether or not the block is on: without it HF builds no router or experts.
    const auto experts = r.optionalInt("num_experts");
    const auto topK = r.optionalInt("top_k_experts");
    const auto width = r.optionalInt("moe_intermediate_size");
    const auto width2 = r.optionalInt("expert_intermediate_size");
    if (!r.ok()) {
        return r.error();
    }
    if (!enabled) {
        return success();
    }
    if (width && width2 && *width != *width2) {
        r.fail("expert_intermediate_size",
            fmt::format("({}) differs from 'moe_intermediate_size' ({})", *width2, *width));
        return r.error();
    }
    MoeSpec moe;
    moe.numExperts = experts.value_or(0);
    moe.topK = topK.value_or(0);
    moe.expertIntermediate = width ? *width : width2.value_or(0);
    if (moe.numExperts <= 0) {
        r.fail("num_experts", "must be a positive integer when enable_moe_block is true");
    } else if (moe.topK <= 0 || moe.topK > moe.numExperts) {
        r.fail("top_k_experts",
            fmt::format("must be between 1 and num_experts ({}) when enable_moe_block is true",
                moe.numExperts));
    } else if (moe.expertIntermediate <= 0) {
        r.fail("moe_intermediate_size", "must be a positive integer when enable_moe_block is true");
    }
    if (!r.ok()) {
        return r.error();
    }
    // Gemma4TextRouter: softmax over proj(norm(x)·scale), top-k, renormalised, times
    // per_expert_scale. Experts stored fused (experts.gate_up_proj / down_proj).
    moe.scoring = RouterScoring::Softmax;
    moe.normTopkProb = true;
    moe.packedExperts = true;
    moe.denseBeside = true;
    spec.moe = moe;
    for (auto& layer : spec.layers) {
        layer.ffn = FfnKind::Moe; // enable_moe_block applies to every layer
    }
    return success();
}

// Attention widths per layer kind, sliding windows, KV sharing and double-wide MLPs.
Result<void> readGemma4Layers(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    const auto full = readFullLayers(r, spec);
    if (!full) {
        return full.error();
    }
    // global_head_dim: absent → 512 (the config's default); null or 0 → head_dim.
    std::int64_t globalHeadDim = spec.headDim;
    if (!presentButNull(text, "global_head_dim")) {
        const std::int64_t value = r.intOr("global_head_dim", 512);
        globalHeadDim = value > 0 ? value : spec.headDim;
    }
    const bool kEqV = r.boolOr("attention_k_eq_v", false);
    const auto globalKv = r.optionalInt("num_global_key_value_heads");
    std::int64_t window = positiveOr(r, "sliding_window", 512);
    // "vision": image tokens attend both ways (a mask rule, no tensors); "all" also halves the
    // window as HF does.
    if (r.has("use_bidirectional_attention")) {
        if (stringOneOf(r, "use_bidirectional_attention", { "vision", "all" }, "") == "all") {
            window = window / 2 + 1;
            spec.bidirectionalText = true;
        }
    }
    spec.kvSharedLayers = r.intOr("num_kv_shared_layers", 0);
    const bool doubleWide = r.boolOr("use_double_wide_mlp", false);
    if (!r.ok()) {
        return r.error();
    }
    const std::int64_t fullKv = kEqV ? globalKv.value_or(0) : spec.numKvHeads;
    if (kEqV && fullKv <= 0) {
        r.fail("num_global_key_value_heads",
            "must be a positive integer when attention_k_eq_v "
            "is true (the full layers' KV heads)");
    } else if (spec.numHeads % fullKv != 0) {
        r.fail("num_global_key_value_heads",
            fmt::format("({}) must divide num_attention_heads ({})", fullKv, spec.numHeads));
    } else if (spec.kvSharedLayers < 0 || spec.kvSharedLayers >= spec.numLayers) {
        r.fail("num_kv_shared_layers",
            fmt::format("({}) must be between 0 and num_hidden_layers − 1 ({})",
                spec.kvSharedLayers, spec.numLayers - 1));
    }
    if (!r.ok()) {
        return r.error();
    }
    const std::int64_t firstShared = spec.numLayers - spec.kvSharedLayers;
    for (std::int64_t i = 0; i < spec.numLayers; ++i) {
        LayerSpec& layer = spec.layers[std::size_t(i)];
        if ((*full)[std::size_t(i)]) {
            layer.mixer = MixerKind::Attention;
            layer.headDim = globalHeadDim;
            layer.numKvHeads = fullKv;
            layer.sharedKv = kEqV; // V is the raw k_proj output: no v_proj
        } else {
            setWindow(layer, window);
        }
        if (doubleWide && i >= firstShared && firstShared > 0) {
            layer.ffnWidth = 2 * spec.intermediateSize;
        }
    }
    // A KV-shared layer reads the cache of the last earlier non-shared layer of its kind.
    for (std::int64_t i = firstShared; i < spec.numLayers; ++i) {
        bool donor = false;
        for (std::int64_t j = 0; j < firstShared; ++j) {
            donor = donor || (*full)[std::size_t(j)] == (*full)[std::size_t(i)];
        }
        if (!donor) {
            r.fail("num_kv_shared_layers",
                fmt::format("({}) leaves layer {} without an earlier {} layer to share the KV "
                            "cache of",
                    spec.kvSharedLayers, i, (*full)[std::size_t(i)] ? kFull : kSliding));
            return r.error();
        }
    }
    return success();
}

Result<void> readGemma4Text(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    // Gemma4TextConfig defaults where a key is absent.
    spec.hiddenSize = positiveOr(r, "hidden_size", 2304);
    spec.numLayers = positiveOr(r, "num_hidden_layers", 30);
    spec.numHeads = positiveOr(r, "num_attention_heads", 8);
    spec.numKvHeads = positiveOr(r, "num_key_value_heads", 4);
    spec.headDim = positiveOr(r, "head_dim", 256);
    spec.intermediateSize = positiveOr(r, "intermediate_size", 9216);
    spec.vocabSize = positiveOr(r, "vocab_size", 262144);
    spec.maxPositions = r.intOr("max_position_embeddings", 131072);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    // The MLP is gated (gate/up/down) whatever the activation.
    spec.hiddenAct = r.stringOr("hidden_activation", "gelu_pytorch_tanh");
    spec.attentionBias = r.boolOr("attention_bias", false);
    spec.attentionOutputBias = spec.attentionBias; // q/k/v/o alike; the MLP never has biases
    spec.qkNorm = true; // q_norm / k_norm with weights; v_norm has none
    spec.finalLogitSoftcap = r.numberOr("final_logit_softcapping", 0.0);
    // PLE: absent → 256 (the class default); null or 0 → none.
    spec.perLayerInputSize = presentButNull(text, "hidden_size_per_layer_input")
        ? 0
        : r.intOr("hidden_size_per_layer_input", 256);
    const std::int64_t pleVocab = positiveOr(r, "vocab_size_per_layer_input", 262144);
    if (r.ok() && spec.perLayerInputSize < 0) {
        r.fail("hidden_size_per_layer_input", "must not be negative");
    }
    if (r.ok() && spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide num_attention_heads ({})", spec.numKvHeads, spec.numHeads));
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.perLayerInputVocab = spec.perLayerInputSize > 0 ? pleVocab : 0;
    spec.attention = spec.numKvHeads == spec.numHeads
        ? AttentionKind::MHA
        : (spec.numKvHeads == 1 ? AttentionKind::MQA : AttentionKind::GQA);
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    DAY0_TRY(readGemma4Layers(text, spec));
    DAY0_TRY(readGemma4Moe(r, spec));
    // The class default of rope_parameters, when the config leaves it out: proportional RoPE
    // (theta 1e6, a quarter of global_head_dim rotated) on full layers, default RoPE (1e4) on
    // sliding layers.
    const bool rope = text.has("rope_parameters") || text.has("rope_scaling");
    DAY0_TRY(readRope(text, spec));
    if (!rope) {
        spec.ropeTheta = 1e6;
        spec.ropeScaling.type = "proportional";
        spec.partialRotaryFactor = 0.25;
        spec.slidingRope = LocalRope { 1e4, {}, 1.0 };
    }
    return success();
}

Result<void> readGemma4Vision(const Section& vision, ModelSpec& spec)
{
    JsonReader r = vision.reader();
    (void)stringOneOf(r, "model_type", { "gemma4_vision" }, "gemma4_vision");
    VisionSpec v;
    v.kind = "gemma4";
    // Gemma4VisionConfig defaults where a key is absent.
    v.depth = positiveOr(r, "num_hidden_layers", 16);
    v.hiddenSize = positiveOr(r, "hidden_size", 768);
    v.intermediateSize = positiveOr(r, "intermediate_size", 3072);
    v.numHeads = positiveOr(r, "num_attention_heads", 12);
    v.numKvHeads = positiveOr(r, "num_key_value_heads", 12);
    v.headDim = positiveOr(r, "head_dim", 64);
    v.patchSize = positiveOr(r, "patch_size", 16);
    v.positionTableSize = positiveOr(r, "position_embedding_size", 10240);
    v.poolingKernel = positiveOr(r, "pooling_kernel_size", 3); // parameter-free average pool
    v.standardize = r.boolOr("standardize", false);
    v.clippedLinears = r.boolOr("use_clipped_linears", false);
    v.hiddenAct = r.stringOr("hidden_activation", "gelu_pytorch_tanh"); // MLP gated anyway
    // Read by no vision module: Gemma4VisionAttention uses head_dim, and every vision Linear is
    // built with bias=False whatever attention_bias says.
    (void)r.intOr("global_head_dim", 0);
    (void)r.boolOr("attention_bias", false);
    (void)r.numberOr("rms_norm_eps", 1e-6);
    // Processor and position settings: soft tokens per image/video, the 2-D RoPE's range.
    (void)r.intOr("default_output_length", 280);
    (void)r.intOr("image_seq_length", 280);
    (void)r.intOr("video_seq_length", 70);
    (void)r.intOr("max_position_embeddings", 131072);
    if (vision.has("rope_parameters") && vision.at("rope_parameters").is_object()) {
        // 2-D RoPE over half the head each for x and y: no tensors.
        JsonReader rope = vision.child("rope_parameters").reader();
        (void)stringOneOf(rope, "rope_type", { "default" }, "default");
        (void)rope.numberOr("rope_theta", 100.0);
        if (!rope.ok()) {
            return rope.error();
        }
    }
    if (r.ok() && (v.numHeads % v.numKvHeads != 0)) {
        r.fail("num_key_value_heads",
            fmt::format("({}) must divide num_attention_heads ({})", v.numKvHeads, v.numHeads));
    }
    if (!r.ok()) {
        return r.error();
    }
    checkTowerDtype(vision, spec);
    v.inChannels = 3;
    v.temporalPatchSize = 1;
    v.spatialMergeSize = 1;
    v.rmsNorm = true;
    v.biases = false;
    v.outHiddenSize = spec.hiddenSize; // embed_vision projects to the text width
    spec.vision = std::move(v);
    return success();
}

Result<void> readGemma4Audio(const Section& audio, ModelSpec& spec)
{
    JsonReader r = audio.reader();
    (void)stringOneOf(r, "model_type", { "gemma4_audio" }, "gemma4_audio");
    AudioSpec a;
    a.kind = "gemma4";
    // Gemma4AudioConfig defaults (the values of the published E2B/E4B).
    a.depth = positiveOr(r, "num_hidden_layers", 12);
    a.hiddenSize = positiveOr(r, "hidden_size", 1024);
    a.numHeads = positiveOr(r, "num_attention_heads", 8);
    a.convKernel = positiveOr(r, "conv_kernel_size", 5);
    a.outputSize = positiveOr(r, "output_proj_dims", 1536);
    a.clippedLinears = r.boolOr("use_clipped_linears", true);
    a.subsamplingChannels = r.has("subsampling_conv_channels")
        ? intArrayOr(r, "subsampling_conv_channels")
        : std::vector<std::int64_t> { 128, 32 };
    // Run-time settings of the conformer (chunked local attention, logit cap, residual weight,
    // clipping of activations): no tensors.
    for (const char* key : { "attention_chunk_size", "attention_context_left",
             "attention_context_right", "attention_logit_cap", "attention_invalid_logits_value",
             "gradient_clipping", "residual_weight", "rms_norm_eps" }) {
        (void)r.numberOr(key, 0.0);
    }
    (void)r.stringOr("hidden_act", "silu");
    const auto& c = a.subsamplingChannels;
    if (r.ok() && (c.size() != 2 || c[0] <= 0 || c[1] <= 0 || c[0] % 4 != 0)) {
        r.fail("subsampling_conv_channels",
            "must be two positive channel counts, the first a multiple of 4 (the subsampler "
            "projects (channels[0] / 4) · channels[1] features)");
    }
    if (r.ok() && a.hiddenSize % a.numHeads != 0) {
        r.fail("num_attention_heads",
            fmt::format("({}) must divide hidden_size ({})", a.numHeads, a.hiddenSize));
    }
    if (!r.ok()) {
        return r.error();
    }
    checkTowerDtype(audio, spec);
    spec.audio = std::move(a);
    return success();
}

} // namespace

Result<void> readGemma4(const ConfigInput& input, ModelSpec& spec)
{
    // Gemma4Config and Gemma4TextConfig tie the head to the embedding unless told otherwise
    // (readConfig then reads tie_word_embeddings over this default).
    spec.tieEmbeddings = true;
    DAY0_TRY(readGemma4Text(input.text, spec));
    const bool wrapper = &input.text.object != &input.top.object;
    if (wrapper) {
        // Gemma4ForConditionalGeneration: model.language_model.*, model.vision_tower.*,
        // model.embed_vision.*, model.audio_tower.*, model.embed_audio.*, lm_head (tied).
        spec.layout.textPrefix = "model.language_model";
        if (input.top.has("vision_config")) {
            if (!input.top.at("vision_config").is_object()) {
                return Error::badInput(
                    fmt::format("{}: 'vision_config' must be an object or null", input.top.origin));
            }
            DAY0_TRY(readGemma4Vision(input.top.child("vision_config"), spec));
            spec.layout.visionPrefix = "model.vision_tower";
            spec.layout.projectorPrefix = "model.embed_vision";
        }
        if (input.top.has("audio_config")) {
            if (!input.top.at("audio_config").is_object()) {
                return Error::badInput(
                    fmt::format("{}: 'audio_config' must be an object or null", input.top.origin));
            }
            DAY0_TRY(readGemma4Audio(input.top.child("audio_config"), spec));
            spec.layout.audioPrefix = "model.audio_tower";
            spec.layout.audioProjectorPrefix = "model.embed_audio";
        }
    } else {
        spec.layout.textPrefix = "model"; // Gemma4ForCausalLM
    }
    spec.layout.lmHead = "lm_head";
    return readQuantizationOf(input, spec);
}

} // namespace day0::model::detail
