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
// discrete top-k, so its weights get zeros, as in autograd) and MiniMax-M2 (q/k RMSNorm across all
// heads, partial rotary, the sigmoid router with its correction bias; backward_glm.cpp), the
// Qwen3-Next hybrid and Qwen3.5's text model (backward_qwen3next.cpp: Gated DeltaNet layers, the
// attention output gate, zero-centred norms, the gated shared expert) and Nemotron-H
// (backward_nemotron_h.cpp: Mamba-2, attention without RoPE, the relu2 MLP, Nemotron-3's MoE with
// its latent projections), DeepSeek-V4 (backward_deepseek_v4.cpp: hyper-connections, the
// compressed attention with its window, sinks and compressors, no gradient through the Lightning
// indexer's top-k, the sqrtsoftplus and hash-routed MoE with the clamped SwiGLU), MiniMax-M3's
// text decoder (backward_minimax_m3.cpp: MSA's block selection, (1 + w) norms, swigluoai),
// Llama-4's text model (backward_llama4.cpp: chunked RoPE layers with the weightless q/k norm,
// NoPE layers with attention temperature tuning, the MoE whose sigmoid score scales the expert's
// input, its shared expert and packed experts, dense layers between), Hunyuan-A13B (the
// standard layer with its q/k norms after RoPE, the NTK-alpha RoPE base, the softmax router
// renormalised over its top-k, the shared mixed MLP, tied embeddings) and Kimi-Linear
// (backward_kimi.cpp: Kimi Delta Attention with its per-channel decay, MLA without RoPE, the
// sigmoid router with its selection bias and shared experts after a dense first layer; of
// Kimi-K3's additions its safe and full-rank KDA gates and the MLA output gate, the others
// named). Anything else is named.
#include "exec/backward.h"
#include "exec/deepseek_v4.h"
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
    // MiniMax-M3's text decoder (backward_minimax_m3.cpp): MSA's block selection on its sparse
    // layers, (1 + w) norms, swigluoai, the sigmoid router with a shared expert.
    const bool minimaxM3 = family == model::Family::MiniMaxM3;
    // Llama-4's text model (backward_llama4.cpp).
    const bool llama4 = family == model::Family::Llama4;
    // Hunyuan-A13B: q/k norms after RoPE (the standard layer), the NTK-alpha RoPE base, the
    // softmax router with its shared mixed MLP.
    const bool hunyuan = family == model::Family::Hunyuan;
    // And the Qwen3-Next hybrid's (Gated DeltaNet layers, the attention output gate, the gated
    // shared expert) for Qwen3-Next, Qwen3.5 and Qwen3.5-MoE.
    const bool qwenNext = detail::isQwenNext(spec);
    // DeepSeek-V4's blocks are its own (backward_deepseek_v4.cpp): what its forward computes.
    if (family == model::Family::DeepseekV4) {
        for (const auto& missing : detail::deepseekV4Unsupported(spec)) {
            out.push_back(missing);
        }
        return out;
    }
    // Kimi-Linear's KDA layers and its MLA without RoPE (backward_kimi.cpp).
    const bool kimi = family == model::Family::KimiLinear;
    // Nemotron-H's layers are its own (backward_nemotron_h.cpp), checked on their own.
    if (family == model::Family::NemotronH) {
        nemotronHBackwardUnsupported(spec, out);
        return out;
    }
    const bool covered = family == model::Family::Llama || family == model::Family::Mistral
        || family == model::Family::Qwen2 || family == model::Family::Qwen3
        || family == model::Family::Qwen3Moe || family == model::Family::DeepseekV3 || gptOss
        || gemma4 || glm45 || glm5 || minimax || qwenNext || minimaxM3 || llama4 || hunyuan || kimi;
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
    // MiniMax-M3's swigluoai is the same form on every MLP (its limit > 0: the clamps).
    const bool clampedSwiglu = (gptOss && spec.hiddenAct == "swiglu_oai" && spec.swigluLimit > 0.0)
        || (minimaxM3 && spec.hiddenAct == "swigluoai" && spec.swigluLimit > 0.0);
    const bool geluTanhGlu = gemma4
        && (spec.hiddenAct == "gelu_pytorch_tanh" || spec.hiddenAct == "gelu_new"
            || spec.hiddenAct == "gelu_fast");
    refuse(spec.hiddenAct != "silu" && spec.hiddenAct != "swish" && !clampedSwiglu && !geluTanhGlu,
        "MLP activations other than silu (SwiGLU)");
    refuse(spec.swigluLimit > 0.0 && !clampedSwiglu, "the clamped SwiGLU");
    refuse(spec.attentionOutputGate && !qwenNext, "the attention output gate");
    refuse(spec.qkNormAcrossHeads && !minimax, "q/k norms across heads");
    refuse(spec.attentionSinks && !gptOss, "attention sinks");
    refuse(spec.qkL2Norm && !llama4, "the weightless q/k L2 norm");
    refuse(spec.attnTemperatureScale > 0.0 && !llama4, "attention temperature tuning");
    refuse(spec.finalLogitSoftcap > 0.0 && !gemma4, "logit soft-capping");
    refuse(minimaxM3 && spec.hiddenAct == "swigluoai" && spec.swigluLimit <= 0.0,
        "MiniMax-M3's swigluoai without swiglu_limit (unclamped)");
    if (minimaxM3 && spec.blockSparse) {
        // As the engine's forward (blockSparseInit, unsupportedFeatures) and the twin select.
        const auto& bs = *spec.blockSparse;
        refuse(bs.indexHeads != spec.numKvHeads,
            "MiniMax-M3 sparse attention with index heads other than the KV heads");
        refuse(bs.indexDim < std::int64_t(double(spec.headDim) * spec.partialRotaryFactor),
            "MiniMax-M3 sparse attention with sparse_index_dim below the rotary width");
        refuse(bs.localBlocks > 1 || bs.initBlocks > 0,
            "MiniMax-M3 sparse attention with sparse_local_block > 1 or sparse_init_block > 0");
        refuse(bs.scoreType != "max", "MiniMax-M3 sparse attention scored other than by max");
    }
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
        refuse(m.outputGate && !kimi, "the MLA output gate");
        refuse(m.noRope && !kimi, "MLA without RoPE");
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
        // MiniMax-M3's MSA: causal attention over each KV group's kept key blocks.
        const bool msa = minimaxM3 && layer.mixer == model::MixerKind::BlockSparse
            && spec.blockSparse.has_value();
        // Llama-4's RoPE layers: causal attention within their attention_chunk_size chunk.
        const bool chunked = llama4 && layer.mixer == model::MixerKind::Chunked
            && layer.attentionChunk > 0 && layer.slidingWindow == 0;
        const bool kda = kimi && layer.mixer == model::MixerKind::KimiDelta;
        if (layer.mixer != model::MixerKind::Attention && !window && !sparseMla && !deltaNet && !msa
            && !chunked && !kda) {
            out.emplace_back("token mixers other than full causal attention (sliding, chunked, "
                             "sparse, linear, recurrent)");
            break;
        }
        if ((layer.slidingWindow > 0 && !window) || (layer.attentionChunk > 0 && !chunked)) {
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
    if (kimi) {
        // Kimi-K3's additions to Kimi-Linear, each by name until the backward models it.
        if (spec.linearAttention) {
            const auto& la = *spec.linearAttention;
            // Its safe and full-rank KDA gates and the MLA output gate are covered.
            refuse(la.paddedALog, "Kimi-K3's A_log padded to head_dim");
        }
        refuse(spec.attnResBlockSize > 0, "Kimi-K3's Block Attention Residuals");
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
        refuse(moe.packedExperts && !gptOss && !gemma4 && !qwenNext && !llama4,
            "packed (fused 3-D) experts");
        refuse(moe.denseBeside && !gemma4, "a dense MLP beside the experts");
        refuse(moe.numHashLayers > 0, "hash-routed layers");
        refuse(moe.sharedIntermediate > 0 && spec.family != model::Family::DeepseekV3 && !glm45
                && !glm5 && !qwenNext && !minimaxM3 && !llama4 && !hunyuan && !kimi,
            "shared experts outside DeepSeek-V3, GLM-4.5, GLM-5, Qwen3-Next, MiniMax-M3, Llama-4, "
            "Hunyuan and Kimi-Linear");
    }
    return out;
}

