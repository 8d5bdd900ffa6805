// Qwen3-Next (qwen3_next), Qwen3.5 / Qwen3.6 dense (qwen3_5) and MoE (qwen3_5_moe): the config
// reader and the checkpoint layout. The graph is in family_qwen_next_graph.cpp.
//
// Where the facts come from (research/qwen_next_35.md, which cites each of them):
// - Keys, defaults and layer kinds: transformers configuration_qwen3_next.py @ 008e5743
//   (full_attention_interval, used only without layer_types: layer i is full attention iff
//   (i + 1) % interval == 0; MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step
//   == 0), configuration_qwen3_5.py @ 8116e632 (layer_types of num_hidden_layers entries,
//   validated), modular_qwen3_5_moe.py @ 0960594c (Qwen3_5MoeTextConfig deletes
//   intermediate_size, decoder_sparse_step, norm_topk_prob, mlp_only_layers: every layer MoE).
// - Attention: Qwen3NextAttention (modular_qwen3_next.py @ 043bb8dd) always builds the sigmoid
//   output gate (q_proj doubled) whatever attn_output_gate says, q_norm/k_norm, biases iff
//   attention_bias; Gemma-style zero-centred RMSNorm, y = x̂·(1 + w).
// - MTP depth: vLLM qwen3_next_mtp.py reads num_nextn_predict_layers (default 1, absent from
//   the published config); qwen3_5_mtp.py @ 01d99805 reads mtp_num_hidden_layers and shares the
//   main embedding and lm_head (mtp_use_dedicated_embeddings false).
// - State dtype: Qwen3.5 mamba_ssm_dtype "float32" → F32 recurrent state (vLLM #34489); without
//   the key vLLM keeps the state in the model dtype.
// - Vision: the Qwen3-VL tower without deepstack mergers (Qwen3_5VisionModel deletes
//   deepstack_merger_list); vision model_type "qwen3_5" / "qwen3_5_moe" in Qwen's configs,
//   "qwen3_5_vision" / "qwen3_5_moe_vision" in NVIDIA's (transformers 5.6+).
// - Layout: model.* for Qwen3-Next; model.language_model.*, model.visual.*, lm_head.* and a
//   top-level mtp.* for Qwen3.5 (the real Qwen3.5-27B header subset in
//   tests/data/model/listings/qwen3.5-27b.header_subset.json, the NVFP4 exclude lists). BF16
//   Qwen3.5 MoE releases fuse the main layers' experts into 3-D tensors (397B header audit:
//   1038 text tensors); ModelOpt and Qwen's FP8 exports write them per expert.

#include "model/config_families.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::model::detail {

