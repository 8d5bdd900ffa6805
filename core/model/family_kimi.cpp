// Kimi-Linear (kimi_linear, moonshotai/Kimi-Linear-48B-A3B) and Kimi-K3 (the kimi_k3 wrapper
// around kimi_linear text and a MoonViT-3 tower): config.json → ModelSpec. Every key of
// text_config, its linear_attn_config and vision_config is read here, inert (config_audit.cpp,
// familyInertKeys in config_decoder.cpp) or reported. The graph is family_kimi_graph.cpp.
//
// Where the facts come from (research note kimi_ct.md (not in the repository), which cites each):
// - The real Kimi-K3 config: tests/data/model/configs/frontier/moonshotai--Kimi-K3.json,
//   byte-identical to GitHub ai-dynamo/aiconfigurator @ 095f58a51c4ca8e61b66ec108d86f223f8d559ce
//   aic-core/src/aiconfigurator_core/model_configs/moonshotai--Kimi-K3_config.json.
// - configuration_kimi_k3.py (is_kda_layer: (i + 1) in kda_layers, l.152-156) and
//   modeling_kimi_linear.py (KDA, MLA, LatentMoE l.797-838, AttnRes l.906-917 and
//   l.1103-1108, SiTU) of HF moonshotai/Kimi-K3, as a public line-by-line analysis quotes them
//   (search index id 59322289100; its MLA widths are wrong, see research note kimi_ct.md (not in
//   the repository) §3.4); aiconfigurator sdk/models/kimi_k3.py (1-based layer lists).
// - modeling_kimi_k3.py of HF moonshotai/Kimi-K3 (a public vendored copy, search index id
//   58920436853): language_model / vision_tower / mm_projector, VisionTowerConfig defaults.
// - The real K3 shard model-00002-of-000096 (a k3x_converter test pinned to HF revision
//   9f62e4e9fffbd0a83ddd60e1c209d828994b3569, search index ids 57454096190 / 57382306723; copied
//   to tests/data/model/listings/kimi-k3-shard00002-layer1.tsv): only the routed experts are
//   MXFP4, whatever the ignore list leaves to compressed-tensors' rule.
// - Kimi-Linear-48B-A3B-Instruct config values as three public GitHub files quote them (search
//   index ids 69403024771, 59839768689, 59090948446):
//   tests/data/model/configs/kimi-linear-48b-a3b.json.

#include "model/config_families.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

