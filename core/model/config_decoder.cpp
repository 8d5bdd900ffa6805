// The decoder of the 2024–25 families: common fields, biases, per-family sections, checkpoint
// layout.

#include "base/json_util.h"
#include "model/config_families.h"

#include <fmt/format.h>

namespace day0::model::detail {

using nlohmann::json;

namespace {

// Biases and QK-norm as each family's attention/MLP modules declare them.
void readBiases(JsonReader& r, ModelSpec& spec)
{
    const bool attentionBias = r.boolOr("attention_bias", false);
    switch (spec.family) {
    case Family::Qwen2:
    case Family::Qwen2Moe:
    case Family::Qwen2Vl:
    case Family::Qwen25Vl:
        spec.attentionBias = true; // q/k/v with bias, o_proj without
        break;
    case Family::Qwen3:
    case Family::Qwen3Moe:
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.qkNorm = true;
        break;
    case Family::Glm4Moe:
        spec.attentionBias = attentionBias; // o_proj never has a bias in Glm4MoeAttention
        spec.qkNorm = r.boolOr("use_qk_norm", false);
        break;
    case Family::Llama4:
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.qkL2Norm = r.boolOr("use_qk_norm", true);
        // Llama4TextConfig defaults: attn_temperature_tuning true, floor_scale 8192,
        // attn_scale 0.1.
        if (r.has("attn_temperature_tuning") && !r.boolOr("attn_temperature_tuning", true)) {
            spec.attnTemperatureScale = 0.0;
        } else {
            spec.attnTemperatureScale = r.numberOr("attn_scale", 0.1);
        }
        spec.attnFloorScale = r.numberOr("floor_scale", 8192.0);
        if (r.ok() && spec.attnFloorScale <= 0.0) {
            r.fail("floor_scale", "must be positive");
        }
        break;
    case Family::Mixtral:
        break;
    default: // llama, mistral, deepseek (q_a/kv_a/o), generic
        spec.attentionBias = attentionBias;
        spec.attentionOutputBias = attentionBias;
        spec.mlpBias = r.boolOr("mlp_bias", false);
        break;
    }
}

} // namespace

// The checkpoint prefixes of each family, as its published checkpoints name the tensors.
void setLayout(ModelSpec& spec)
{
    CheckpointLayout& layout = spec.layout;
    switch (spec.family) {
    case Family::Llama4:
        // Llama4ForConditionalGeneration keeps the text tower under `language_model`
        // (MaxText's llama4 checkpoint mapping: language_model.model.layers.N...,
        // language_model.lm_head.weight); a text-only Llama4ForCausalLM does not.
        if (spec.modelType != "llama4_text" && spec.architecture != "Llama4ForCausalLM") {
            layout.textPrefix = "language_model.model";
            layout.lmHead = "language_model.lm_head";
        }
        break;
    case Family::Qwen2Vl:
    case Family::Qwen25Vl:
        // Published before transformers 4.52; save_pretrained keeps this legacy naming
        // (checked against the Qwen2-VL-7B index in tests/data/model/indexes).
        layout.visionPrefix = "visual";
        break;
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        // Qwen3VLModel has an empty _checkpoint_conversion_mapping: checkpoints store
        // model.language_model.* and model.visual.* (transformers modeling_qwen3_vl.py).
        layout.textPrefix = "model.language_model";
        layout.visionPrefix = "model.visual";
        break;
    case Family::KimiLinear:
        // Kimi-K3 (KimiK3ForConditionalGeneration, modeling_kimi_k3.py: self.language_model =
        // KimiLinearForCausalLM) stores language_model.model.* and language_model.lm_head (the
        // real shard model-00002-of-000096); a flat Kimi-Linear keeps model.* and lm_head.
        if (spec.modelType == "kimi_k3" || spec.architecture == "KimiK3ForConditionalGeneration") {
            layout.textPrefix = "language_model.model";
            layout.lmHead = "language_model.lm_head";
        }
        break;
    case Family::NemotronH:
        // Checkpoints keep the Mamba-era `backbone.` prefix (HF renames it to `model.` when it
        // loads them): backbone.embeddings, backbone.layers.N, backbone.norm_f.
        layout.textPrefix = "backbone";
        break;
    case Family::Qwen3Next:
    case Family::Qwen35:
    case Family::Qwen35Moe:
        setQwenNextLayout(spec);
        break;
    default:
        break;
    }
    if (spec.vision && (spec.vision->kind == "moonvit" || spec.vision->kind == "moonvit3")) {
        // Kimi-K2.5 (KimiK25ForConditionalGeneration) and Kimi-K3: language_model.model.*,
        // language_model.lm_head, vision_tower.*, mm_projector.* (tensor listing of the
        // published K2.5 checkpoint, 208,550 tensors; see layer_graph tests).
        layout.textPrefix = "language_model.model";
        layout.lmHead = "language_model.lm_head";
        layout.visionPrefix = "vision_tower";
        layout.projectorPrefix = "mm_projector";
    }
}

Result<DType> readDtype(const ConfigInput& input)
{
    for (const Section* section : { &input.text, &input.top }) {
        for (const char* key : { "torch_dtype", "dtype" }) {
            if (!section->has(key)) {
                continue;
            }
            const auto& value = section->at(key);
            if (value.is_string()) {
                if (auto dtype = parseDTypeLoose(value.get<std::string>())) {
                    // A multimodal wrapper repeats the dtype at the top level: both are read.
                    for (const Section* other : { &input.text, &input.top }) {
                        for (const char* k : { "torch_dtype", "dtype" }) {
                            (void)other->has(k);
                        }
                    }
                    return *dtype;
                }
            }
            return Error::badInput(
                fmt::format("{}: '{}' must name a dtype such as \"bfloat16\", found {}",
                    section->origin, key, dumpJson(value)));
        }
    }
    return DType::BF16;
}

// Common decoder fields: widths, heads, vocabulary, norms, activations.
Result<void> readDecoder(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.numKvHeads
        = r.has("num_key_value_heads") ? r.requirePositive("num_key_value_heads") : spec.numHeads;
    spec.intermediateSize = r.requirePositive("intermediate_size");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    spec.hiddenAct = r.stringOr("hidden_act", "silu");
    // MLA configs take their head widths from readMla (Kimi-K3: 96 heads do not divide 7168);
    // looked up without reading it, so that the family reader still accounts for the key. Only
    // for the families whose reader calls readMla: any other family (the generic decoder
    // included) that carries kv_lora_rank leaves it unread, and its head width is its own.
    const bool readsMla = spec.family == Family::DeepseekV2 || spec.family == Family::DeepseekV3
        || spec.family == Family::GlmMoeDsa || spec.family == Family::KimiLinear;
    const bool mla = readsMla && text.object.contains("kv_lora_rank")
        && !text.object.at("kv_lora_rank").is_null();
    if (r.has("head_dim")) {
        spec.headDim = r.requirePositive("head_dim");
    } else if (mla) {
        spec.headDim = 0;
    } else if (r.ok() && spec.hiddenSize % spec.numHeads != 0) {
        r.fail("num_attention_heads",
            fmt::format("({}) does not divide 'hidden_size' ({}) and 'head_dim' is not given",
                spec.numHeads, spec.hiddenSize));
    } else if (r.ok()) {
        spec.headDim = spec.hiddenSize / spec.numHeads;
    }
    if (r.ok() && spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
    }
    if (spec.family == Family::Llama4) {
        spec.intermediateSize = r.intOr("intermediate_size_mlp", spec.intermediateSize);
    }
    if (spec.family == Family::DeepseekV3 || spec.family == Family::Glm4Moe
        || spec.family == Family::GlmMoeDsa) {
        spec.numMtpLayers = r.intOr("num_nextn_predict_layers", 0);
        if (r.ok() && spec.numMtpLayers < 0) {
            r.fail("num_nextn_predict_layers", "must not be negative");
        }
    }
    readBiases(r, spec);
    if (!r.ok()) {
        return r.error();
    }
    spec.attention = attentionKindForHeads(spec.numHeads, spec.numKvHeads);
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    spec.mtpLayers.assign(std::size_t(spec.numMtpLayers), LayerSpec {});
    return success();
}

Result<void> readClassicFamily(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    DAY0_TRY(readDecoder(text, spec));
    if (spec.family == Family::DeepseekV2 || spec.family == Family::DeepseekV3) {
        DAY0_TRY(readMla(text, spec));
    }
    DAY0_TRY(readMoe(text, spec));
    DAY0_TRY(readRope(text, spec));
    DAY0_TRY(readLayerPattern(text, spec));

    std::string visionKind;
    switch (spec.family) {
    case Family::Qwen2Vl:
        visionKind = "qwen2_vl";
        break;
    case Family::Qwen25Vl:
        visionKind = "qwen2_5_vl";
        break;
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        visionKind = "qwen3_vl";
        break;
    default:
        if (spec.modelType == "kimi_k25"
            || spec.architecture == "KimiK25ForConditionalGeneration") {
            visionKind = "moonvit";
        }
        break;
    }
    if (!visionKind.empty()) {
        if (!input.top.has("vision_config")) {
            return Error::badInput(fmt::format("{}: 'vision_config' is missing ({} has a vision "
                                               "tower)",
                input.top.origin, spec.modelType));
        }
        DAY0_TRY(readVision(input.top.child("vision_config"), visionKind, spec));
    } else if (spec.family == Family::Llama4 && input.top.has("vision_config")) {
        input.top.notModelled("vision_config",
            "the Llama-4 vision encoder is not modelled (counts and tensors would cover the text "
            "tower only)");
    }
    return readQuantizationOf(input, spec);
}

Result<void> readQuantizationOf(const ConfigInput& input, ModelSpec& spec)
{
    for (const Section* section : { &input.text, &input.top }) {
        if (!section->has("quantization_config")) {
            continue;
        }
        if (!section->at("quantization_config").is_object()) {
            return Error::badInput(
                fmt::format("{} (quantization_config): must be an object", section->origin));
        }
        DAY0_TRY(readQuantization(section->child("quantization_config"), spec));
        break;
    }
    return success();
}

std::vector<std::string> familyInertKeys(Family family)
{
    switch (family) {
    case Family::Mixtral:
        // MixtralAttention has no biases whatever attention_bias says.
        return { "attention_bias" };
    case Family::DeepseekV2:
    case Family::DeepseekV3:
    case Family::Glm4Moe:
        // Training-time balancing parameters; Kimi-K2.5's processor switch for video chunks.
        return { "aux_loss_alpha", "seq_aux", "use_unified_vision_chunk" };
    case Family::GlmMoeDsa:
        // moe_router_dtype is the dtype the router computes in (float32), not a stored
        // tensor's. No tensor changes with it. (indexer_rope_interleave is read: readMla.)
        return { "aux_loss_alpha", "seq_aux", "moe_router_dtype" };
    case Family::Qwen3:
    case Family::Qwen3Moe:
    case Family::Qwen3Vl:
    case Family::Qwen3VlMoe:
        // Leftovers of Qwen's training configs that Qwen3Config does not define: HF always
        // builds q_norm/k_norm and takes biases from attention_bias (Qwen3-Coder-480B has both).
        return { "qkv_bias", "use_qk_norm" };
    case Family::KimiLinear:
        // SiTU's two constants (β 4, β_lin 25) shape the activation, not its gate/up/down
        // tensors (Kimi-K3 SituAndMul); readKimiText reads them when hidden_act is "situ", and
        // with "silu" they change nothing. Kimi-Linear's model_max_length is a serving context
        // limit beside max_position_embeddings: no weight depends on it.
        return { "activation_situ_beta", "activation_situ_linear_beta", "model_max_length" };
    case Family::Gemma4:
        // The processor's soft-token count per image (Gemma4Config): no tensors.
        return { "vision_soft_tokens_per_image" };
    case Family::Hunyuan:
        return { // Not read by modeling_hunyuan.py or transformers' hunyuan_v1_moe: routing
                 // always softmax top-k renormalised, RMSNorm always, no group-limited routing.
            "norm_topk_prob", "routed_scaling_factor", "group_limited_greedy", "n_group",
            "topk_group", "norm_type",
            // Special-token ids without the _token_id suffix, and the original vocabulary size.
            "im_start_id", "im_end_id", "im_newline_id", "text_start_id", "text_end_id",
            "video_start_id", "video_end_id", "org_vocab_size",
            // Settings of a vision front end HunYuanMoEV1ForCausalLM never builds (vit_type and
            // vit_path, which would name one, are checked by the reader).
            "anyres_pooling_size", "anyres_vit_max_image_size", "anyres_vit_two_views",
            "num_media_embeds", "skip_cls_token", "vit_add_patchemb_bias", "vit_input_resolution",
            "vit_mapping_type", "vit_norm_type", "vit_patch", "vit_remove_prenorm", "vit_token",
            "vit_used_rms_norm"
        };
    case Family::GptOss:
        // initial_context_length: OpenAI's legacy copy of the YaRN original context (4096),
        // not a GptOssConfig field. hidden_act: GptOssExperts computes its clamped SwiGLU
        // whatever the config says.
        return { "initial_context_length", "hidden_act" };
    case Family::MiniMaxM2:
        // mlp_intermediate_size: a remote-code MiniMaxM2Config field (default 8192) that no
        // module reads; every MLP is an expert of intermediate_size.
        return { "mlp_intermediate_size" };
    case Family::NemotronH:
        // HF's NemotronH modeling ignores these for every tensor and shape: `expand` (d_inner is
        // mamba_num_heads · mamba_head_dim; Nano has expand · H ≠ d_inner), the RoPE keys (its
        // attention applies no rotary embedding), the duplicate epsilons `norm_eps` and
        // `rms_norm_eps` (layer_norm_epsilon is read), `residual_in_fp32` (residual precision),
        // the dt initialisation and clamp `time_step_*`, and `time_step_rank` (a Mamba-1 relic:
        // the Mamba-2 mixer has no dt_proj).
        return { "expand", "rope_theta", "partial_rotary_factor", "norm_eps", "rms_norm_eps",
            "residual_in_fp32", "time_step_min", "time_step_max", "time_step_floor",
            "time_step_limit", "time_step_rank" };
    case Family::Qwen3Next:
        // Qwen3NextAttention drops sliding_window: every full-attention layer sees the whole
        // context whatever use_sliding_window says.
        return { "use_sliding_window" };
    case Family::Qwen35:
        // output_gate_type (NVIDIA's Qwen3.6-27B): HF's attention always gates with a sigmoid
        // and the gated norm with SiLU; the key selects nothing and names no tensor.
        return { "output_gate_type" };
    case Family::Qwen35Moe:
        // Qwen3_5MoeTextConfig deletes intermediate_size, decoder_sparse_step and
        // norm_topk_prob: every layer is MoE and the router always renormalises.
        return { "output_gate_type", "intermediate_size", "decoder_sparse_step", "norm_topk_prob" };
    default:
        return {};
    }
}

} // namespace day0::model::detail
