// unsupportedFeatures: what of a model the reference engine does not compute, named, so that
// Engine::create refuses it rather than compute a guess; with each 2026 family's own list.
#include "exec/deepseek_v4.h"
#include "exec/engine.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace day0::exec {

namespace {

// What of Gemma-4's text tower the engine (gemma4_block.cpp) does not compute.
void gemma4Unsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    // HF looks every token up in both tables; a smaller per-layer table would fail there.
    if (spec.perLayerInputSize > 0 && spec.perLayerInputVocab != spec.vocabSize) {
        out.push_back(fmt::format("per-layer input embeddings of gemma4 over {} tokens of a {}-"
                                  "token vocabulary (vocab_size_per_layer_input)",
            spec.perLayerInputVocab, spec.vocabSize));
    }
    if (spec.bidirectionalText) {
        out.push_back("bidirectional text attention of gemma4 (use_bidirectional_attention "
                      "\"all\")");
    }
    if (spec.quantization) {
        out.push_back(fmt::format("quantised gemma4 checkpoints ({}: experts stored one Linear "
                                  "per expert, not the fused tensors the engine maps)",
            spec.quantization->method));
    }
    const auto ropeType = [&](const std::string& type, const char* layers) {
        if (type != "default" && type != "proportional") {
            out.push_back(fmt::format("RoPE type '{}' of the gemma4 {} layers", type, layers));
        }
    };
    ropeType(spec.ropeScaling.type, "full_attention");
    if (spec.slidingRope) {
        ropeType(spec.slidingRope->scaling.type, "sliding_attention");
    }
}

// What of Kimi-Linear / Kimi-K3 the engine (kimi_delta.cpp, the MLA without RoPE, the
// DeepSeek-style sigmoid MoE, Kimi-K3's SiTU-GLU in ffn_block.cpp and Block Attention Residuals
// in kimi_attn_res.cpp) does not compute, each by its config key.
void kimiUnsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    const std::string type = spec.modelType;
    if (spec.hiddenAct != "silu" && spec.hiddenAct != "situ") {
        out.push_back(fmt::format("the '{}' activation of {} (hidden_act; SiTU's "
                                  "activation_situ_beta / activation_situ_linear_beta)",
            spec.hiddenAct, type));
    }
    if (spec.attention == model::AttentionKind::MLA && !spec.mla.noRope) {
        // Kimi's MLA with RoPE (mla_use_nope false) is not checked against Kimi's code.
        out.push_back(fmt::format("the rotary MLA of {} (mla_use_nope false)", type));
    }
    if (spec.linearAttention) {
        const auto& la = *spec.linearAttention;
        if (la.gateLowerBound > 0.0) {
            out.push_back(fmt::format("a positive KDA gate_lower_bound of {} ({}: the safe gate "
                                      "bounds a log decay from below, so it must be negative)",
                type, la.gateLowerBound));
        }
        if (la.paddedALog && la.valueHeads > la.valueHeadDim) {
            // Head h reads A_log[h] of the [head_dim] tensor (addKimiDeltaWeights).
            out.push_back(fmt::format("the KDA A_log padded to head_dim of {} with more heads ({}) "
                                      "than head_dim ({})",
                type, la.valueHeads, la.valueHeadDim));
        }
        if (la.keyHeads != la.valueHeads || la.keyHeadDim != la.valueHeadDim) {
            out.push_back(
                fmt::format("KDA with key and value heads of different shapes ({})", type));
        }
    }
    if (spec.moe) {
        const auto& moe = *spec.moe;
        if (moe.scoring != model::RouterScoring::Sigmoid) {
            out.push_back(
                fmt::format("the softmax router of {} (moe_router_activation_func softmax)", type));
        }
        if (moe.numGroups > 1) {
            // Kimi's grouped top-k is not checked against its code for more than one group.
            out.push_back(fmt::format(
                "grouped expert routing of {} (num_expert_group {})", type, moe.numGroups));
        }
    }
    // A tower of a kind the engine runs elsewhere (Qwen-VL) is not wired into Kimi's sequence;
    // any other kind unsupportedFeatures names with its missing pieces.
    if (spec.vision
        && (spec.vision->kind == "qwen3_vl" || spec.vision->kind == "qwen2_vl"
            || spec.vision->kind == "qwen2_5_vl")) {
        out.push_back(fmt::format("the {} vision tower of {} (vision_config) in Kimi's sequence",
            spec.vision->kind, type));
    }
}

