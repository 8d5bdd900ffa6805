// minimax_m2 (MiniMaxM2ForCausalLM: MiniMax-M2, M2.1, M2.5, M2.7, their FP8 releases and
// nvidia/MiniMax-M2.5-NVFP4) and minimax_m3 (the MiniMax-M3 text decoder): readers and text
// towers. The two share the `block_sparse_moe` layout (F32 router `gate` and
// `e_score_correction_bias`, per-expert w1 gate / w3 up / w2 down) and q_norm/k_norm.
//
// Where the facts come from (research/gptoss_minimax.md, Parts B and C):
// - M2 config keys and defaults: the remote-code MiniMaxM2Config as copied in
//   ModelCloud/GPTQModel gptqmodel/hf_minimax_m2/configuration_minimax_m2.py (commit 3d145115):
//   qk_norm_type "per_layer", use_routing_bias true, scoring "sigmoid", routed_scaling_factor
//   1.0, shared_intermediate_size 0, use_mtp true / num_mtp_modules 3 / mtp_transformer_layers
//   1, attn_type_list [1]·L, mlp_intermediate_size 8192 (read by no module).
// - M2 checkpoint names: vLLM vllm/model_executor/models/minimax_m2.py (commit 01d99586;
//   block_sparse_moe.experts.{j}.w1/w2/w3, e_score_correction_bias, q_norm over all heads
//   [heads·head_dim]) and a parameter calculator reading a real M2 tensor dump (search index id
//   53829664362: `…q_proj.weight_scale_inv`, `…experts.0.w1.weight_scale_inv`); dtypes from
//   hf_mem's byte total of MiniMaxAI/MiniMax-M2, 230,121,630,720 (id 51835574452), which holds
//   only with the router gate and the bias in F32; 96,103 tensors, no MTP (Ex0bit/MiniMax-SLURPY
//   card; sglang PR #13981; MiniMax-AI/MiniMax-M2.7 issue #16).
// - M2.5-NVFP4: its config.json / hf_quant_config.json (tests/data/model/configs/frontier) and
//   ModelOpt nvfp4_tensor.py (NVIDIA/Model-Optimizer commit 211c6b34); no real index was found,
//   so the kept-F32 router and the k/v cache scales are inferred.
// - M3: transformers models/minimax_m3_vl/configuration_minimax_m3_vl.py (commit 01a05aad);
//   checkpoint names, shapes and dtypes from the "MiniMax-M3 architecture trace" built from the
//   official index and safetensors headers (id 57421159622) and the index census (id
//   59993978826): language_model.model.*, language_model.lm_head, dense `mlp.*` on layers with
//   moe_layer_freq 0, `self_attn.index_{q,k}_proj` / `index_{q,k}_norm` on sparse layers, one
//   `block_sparse_moe.shared_experts` MLP, F32 router and bias; vision tower
//   vision_tower.* / multi_modal_projector.* / patch_merge_mlp.* (not modelled here).
//   The refdata M3 config is aiconfigurator's flattening of the Hub's minimax_m3_vl config
//   (aiconfigurator commit dbb322e6f): first_k_dense_replace and moe_intermediate_size are its
//   additions.

#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::model::detail {

using nlohmann::json;

