// Vision towers: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Kimi-K2.5's MoonViT and Kimi-K3's MoonViT-3.
//
// Where the names come from:
// - Qwen2-VL: the Qwen2-VL-7B checkpoint index in tests/data/model/indexes (visual.patch_embed,
//   visual.blocks.N.{norm1,norm2 (LayerNorm), attn.qkv, attn.proj, mlp.fc1, mlp.fc2},
//   visual.merger.{ln_q, mlp.0, mlp.2}); compared exactly in the tests.
// - Qwen2.5-VL: transformers modeling_qwen2_5_vl.py (Qwen2_5_VLVisionBlock: RMSNorm norm1/norm2
//   without bias, SwiGLU mlp.{gate,up,down}_proj with bias; Qwen2_5_VLPatchMerger ln_q RMSNorm;
//   patch Conv3d without bias), same legacy "visual." prefix as Qwen2-VL.
// - Qwen3-VL: transformers modeling_qwen3_vl.py (Conv3d patch embed with bias, learned pos_embed,
//   LayerNorm norm1/norm2, mlp.linear_fc1/linear_fc2, merger.{norm, linear_fc1, linear_fc2},
//   deepstack_merger_list.K with a norm over the merged width), prefix "model.visual".
// - MoonViT (Kimi-K2.5): tensor listing of the published checkpoint
//   (vision_tower.patch_embed.{proj [1152, 3, 14, 14] + bias, pos_emb [64, 64, 1152]},
//   vision_tower.encoder.blocks.N.{norm0, norm1, wqkv, wo, mlp.fc0, mlp.fc1} with biases,
//   vision_tower.encoder.final_layernorm, mm_projector.{pre_norm, proj.0, proj.2}).
// - MoonViT-3 (Kimi-K3): modeling_kimi_k3.py of HF moonshotai/Kimi-K3 (a public vendored copy,
//   search index id 58920436853): the same names; nn.RMSNorm norms (weight only) with
//   norm_type "rmsnorm"; wqkv [3·qkv_hidden_size, hidden] and wo [hidden, qkv_hidden_size]
//   biased by attn_bias, mlp.fc0/fc1 by linear_bias, the conv by patch_embed_proj_bias;
//   PatchMergerMLPV2 = mm_projector.proj.{0,2} without bias and post_norm (RMSNorm of the text
//   width), no pre_norm (research note kimi_ct.md (not in the repository) §3.8: 168 tensors).

#include "model/graph_builder.h"

#include <string>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

constexpr Component kVision = Component::Vision;

LinearOptions withBias(ParallelRole role)
{
    LinearOptions o { role, kVision, true };
    o.quantizable = false;
    return o;
}

void addQwenVisionBlock(GraphBuilder& b, const VisionSpec& v, const std::string& p)
{
    const std::int64_t e = v.hiddenSize;
    const std::int64_t i = v.intermediateSize;
    const bool qwen25 = v.kind == "qwen2_5_vl";
    b.norm(p + ".norm1", e, !qwen25);
    b.norm(p + ".norm2", e, !qwen25);
    b.linear(p + ".attn.qkv", 3 * e, e, withBias(R::ColumnParallel));
    b.linear(p + ".attn.proj", e, e, withBias(R::RowParallel));
    if (v.kind == "qwen2_vl") {
        b.linear(p + ".mlp.fc1", i, e, withBias(R::ColumnParallel));
        b.linear(p + ".mlp.fc2", e, i, withBias(R::RowParallel));
    } else if (qwen25) {
        b.linear(p + ".mlp.gate_proj", i, e, withBias(R::ColumnParallel));
        b.linear(p + ".mlp.up_proj", i, e, withBias(R::ColumnParallel));
        b.linear(p + ".mlp.down_proj", e, i, withBias(R::RowParallel));
    } else {
        b.linear(p + ".mlp.linear_fc1", i, e, withBias(R::ColumnParallel));
        b.linear(p + ".mlp.linear_fc2", e, i, withBias(R::RowParallel));
    }
}

