// Hunyuan-A13B (`hunyuan`, HunYuanMoEV1ForCausalLM): the config reader and the checkpoint
// tensors.
//
// Where the facts come from (research note gemma4_hunyuan.md (not in the repository), Part B):
// - GitHub Tencent-Hunyuan/Hunyuan-A13B @ 2798f3c8b6a69e0ce93950b0d2417203cf950fa0:
//   models/config.json (the frontier copy), configuration_hunyuan.py, modeling_hunyuan.py and
//   hunyuan.py — the trust_remote_code classes auto_map names, so the ones modelled here: the
//   attention's head width is hidden_size / num_attention_heads (attention_head_dim is not
//   read), query_layernorm / key_layernorm with use_qk_norm, every expert and the shared MLP
//   `intermediate_size` wide (the shared one times num_shared_expert[0]), moe_topk[0] and
//   num_shared_expert[0] used for every layer, mlp.shared_mlp only with use_mixed_mlp_moe, the
//   MLP without biases whatever mlp_bias says, the router an FP32 nn.Linear `mlp.gate.wg`;
// - transformers models/hunyuan_v1_moe @ 008cd60e348a9ef3ce1b49cbccca5b26413e8081 (the native
//   port: per-layer moe_topk, no CLA) for what the two implementations disagree on;
// - checkpoint key lists of the published model (search index ids 52431021674, 56790231658,
//   55604399571): model.layers.N.mlp.gate.wg.weight [E, H], mlp.shared_mlp.*,
//   mlp.experts.E.{gate,up,down}_proj.weight stored per expert, no lm_head (tied).
// The router's stored dtype is not verified (created FP32, the checkpoint is BF16): BF16 with
// F32 as its alternative.

#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

// A per-layer list the Tencent code reads at index 0 for every layer (HF per layer): only a
// uniform one means the same model to both.
std::int64_t uniformPerLayer(
    JsonReader& r, const std::string& key, std::int64_t layers, std::int64_t fallback)
{
    const auto values = perLayerInts(r, key, layers);
    if (!r.ok() || values.empty()) {
        return fallback;
    }
    for (std::size_t i = 1; i < values.size(); ++i) {
        if (values[i] != values[0]) {
            r.fail(key,
                fmt::format("entry {} is {} but entry 0 is {}: the Tencent modeling code uses "
                            "entry 0 for every layer and transformers' port each layer's own, so "
                            "a non-uniform list is not modelled",
                    i, values[i], values[0]));
            return fallback;
        }
    }
    return values[0];
}

// Keys the HunYuanMoEV1ForCausalLM classes have but that change no tensor.
void readInertFlags(const Section& text, JsonReader& r)
{
    // Absent structures, meaningful only when switched on (checked just before).
    for (const char* key : { "cla_share_factor", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
             "qk_rope_head_dim", "v_head_dim", "class_num" }) {
        (void)r.intOr(key, 0);
    }
    (void)r.stringOr("pool_type", "");
    (void)intArrayOr(r, "dense_list"); // [hidden, class_num] of the absent classification head
    (void)text.has("xdrope_section");
    // A vision tower would need another class than HunYuanMoEV1ForCausalLM.
    for (const char* key : { "vit_type", "vit_path" }) {
        if (text.has(key)) {
            text.notModelled(key,
                "a Hunyuan vision tower is not modelled (the published A13B "
                "is text only)");
        }
    }
}

