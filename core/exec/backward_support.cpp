// What the gradient pass covers (backward.h backwardUnsupported): dense Llama-style decoders
// (Llama, Mistral, Qwen2 biases, Qwen3 QK-norm), Qwen3-MoE's softmax router, DeepSeek-V3's MLA
// with its sigmoid group-limited router and shared experts, and gpt-oss (learned attention
// sinks, its alternating sliding-window / full layers, biased q/k/v/o, the clamped SwiGLU,
// packed biased experts behind a biased router with a softmax over the chosen experts) and
// Gemma-4's text model (backward_gemma4.cpp: scaled embeddings, q/k/v norms, sliding and full
// layers with a RoPE per layer type and the full layers' global_head_dim, attention_k_eq_v, the
// sandwich norms, the layer scalar, the gelu-tanh GLU, the MoE block beside the dense MLP, final
// logit soft-capping), GLM-4.5 (partial rotary, biased q/k/v, optional q/k norm, the sigmoid router
// with shared experts after first_k_dense_replace dense layers), GLM-5 and DeepSeek-V3.2 (MLA
// restricted to the keys its DSA indexer selects; no gradient reaches the indexer through its
// discrete top-k, so its weights get zeros, as in autograd) and MiniMax-M2 (q/k RMSNorm across all heads, partial rotary,
// the sigmoid router with its correction bias; backward_glm.cpp), the Qwen3-Next hybrid and
// Qwen3.5's text model (backward_qwen3next.cpp: Gated DeltaNet layers, the attention output gate,
// zero-centred norms, the gated shared expert) and Nemotron-H (backward_nemotron_h.cpp: Mamba-2,
// attention without RoPE, the relu2 MLP, Nemotron-3's MoE with its latent projections). Anything
// else is named.
#include "exec/backward.h"
#include "exec/forward.h"

#include <fmt/format.h>

