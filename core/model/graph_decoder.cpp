// The text tower of every family: embedding, decoder layers, final norm, lm_head, MTP layers.
//
// Where the names come from (each checked against a real checkpoint where one is available):
// - Llama / Mistral / Qwen2 / Qwen3 / Mixtral / Qwen2-VL text: the checkpoint indexes in
//   tests/data/model/indexes (weight_map keys compared exactly in the tests).
// - DeepSeek-V3 / R1 (and Kimi-K2, same DeepseekV3ForCausalLM): DeepSeek's README_WEIGHTS.md and
//   a published tensor listing of the DeepSeek-R1 checkpoint (91,991 tensors, F8 weights with
//   F32 `weight_scale_inv`; BF16 embed/lm_head/norms/router/eh_proj; F32
//   `mlp.gate.e_score_correction_bias`; MTP layer 61 = embed_tokens, enorm, hnorm, eh_proj
//   [7168, 14336], shared_head.{norm,head} + a full MoE decoder layer).
// - DeepSeek-V3.2 indexer: `self_attn.indexer.{wq_b, wk, k_norm (LayerNorm), weights_proj}`;
//   wq_b/wk are FP8 with scales, weights_proj stays BF16 (NeMo's DeepSeekV32StateDictAdapter
//   tests: "indexer weights_proj is not quantized").
// - Kimi-K2.5: tensor listing of the published checkpoint (language_model.* prefix, INT4
//   pack-quantized routed experts, BF16 attention/shared experts/dense MLP).
// - Qwen2-MoE / Qwen3-MoE: transformers modeling_qwen2_moe.py / modeling_qwen3_moe.py
//   (mlp.gate, mlp.experts.E.{gate,up,down}_proj, Qwen2-MoE mlp.shared_expert +
//   shared_expert_gate).
// - Llama-4: transformers modeling_llama4.py (Llama4TextExperts: gate_up_proj [E, H, 2I] and
//   down_proj [E, I, H] as plain parameters; router; shared_expert) and MaxText's checkpoint
//   mapping (language_model.model.layers.N.feed_forward.*).
// - GLM-4.5: transformers modeling_glm4_moe.py (q/k/v bias, o_proj without; q_norm/k_norm with
//   use_qk_norm; DeepSeek-style router with e_score_correction_bias, shared_experts; MTP layer at
//   num_hidden_layers ignored by HF via _keys_to_ignore_on_load_unexpected "model.layers.92.*").
//   GLM-4.6 omits the MTP layer's embed_tokens and shared_head.head (vLLM issue #25993), so both
//   are marked optional.
// - GLM-5 (glm_moe_dsa): the DeepSeek-V3.2 layers with an indexer only on SparseMla layers
//   (GLM-5.2's indexer_types) and an MTP layer without embed_tokens / shared_head.head
//   (sources in family_glm_moe_dsa.cpp).
// - Qwen3-VL-MoE: fused experts gate_up_proj [E, H, 2I] / down_proj [E, I, H] as stored in
//   Qwen/Qwen3-VL-30B-A3B-Instruct's safetensors.

#include "model/graph_builder.h"

#include <string>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

std::string str(std::int64_t v) { return std::to_string(v); }

} // namespace

void addDenseMlp(GraphBuilder& b, const std::string& p, std::int64_t width, Component component)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    b.linear(p + ".gate_proj", width, h, { R::ColumnParallel, component, s.mlpBias });
    b.linear(p + ".up_proj", width, h, { R::ColumnParallel, component, s.mlpBias });
    b.linear(p + ".down_proj", h, width, { R::RowParallel, component, s.mlpBias });
}

void addStandardAttention(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t q = s.numHeads * s.headDim;
    const std::int64_t kv = s.numKvHeads * s.headDim;
    const Component c = Component::Attention;
    b.linear(p + ".q_proj", q, h, { R::ColumnParallel, c, s.attentionBias });
    b.linear(p + ".k_proj", kv, h, { R::ColumnParallel, c, s.attentionBias });
    b.linear(p + ".v_proj", kv, h, { R::ColumnParallel, c, s.attentionBias });
    b.linear(p + ".o_proj", h, q, { R::RowParallel, c, s.attentionOutputBias });
    if (s.qkNorm) {
        b.norm(p + ".q_norm", s.headDim);
        b.norm(p + ".k_norm", s.headDim);
    }
}