Result<void> readHunyuanMoe(JsonReader& r, ModelSpec& spec)
{
    const std::int64_t layers = spec.numLayers;
    const std::int64_t experts = uniformPerLayer(r, "num_experts", layers, 1);
    const std::int64_t topK = uniformPerLayer(r, "moe_topk", layers, 1);
    const std::int64_t shared = uniformPerLayer(r, "num_shared_expert", layers, 1);
    const bool mixed = r.boolOr("use_mixed_mlp_moe", false);
    // moe_intermediate_size is read by neither modeling file (both size the experts by
    // intermediate_size); a list that says otherwise would be read differently elsewhere.
    const auto widths = perLayerInts(r, "moe_intermediate_size", layers);
    for (std::size_t i = 0; r.ok() && i < widths.size(); ++i) {
        if (widths[i] != spec.intermediateSize) {
            r.fail("moe_intermediate_size",
                fmt::format("entry {} is {} but the Tencent and transformers modeling code size "
                            "every expert by intermediate_size ({}); per-layer expert widths are "
                            "not modelled",
                    i, widths[i], spec.intermediateSize));
        }
    }
    if (r.intOr("moe_layer_num_skipped", 0) != 0 && r.ok()) {
        r.fail("moe_layer_num_skipped", "is not 0; no modeling code says which layers it skips");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (experts <= 1) {
        return success(); // HunYuanMLP in every layer (HunYuanDecoderLayer: num_experts > 1)
    }
    if (topK <= 0 || topK > experts) {
        r.fail(
            "moe_topk", fmt::format("({}) must be between 1 and num_experts ({})", topK, experts));
    } else if (mixed && shared <= 0) {
        r.fail("num_shared_expert", "must be positive with use_mixed_mlp_moe");
    }
    if (!r.ok()) {
        return r.error();
    }
    MoeSpec moe;
    moe.numExperts = experts;
    moe.topK = topK;
    moe.expertIntermediate = spec.intermediateSize;
    // HunYuanTopKGate: softmax, top-k, weights renormalised (norm_topk_prob is not read).
    moe.scoring = RouterScoring::Softmax;
    moe.normTopkProb = true;
    if (mixed) {
        moe.numSharedExperts = shared;
        moe.sharedIntermediate = spec.intermediateSize * shared;
    }
    spec.moe = moe;
    for (auto& layer : spec.layers) {
        layer.ffn = FfnKind::Moe;
    }
    // transformers' port (topkgating) drops, even at inference, the tokens an expert receives
    // beyond its capacity; vLLM and SGLang route every token, as Day0's reference does.
    spec.warnings.push_back(fmt::format("{}: transformers' HunYuanMoEV1 drops the tokens an expert "
                                        "receives beyond max(k, k·T/E) of a T-token pass "
                                        "(k = {}, E = {}); Day0 routes every token to its {} "
                                        "experts, as vLLM does, so a long prompt can differ from "
                                        "transformers' output",
        spec.origin, topK, experts, topK));
    return success();
}

void addMlp(GraphBuilder& b, const std::string& p, std::int64_t width, Component c,
    std::int32_t expert = -1, const int* quantized = nullptr)
{
    const std::int64_t h = b.spec().hiddenSize;
    LinearOptions col { R::ColumnParallel, c };
    LinearOptions row { R::RowParallel, c };
    col.expert = row.expert = expert;
    if (quantized != nullptr) {
        col.quantized = quantized[0];
    }
    b.linear(p + ".gate_proj", width, h, col);
    if (quantized != nullptr) {
        col.quantized = quantized[1];
        row.quantized = quantized[2];
    }
    b.linear(p + ".up_proj", width, h, col);
    b.linear(p + ".down_proj", h, width, row);
}

void addLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t q = s.numHeads * s.headDim;
    const std::int64_t kv = s.numKvHeads * s.headDim;
    const std::string a = p + ".self_attn";
    b.norm(p + ".input_layernorm", h);
    b.linear(a + ".q_proj", q, h, { R::ColumnParallel, Component::Attention, s.attentionBias });
    b.linear(a + ".k_proj", kv, h, { R::ColumnParallel, Component::Attention, s.attentionBias });
    b.linear(a + ".v_proj", kv, h, { R::ColumnParallel, Component::Attention, s.attentionBias });
    b.linear(a + ".o_proj", h, q, { R::RowParallel, Component::Attention, s.attentionOutputBias });
    if (s.qkNorm) {
        b.norm(a + ".query_layernorm", s.headDim);
        b.norm(a + ".key_layernorm", s.headDim);
    }
    b.norm(p + ".post_attention_layernorm", h);
    const std::string m = p + ".mlp";
    if (!layer.moe()) {
        addMlp(b, m, s.intermediateSize, Component::DenseMlp);
        return;
    }
    const MoeSpec& moe = *s.moe;
    b.tensor(
        m + ".gate.wg.weight", { moe.numExperts, h }, s.dtype, R::Replicated, Component::Router);
    b.last().altDtype = DType::F32; // an FP32 nn.Linear in both modeling files
    if (moe.sharedIntermediate > 0) {
        addMlp(b, m + ".shared_mlp", moe.sharedIntermediate, Component::SharedExperts);
    }
    // One nn.ModuleList entry per expert; quantisation rules never tell experts apart.
    const std::string first = m + ".experts.0.";
    const int quantized[3] = { b.quantizes(first + "gate_proj") ? 1 : 0,
        b.quantizes(first + "up_proj") ? 1 : 0, b.quantizes(first + "down_proj") ? 1 : 0 };
    b.reserve(std::size_t(moe.numExperts) * 3);
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        addMlp(b, m + ".experts." + std::to_string(e), moe.expertIntermediate,
            Component::RoutedExperts, static_cast<std::int32_t>(e), quantized);
    }
}

} // namespace