bool untrainableParameter(const std::string& name)
{
    // DeepSeek-V4's native names: its selection bias (gate.bias) and the hash layers' tid2eid
    // (an integer table).
    return name.ends_with("e_score_correction_bias") || name.ends_with(".layer_scalar")
        || name.ends_with(".ffn.gate.bias") || name.ends_with(".gate.tid2eid");
}

std::vector<std::string> emulatedBackwardUnsupported(const model::ModelSpec& spec)
{
    // Every op the fp64/fp32 backward covers has its emulated rounding (gradient_pass.h, the
    // MLA's in backward_mla.cpp, the Gated DeltaNet's and the Qwen3-Next gates' in
    // backward_qwen3next.cpp, Mamba-2's in backward_nemotron_h.cpp, Gemma-4's in
    // backward_gemma4.cpp, gpt-oss's clamped SwiGLU in backward_ffn.cpp), except those of the
    // families named here; what neither models (the DSA indexer, the MLA
    // output gate, MLA without RoPE, ...) is backwardUnsupported()'s to name.
    std::vector<std::string> out;
    if (spec.family == model::Family::DeepseekV4) {
        out.emplace_back("DeepSeek-V4 (hyper-connections, the compressors' pooling, the sinks, "
                         "the sqrtsoftplus router and the clamped SwiGLU; fp64 or fp32 only)");
    }
    if (spec.family == model::Family::MiniMaxM3) {
        out.emplace_back("MiniMax-M3 (MSA's index branch and block selection; "
                         "fp64 or fp32 only)");
    }
    if (spec.family == model::Family::Llama4) {
        out.emplace_back("Llama-4 (chunked and NoPE attention with the weightless q/k norm and "
                         "attention temperature, the experts fed their score-scaled input; fp64 "
                         "or fp32 only)");
    }
    if (spec.family == model::Family::Hunyuan) {
        out.emplace_back("Hunyuan (q/k norms after RoPE, the fp32 router; fp64 or fp32 only)");
    }
    if (spec.family == model::Family::KimiLinear) {
        out.emplace_back("Kimi-Linear (Kimi Delta Attention's convs, per-channel decay, rule and "
                         "gated o_norm; fp64 or fp32 only)");
    }
    return out;
}

} // namespace day0::exec