namespace {

constexpr const char* kLinearAttention = "linear_attention";
constexpr const char* kFullAttention = "full_attention";

// Widths, heads, vocabulary, norms and biases.
void readWidths(JsonReader& r, ModelSpec& spec)
{
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.numKvHeads = r.requirePositive("num_key_value_heads");
    // 256 in every release, never hidden_size / heads: required rather than derived.
    spec.headDim = r.requirePositive("head_dim");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    // The SwiGLU MLPs, the conv and the gated norm use it; no tensor depends on it.
    spec.hiddenAct = r.stringOr("hidden_act", "silu");
    const bool bias = r.boolOr("attention_bias", false);
    spec.attentionBias = bias;
    spec.attentionOutputBias = bias;
    spec.qkNorm = true;
    spec.normOffset = true;
    spec.gatedMlp = true;
    if (r.ok() && spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
    }
    if (!r.ok()) {
        return;
    }
    spec.attention = attentionKindForHeads(spec.numHeads, spec.numKvHeads);
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
}

MixerKind intervalKind(std::int64_t i, std::int64_t interval)
{
    return (i + 1) % interval == 0 ? MixerKind::Attention : MixerKind::GatedDeltaNet;
}

// layer_types when given (HF takes it over the interval), else full_attention_interval.
void readLayerKinds(JsonReader& r, ModelSpec& spec)
{
    const std::int64_t interval = r.intOr("full_attention_interval", 4);
    if (r.ok() && interval <= 0) {
        r.fail("full_attention_interval", "must be a positive integer");
    }
    if (!r.ok()) {
        return;
    }
    if (!r.has("layer_types")) {
        for (std::int64_t i = 0; i < spec.numLayers; ++i) {
            spec.layers[std::size_t(i)].mixer = intervalKind(i, interval);
        }
        return;
    }
    const auto types = stringArrayOr(r, "layer_types");
    if (!r.ok()) {
        return;
    }
    if (std::int64_t(types.size()) != spec.numLayers) {
        r.fail("layer_types",
            fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                types.size(), spec.numLayers));
        return;
    }
    bool matchesInterval = true;
    for (std::size_t i = 0; i < types.size(); ++i) {
        MixerKind kind = MixerKind::Attention;
        if (types[i] == kLinearAttention) {
            kind = MixerKind::GatedDeltaNet;
        } else if (types[i] != kFullAttention) {
            r.fail("layer_types",
                fmt::format("entry {} is \"{}\", which Day0 does not model (it models \"{}\" and "
                            "\"{}\")",
                    i, types[i], kLinearAttention, kFullAttention));
            return;
        }
        spec.layers[i].mixer = kind;
        matchesInterval = matchesInterval && kind == intervalKind(std::int64_t(i), interval);
    }
    if (!matchesInterval && r.has("full_attention_interval")) {
        spec.notes.push_back(fmt::format("{}: layer_types does not follow full_attention_interval "
                                         "{}; layer_types is used, as HF does",
            r.origin(), interval));
    }
}

// The Gated DeltaNet dimensions and the dtype of its recurrent state.
void readLinearAttention(JsonReader& r, ModelSpec& spec)
{
    LinearAttentionSpec la;
    la.keyHeads = r.requirePositive("linear_num_key_heads");
    la.keyHeadDim = r.requirePositive("linear_key_head_dim");
    la.valueHeads = r.requirePositive("linear_num_value_heads");
    la.valueHeadDim = r.requirePositive("linear_value_head_dim");
    la.convKernel = r.requirePositive("linear_conv_kernel_dim");
    la.stateDtype = spec.dtype;
    if (r.has("mamba_ssm_dtype")) {
        const std::string name = r.stringOr("mamba_ssm_dtype", "");
        const auto dtype = parseDTypeLoose(name);
        if (dtype && (*dtype == DType::F32 || *dtype == DType::BF16 || *dtype == DType::F16)) {
            la.stateDtype = *dtype;
        } else if (r.ok()) {
            r.fail("mamba_ssm_dtype",
                fmt::format(R"(is "{}"; Day0 models "float32", "bfloat16" and "float16")", name));
        }
    }
    if (r.ok() && la.valueHeads % la.keyHeads != 0) {
        r.fail("linear_num_value_heads",
            fmt::format("({}) must be a multiple of 'linear_num_key_heads' ({}): q and k repeat "
                        "onto the value heads",
                la.valueHeads, la.keyHeads));
    }
    spec.linearAttention = la;
}

bool isMoeFamily(const ModelSpec& spec) { return spec.family != Family::Qwen35; }

