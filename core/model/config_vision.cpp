// Vision-tower sections of config.json: Qwen2-VL, Qwen2.5-VL, Qwen3-VL (and the Qwen3.5 tower of
// the same shape), Kimi-K2.5's MoonViT and Kimi-K3's MoonViT-3 (modeling_kimi_k3.py). Every key
// of a vision_config is read, checked against what the graph models, or inert
// (config_audit.cpp).

#include "model/config_sections.h"

#include <fmt/format.h>

namespace day0::model::detail {

namespace {

// Keys only Kimi-K3's MoonViT-3 reads (modeling_kimi_k3.py VisionTowerConfig): norm type,
// per-module biases, the attention width and the projector kind. Absent, they take that code's
// defaults, which are Kimi-K2.5's tower (LayerNorm, every bias, qkv = hidden, patchmerger).
void readMoonVit3Keys(JsonReader& r, VisionSpec& v)
{
    v.rmsNorm = stringOneOf(r, "norm_type", { "layernorm", "rmsnorm" }, "layernorm") == "rmsnorm";
    v.attentionBias = r.boolOr("attn_bias", true);
    v.biases = r.boolOr("linear_bias", true);
    v.patchEmbedBias = r.boolOr("patch_embed_proj_bias", true);
    (void)stringOneOf(r, "mlp_type", { "mlp2" }, "mlp2"); // fc0 / fc1, the only MLP the code has
    const std::int64_t qkv = r.intOr("qkv_hidden_size", v.hiddenSize);
    if (r.ok() && (qkv <= 0 || qkv % v.numHeads != 0)) {
        r.fail("qkv_hidden_size",
            fmt::format("({}) must be a positive multiple of vt_num_attention_heads ({})", qkv,
                v.numHeads));
    }
    v.qkvWidth = 3 * qkv;
    v.headDim = v.numHeads > 0 ? qkv / v.numHeads : 0;
    // The tower's GELU-tanh and the interpolation of the position table are fixed in code or
    // change values only (MoonVision3dPatchEmbed, MoonViTEncoderLayer): no tensors.
    (void)r.stringOr("activation_func", "");
    (void)r.stringOr("pos_emb_interpolation_mode", "bilinear");
}

void readMoonVit(JsonReader& r, VisionSpec& v, const ModelSpec& spec)
{
    const bool moonVit3 = v.kind == "moonvit3";
    v.depth = r.requirePositive("vt_num_hidden_layers");
    v.hiddenSize = r.requirePositive("vt_hidden_size");
    v.intermediateSize = r.requirePositive("vt_intermediate_size");
    v.numHeads = r.requirePositive("vt_num_attention_heads");
    v.patchSize = r.intOr("patch_size", 14);
    v.temporalPatchSize = 1; // MoonViT embeds patches with a Conv2d
    const auto merge = intArrayOr(r, "merge_kernel_size");
    if (r.ok() && (merge.size() != 2 || merge[0] != merge[1] || merge[0] <= 0)) {
        r.fail("merge_kernel_size", "must be a square kernel such as [2, 2]");
    }
    v.spatialMergeSize = merge.empty() ? 2 : merge[0];
    v.posEmbHeight = r.intOr("init_pos_emb_height", 64);
    v.posEmbWidth = r.intOr("init_pos_emb_width", 64);
    v.outHiddenSize = r.intOr("text_hidden_size", spec.hiddenSize);
    v.hiddenAct = r.stringOr("projector_hidden_act", "gelu");
    // What the published Kimi-K2.5 tower is (its tensor listing): a learned 2-D table plus a
    // fixed (parameter-free) time embedding, spatial 2×2 merging with temporal pooling, the
    // two-layer patch-merger projector. Kimi-K3's code adds patchmergerv2 (PatchMergerMLPV2:
    // Linears without bias, then an RMSNorm of the text width). Other values change the tensors.
    (void)stringOneOf(r, "pos_emb_type", { "divided_fixed" }, "divided_fixed");
    (void)stringOneOf(r, "merge_type", { "sd2_tpool" }, "sd2_tpool");
    v.projector = moonVit3
        ? stringOneOf(r, "mm_projector_type", { "patchmerger", "patchmergerv2" }, "patchmerger")
        : stringOneOf(r, "mm_projector_type", { "patchmerger" }, "patchmerger");
    (void)stringOneOf(r, "video_attn_type", { "spatial_temporal" }, "spatial_temporal");
    (void)r.intOr("init_pos_emb_time", 4); // length of the fixed time embedding: no weights
    (void)r.numberOr("projector_ln_eps", 1e-5);
    const std::int64_t mmHidden = r.intOr("mm_hidden_size", v.hiddenSize);
    if (r.ok() && mmHidden != v.hiddenSize) {
        r.fail("mm_hidden_size",
            fmt::format("({}) must equal vt_hidden_size ({})", mmHidden, v.hiddenSize));
    }
    if (moonVit3 && r.ok()) {
        readMoonVit3Keys(r, v);
    }
}

void readQwenTower(JsonReader& r, const std::string& kind, VisionSpec& v, const ModelSpec& spec)
{
    if (kind == "qwen2_vl") {
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
        if (kind == "qwen2_5_vl") {
            v.fullAttentionBlocks = intArrayOr(r, "fullatt_block_indexes");
            v.windowSize = r.intOr("window_size", 0);
            (void)r.numberOr("tokens_per_second", 2.0); // M-RoPE time step of video frames
        } else {
            v.numPositionEmbeddings = r.intOr("num_position_embeddings", 0);
            v.deepstackIndexes = intArrayOr(r, "deepstack_visual_indexes");
        }
    }
    v.patchSize = r.intOr("patch_size", 14);
    v.temporalPatchSize = r.intOr("temporal_patch_size", 2);
    v.spatialMergeSize = r.intOr("spatial_merge_size", 2);
    const std::int64_t spatialPatch = r.intOr("spatial_patch_size", v.patchSize);
    if (r.ok() && spatialPatch != v.patchSize) {
        r.fail("spatial_patch_size",
            fmt::format("({}) must equal patch_size ({})", spatialPatch, v.patchSize));
    }
    v.inChannels = r.intOr("in_channels", r.intOr("in_chans", 3));
}

} // namespace

Result<void> readVision(const Section& vision, const std::string& kind, ModelSpec& spec)
{
    if (!vision.object.is_object()) {
        return Error::badInput(fmt::format("{}: 'vision_config' must be an object", vision.origin));
    }
    JsonReader r = vision.reader();
    VisionSpec v;
    v.kind = kind;
    if (kind == "moonvit" || kind == "moonvit3") {
        readMoonVit(r, v, spec);
    } else {
        readQwenTower(r, kind, v, spec);
    }
    // A tower with its own attention width (MoonViT-3 qkv_hidden_size) checked its head width.
    if (r.ok() && v.headDim == 0 && v.hiddenSize % v.numHeads != 0) {
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

} // namespace day0::model::detail