namespace day0::exec {

namespace {

// Nemotron-H (Nemotron-H, Nemotron 3 Nano / Super): Mamba-2, attention without RoPE, the relu2
// MLP and the MoE (sigmoid router with its selection bias, relu2 experts, the latent MoE, the
// shared expert), as the engine's forward runs them (nemotron_h_block.cpp).
void nemotronHBackwardUnsupported(const model::ModelSpec& spec, std::vector<std::string>& out)
{
    for (const auto& layer : spec.layers) {
        const bool known = layer.mixer == model::MixerKind::Mamba2
            || layer.mixer == model::MixerKind::Attention
            || (layer.mixer == model::MixerKind::None
                && (layer.ffn == model::FfnKind::Dense || layer.ffn == model::FfnKind::Moe));
        if (!known) {
            out.emplace_back("Nemotron-H layers other than Mamba-2, attention, MLP or MoE");
            break;
        }
    }
    if (spec.moe) {
        // The engine refuses group-limited routing of nemotron_h (unsupportedFeatures).
        if (spec.moe->scoring != model::RouterScoring::Sigmoid || spec.moe->numGroups > 1) {
            out.emplace_back("Nemotron-H routers other than the ungrouped sigmoid router");
        }
    }
}

} // namespace

std::vector<std::string> backwardUnsupported(const model::ModelSpec& spec)
{
    std::vector<std::string> out;
    const auto family = spec.family;
    // gpt-oss's own features are covered for gpt-oss only; each stays refused elsewhere.
    const bool gptOss = family == model::Family::GptOss;
    // So are Gemma-4's (its sliding layers, per-layer head widths, k = v, the gelu-tanh GLU,
    // the soft-capped logits) for Gemma-4.
    const bool gemma4 = family == model::Family::Gemma4;
    // GLM-4.5, GLM-5 and MiniMax-M2 (backward_glm.cpp).
    const bool glm45 = family == model::Family::Glm4Moe;
    const bool glm5 = family == model::Family::GlmMoeDsa;
    // DeepSeek-V3.2's DSA is GLM-5's (the indexer's top-k keys under MLA).
    const bool dsa = glm5
        || (family == model::Family::DeepseekV3 && spec.attention == model::AttentionKind::MLA
            && spec.mla.indexerHeads > 0);
    const bool minimax = family == model::Family::MiniMaxM2;
    // And the Qwen3-Next hybrid's (Gated DeltaNet layers, the attention output gate, the gated
    // shared expert) for Qwen3-Next, Qwen3.5 and Qwen3.5-MoE.
    const bool qwenNext = detail::isQwenNext(spec);
    // Nemotron-H's layers are its own (backward_nemotron_h.cpp), checked on their own.
    if (family == model::Family::NemotronH) {
        nemotronHBackwardUnsupported(spec, out);
        return out;
    }
    const bool covered = family == model::Family::Llama || family == model::Family::Mistral
        || family == model::Family::Qwen2 || family == model::Family::Qwen3
        || family == model::Family::Qwen3Moe || family == model::Family::DeepseekV3 || gptOss
        || gemma4 || glm45 || glm5 || minimax || qwenNext;
    if (!covered) {
        out.push_back(fmt::format("the {} family", model::familyName(family)));
        return out;
    }
    const auto refuse = [&](bool bad, const char* what) {
        if (bad) {
            out.emplace_back(what);
        }
    };
    // Qwen3.5's vision tower is not part of its text model (no weight of it is read).
    refuse(spec.vision.has_value() && !qwenNext, "the vision tower");
    // gpt-oss's experts: (clamp(up) + 1) · ĝ·σ(α·ĝ), ĝ = min(gate, swiglu_limit).
    const bool clampedSwiglu = gptOss && spec.hiddenAct == "swiglu_oai" && spec.swigluLimit > 0.0;
    const bool geluTanhGlu = gemma4
        && (spec.hiddenAct == "gelu_pytorch_tanh" || spec.hiddenAct == "gelu_new"
            || spec.hiddenAct == "gelu_fast");
    refuse(spec.hiddenAct != "silu" && spec.hiddenAct != "swish" && !clampedSwiglu && !geluTanhGlu,
        "MLP activations other than silu (SwiGLU)");
    refuse(spec.swigluLimit > 0.0 && !clampedSwiglu, "the clamped SwiGLU");
    refuse(spec.attentionOutputGate && !qwenNext, "the attention output gate");
    refuse(spec.qkNormAcrossHeads && !minimax, "q/k norms across heads");
    refuse(spec.attentionSinks && !gptOss, "attention sinks");
    refuse(spec.qkL2Norm, "the weightless q/k L2 norm");
    refuse(spec.attnTemperatureScale > 0.0, "attention temperature tuning");
    refuse(spec.finalLogitSoftcap > 0.0 && !gemma4, "logit soft-capping");
    if (gemma4) {
        refuse(spec.perLayerInputSize > 0, "Gemma-4's per-layer input embeddings");
        refuse(spec.kvSharedLayers > 0, "Gemma-4's KV-shared layers");
        refuse(spec.bidirectionalText, "Gemma-4's bidirectional text attention");
    }
    // Qwen3.5's M-RoPE on text positions (all three the token's) is the plain rotation.
    refuse(!spec.ropeScaling.mropeSection.empty() && !qwenNext, "M-RoPE");
    if (spec.attention == model::AttentionKind::MLA) {
        const auto& m = spec.mla;
        refuse(m.indexerHeads > 0 && !dsa, "the DSA indexer (sparse MLA)");
        refuse(dsa && m.indexerHeads > 0 && m.qLoraRank <= 0,
            "the DSA indexer without a query latent (q_lora_rank)");
        refuse(m.outputGate, "the MLA output gate");
        refuse(m.noRope, "MLA without RoPE");
    } else {
        refuse(spec.family == model::Family::DeepseekV3, "DeepSeek-V3 without MLA");
    }
    for (const auto& layer : spec.layers) {
        // gpt-oss's sliding layers: causal attention over the last sliding_window keys.
        // Gemma-4's likewise.
        const bool window = (gptOss || gemma4) && layer.mixer == model::MixerKind::Sliding
            && layer.slidingWindow > 0 && layer.attentionChunk == 0;
        // GLM-5's MLA over the keys its indexer selects.
        const bool sparseMla = dsa && layer.mixer == model::MixerKind::SparseMla;
        const bool deltaNet = qwenNext && layer.mixer == model::MixerKind::GatedDeltaNet;
        if (layer.mixer != model::MixerKind::Attention && !window && !sparseMla && !deltaNet) {
            out.emplace_back("token mixers other than full causal attention (sliding, chunked, "
                             "sparse, linear, recurrent)");
            break;
        }
        if ((layer.slidingWindow > 0 && !window) || layer.attentionChunk > 0) {
            out.emplace_back("sliding-window or chunked attention");
            break;
        }
        if (layer.ffn != model::FfnKind::Dense && layer.ffn != model::FfnKind::Moe) {
            out.emplace_back("feed-forward layers other than a gated MLP or MoE");
            break;
        }
        // Gemma-4's full layers have heads of their own width (global_head_dim), KV heads of
        // their own and, with attention_k_eq_v, keys that double as values.
        if ((layer.numHeads != 0 || layer.headDim != 0 || layer.sharedKv) && !gemma4) {
            out.emplace_back("per-layer head, expert or routing overrides");
            break;
        }
        if (layer.topK != 0 || layer.expertWidth != 0 || layer.sharedWidth >= 0
            || layer.hashRouted) {
            out.emplace_back("per-layer head, expert or routing overrides");
            break;
        }
    }
    if (spec.moe) {
        const auto& moe = *spec.moe;
        refuse(moe.scoring != model::RouterScoring::Softmax
                && moe.scoring != model::RouterScoring::Sigmoid,
            "routers other than softmax or sigmoid");
        refuse(moe.sharedExpertGate && !qwenNext, "the shared-expert gate");
        refuse((moe.expertBias || moe.routerBias) && !gptOss, "biased experts or routers");
        refuse(moe.latentSize > 0, "latent MoE");
        refuse(!moe.gatedExperts, "ungated experts");
        refuse(moe.packedExperts && !gptOss && !gemma4 && !qwenNext, "packed (fused 3-D) experts");
        refuse(moe.denseBeside && !gemma4, "a dense MLP beside the experts");
        refuse(moe.numHashLayers > 0, "hash-routed layers");
        refuse(moe.sharedIntermediate > 0 && spec.family != model::Family::DeepseekV3 && !glm45
                && !glm5 && !qwenNext,
            "shared experts outside DeepSeek-V3, GLM-4.5, GLM-5 and Qwen3-Next");
    }
    return out;
}

bool untrainableParameter(const std::string& name)
{
    return name.ends_with("e_score_correction_bias") || name.ends_with(".layer_scalar");
}

std::vector<std::string> emulatedBackwardUnsupported(const model::ModelSpec& spec)
{
    // Every op the fp64/fp32 backward covers has its emulated rounding (gradient_pass.h, the
    // MLA's in backward_mla.cpp, the Gated DeltaNet's and the Qwen3-Next gates' in
    // backward_qwen3next.cpp, Mamba-2's in backward_nemotron_h.cpp, Gemma-4's in
    // backward_gemma4.cpp, gpt-oss's clamped SwiGLU in backward_ffn.cpp), except those of the
    // families named here (none at present); what neither models (the DSA indexer, the MLA
    // output gate, MLA without RoPE, ...) is backwardUnsupported()'s to name.
    std::vector<std::string> out;
    (void)spec;
    return out;
}

} // namespace day0::exec