namespace {

using R = ParallelRole;

// Attention widths, QK-norm and RoPE: the keys M2 and M3 spell alike.
Result<void> readAttention(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.numKvHeads = r.requirePositive("num_key_value_heads");
    spec.headDim = r.requirePositive("head_dim");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    if (r.ok() && spec.numHeads % spec.numKvHeads != 0) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
    }
    // per_layer (M2): q_norm/k_norm over the whole projection, [heads·head_dim]; per_head
    // (M3): one [head_dim] weight shared by the heads.
    if (r.boolOr("use_qk_norm", true)) {
        const std::string type = stringOneOf(r, "qk_norm_type", { "per_layer", "per_head" },
            spec.family == Family::MiniMaxM2 ? "per_layer" : "per_head");
        spec.qkNorm = type == "per_head";
        spec.qkNormAcrossHeads = type == "per_layer";
    }
    const std::optional<std::int64_t> rotary = r.optionalInt("rotary_dim");
    if (!r.ok()) {
        return r.error();
    }
    spec.attention = spec.numKvHeads == spec.numHeads ? AttentionKind::MHA
        : spec.numKvHeads == 1                        ? AttentionKind::MQA
                                                      : AttentionKind::GQA;
    spec.ropeTheta = 5'000'000.0;
    const bool factorGiven = text.has("partial_rotary_factor");
    DAY0_TRY(readRope(text, spec));
    if (rotary) {
        // rotary_dim is the rotated width; partial_rotary_factor, when also given, must agree.
        const double factor = double(*rotary) / double(spec.headDim);
        if (*rotary <= 0 || *rotary > spec.headDim || *rotary % 2 != 0) {
            r.fail("rotary_dim",
                fmt::format("({}) must be even and within head_dim ({})", *rotary, spec.headDim));
        } else if (factorGiven && std::abs(factor - spec.partialRotaryFactor) > 1e-9) {
            r.fail("rotary_dim",
                fmt::format("({}) disagrees with 'partial_rotary_factor' ({}) for head_dim {}",
                    *rotary, spec.partialRotaryFactor, spec.headDim));
        }
        spec.partialRotaryFactor = factor;
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    return success();
}

// The routed experts and router of both: sigmoid scores plus a selection bias, top-k
// renormalised.
Result<MoeSpec> readRouting(JsonReader& r, std::int64_t expertWidth)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("num_local_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = expertWidth;
    const std::string scoring = stringOneOf(r, "scoring_func", { "sigmoid", "softmax" }, "sigmoid");
    moe.scoring = scoring == "softmax" ? RouterScoring::Softmax : RouterScoring::Sigmoid;
    moe.expertScoreBias = r.boolOr("use_routing_bias", true);
    moe.normTopkProb = true;
    moe.routedScalingFactor = r.numberOr("routed_scaling_factor", 1.0);
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_local_experts' ({})", moe.topK, moe.numExperts));
    }
    if (!r.ok()) {
        return r.error();
    }
    return moe;
}