// DeepSeek multi-head latent attention (DeepseekV3Attention): the latent down-projections are
// replicated, the per-head up-projections column-parallel. SparseMla layers add the DSA indexer
// (GLM-5.2's "shared" layers reuse an earlier one's and have none).
void addMlaAttention(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const MlaSpec& m = s.mla;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t qHead = m.qkNopeHeadDim + m.qkRopeHeadDim;
    const Component c = Component::Attention;
    if (m.qLoraRank > 0) {
        b.linear(p + ".q_a_proj", m.qLoraRank, h, { R::Replicated, c, s.attentionBias });
        b.norm(p + ".q_a_layernorm", m.qLoraRank);
        b.linear(p + ".q_b_proj", s.numHeads * qHead, m.qLoraRank, { R::ColumnParallel, c });
    } else {
        b.linear(p + ".q_proj", s.numHeads * qHead, h, { R::ColumnParallel, c });
    }
    b.linear(p + ".kv_a_proj_with_mqa", m.kvLoraRank + m.qkRopeHeadDim, h,
        { R::Replicated, c, s.attentionBias });
    b.norm(p + ".kv_a_layernorm", m.kvLoraRank);
    b.linear(p + ".kv_b_proj", s.numHeads * (m.qkNopeHeadDim + m.vHeadDim), m.kvLoraRank,
        { R::ColumnParallel, c });
    if (m.outputGate) {
        // Kimi-K3 mla_use_output_gate: o_proj(attn · sigmoid(g_proj(x))), one gate per value
        // channel (vLLM-TPU K3 MultiHeadLatentAttention; fused q_a + kv_a + g = 1536 + 576 +
        // 12288 rows in a real-config test).
        b.linear(p + ".g_proj", s.numHeads * m.vHeadDim, h, { R::ColumnParallel, c });
    }
    b.linear(p + ".o_proj", h, s.numHeads * m.vHeadDim, { R::RowParallel, c, s.attentionBias });
    if (m.indexerHeads > 0 && layer.mixer == MixerKind::SparseMla) {
        const std::string ix = p + ".indexer";
        b.linear(
            ix + ".wq_b", m.indexerHeads * m.indexerHeadDim, m.qLoraRank, { R::Replicated, c });
        b.linear(ix + ".wk", m.indexerHeadDim, h, { R::Replicated, c });
        b.norm(ix + ".k_norm", m.indexerHeadDim, true);
        LinearOptions weights { R::Replicated, c };
        weights.quantizable = false;
        b.linear(ix + ".weights_proj", m.indexerHeads, h, weights);
    }
}

void addModelOptKvScales(GraphBuilder& b, const std::string& p)
{
    const auto& q = b.spec().quantization;
    if (!q || q->method != "modelopt" || !q->kvCacheDtype) {
        return;
    }
    // ModelOpt's FP8 KV cache: one F32 scale for K and one for V per attention layer, named
    // after k_proj / v_proj even for MLA, which has neither (the Kimi-K2.5-NVFP4 tensor listing:
    // 278,341 tensors = ... + 61·2 of these; research note kimi_ct.md (not in the repository)
    // §4.5). Seen in the Kimi-K2.5-NVFP4 listing only; other MLA exports (GLM-5-NVFP4) are expected
    // to carry them under the same names, unverified: optional there.
    const bool verified = b.spec().vision && b.spec().vision->kind == "moonvit";
    b.tensor(p + ".k_proj.k_scale", {}, DType::F32, R::Replicated, Component::Attention,
        TensorKind::Scale);
    b.last().optional = !verified;
    b.tensor(p + ".v_proj.v_scale", {}, DType::F32, R::Replicated, Component::Attention,
        TensorKind::Scale);
    b.last().optional = !verified;
}

// Routed experts stored one module per expert: `<p>.<E>.<gate>/<up>/<down>`.
void addPerExpertMlps(
    GraphBuilder& b, const std::string& p, const char* gate, const char* up, const char* down)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    // A latent MoE's experts read and write the latent width (Kimi-K3 routed_expert_hidden_size).
    const std::int64_t h = moe.latentSize > 0 ? moe.latentSize : s.hiddenSize;
    const std::int64_t w = moe.expertIntermediate;
    // Quantisation rules never tell experts apart: decide once per projection (a regex per
    // expert would cost more than the whole graph for Kimi-K2.5's 23k expert modules).
    const std::string first = p + ".0.";
    const int qGate = b.quantizes(first + gate) ? 1 : 0;
    const int qUp = b.quantizes(first + up) ? 1 : 0;
    const int qDown = b.quantizes(first + down) ? 1 : 0;
    // One tensor per projection, plus its scale (and packed-INT metadata) when quantised.
    const std::size_t perProjection = s.quantization ? 3 : 1;
    b.reserve(std::size_t(moe.numExperts) * 3 * perProjection);
    std::string module; // reused: the expert loops build ~20k names for the largest models
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        const auto expert = static_cast<std::int32_t>(e);
        LinearOptions col { R::ColumnParallel, Component::RoutedExperts };
        col.expert = expert;
        LinearOptions row { R::RowParallel, Component::RoutedExperts };
        row.expert = expert;
        module.assign(p).append(".").append(str(e)).append(".");
        const std::size_t stem = module.size();
        col.quantized = qGate;
        b.linear(module.append(gate), w, h, col);
        module.resize(stem);
        row.quantized = qDown;
        b.linear(module.append(down), h, w, row);
        module.resize(stem);
        col.quantized = qUp;
        b.linear(module.append(up), w, h, col);
    }
}