void addQwenTower(GraphBuilder& b, const VisionSpec& v, const std::string& prefix)
{
    const ModelSpec& s = b.spec();
    const std::int64_t e = v.hiddenSize;
    const std::int64_t merged = e * v.spatialMergeSize * v.spatialMergeSize;
    const bool qwen3 = v.kind == "qwen3_vl";

    b.begin(prefix + ".patch_embed", BlockKind::VisionPatchEmbed);
    b.tensor(prefix + ".patch_embed.proj.weight",
        { e, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize }, s.dtype, R::Replicated,
        kVision);
    if (qwen3) {
        b.tensor(prefix + ".patch_embed.proj.bias", { e }, s.dtype, R::Replicated, kVision,
            TensorKind::Bias);
        b.tensor(prefix + ".pos_embed.weight", { v.numPositionEmbeddings, e }, s.dtype,
            R::Replicated, kVision);
    }

    for (std::int64_t i = 0; i < v.depth; ++i) {
        const std::string p = prefix + ".blocks." + std::to_string(i);
        b.begin(p, BlockKind::VisionBlock, static_cast<std::int32_t>(i));
        addQwenVisionBlock(b, v, p);
    }

    const std::string merger = prefix + ".merger";
    b.begin(merger, BlockKind::VisionMerger);
    if (qwen3) {
        b.norm(merger + ".norm", e, true);
        b.linear(merger + ".linear_fc1", merged, merged, withBias(R::ColumnParallel));
        b.linear(merger + ".linear_fc2", v.outHiddenSize, merged, withBias(R::RowParallel));
        for (std::size_t k = 0; k < v.deepstackIndexes.size(); ++k) {
            const std::string d = prefix + ".deepstack_merger_list." + std::to_string(k);
            b.begin(d, BlockKind::VisionMerger, static_cast<std::int32_t>(k));
            b.norm(d + ".norm", merged, true);
            b.linear(d + ".linear_fc1", merged, merged, withBias(R::ColumnParallel));
            b.linear(d + ".linear_fc2", v.outHiddenSize, merged, withBias(R::RowParallel));
        }
    } else {
        b.norm(merger + ".ln_q", e, v.kind == "qwen2_vl");
        b.linear(merger + ".mlp.0", merged, merged, withBias(R::ColumnParallel));
        b.linear(merger + ".mlp.2", v.outHiddenSize, merged, withBias(R::RowParallel));
    }
}

// Kimi-K2.5's MoonViT and Kimi-K3's MoonViT-3 share the module tree; K3 switches the norms to
// RMSNorm, drops the biases, widens the attention (qkv_hidden_size) and projects with
// patchmergerv2 (modeling_kimi_k3.py MoonViTEncoderLayer, PatchMergerMLPV2).
void addMoonVit(
    GraphBuilder& b, const VisionSpec& v, const std::string& prefix, const std::string& projector)
{
    const ModelSpec& s = b.spec();
    const std::int64_t e = v.hiddenSize;
    const std::int64_t i = v.intermediateSize;
    const std::int64_t qkv = v.qkvWidth > 0 ? v.qkvWidth : 3 * e;
    const std::int64_t merged = e * v.spatialMergeSize * v.spatialMergeSize;
    const bool layerNorm = !v.rmsNorm;
    auto linear = [](ParallelRole role, bool bias) {
        LinearOptions o { role, kVision, bias };
        o.quantizable = false;
        return o;
    };

    b.begin(prefix + ".patch_embed", BlockKind::VisionPatchEmbed);
    b.tensor(prefix + ".patch_embed.proj.weight", { e, v.inChannels, v.patchSize, v.patchSize },
        s.dtype, R::Replicated, kVision);
    if (v.patchEmbedBias) {
        b.tensor(prefix + ".patch_embed.proj.bias", { e }, s.dtype, R::Replicated, kVision,
            TensorKind::Bias);
    }
    b.tensor(prefix + ".patch_embed.pos_emb.weight", { v.posEmbHeight, v.posEmbWidth, e }, s.dtype,
        R::Replicated, kVision);

    for (std::int64_t k = 0; k < v.depth; ++k) {
        const std::string p = prefix + ".encoder.blocks." + std::to_string(k);
        b.begin(p, BlockKind::VisionBlock, static_cast<std::int32_t>(k));
        b.norm(p + ".norm0", e, layerNorm);
        b.norm(p + ".norm1", e, layerNorm);
        b.linear(p + ".wqkv", qkv, e, linear(R::ColumnParallel, v.attentionBias));
        b.linear(p + ".wo", e, qkv / 3, linear(R::RowParallel, v.attentionBias));
        b.linear(p + ".mlp.fc0", i, e, linear(R::ColumnParallel, v.biases));
        b.linear(p + ".mlp.fc1", e, i, linear(R::RowParallel, v.biases));
    }

    b.begin(prefix + ".encoder.final_layernorm", BlockKind::VisionMerger);
    b.norm(prefix + ".encoder.final_layernorm", e, layerNorm);

    b.begin(projector, BlockKind::VisionMerger);
    if (v.projector == "patchmergerv2") {
        b.linear(projector + ".proj.0", merged, merged, linear(R::ColumnParallel, false));
        b.linear(projector + ".proj.2", v.outHiddenSize, merged, linear(R::RowParallel, false));
        b.norm(projector + ".post_norm", v.outHiddenSize);
    } else {
        b.norm(projector + ".pre_norm", e, true);
        b.linear(projector + ".proj.0", merged, merged, withBias(R::ColumnParallel));
        b.linear(projector + ".proj.2", v.outHiddenSize, merged, withBias(R::RowParallel));
    }
}

} // namespace

void addVisionTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    if (s.family == Family::Gemma4) {
        addGemma4Towers(b); // vision and audio (family_gemma4_graph.cpp)
        return;
    }
    if (!s.vision) {
        return;
    }
    const VisionSpec& v = *s.vision;
    if (v.kind == "moonvit" || v.kind == "moonvit3") {
        addMoonVit(b, v, s.layout.visionPrefix, s.layout.projectorPrefix);
    } else {
        addQwenTower(b, v, s.layout.visionPrefix);
    }
}

} // namespace day0::model::detail