// A per-layer list of 0/1 flags (moe_layer_freq, sparse_attention_freq, ...); absent: `fallback`
// for every layer.
Result<std::vector<std::int64_t>> flags(
    JsonReader& r, const std::string& key, std::int64_t layers, std::int64_t fallback)
{
    auto out = perLayerInts(r, key, layers);
    if (r.ok() && out.empty()) {
        out.assign(std::size_t(layers), fallback);
    }
    for (std::size_t i = 0; r.ok() && i < out.size(); ++i) {
        if (out[i] > 1) {
            r.fail(
                key, fmt::format("entry {} is {}, which Day0 does not model (0 or 1)", i, out[i]));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    return out;
}

std::string mtpWarning(const ModelSpec& spec, const std::string& declared, const char* shipped)
{
    return fmt::format("{}: the config declares {}; {}; no MTP tensors are listed and every count "
                       "leaves MTP out",
        spec.origin, declared, shipped);
}

} // namespace

Result<void> readMiniMaxM2(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    DAY0_TRY(readAttention(text, spec));
    JsonReader r = text.reader();
    spec.intermediateSize = r.requirePositive("intermediate_size");
    spec.hiddenAct = stringOneOf(r, "hidden_act", { "silu" }, "silu");
    if (!r.ok()) {
        return r.error();
    }
    auto moe = readRouting(r, spec.intermediateSize);
    if (!moe) {
        return moe.error();
    }
    // Grouped top-k without a group limit by default (num_expert_group / topk_group null):
    // routing only, no tensors.
    (void)r.boolOr("use_grouped_topk", true);
    moe->numGroups = r.intOr("num_expert_group", 1);
    moe->topkGroup = r.intOr("topk_group", 1);
    if (r.ok() && (moe->numGroups <= 0 || moe->numExperts % moe->numGroups != 0)) {
        r.fail("num_expert_group",
            fmt::format(
                "({}) must divide 'num_local_experts' ({})", moe->numGroups, moe->numExperts));
    }
    const std::int64_t shared = r.intOr("shared_intermediate_size", 0);
    if (shared > 0) {
        text.notModelled("shared_intermediate_size",
            "a MiniMax-M2 shared expert: no published M2 has one and its tensor names are not "
            "known");
    } else {
        (void)r.stringOr("shared_moe_mode", "sigmoid"); // the gate of an absent shared expert
    }
    // attn_type_list: 1 = softmax attention; 0 = MiniMax-01 lightning attention.
    auto attnTypes = flags(r, "attn_type_list", spec.numLayers, 1);
    if (!attnTypes) {
        return attnTypes.error();
    }
    for (std::size_t i = 0; i < attnTypes->size(); ++i) {
        if ((*attnTypes)[i] == 0) {
            r.fail("attn_type_list",
                fmt::format("entry {} is 0 (MiniMax-01 lightning attention), which Day0 does not "
                            "model",
                    i));
            return r.error();
        }
    }
    // MTP: declared by every M2 config, shipped by none of the published checkpoints (their
    // indexes hold layers 0…61 only).
    const bool useMtp = r.boolOr("use_mtp", true);
    const std::int64_t modules = r.intOr("num_mtp_modules", 3);
    const std::int64_t mtpLayers = r.intOr("mtp_transformer_layers", 1);
    if (r.ok() && (modules < 0 || mtpLayers < 0)) {
        r.fail(modules < 0 ? "num_mtp_modules" : "mtp_transformer_layers", "must not be negative");
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.declaredMtpModules = useMtp ? modules : 0;
    if (spec.declaredMtpModules > 0) {
        spec.warnings.push_back(mtpWarning(spec,
            fmt::format("{} MTP modules (num_mtp_modules, {} transformer layer(s) each)", modules,
                mtpLayers),
            "the published MiniMax-M2/M2.5/M2.7 checkpoints ship none"));
    }
    for (auto& layer : spec.layers) {
        layer.ffn = FfnKind::Moe;
    }
    spec.moe = *moe;
    return readQuantizationOf(input, spec);
}

namespace {

// sparse_attention_config: which layers carry the block-sparse indexer, and its dimensions.
Result<void> readSparseAttention(const Section& text, ModelSpec& spec)
{
    if (!text.has("sparse_attention_config")) {
        return success(); // every layer plain full attention
    }
    JsonReader outer = text.reader();
    if (!text.at("sparse_attention_config").is_object()) {
        outer.fail("sparse_attention_config", "must be an object");
        return outer.error();
    }
    const Section section = text.child("sparse_attention_config");
    JsonReader r = section.reader();
    const bool enabled = r.boolOr("use_sparse_attention", true);
    if (!enabled) {
        section.touchAll(); // plain attention everywhere: the indexer settings shape nothing
        return success();
    }
    // Which layers carry the indexer, and whether it is score-only, change the tensors: no
    // default is assumed for either.
    for (const char* key : { "sparse_attention_freq", "sparse_disable_index_value" }) {
        if (r.ok() && !r.has(key)) {
            r.fail(
                key, "is missing (a per-layer list of 0/1 is needed to know the indexer layers)");
        }
    }
    auto sparse = flags(r, "sparse_attention_freq", spec.numLayers, 0);
    if (!sparse) {
        return sparse.error();
    }
    auto scoreOnly = flags(r, "sparse_disable_index_value", spec.numLayers, 0);
    if (!scoreOnly) {
        return scoreOnly.error();
    }
    BlockSparseSpec bs;
    bs.indexHeads = r.requirePositive("sparse_num_index_heads");
    bs.indexDim = r.requirePositive("sparse_index_dim");
    bs.blockSize = r.requirePositive("sparse_block_size");
    bs.topKBlocks = r.requirePositive("sparse_topk_blocks");
    bs.initBlocks = r.intOr("sparse_init_block", 0);
    bs.localBlocks = r.intOr("sparse_local_block", 1);
    bs.scoreType = stringOneOf(r, "sparse_score_type", { "max" }, "max");
    if (r.ok() && bs.indexHeads != spec.numKvHeads) {
        r.fail("sparse_num_index_heads",
            fmt::format("({}) must equal num_key_value_heads ({}): one block selection per KV "
                        "group",
                bs.indexHeads, spec.numKvHeads));
    }
    if (!r.ok()) {
        return r.error();
    }
    for (std::size_t i = 0; i < sparse->size(); ++i) {
        if ((*sparse)[i] == 0) {
            continue;
        }
        if ((*scoreOnly)[i] == 0) {
            r.fail("sparse_disable_index_value",
                fmt::format("entry {} is 0: an indexer with index value/output projections "
                            "(names and shapes unknown), which Day0 does not model",
                    i));
            return r.error();
        }
        spec.layers[i].mixer = MixerKind::BlockSparse;
    }
    spec.blockSparse = bs;
    return success();
}

Result<void> readM3Ffn(JsonReader& r, ModelSpec& spec)
{
    const std::int64_t expertWidth = r.requirePositive("intermediate_size");
    if (r.has("moe_intermediate_size") && r.ok()) {
        // aiconfigurator's copy of intermediate_size.
        const std::int64_t copy = r.requirePositive("moe_intermediate_size");
        if (r.ok() && copy != expertWidth) {
            r.fail("moe_intermediate_size",
                fmt::format("({}) must equal intermediate_size ({}), the routed-expert width", copy,
                    expertWidth));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    auto moe = readRouting(r, expertWidth);
    if (!moe) {
        return moe.error();
    }
    // transformers builds one shared_experts MLP of shared_intermediate_size; n_shared_experts
    // must agree with it.
    const std::int64_t shared = r.intOr("shared_intermediate_size", 0);
    const std::int64_t sharedCount = r.intOr("n_shared_experts", shared > 0 ? 1 : 0);
    if (r.ok() && (shared < 0 || sharedCount != (shared > 0 ? 1 : 0))) {
        r.fail("n_shared_experts",
            fmt::format("is {} with shared_intermediate_size {}; the checkpoint holds one "
                        "shared_experts MLP of shared_intermediate_size (0: none)",
                sharedCount, shared));
    }
    moe->numSharedExperts = shared > 0 ? 1 : 0;
    moe->sharedIntermediate = shared;
    auto moeLayers = flags(r, "moe_layer_freq", spec.numLayers, 1);
    if (!moeLayers) {
        return moeLayers.error();
    }
    const bool anyDense = std::find(moeLayers->begin(), moeLayers->end(), 0) != moeLayers->end();
    spec.intermediateSize = anyDense ? r.requirePositive("dense_intermediate_size")
                                     : r.intOr("dense_intermediate_size", expertWidth);
    if (r.has("first_k_dense_replace") && r.ok()) {
        // aiconfigurator's summary of moe_layer_freq: the first k layers dense, the rest MoE.
        const std::int64_t k = r.requireInt("first_k_dense_replace");
        for (std::int64_t i = 0; r.ok() && i < spec.numLayers; ++i) {
            if (((*moeLayers)[std::size_t(i)] == 0) != (i < k)) {
                r.fail("first_k_dense_replace",
                    fmt::format("({}) disagrees with moe_layer_freq at layer {} ({})", k, i,
                        (*moeLayers)[std::size_t(i)]));
            }
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    for (std::size_t i = 0; i < moeLayers->size(); ++i) {
        spec.layers[i].ffn = (*moeLayers)[i] != 0 ? FfnKind::Moe : FfnKind::Dense;
    }
    spec.moe = *moe;
    return success();
}

} // namespace

Result<void> readMiniMaxM3(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    DAY0_TRY(readAttention(text, spec));
    JsonReader r = text.reader();
    DAY0_TRY(readM3Ffn(r, spec));
    DAY0_TRY(readSparseAttention(text, spec));
    // swigluoai on routed, shared and dense MLPs alike: g = min(W1·x, limit),
    // u = clamp(W3·x, ±limit), (u + 1)·g·σ(α·g). Gate and up stay separate tensors.
    spec.hiddenAct = stringOneOf(r, "hidden_act", { "swigluoai", "silu" }, "swigluoai");
    if (spec.hiddenAct == "swigluoai") {
        spec.swigluAlpha = r.numberOr("swiglu_alpha", 1.702);
        spec.swigluLimit = r.numberOr("swiglu_limit", 7.0);
    }
    // An output gate would add a projection whose name is not known (loaders assert false).
    boolMustBe(r, "attention_output_gate", false);
    spec.normOffset = r.boolOr("use_gemma_norm", false);
    // MTP: transformers ignores the modules at inference; their checkpoint names are not known,
    // so none are invented.
    const std::int64_t modules = r.intOr("num_mtp_modules", 0);
    const std::int64_t nextn = r.intOr("num_nextn_predict_layers", 0);
    if (r.ok() && (modules < 0 || nextn < 0)) {
        r.fail(
            modules < 0 ? "num_mtp_modules" : "num_nextn_predict_layers", "must not be negative");
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.declaredMtpModules = std::max(modules, nextn);
    if (spec.declaredMtpModules > 0) {
        spec.warnings.push_back(mtpWarning(spec,
            fmt::format(
                "MTP modules (num_mtp_modules {}, num_nextn_predict_layers {})", modules, nextn),
            "their checkpoint names are not known (the official BF16 checkpoint's size suggests "
            "one module of about 7.49B parameters under an `mtp.` name, which a verification "
            "would report as extra tensors)"));
    }
    // The published checkpoint (MiniMaxM3SparseForConditionalGeneration) keeps the text decoder
    // under language_model.
    spec.layout.textPrefix = "language_model.model";
    spec.layout.lmHead = "language_model.lm_head";
    if (input.top.has("vision_config")) {
        input.top.notModelled("vision_config",
            "the MiniMax-M3 vision tower (CLIP-style encoder, multi_modal_projector, "
            "patch_merge_mlp) is not modelled: counts and tensors cover the text decoder only");
        for (const char* key :
            { "projector_hidden_size", "projector_hidden_act", "multimodal_projector_bias" }) {
            if (input.top.has(key)) {
                input.top.notModelled(key, "part of the MiniMax-M3 vision projector");
            }
        }
    } else {
        spec.warnings.push_back(fmt::format(
            "{}: a text-decoder config (model_type '{}'); the published MiniMax-M3 checkpoint "
            "also holds a vision tower (vision_tower.*, multi_modal_projector.*, "
            "patch_merge_mlp.*, about 0.87B parameters) that this config does not describe: "
            "counts and tensors cover the text decoder only",
            spec.origin, spec.modelType));
    }
    return readQuantizationOf(input, spec);
}

namespace {

void addMlp(GraphBuilder& b, const std::string& p, std::int64_t width, Component component)
{
    const std::int64_t h = b.spec().hiddenSize;
    b.linear(p + ".gate_proj", width, h, { R::ColumnParallel, component });
    b.linear(p + ".up_proj", width, h, { R::ColumnParallel, component });
    b.linear(p + ".down_proj", h, width, { R::RowParallel, component });
}

void addAttention(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t q = s.numHeads * s.headDim;
    const std::int64_t kv = s.numKvHeads * s.headDim;
    const Component c = Component::Attention;
    b.linear(p + ".q_proj", q, h, { R::ColumnParallel, c });
    b.linear(p + ".k_proj", kv, h, { R::ColumnParallel, c });
    b.linear(p + ".v_proj", kv, h, { R::ColumnParallel, c });
    b.linear(p + ".o_proj", h, q, { R::RowParallel, c });
    if (s.quantization && s.quantization->kvCacheDtype) {
        // ModelOpt's FP8 KV cache scales (remapped by vLLM to attn.k_scale / v_scale); not seen
        // in a real index of these releases.
        for (const char* name : { ".k_proj.k_scale", ".v_proj.v_scale" }) {
            b.tensor(p + name, {}, DType::F32, R::Replicated, c, TensorKind::Scale);
            b.last().optional = true;
        }
    }
    if (s.qkNormAcrossHeads) {
        // Normalised over the whole projection: split with the heads under TP.
        b.tensor(p + ".q_norm.weight", { q }, s.dtype, R::ColumnParallel, Component::Norm);
        b.tensor(p + ".k_norm.weight", { kv }, s.dtype, R::ColumnParallel, Component::Norm);
    } else if (s.qkNorm) {
        b.norm(p + ".q_norm", s.headDim);
        b.norm(p + ".k_norm", s.headDim);
    }
    if (layer.mixer == MixerKind::BlockSparse) {
        // Score-only indexer: index query heads and one shared index-key head.
        const BlockSparseSpec& bs = *s.blockSparse;
        b.linear(p + ".index_q_proj", bs.indexHeads * bs.indexDim, h, { R::Replicated, c });
        b.linear(p + ".index_k_proj", bs.indexDim, h, { R::Replicated, c });
        b.norm(p + ".index_q_norm", bs.indexDim);
        b.norm(p + ".index_k_norm", bs.indexDim);
    }
}

// Router `gate` [E, H] and the selection bias, both kept in F32 by the published checkpoints
// (every quantised release excludes the gate).
void addMiniMaxRouter(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::string gate = p + ".gate";
    if (b.quantizes(gate)) {
        // A quantisation that does not exclude the router stores it as it says.
        b.linear(gate, moe.numExperts, s.hiddenSize, { R::Replicated, Component::Router });
    } else {
        b.tensor(gate + ".weight", { moe.numExperts, s.hiddenSize }, DType::F32, R::Replicated,
            Component::Router);
        if (s.quantization && s.quantization->scheme == QuantScheme::Nvfp4) {
            // Unverified for the NVFP4 repositories (no index found): F32 as in their source,
            // or written in BF16.
            b.last().altDtype = DType::BF16;
        }
    }
    if (moe.expertScoreBias) {
        b.tensor(p + ".e_score_correction_bias", { moe.numExperts }, DType::F32, R::Replicated,
            Component::Router, TensorKind::Bias);
        if (s.quantization && s.quantization->scheme == QuantScheme::Nvfp4) {
            b.last().altDtype = DType::BF16;
        }
    }
}

// Routed experts, one module per expert: w1 (gate) and w3 (up) [I, H], w2 (down) [H, I].
void addExperts(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t w = moe.expertIntermediate;
    // Quantisation rules never tell experts apart: decide once per projection and layer.
    const int q1 = b.quantizes(p + ".0.w1") ? 1 : 0;
    const int q2 = b.quantizes(p + ".0.w2") ? 1 : 0;
    const int q3 = b.quantizes(p + ".0.w3") ? 1 : 0;
    b.reserve(std::size_t(moe.numExperts) * 3 * (s.quantization ? 4 : 1));
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        const std::string m = p + "." + std::to_string(e);
        LinearOptions col { R::ColumnParallel, Component::RoutedExperts };
        col.expert = static_cast<std::int32_t>(e);
        LinearOptions row { R::RowParallel, Component::RoutedExperts };
        row.expert = col.expert;
        col.quantized = q1;
        b.linear(m + ".w1", w, h, col);
        row.quantized = q2;
        b.linear(m + ".w2", h, w, row);
        col.quantized = q3;
        b.linear(m + ".w3", w, h, col);
    }
}

void addLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    b.norm(p + ".input_layernorm", s.hiddenSize);
    addAttention(b, p + ".self_attn", layer);
    b.norm(p + ".post_attention_layernorm", s.hiddenSize);
    if (!layer.moe()) {
        addMlp(b, p + ".mlp", s.ffnWidthOf(layer), Component::DenseMlp);
        return;
    }
    const std::string moe = p + ".block_sparse_moe";
    addMiniMaxRouter(b, moe);
    addExperts(b, moe + ".experts");
    if (s.moe->sharedIntermediate > 0) {
        addMlp(b, moe + ".shared_experts", s.moe->sharedIntermediate, Component::SharedExperts);
    }
}

} // namespace

void addMiniMaxTextTower(GraphBuilder& b)
{
    addDecoderTower(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            addLayer(g, p, layer);
        });
}

} // namespace day0::model::detail