namespace {

// Routed experts stored as two fused parameters (Llama-4, Qwen3-VL-MoE): gate_up [E, H, 2I]
// and down [E, I, H], without a ".weight" suffix.
void addPackedExperts(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t e = moe.numExperts;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t w = moe.expertIntermediate;
    b.tensor(p + ".gate_up_proj", { e, h, 2 * w }, s.dtype, R::ColumnParallel,
        Component::RoutedExperts, TensorKind::Weight, -1, e);
    b.tensor(p + ".down_proj", { e, w, h }, s.dtype, R::RowParallel, Component::RoutedExperts,
        TensorKind::Weight, -1, e);
}

} // namespace

void addRouter(GraphBuilder& b, const std::string& module)
{
    const ModelSpec& s = b.spec();
    b.tensor(module + ".weight", { s.moe->numExperts, s.hiddenSize }, s.dtype, R::Replicated,
        Component::Router);
    if (s.moe->expertScoreBias) {
        // Kept in F32 by every published DeepSeek-V3/Kimi/GLM checkpoint
        // (Glm4MoePreTrainedModel._keep_in_fp32_modules_strict = ["e_score_correction_bias"]),
        // except NVIDIA's ModelOpt exports of Kimi-K2.5: the Kimi-K2.5-NVFP4 listing has it in
        // BF16 (research note kimi_ct.md (not in the repository) §4.5; K2.6-NVFP4 not verified, so
        // either is accepted).
        const bool modelOptKimi = s.quantization && s.quantization->method == "modelopt" && s.vision
            && s.vision->kind == "moonvit";
        b.tensor(module + ".e_score_correction_bias", { s.moe->numExperts },
            modelOptKimi ? s.dtype : DType::F32, R::Replicated, Component::Router,
            TensorKind::Bias);
        if (modelOptKimi) {
            b.last().altDtype = DType::F32;
        }
    }
}

namespace {

void addMoe(GraphBuilder& b, const std::string& layer)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    switch (s.family) {
    case Family::Mixtral: {
        const std::string p = layer + ".block_sparse_moe";
        addRouter(b, p + ".gate");
        addPerExpertMlps(b, p + ".experts", "w1", "w3", "w2");
        break;
    }
    case Family::Llama4: {
        const std::string p = layer + ".feed_forward";
        addRouter(b, p + ".router");
        addPackedExperts(b, p + ".experts");
        addDenseMlp(b, p + ".shared_expert", moe.sharedIntermediate, Component::SharedExperts);
        break;
    }
    case Family::Qwen3VlMoe: {
        const std::string p = layer + ".mlp";
        addRouter(b, p + ".gate");
        addPackedExperts(b, p + ".experts");
        break;
    }
    default: {
        const std::string p = layer + ".mlp";
        addRouter(b, p + ".gate");
        addPerExpertMlps(b, p + ".experts", "gate_proj", "up_proj", "down_proj");
        if (moe.sharedIntermediate > 0 && moe.sharedExpertGate) {
            addDenseMlp(b, p + ".shared_expert", moe.sharedIntermediate, Component::SharedExperts);
            LinearOptions gate { R::Replicated, Component::SharedExperts };
            gate.quantizable = false;
            b.linear(p + ".shared_expert_gate", 1, s.hiddenSize, gate);
        } else if (moe.sharedIntermediate > 0) {
            addDenseMlp(b, p + ".shared_experts", moe.sharedIntermediate, Component::SharedExperts);
        }
        break;
    }
    }
}

void addDecoderLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    b.norm(p + ".input_layernorm", s.hiddenSize);
    if (s.attention == AttentionKind::MLA) {
        addMlaAttention(b, p + ".self_attn", layer);
        addModelOptKvScales(b, p + ".self_attn");
    } else {
        addStandardAttention(b, p + ".self_attn");
    }
    b.norm(p + ".post_attention_layernorm", s.hiddenSize);
    if (layer.moe()) {
        addMoe(b, p);
    } else {
        const std::string ffn = s.family == Family::Llama4 ? ".feed_forward" : ".mlp";
        addDenseMlp(b, p + ffn, s.intermediateSize, Component::DenseMlp);
    }
}