// Dense MLPs (qwen3_5), or the routed experts with one gated shared expert.
void readFfn(JsonReader& r, const Section& text, ModelSpec& spec)
{
    const auto mlpOnly = intArrayOr(r, "mlp_only_layers");
    for (const auto layer : mlpOnly) {
        if (r.ok() && layer >= spec.numLayers) {
            r.fail("mlp_only_layers",
                fmt::format("holds layer {} but the model has {} layers", layer, spec.numLayers));
        }
    }
    if (!r.ok()) {
        return;
    }
    if (!isMoeFamily(spec)) {
        // Every layer is a dense MLP; mlp_only_layers (HF ignores it) can only agree.
        spec.intermediateSize = r.requirePositive("intermediate_size");
        return;
    }
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.sharedIntermediate = r.requirePositive("shared_expert_intermediate_size");
    moe.numSharedExperts = 1;
    moe.sharedExpertGate = true;
    moe.scoring = RouterScoring::Softmax;
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_experts' ({})", moe.topK, moe.numExperts));
    }
    if (spec.family == Family::Qwen35Moe) {
        // Qwen3_5MoeSparseMoeBlock in every layer; its router always renormalises the top-k.
        moe.normTopkProb = true;
        // The BF16 releases fuse the experts; setQwenNextLayout decides for quantised ones.
        moe.packedExperts = true;
        if (!mlpOnly.empty()) {
            text.notModelled("mlp_only_layers",
                "a non-empty list is not modelled: Qwen3.5-MoE's modeling code ignores it and "
                "makes every layer MoE, so the checkpoint's layout is not known");
        }
        for (auto& layer : spec.layers) {
            layer.ffn = FfnKind::Moe;
        }
    } else {
        moe.normTopkProb = r.boolOr("norm_topk_prob", true);
        const std::int64_t step = r.intOr("decoder_sparse_step", 1);
        spec.intermediateSize = r.intOr("intermediate_size", 0);
        if (r.ok() && step <= 0) {
            r.fail("decoder_sparse_step", "must be a positive integer");
        }
        if (!r.ok()) {
            return;
        }
        std::int64_t dense = 0;
        for (std::int64_t i = 0; i < spec.numLayers; ++i) {
            const bool listed = std::find(mlpOnly.begin(), mlpOnly.end(), i) != mlpOnly.end();
            const bool moeLayer = !listed && (i + 1) % step == 0;
            spec.layers[std::size_t(i)].ffn = moeLayer ? FfnKind::Moe : FfnKind::Dense;
            dense += moeLayer ? 0 : 1;
        }
        if (dense > 0 && spec.intermediateSize <= 0) {
            r.fail("intermediate_size",
                fmt::format("must be positive: {} layers have a dense MLP", dense));
        }
    }
    spec.moe = moe;
}

// The MTP block: a fusing projection, norms and full-attention decoder layers.
void readMtp(JsonReader& r, const Section& text, ModelSpec& spec)
{
    std::int64_t count = 0;
    if (spec.family == Family::Qwen3Next) {
        count = r.intOr("num_nextn_predict_layers", 1);
        if (!r.has("num_nextn_predict_layers")) {
            spec.notes.emplace_back(
                "one MTP layer (mtp.*): num_nextn_predict_layers is absent and vLLM's Qwen3-Next "
                "MTP reads 1 then");
        }
    } else {
        count = r.intOr("mtp_num_hidden_layers", 1);
        if (r.boolOr("mtp_use_dedicated_embeddings", false)) {
            text.notModelled("mtp_use_dedicated_embeddings",
                "true is not modelled: no published checkpoint has an MTP embedding of its own, "
                "so its tensor name is not known");
        }
    }
    if (r.ok() && count < 0) {
        r.fail(
            spec.family == Family::Qwen3Next ? "num_nextn_predict_layers" : "mtp_num_hidden_layers",
            "must not be negative");
        return;
    }
    spec.numMtpLayers = count;
    LayerSpec layer;
    layer.mixer = MixerKind::Attention; // vLLM builds MTP layers as full attention
    layer.ffn = isMoeFamily(spec) ? FfnKind::Moe : FfnKind::Dense;
    spec.mtpLayers.assign(std::size_t(std::max<std::int64_t>(count, 0)), layer);
}