namespace day0::model::detail {

namespace {

bool isK3Wrapper(const ModelSpec& spec)
{
    return spec.modelType == "kimi_k3" || spec.architecture == "KimiK3ForConditionalGeneration";
}

// Common text keys the shared readers leave: NoPE, MLA output gate, activation, MTP, AttnRes.
Result<void> readKimiText(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    // mla_use_nope: no RoPE, but the 64-wide "rope" key slice is still projected and cached
    // (HF docstring), so the MLA shapes stay those of readMla.
    spec.mla.noRope = r.boolOr("mla_use_nope", false);
    spec.mla.outputGate = r.boolOr("mla_use_output_gate", false);
    // SiTU and SiLU are both gated: gate/up/down everywhere (Kimi-K3 SituAndMul).
    const std::string act = stringOneOf(r, "hidden_act", { "situ", "silu" }, "silu");
    if (act == "situ") {
        // _get_situ_activation_params: `beta or 1.0`, linear_beta only when set.
        spec.situBeta = r.numberOr("activation_situ_beta", 1.0);
        spec.situLinearBeta = r.numberOr("activation_situ_linear_beta", 0.0);
        if (r.ok() && spec.situBeta <= 0.0) {
            r.fail("activation_situ_beta", "must be positive (SiTU divides the gate by it)");
        }
        if (r.ok() && spec.situLinearBeta < 0.0) {
            r.fail("activation_situ_linear_beta", "must be positive (SiTU divides up by it)");
        }
    }
    if (r.ok() && spec.attentionBias) {
        r.fail("attention_bias", "is true, but Kimi's KDA and MLA projections have no biases");
    }
    if (r.ok() && spec.mlpBias) {
        r.fail("mlp_bias", "is true, but Kimi's MLPs and experts have no biases");
    }
    const std::int64_t mtp = r.intOr("num_nextn_predict_layers", 0);
    if (r.has("attn_res_block_size")) {
        // Its presence adds the AttnRes norms and projections to every layer and the model
        // (modeling_kimi_linear.py `is not None`); the size only groups layers into blocks.
        spec.attnResBlockSize = r.requirePositive("attn_res_block_size");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (mtp != 0) {
        text.notModelled("num_nextn_predict_layers",
            fmt::format("{} MTP layers: Kimi MTP modules are not modelled (the published "
                        "Kimi-K3 and Kimi-Linear have none)",
                mtp));
    }
    return success();
}

// linear_attn_config: KDA geometry and which layers are KDA. Both lists are 1-based
// (configuration_kimi_k3.py is_kda_layer) and must name every layer exactly once.
Result<void> readLinearAttention(const Section& text, ModelSpec& spec)
{
    if (!text.has("linear_attn_config")) {
        return success(); // no KDA: every layer is MLA (is_kda_layer is false without the config)
    }
    if (!text.at("linear_attn_config").is_object()) {
        JsonReader r = text.reader();
        r.fail("linear_attn_config", "must be an object");
        return r.error();
    }
    const Section section = text.child("linear_attn_config");
    JsonReader r = section.reader();
    LinearAttentionSpec la;
    la.keyHeads = la.valueHeads = r.requirePositive("num_heads");
    la.keyHeadDim = la.valueHeadDim = r.requirePositive("head_dim");
    la.convKernel = r.requirePositive("short_conv_kernel_size");
    la.stateDtype = DType::F32; // vLLM kda_state_dtype: (model dtype conv, float32 recurrent)
    la.fullRankGate = r.boolOr("use_full_rank_gate", false);
    // K3's code pads A_log to head_dim (the real shard: A_log F32 [128] for 96 heads).
    la.paddedALog = isK3Wrapper(spec);
    // The safe forget gate's lower bound (absent: the softplus gate) changes the formula only.
    la.gateLowerBound = r.numberOr("gate_lower_bound", 0.0);
    for (const char* key : { "full_attn_layers", "kda_layers" }) {
        if (r.ok() && !r.has(key)) {
            r.fail(key,
                "is missing (Day0 checks that full_attn_layers and kda_layers together list "
                "every layer once)");
        }
    }
    const auto full = intArrayOr(r, "full_attn_layers");
    const auto kda = intArrayOr(r, "kda_layers");
    if (!r.ok()) {
        return r.error();
    }
    const std::int64_t n = spec.numLayers;
    enum class Owner : std::uint8_t { None, Full, Kda };
    std::vector<Owner> owner(std::size_t(n), Owner::None);
    const auto claim = [&](const char* key, const std::vector<std::int64_t>& list, Owner who) {
        for (const auto layer : list) {
            if (layer < 1 || layer > n) {
                r.fail(key,
                    fmt::format("holds layer {}, but the lists are 1-based: layers 1..{} "
                                "(num_hidden_layers {})",
                        layer, n, n));
                return;
            }
            Owner& o = owner[std::size_t(layer - 1)];
            if (o == who) {
                r.fail(key, fmt::format("lists layer {} twice", layer));
                return;
            }
            if (o != Owner::None) {
                r.fail(key,
                    fmt::format("lists layer {} (0-based {}), which full_attn_layers also "
                                "lists: a layer is either KDA or full attention",
                        layer, layer - 1));
                return;
            }
            o = who;
        }
    };
    claim("full_attn_layers", full, Owner::Full);
    claim("kda_layers", kda, Owner::Kda);
    for (std::int64_t i = 0; r.ok() && i < n; ++i) {
        if (owner[std::size_t(i)] == Owner::None) {
            r.fail("kda_layers",
                fmt::format("and 'full_attn_layers' leave out layer {} (0-based {}): every "
                            "layer must be in exactly one of them",
                    i + 1, i));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    for (std::int64_t i = 0; i < n; ++i) {
        spec.layers[std::size_t(i)].mixer
            = owner[std::size_t(i)] == Owner::Kda ? MixerKind::KimiDelta : MixerKind::Attention;
    }
    spec.linearAttention = la;
    return success();
}

// The MoE of modeling_kimi_linear.py: block_sparse_moe from first_k_dense_replace on, a
// DeepSeek-style sigmoid router with e_score_correction_bias, fused shared experts, and
// Kimi-K3's latent MoE.
Result<void> readKimiMoe(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_experts");
    moe.topK = r.requirePositive("num_experts_per_token");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.numSharedExperts = r.requireInt("num_shared_experts");
    const std::int64_t firstDense = r.requireInt("first_k_dense_replace");
    // Every layer from first_k_dense_replace on at 1; the DeepSeek `% freq` rule for other values
    // is not confirmed for Kimi's code, so they are refused.
    const std::int64_t frequency = r.intOr("moe_layer_freq", 1);
    const std::string scoring
        = stringOneOf(r, "moe_router_activation_func", { "sigmoid", "softmax" }, "sigmoid");
    moe.scoring = scoring == "softmax" ? RouterScoring::Softmax : RouterScoring::Sigmoid;
    // noaux_tc is the router the checkpoints have (gate.e_score_correction_bias, F32 in the
    // real K3 shard); another method could drop the bias.
    (void)stringOneOf(r, "topk_method", { "noaux_tc" }, "noaux_tc");
    moe.expertScoreBias = true;
    moe.normTopkProb = r.boolOr("moe_renormalize", true);
    moe.routedScalingFactor = r.numberOr("routed_scaling_factor", 1.0);
    const bool grouped = r.boolOr("use_grouped_topk", false);
    const std::int64_t groups = r.intOr("num_expert_group", 1);
    const std::int64_t topkGroup = r.intOr("topk_group", 1);
    moe.numGroups = grouped ? groups : 1;
    moe.topkGroup = grouped ? topkGroup : 1;
    if (r.has("routed_expert_hidden_size")) {
        moe.latentSize = r.requirePositive("routed_expert_hidden_size");
    }
    moe.latentNorm = r.boolOr("latent_moe_use_norm", false);
    if (!r.ok()) {
        return r.error();
    }
    if (moe.topK > moe.numExperts) {
        r.fail("num_experts_per_token",
            fmt::format("({}) exceeds 'num_experts' ({})", moe.topK, moe.numExperts));
    } else if (moe.numSharedExperts < 0) {
        r.fail("num_shared_experts", "must not be negative");
    } else if (firstDense < 0 || firstDense > spec.numLayers) {
        r.fail("first_k_dense_replace",
            fmt::format(
                "({}) must be between 0 and num_hidden_layers ({})", firstDense, spec.numLayers));
    } else if (frequency != 1) {
        r.fail("moe_layer_freq",
            fmt::format("is {}, which Day0 does not model (only 1: every layer from "
                        "first_k_dense_replace on is MoE)",
                frequency));
    } else if (moe.numGroups <= 0 || moe.numExperts % moe.numGroups != 0) {
        r.fail("num_expert_group",
            fmt::format("({}) must divide 'num_experts' ({})", moe.numGroups, moe.numExperts));
    } else if (moe.topkGroup <= 0 || moe.topkGroup > moe.numGroups) {
        r.fail("topk_group",
            fmt::format("({}) must be between 1 and 'num_expert_group' ({})", moe.topkGroup,
                moe.numGroups));
    } else if (moe.latentNorm && moe.latentSize == 0) {
        r.fail("latent_moe_use_norm",
            "is true but 'routed_expert_hidden_size' is not set: there is no latent to normalise");
    }
    if (!r.ok()) {
        return r.error();
    }
    moe.sharedIntermediate = moe.numSharedExperts * moe.expertIntermediate;
    for (std::int64_t i = 0; i < spec.numLayers; ++i) {
        spec.layers[std::size_t(i)].ffn = i >= firstDense ? FfnKind::Moe : FfnKind::Dense;
    }
    spec.moe = moe;
    return success();
}

} // namespace

Result<void> readKimiLinear(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    DAY0_TRY(readDecoder(text, spec)); // head_dim (Kimi-Linear: 72) is not an MLA width
    DAY0_TRY(readMla(text, spec));
    DAY0_TRY(readKimiText(text, spec));
    DAY0_TRY(readLinearAttention(text, spec));
    DAY0_TRY(readKimiMoe(text, spec));
    // RoPE base of the MLA layers (Kimi-Linear rope_theta); with mla_use_nope it is unused.
    DAY0_TRY(readRope(text, spec));
    if (isK3Wrapper(spec)) {
        // KimiK3ForConditionalGeneration always builds its tower (VisionTowerConfig).
        if (!input.top.has("vision_config") || !input.top.at("vision_config").is_object()) {
            return Error::badInput(
                fmt::format("{}: 'vision_config' must be an object (kimi_k3 has a vision tower)",
                    input.top.origin));
        }
        DAY0_TRY(readVision(input.top.child("vision_config"), "moonvit3", spec));
    } else if (input.top.has("vision_config")) {
        input.top.notModelled(
            "vision_config", "a vision tower beside a flat kimi_linear model is not modelled");
    }
    DAY0_TRY(readQuantizationOf(input, spec));
    if (spec.quantization && spec.quantization->scheme == QuantScheme::PackedMxfp4) {
        // Kimi-K3's mxfp4-pack-quantized checkpoint quantises exactly the routed experts: its
        // ignore list leaves block_sparse_moe.routed_expert_{down,up}_proj and the AttnRes
        // *_res_proj Linears to the rule, yet the real shard stores them in BF16 (its size is
        // byte-exact only so; sglang builds the latent projections with quant_config=None).
        spec.quantization->routedExpertsOnly = true;
    }
    return success();
}

} // namespace day0::model::detail