// DeepSeek-V3 / GLM-4.5 multi-token prediction layer at index num_hidden_layers + i.
void addMtpLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const bool glm = s.family == Family::Glm4Moe;
    // GLM-5's published MTP layer has neither embed_tokens nor shared_head.head: it reuses
    // model.embed_tokens and lm_head.
    const bool own = s.family != Family::GlmMoeDsa;
    if (own) {
        b.tensor(p + ".embed_tokens.weight", { s.vocabSize, h }, s.dtype, R::VocabParallel,
            Component::Embedding);
        b.last().optional = glm;
    }
    b.norm(p + ".enorm", h);
    b.norm(p + ".hnorm", h);
    // eh_proj is BF16 in the FP8 checkpoints (published R1 listing) and small: replicated.
    LinearOptions eh { R::Replicated, Component::Mtp };
    eh.quantizable = false;
    b.linear(p + ".eh_proj", h, 2 * h, eh);
    b.norm(p + ".shared_head.norm", h);
    if (own) {
        b.tensor(p + ".shared_head.head.weight", { s.vocabSize, h }, s.dtype, R::VocabParallel,
            Component::LmHead);
        b.last().optional = glm;
    }
    addDecoderLayer(b, p, layer);
}

} // namespace

void addEmbedding(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    const std::string& prefix = s.layout.textPrefix;
    b.begin(prefix + ".embed_tokens", BlockKind::Embedding);
    b.tensor(prefix + ".embed_tokens.weight", { s.vocabSize, s.hiddenSize }, s.dtype,
        R::VocabParallel, Component::Embedding);
}

void addDecoderLayers(GraphBuilder& b,
    const std::function<void(GraphBuilder&, const std::string&, const LayerSpec&, std::int64_t)>&
        layer)
{
    const ModelSpec& s = b.spec();
    for (std::int64_t i = 0; i < s.numLayers; ++i) {
        const LayerSpec& pattern = s.layers[std::size_t(i)];
        const std::string p = s.layout.textPrefix + ".layers." + str(i);
        b.begin(p, BlockKind::Decoder, static_cast<std::int32_t>(i), pattern.moe());
        layer(b, p, pattern, i);
    }
}

void addFinalNorm(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    b.begin(s.layout.textPrefix + ".norm", BlockKind::FinalNorm);
    b.norm(s.layout.textPrefix + ".norm", s.hiddenSize);
}

void addLmHead(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    if (!s.tieEmbeddings) {
        b.begin(s.layout.lmHead, BlockKind::LmHead);
        b.tensor(s.layout.lmHead + ".weight", { s.vocabSize, s.hiddenSize }, s.dtype,
            R::VocabParallel, Component::LmHead);
    }
}

void addDecoderTower(GraphBuilder& b,
    const std::function<void(GraphBuilder&, const std::string&, const LayerSpec&, std::int64_t)>&
        layer)
{
    addEmbedding(b);
    addDecoderLayers(b, layer);
    addFinalNorm(b);
    addLmHead(b);
}

void addTextTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    // The 2026 families name their checkpoints their own way (family_*.cpp).
    switch (s.family) {
    case Family::KimiLinear:
        addKimiLinearTextTower(b);
        return;
    case Family::Gemma4:
        addGemma4TextTower(b);
        return;
    case Family::Hunyuan:
        addHunyuanTextTower(b);
        return;
    case Family::GptOss:
        addGptOssTextTower(b);
        return;
    case Family::MiniMaxM2:
    case Family::MiniMaxM3:
        addMiniMaxTextTower(b);
        return;
    case Family::NemotronH:
        addNemotronHTextTower(b);
        return;
    case Family::NemotronNas:
        addNemotronNasTextTower(b);
        return;
    case Family::Qwen3Next:
    case Family::Qwen35:
    case Family::Qwen35Moe:
        addQwenNextTextTower(b);
        return;
    case Family::DeepseekV4:
        addDeepseekV4TextTower(b);
        return;
    default:
        break;
    }
    const std::string& prefix = s.layout.textPrefix;
    addEmbedding(b);
    addDecoderLayers(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            addDecoderLayer(g, p, layer);
        });
    addFinalNorm(b);
    addLmHead(b);

    for (std::int64_t i = 0; i < s.numMtpLayers; ++i) {
        const LayerSpec& layer = s.mtpLayers[std::size_t(i)];
        const std::int64_t index = s.numLayers + i;
        const std::string p = prefix + ".layers." + str(index);
        b.begin(p, BlockKind::Mtp, static_cast<std::int32_t>(index), layer.moe());
        addMtpLayer(b, p, layer);
    }
}

} // namespace day0::model::detail