// The Qwen3.5 vision tower: Qwen3-VL's shape without deepstack mergers.
Result<void> readQwen35Vision(const Section& top, ModelSpec& spec)
{
    if (!top.has("vision_config") || !top.at("vision_config").is_object()) {
        return Error::badInput(fmt::format("{}: 'vision_config' must be an object ({} has a "
                                           "vision tower)",
            top.origin, spec.modelType));
    }
    const Section vision = top.child("vision_config");
    {
        JsonReader r = vision.reader();
        (void)stringOneOf(r, "model_type",
            { "qwen3_5", "qwen3_5_vision", "qwen3_5_moe", "qwen3_5_moe_vision" }, "qwen3_5");
        if (r.has("dtype")) {
            const std::string name = r.stringOr("dtype", "");
            const auto dtype = parseDTypeLoose(name);
            if (r.ok() && dtype != spec.dtype) {
                vision.notModelled("dtype",
                    fmt::format("a vision tower stored as \"{}\" beside {} text weights is not "
                                "modelled",
                        name, dtypeName(spec.dtype)));
            }
        }
        if (!r.ok()) {
            return r.error();
        }
    }
    DAY0_TRY(readVision(vision, "qwen3_vl", spec));
    if (!spec.vision->deepstackIndexes.empty()) {
        vision.notModelled("deepstack_visual_indexes",
            "a non-empty list is not modelled: Qwen3.5's vision model has no deepstack mergers");
        spec.vision->deepstackIndexes.clear();
    }
    return success();
}

} // namespace

Result<void> readQwenNext(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    const bool multimodal = spec.family != Family::Qwen3Next;
    if (multimodal && &text.object == &input.top.object) {
        return Error::badInput(fmt::format("{}: a {} config without 'text_config' (a text-only "
                                           "Qwen3.5 checkpoint) is not modelled: its tensor "
                                           "names are not established",
            input.top.origin, spec.modelType));
    }
    JsonReader r = text.reader();
    if (multimodal) {
        const char* expected = spec.family == Family::Qwen35 ? "qwen3_5_text" : "qwen3_5_moe_text";
        (void)stringOneOf(r, "model_type", { expected }, expected);
    }
    readWidths(r, spec);
    if (r.ok()) {
        readLayerKinds(r, spec);
    }
    if (r.ok()) {
        readLinearAttention(r, spec);
    }
    if (r.ok()) {
        readFfn(r, text, spec);
    }
    if (r.ok()) {
        readMtp(r, text, spec);
    }
    // HF builds the output gate whatever the key says (Qwen3-Next's config has no such key).
    if (r.ok() && !r.boolOr("attn_output_gate", true)) {
        text.notModelled("attn_output_gate",
            "false (q_proj without the output gate) is not modelled: HF's attention always "
            "builds the gate and no published checkpoint turns it off");
    }
    spec.attentionOutputGate = true;
    if (!r.ok()) {
        return r.error();
    }
    DAY0_TRY(readRope(text, spec));
    if (multimodal) {
        JsonReader top = input.top.reader();
        if (top.boolOr("language_model_only", false)) {
            input.top.notModelled("language_model_only",
                "true (a checkpoint without its vision tower) is not modelled");
        }
        if (!top.ok()) {
            return top.error();
        }
        DAY0_TRY(readQwen35Vision(input.top, spec));
    }
    return readQuantizationOf(input, spec);
}

void setQwenNextLayout(ModelSpec& spec)
{
    if (spec.family == Family::Qwen3Next) {
        return; // model.*, lm_head, mtp.*: the defaults
    }
    // Qwen3_5Model holds language_model and visual; lm_head and mtp.* sit at the top.
    spec.layout.textPrefix = "model.language_model";
    spec.layout.lmHead = "lm_head";
    spec.layout.visionPrefix = spec.vision ? "model.visual" : "";
    if (spec.moe && spec.family == Family::Qwen35Moe) {
        // Quantisers (ModelOpt NVFP4, Qwen's FP8) export the experts one module per expert;
        // the BF16 releases keep transformers' fused gate_up_proj / down_proj.
        spec.moe->packedExperts = !spec.quantization.has_value();
    }
}

} // namespace day0::model::detail
