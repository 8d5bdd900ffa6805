// The decoder's weight names per layer (layerNames) and the weights a forward pass needs
// (requiredWeights), by family: what the engine loads and checks before it runs.
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::exec::detail {

LayerNames layerNames(const model::ModelSpec& spec, int layer)
{
    LayerNames n;
    n.prefix = fmt::format("model.layers.{}", layer);
    // MiniMax-M2 and M3 keep Mixtral's names: block_sparse_moe with w1 / w3 / w2 experts.
    const bool minimax
        = spec.family == model::Family::MiniMaxM2 || spec.family == model::Family::MiniMaxM3;
    // Kimi-Linear too: block_sparse_moe with w1 / w3 / w2 experts (modeling_kimi_linear.py).
    const bool mixtral = spec.family == model::Family::Mixtral || minimax
        || spec.family == model::Family::KimiLinear;
    const bool moe
        = std::size_t(layer) < spec.layers.size() && spec.layers[std::size_t(layer)].moe();
    const bool llama4 = spec.family == model::Family::Llama4;
    n.ffn = n.prefix + (mixtral && moe ? ".block_sparse_moe" : llama4 ? ".feed_forward" : ".mlp");
    n.router = n.ffn
        + (llama4 || spec.family == model::Family::GptOss ? ".router"
                : spec.family == model::Family::Hunyuan   ? ".gate.wg"
                                                          : ".gate");
    n.expertGate = mixtral ? "w1" : "gate_proj";
    n.expertUp = mixtral ? "w3" : "up_proj";
    n.expertDown = mixtral ? "w2" : "down_proj";
    n.scoreBias = n.ffn + (minimax ? ".e_score_correction_bias" : ".gate.e_score_correction_bias");
    if (moe && spec.moe && spec.moe->sharedIntermediate > 0) {
        n.shared = n.ffn
            + (spec.family == model::Family::Hunyuan       ? ".shared_mlp"
                    : spec.moe->sharedExpertGate || llama4 ? ".shared_expert"
                                                           : ".shared_experts");
    }
    // Hunyuan names its per-head q/k norms query_layernorm / key_layernorm.
    const bool hunyuan = spec.family == model::Family::Hunyuan;
    n.qNorm = n.prefix + (hunyuan ? ".self_attn.query_layernorm" : ".self_attn.q_norm");
    n.kNorm = n.prefix + (hunyuan ? ".self_attn.key_layernorm" : ".self_attn.k_norm");
    return n;
}

std::vector<WeightRequirement> requiredWeights(const model::ModelSpec& spec)
{
    if (spec.family == model::Family::Gemma4) {
        return gemma4Weights(spec);
    }
    if (spec.family == model::Family::DeepseekV4) {
        return deepseekV4Weights(spec);
    }
    if (spec.family == model::Family::NemotronH) {
        return nemotronHWeights(spec);
    }
    std::vector<WeightRequirement> w;
    const std::int64_t h = spec.hiddenSize;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto addMlp = [&](const std::string& module, const std::string& gate,
                            const std::string& up, const std::string& down, std::int64_t inter,
                            bool bias = false, std::int64_t width = 0) {
        const std::int64_t io = width > 0 ? width : h; // Kimi-K3's latent experts
        add(module + "." + gate + ".weight", { inter, io });
        add(module + "." + up + ".weight", { inter, io });
        add(module + "." + down + ".weight", { io, inter });
        if (bias) {
            add(module + "." + gate + ".bias", { inter });
            add(module + "." + up + ".bias", { inter });
            add(module + "." + down + ".bias", { io });
        }
    };
    add("model.embed_tokens.weight", { spec.vocabSize, h });
    for (int l = 0; l < int(spec.numLayers); ++l) {
        const LayerNames n = layerNames(spec, l);
        const std::string attn = n.prefix + ".self_attn";
        const model::LayerSpec& layer = spec.layers[std::size_t(l)];
        // Nemotron-NAS: a no-op block has no norm; a linear replacement keeps it.
        if (layer.mixer != model::MixerKind::None) {
            add(n.prefix + ".input_layernorm.weight", { h });
        }
        if (layer.ffn != model::FfnKind::None) {
            add(n.prefix + ".post_attention_layernorm.weight", { h });
        }
        if (layer.mixer == model::MixerKind::None) {
            // nothing to load
        } else if (layer.mixer == model::MixerKind::GatedDeltaNet) {
            addGatedDeltaNetWeights(spec, l, w);
        } else if (layer.mixer == model::MixerKind::KimiDelta) {
            addKimiDeltaWeights(spec, l, w);
        } else if (layer.mixer == model::MixerKind::Linear) {
            add(attn + ".linear_attn.weight", { h, h });
        } else if (spec.attention == model::AttentionKind::MLA) {
            const auto& m = spec.mla;
            const std::int64_t qk = m.qkNopeHeadDim + m.qkRopeHeadDim;
            if (m.qLoraRank > 0) {
                add(attn + ".q_a_proj.weight", { m.qLoraRank, h });
                add(attn + ".q_a_layernorm.weight", { m.qLoraRank });
                add(attn + ".q_b_proj.weight", { spec.numHeads * qk, m.qLoraRank });
            } else {
                add(attn + ".q_proj.weight", { spec.numHeads * qk, h });
            }
            add(attn + ".kv_a_proj_with_mqa.weight", { m.kvLoraRank + m.qkRopeHeadDim, h });
            add(attn + ".kv_a_layernorm.weight", { m.kvLoraRank });
            add(attn + ".kv_b_proj.weight",
                { spec.numHeads * (m.qkNopeHeadDim + m.vHeadDim), m.kvLoraRank });
            add(attn + ".o_proj.weight", { h, spec.numHeads * m.vHeadDim });
            if (m.outputGate) { // Kimi-K3 mla_use_output_gate
                add(attn + ".g_proj.weight", { spec.numHeads * m.vHeadDim, h });
            }
            if (m.indexerHeads > 0
                && spec.layers[std::size_t(l)].mixer == model::MixerKind::SparseMla) {
                const std::string ix = attn + ".indexer";
                add(ix + ".wq_b.weight", { m.indexerHeads * m.indexerHeadDim, m.qLoraRank });
                add(ix + ".wk.weight", { m.indexerHeadDim, h });
                add(ix + ".k_norm.weight", { m.indexerHeadDim });
                add(ix + ".k_norm.bias", { m.indexerHeadDim });
                add(ix + ".weights_proj.weight", { m.indexerHeads, h });
            }
        } else {
            const std::int64_t q = spec.numHeads * spec.headDim;
            const std::int64_t kv = spec.kvHeadsOf(layer) * spec.headDim;
            // Qwen3-Next's q_proj also emits the sigmoid output gate, per head after the query.
            add(attn + ".q_proj.weight", { spec.attentionOutputGate ? 2 * q : q, h });
            add(attn + ".k_proj.weight", { kv, h });
            add(attn + ".v_proj.weight", { kv, h });
            add(attn + ".o_proj.weight", { h, q });
            if (spec.attentionBias) {
                add(attn + ".q_proj.bias", { spec.attentionOutputGate ? 2 * q : q });
                add(attn + ".k_proj.bias", { kv });
                add(attn + ".v_proj.bias", { kv });
            }
            if (spec.attentionOutputBias) {
                add(attn + ".o_proj.bias", { h });
            }
            if (spec.qkNorm) {
                add(n.qNorm + ".weight", { spec.headDim });
                add(n.kNorm + ".weight", { spec.headDim });
            }
            if (spec.qkNormAcrossHeads) {
                add(attn + ".q_norm.weight", { q });
                add(attn + ".k_norm.weight", { kv });
            }
            if (spec.attentionSinks) {
                add(attn + ".sinks", { spec.numHeads });
            }
            if (layer.mixer == model::MixerKind::BlockSparse && spec.blockSparse) {
                // MiniMax-M3's score-only index branch (minimax_m3_block.cpp).
                const auto& bs = *spec.blockSparse;
                add(attn + ".index_q_proj.weight", { bs.indexHeads * bs.indexDim, h });
                add(attn + ".index_k_proj.weight", { bs.indexDim, h });
                add(attn + ".index_q_norm.weight", { bs.indexDim });
                add(attn + ".index_k_norm.weight", { bs.indexDim });
            }
        }
        if (layer.ffn == model::FfnKind::None) {
            continue;
        }
        if (layer.ffn == model::FfnKind::Linear) {
            add(n.ffn + ".linear_mlp.weight", { h, h });
            continue;
        }
        if (!layer.moe() || !spec.moe) {
            addMlp(n.ffn, "gate_proj", "up_proj", "down_proj", spec.ffnWidthOf(layer));
            continue;
        }
        const auto& moe = *spec.moe;
        add(n.router + ".weight", { moe.numExperts, h });
        if (moe.routerBias) {
            add(n.router + ".bias", { moe.numExperts });
        }
        if (moe.expertScoreBias) {
            add(n.scoreBias, { moe.numExperts });
        }
        if (moe.latentSize > 0) {
            add(n.ffn + ".routed_expert_down_proj.weight", { moe.latentSize, h });
            if (moe.latentNorm) {
                add(n.ffn + ".routed_expert_norm.weight", { moe.latentSize });
            }
            add(n.ffn + ".routed_expert_up_proj.weight", { h, moe.latentSize });
        }
        for (std::int64_t e = 0; e < moe.numExperts; ++e) {
            addMlp(fmt::format("{}.experts.{}", n.ffn, e), n.expertGate, n.expertUp, n.expertDown,
                moe.expertIntermediate, moe.expertBias, moe.latentSize);
        }
        if (!n.shared.empty()) {
            addMlp(n.shared, "gate_proj", "up_proj", "down_proj", moe.sharedIntermediate);
            if (moe.sharedExpertGate) {
                add(n.ffn + ".shared_expert_gate.weight", { 1, h });
            }
        }
    }
    add("model.norm.weight", { h });
    if (spec.attnResBlockSize > 0) {
        // Kimi-K3's Block Attention Residuals: two mixes a layer and one before the final norm.
        for (int l = 0; l < int(spec.numLayers); ++l) {
            for (const char* part : { "self_attention", "mlp" }) {
                const std::string p = fmt::format("model.layers.{}.{}", l, part);
                add(p + "_res_norm.weight", { h });
                add(p + "_res_proj.weight", { 1, h });
            }
        }
        add("model.output_attn_res_norm.weight", { h });
        add("model.output_attn_res_proj.weight", { 1, h });
    }
    w.push_back({ "lm_head.weight", { spec.vocabSize, h }, spec.tieEmbeddings });
    // Qwen3.5's vision tower is not computed (Engine::run refuses an image for it by name).
    if (spec.vision && !isQwenNext(spec)) {
        const auto vision = visionWeights(spec);
        w.insert(w.end(), vision.begin(), vision.end());
    }
    return w;
}

} // namespace day0::exec::detail