// What of the Qwen3-Next / Qwen3.5 text towers the engine (gated_delta_net.cpp, the gated
// attention, the MoE with its gated shared expert) does not compute.
void qwenNextUnsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    // HF's conv applies hidden_act and its gated norm SiLU (FusedRMSNormGated: hidden_act too);
    // the engine computes SiLU for both.
    if (spec.hiddenAct != "silu" && spec.hiddenAct != "swish") {
        out.push_back(fmt::format("the Gated DeltaNet conv and gated norm of {} with hidden_act "
                                  "'{}' (the engine computes SiLU)",
            spec.modelType, spec.hiddenAct));
    }
    if (!spec.linearAttention && spec.numLayers > 0) {
        out.push_back(
            fmt::format("{}: linear-attention layers without their dimensions", spec.modelType));
    }
    if (spec.ropeScaling.type != "default") {
        out.push_back(fmt::format("RoPE type '{}' of {}", spec.ropeScaling.type, spec.modelType));
    }
}

// What of MiniMax-M3 (minimax_m3_block.cpp) the engine does not compute.
void miniMaxM3Unsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    if (const auto& bs = spec.blockSparse) {
        // The references part ways beyond the published values (sparse_local_block 1,
        // sparse_init_block 0): for sparse_local_block > 1 Automodel still forces only the
        // query's own block, transformers the local_blocks blocks ending at it; Automodel forces
        // the first sparse_init_block blocks, transformers ignores the key.
        if (bs->localBlocks > 1) {
            out.push_back(fmt::format("sparse_local_block {} of minimax_m3 (the references "
                                      "disagree beyond 1)",
                bs->localBlocks));
        }
        if (bs->initBlocks > 0) {
            out.push_back(fmt::format("sparse_init_block {} of minimax_m3 (the references "
                                      "disagree beyond 0)",
                bs->initBlocks));
        }
        // Automodel asserts qk_norm_type "per_head" on its sparse layers.
        if (spec.qkNormAcrossHeads) {
            out.push_back("q/k norms across heads (qk_norm_type 'per_layer') on the sparse "
                          "attention layers of minimax_m3");
        }
        if (bs->scoreType != "max") {
            out.push_back(fmt::format("sparse_score_type '{}' of minimax_m3", bs->scoreType));
        }
    }
    if (spec.quantization) {
        out.push_back(fmt::format(
            "quantised minimax_m3 checkpoints ({}: not verified)", spec.quantization->method));
    }
}

// What of Nemotron-H the engine (nemotron_h_block.cpp, mamba2.cpp) does not compute.
void nemotronHUnsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    if (spec.quantization) {
        // ModelOpt FP8 / NVFP4 Nemotron checkpoints: shrink generates neither, so no twin has
        // checked the engine's reading of them.
        out.push_back(fmt::format("quantised nemotron_h checkpoints ({})",
            model::quantSchemeName(spec.quantization->scheme)));
    }
    if (spec.tieEmbeddings) {
        out.push_back("tied embeddings of nemotron_h (lm_head read from backbone.embeddings)");
    }
    if (spec.mamba && spec.mamba->stateDtype != DType::F32) {
        out.push_back(fmt::format("a {} SSM state of nemotron_h (mamba_ssm_cache_dtype; the "
                                  "engine keeps it in the compute type)",
            dtypeName(spec.mamba->stateDtype)));
    }
    if (spec.moe && spec.moe->numGroups > 1) {
        // HF's NemotronHMoE masks the groups left out with -inf, the engine's router with 0.
        out.push_back(
            fmt::format("group-limited routing of nemotron_h (n_group {})", spec.moe->numGroups));
    }
}