Result<void> readHunyuan(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    if (spec.modelType != "hunyuan") {
        // transformers' own hunyuan_v1_moe config reads differently (shared_mlp always, per-layer
        // moe_topk, head_dim): not this reader's rules.
        return Error::badInput(fmt::format("{}: model_type '{}' with {} is not modelled (Day0 "
                                           "reads Tencent's model_type \"hunyuan\")",
            text.origin, spec.modelType, spec.architecture));
    }
    // hidden_size, layers, heads, kv heads, intermediate_size, vocab, max positions, norm eps,
    // activation, attention_bias (q/k/v/o) and mlp_bias.
    DAY0_TRY(readDecoder(text, spec));
    spec.mlpBias = false; // HunYuanMLP is built with bias=False whatever mlp_bias says
    JsonReader r = text.reader();
    const std::int64_t headDim = spec.hiddenSize / spec.numHeads;
    if (spec.headDim != headDim) {
        r.fail("head_dim",
            fmt::format("({}) differs from hidden_size / num_attention_heads ({}), "
                        "the head width the Tencent attention uses",
                spec.headDim, headDim));
    }
    if (r.ok() && r.intOr("attention_head_dim", headDim) != headDim) {
        r.fail("attention_head_dim",
            fmt::format("({}) differs from hidden_size / num_attention_heads ({}): the Tencent "
                        "attention ignores it and transformers' port reads head_dim, so the two "
                        "would build different models",
                r.intOr("attention_head_dim", 0), headDim));
    }
    spec.qkNorm = r.boolOr("use_qk_norm", false);
    const bool rope = r.boolOr("use_rotary_pos_emb", true);
    boolMustBe(r, "position_embedding_xdrope", false); // XD-RoPE (the VL models) not modelled
    // Cross-layer attention drops k_proj / v_proj and the KV cache on all but every
    // cla_share_factor-th layer; neither it nor MLA nor the classification head is modelled.
    boolMustBe(r, "use_cla", false);
    boolMustBe(r, "use_mla", false);
    boolMustBe(r, "add_classification_head", false);
    if (!r.ok()) {
        return r.error();
    }
    readInertFlags(text, r);
    DAY0_TRY(readHunyuanMoe(r, spec));
    for (auto& layer : spec.layers) {
        layer.rope = rope;
    }
    // rope_theta and rope_scaling: dynamic NTK-alpha (type "dynamic", alpha); no tensors.
    DAY0_TRY(readRope(text, spec));
    spec.layout.textPrefix = "model";
    spec.layout.lmHead = "lm_head";
    return readQuantizationOf(input, spec);
}

void addHunyuanTextTower(GraphBuilder& b)
{
    addDecoderTower(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            addLayer(g, p, layer);
        });
}

} // namespace day0::model::detail