// What a MoonViT / MoonViT-3 run would need that the engine lacks, by config key.
std::string moonVitMissing(const model::ModelSpec& spec)
{
    return fmt::format("vision tower of {} ({}: the pos_emb_type 'divided_fixed' learned 2-D "
                       "position table bilinearly resized to the patch grid plus the fixed time "
                       "embedding, the 2-D rotary of its blocks, merge_type 'sd2_tpool' (2x2 "
                       "spatial merge with temporal pooling) and the mm_projector_type '{}' "
                       "projector; the engine implements the Qwen2/2.5/3-VL and Gemma-4 towers)",
        spec.modelType.empty() ? std::string("this model") : spec.modelType, spec.vision->kind,
        spec.vision->projector.empty() ? std::string("patchmerger") : spec.vision->projector);
}

} // namespace

std::optional<std::string> visionTowerNotRun(const model::ModelSpec& spec)
{
    if (spec.vision && spec.vision->kind == "moonvit3") {
        return moonVitMissing(spec);
    }
    return std::nullopt;
}

std::vector<std::string> unsupportedFeatures(const model::ModelSpec& spec)
{
    std::vector<std::string> out;
    const std::string family = spec.modelType.empty() ? std::string("this model") : spec.modelType;
    // Gemma-4's vision tower runs (vision_gemma4.cpp); its audio tower is reached only by an
    // audio input, which the engine does not take.
    // Kimi-K3's MoonViT-3 tower is not run either, but its text model runs without it: a run
    // names the tower as not run (visionTowerNotRun), and an image is refused.
    if (spec.vision && spec.vision->kind == "moonvit") {
        out.push_back(moonVitMissing(spec));
    } else if (spec.vision && spec.vision->kind != "qwen3_vl" && spec.vision->kind != "qwen2_vl"
        && spec.vision->kind != "qwen2_5_vl" && spec.vision->kind != "gemma4"
        && spec.vision->kind != "moonvit3") {
        out.push_back(fmt::format("vision tower of {} ({}: patch embedding, ViT blocks, patch "
                                  "merger; the engine implements the Qwen2/2.5/3-VL and Gemma-4 "
                                  "towers)",
            family, spec.vision->kind));
    }
    if (spec.moe && spec.moe->packedExperts && spec.family != model::Family::Qwen3VlMoe
        && spec.family != model::Family::Llama4 && spec.family != model::Family::GptOss
        && spec.family != model::Family::Gemma4 && spec.family != model::Family::Qwen35Moe) {
        out.push_back(fmt::format("fused 3-D expert tensors of {}", family));
    }
    // The DSA indexer (dsa_indexer.cpp) needs the MLA query latent it reads.
    if (spec.mla.indexerHeads > 0 && spec.attention == model::AttentionKind::MLA
        && spec.mla.qLoraRank <= 0) {
        out.push_back(fmt::format("sparse-attention indexer of {} without q_lora_rank", family));
    }
    if (spec.attention == model::AttentionKind::MLA && !spec.mla.ropeInterleave) {
        out.push_back(fmt::format("rotate-half MLA rotary dims of {} (rope_interleave false; the "
                                  "engine rotates adjacent pairs, as DeepSeek's reference does)",
            family));
    }
    if ((spec.hiddenAct == "swiglu_oai" || spec.hiddenAct == "swigluoai")
        && spec.swigluAlpha != 1.702) {
        out.push_back(fmt::format("the clamped SwiGLU of {} with swiglu_alpha {} (the engine "
                                  "computes g·σ(1.702·g), gpt-oss's)",
            family, spec.swigluAlpha));
    }
    // Nemotron-H's relu2 MLPs and experts are up/down only (nemotron_h_block.cpp).
    if (!spec.gatedMlp && spec.family != model::Family::NemotronH) {
        out.push_back(fmt::format("non-gated MLP of {}", family));
    }
    if (spec.normOffset && spec.family != model::Family::MiniMaxM3 && !detail::isQwenNext(spec)) {
        out.push_back(fmt::format("(1 + w) RMSNorm weights of {}", family));
    }
    switch (spec.family) {
    case model::Family::MiniMaxM3:
        miniMaxM3Unsupported(spec, out);
        break;
    case model::Family::KimiLinear:
        kimiUnsupported(spec, out);
        break;
    case model::Family::Gemma4:
        gemma4Unsupported(spec, out);
        break;
    case model::Family::Qwen3Next:
    case model::Family::Qwen35:
    case model::Family::Qwen35Moe:
        qwenNextUnsupported(spec, out);
        break;
    case model::Family::DeepseekV4: {
        const auto v4 = detail::deepseekV4Unsupported(spec); // deepseek_v4_block.cpp
        out.insert(out.end(), v4.begin(), v4.end());
        break;
    }
    case model::Family::NemotronH:
        nemotronHUnsupported(spec, out);
        break;
    default:
        break;
    }
    for (const auto& layer : spec.layers) {
        if (layer.mixer != model::MixerKind::Attention && layer.mixer != model::MixerKind::Sliding
            && layer.mixer != model::MixerKind::Chunked
            && layer.mixer != model::MixerKind::SparseMla && layer.mixer != model::MixerKind::Linear
            && layer.mixer != model::MixerKind::None
            && !(layer.mixer == model::MixerKind::GatedDeltaNet && detail::isQwenNext(spec))
            && !(layer.mixer == model::MixerKind::KimiDelta
                && spec.family == model::Family::KimiLinear)
            && !(layer.mixer == model::MixerKind::Compressed
                && spec.family == model::Family::DeepseekV4)
            && !(layer.mixer == model::MixerKind::BlockSparse && spec.blockSparse)
            && !(layer.mixer == model::MixerKind::Mamba2
                && spec.family == model::Family::NemotronH)) {
            out.push_back(
                fmt::format("{} layers of {}", model::mixerKindName(layer.mixer), family));
            break;
        }
    }
    // Per-layer shapes the forward honours: KV heads and the dense MLP's width (Nemotron-NAS),
    // and Gemma-4's full layers' head width and keys doubling as values (gemma4_block.cpp).
    // The others change a layer's tensors, which it would read at the model-wide shapes.
    const bool gemma4 = spec.family == model::Family::Gemma4;
    for (const auto& layer : spec.layers) {
        std::vector<std::string> perLayer;
        if (layer.numHeads != 0) {
            perLayer.emplace_back("query heads");
        }
        if (layer.headDim != 0 && !gemma4) {
            perLayer.emplace_back("head width");
        }
        if (layer.sharedKv && !gemma4) {
            perLayer.emplace_back("keys doubling as values");
        }
        if (layer.topK != 0 || layer.expertWidth != 0 || layer.sharedWidth >= 0) {
            perLayer.emplace_back("MoE shape");
        }
        if (layer.hashRouted && spec.family != model::Family::DeepseekV4) {
            perLayer.emplace_back("hash routing");
        }
        if (!perLayer.empty()) {
            out.push_back(fmt::format("per-layer {} of {}", fmt::join(perLayer, ", "), family));
            break;
        }
    }
    // Block FP8 is dequantised in loadWeight, every other format the checkpoint reader
    // dequantises as convert does (checkpoint::DequantizedWeights).
    const auto dequantised = [](model::QuantScheme s) {
        using enum model::QuantScheme;
        return s == BlockFp8 || s == PackedInt || s == Mxfp4 || s == PackedMxfp4 || s == Nvfp4
            || s == Fp8PerTensor || s == Fp4Block;
    };
    if (const auto& q = spec.quantization; q
        && (!dequantised(q->scheme) || (q->expertScheme && !dequantised(*q->expertScheme))
            || (q->mixedScheme && !dequantised(*q->mixedScheme)))) {
        out.push_back(fmt::format("{} weights ({})", model::quantSchemeName(q->scheme), q->method));
    }
    if (spec.partial) {
        out.push_back(fmt::format("a partial reading of {} (structure not modelled: {} key(s))",
            family, spec.ignored.size()));
    }
    if (spec.layers.size() != std::size_t(spec.numLayers)) {
        out.push_back(fmt::format("{}: the spec lists {} layer entries for {} layers", family,
            spec.layers.size(), spec.numLayers));
    }
    return out;
}

} // namespace day0::exec
