// gpt_oss (GptOssForCausalLM: openai/gpt-oss-120b, openai/gpt-oss-20b): reader and text tower.
//
// Where the facts come from (research/gptoss_minimax.md, Part A):
// - Config keys and their defaults: huggingface/transformers
//   src/transformers/models/gpt_oss/configuration_gpt_oss.py (commit 02b8f42b) and
//   modular_gpt_oss.py (commit 0261a467): hidden 2880, 36 layers, 64 heads of 64, 8 KV heads,
//   128 experts top-4, sliding_window 128, layer_types alternating sliding/full from layer 0,
//   attention_bias true, rope_theta 150000 with YaRN factor 32 (truncate false),
//   swiglu_limit 7.0; swiglu_alpha 1.702 (older transformers hard-codes self.alpha = 1.702).
//   `experts_per_token` and `initial_context_length` are OpenAI's legacy keys, not fields of
//   GptOssConfig.
// - Checkpoint names, order and the all-BF16 non-expert dtypes: the real openai/gpt-oss-20b
//   model.safetensors.index.json (search index id 31112482743; key list in
//   tests/data/model/indexes/gpt-oss-20b), whose total_size 13,761,264,768 equals the byte sum of
//   this graph; the 120b tensor bytes 65,248,815,744 (third-party test, id 59724567210).
// - MXFP4 experts: transformers src/transformers/integrations/mxfp4.py (commit 0189b1d0,
//   Mxfp4GptOssExperts): `<p>_blocks` U8 [E, out, in/32, 16] (two E2M1 per byte, element 2k in
//   the low nibble), `<p>_scales` U8 E8M0 [E, out, in/32], `<p>_bias` [E, out]; only
//   GptOssExperts is replaced, so no Linear module is ever quantised (modules_to_not_convert is
//   redundant). Unquantised: GptOssExperts' `gate_up_proj` [E, H, 2I] and `down_proj` [E, I, H]
//   (transposed against the blocks), gate/up interleaved along 2I.
// - Sinks: one learned logit per query head (`self_attn.sinks` [heads]); router `mlp.router`
//   with a bias over all experts.

#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

namespace day0::model::detail {

using nlohmann::json;

namespace {

using R = ParallelRole;

// An optional positive integer with the class default.
std::int64_t positiveOr(JsonReader& r, const std::string& key, std::int64_t fallback)
{
    const std::int64_t value = r.intOr(key, fallback);
    if (r.ok() && value <= 0) {
        r.fail(key, fmt::format("must be a positive integer, found {}", value));
    }
    return value;
}

// layer_types: "sliding_attention" / "full_attention" per layer (length checked); absent,
// GptOssConfig alternates sliding (even layers) and full (odd layers).
Result<void> readLayerTypes(const Section& text, ModelSpec& spec, std::int64_t window)
{
    JsonReader r = text.reader();
    std::vector<std::string> types;
    if (r.has("layer_types")) {
        types = stringArrayOr(r, "layer_types");
        if (r.ok() && std::int64_t(types.size()) != spec.numLayers) {
            r.fail("layer_types",
                fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                    types.size(), spec.numLayers));
        }
    } else {
        for (std::int64_t i = 0; i < spec.numLayers; ++i) {
            types.emplace_back((i + 1) % 2 != 0 ? "sliding_attention" : "full_attention");
        }
    }
    for (std::size_t i = 0; r.ok() && i < types.size(); ++i) {
        if (types[i] == "sliding_attention" && window == 0) {
            r.fail(
                "sliding_window", fmt::format("is null but layer {} is \"sliding_attention\"", i));
        } else if (types[i] == "sliding_attention") {
            setWindow(spec.layers[i], window);
        } else if (types[i] == "full_attention") {
            setWindow(spec.layers[i], 0);
        } else {
            r.fail("layer_types",
                fmt::format("entry {} is \"{}\", which Day0 does not model (it models "
                            "\"sliding_attention\" and \"full_attention\")",
                    i, types[i]));
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

Result<void> readGptOssDecoder(JsonReader& r, ModelSpec& spec)
{
    spec.hiddenSize = positiveOr(r, "hidden_size", 2880);
    spec.numLayers = positiveOr(r, "num_hidden_layers", 36);
    spec.numHeads = positiveOr(r, "num_attention_heads", 64);
    // GptOssConfig: num_key_value_heads null → num_attention_heads; head_dim null →
    // hidden_size // num_attention_heads; absent → the class defaults 8 and 64.
    const bool kvNull = r.object().contains("num_key_value_heads") && !r.has("num_key_value_heads");
    spec.numKvHeads = kvNull ? spec.numHeads : positiveOr(r, "num_key_value_heads", 8);
    const bool headNull = r.object().contains("head_dim") && !r.has("head_dim");
    spec.headDim = headNull ? spec.hiddenSize / std::max<std::int64_t>(spec.numHeads, 1)
                            : positiveOr(r, "head_dim", 64);
    spec.intermediateSize = positiveOr(r, "intermediate_size", 2880);
    spec.vocabSize = positiveOr(r, "vocab_size", 201088);
    spec.maxPositions = r.intOr("max_position_embeddings", 131072);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-5);
    // GptOssAttention: q/k/v and o_proj all take attention_bias (default true).
    spec.attentionBias = r.boolOr("attention_bias", true);
    spec.attentionOutputBias = spec.attentionBias;
    spec.attentionSinks = true;
    spec.swigluLimit = r.numberOr("swiglu_limit", 7.0);
    spec.swigluAlpha = r.numberOr("swiglu_alpha", 1.702);
    if (r.ok() && (spec.headDim <= 0 || spec.numHeads % spec.numKvHeads != 0)) {
        r.fail("num_key_value_heads",
            fmt::format(
                "({}) must divide 'num_attention_heads' ({})", spec.numKvHeads, spec.numHeads));
    }
    if (r.ok() && spec.swigluLimit <= 0.0) {
        r.fail("swiglu_limit", fmt::format("must be positive, found {}", spec.swigluLimit));
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.attention = spec.numKvHeads == spec.numHeads ? AttentionKind::MHA
        : spec.numKvHeads == 1                        ? AttentionKind::MQA
                                                      : AttentionKind::GQA;
    // The experts compute the clamped SwiGLU, (up + 1) · gate · σ(α·gate), whatever hidden_act
    // says (GptOssExperts reads no activation from the config).
    spec.hiddenAct = "swiglu_oai";
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    return success();
}

Result<void> readGptOssMoe(JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = positiveOr(r, "num_local_experts", 128);
    moe.topK = positiveOr(r, "num_experts_per_tok", 4);
    // OpenAI's own config repeats top-k as experts_per_token; GptOssConfig ignores it, so a
    // config where the two differ cannot be read without a guess.
    if (r.has("experts_per_token")) {
        const std::int64_t legacy = r.requirePositive("experts_per_token");
        if (r.ok() && legacy != moe.topK) {
            r.fail("experts_per_token",
                fmt::format("is {} but 'num_experts_per_tok' is {} (transformers uses the "
                            "latter; the config contradicts itself)",
                    legacy, moe.topK));
        }
    }
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'num_local_experts' ({})", moe.topK, moe.numExperts));
    }
    if (!r.ok()) {
        return r.error();
    }
    moe.expertIntermediate = spec.intermediateSize;
    // Router: softmax over the top-k logits (= renormalised top-k of the softmax).
    moe.scoring = RouterScoring::Softmax;
    moe.normTopkProb = true;
    moe.packedExperts = true;
    moe.expertBias = true;
    moe.routerBias = true;
    for (auto& layer : spec.layers) {
        layer.ffn = FfnKind::Moe;
    }
    spec.moe = moe;
    return success();
}

} // namespace

Result<void> readGptOss(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    JsonReader r = text.reader();
    DAY0_TRY(readGptOssDecoder(r, spec));
    DAY0_TRY(readGptOssMoe(r, spec));
    // sliding_window null leaves the sliding layers without a window: refused below if any.
    const bool windowNull = text.object.contains("sliding_window") && !r.has("sliding_window");
    const std::int64_t window = windowNull ? 0 : positiveOr(r, "sliding_window", 128);
    if (!r.ok()) {
        return r.error();
    }
    DAY0_TRY(readLayerTypes(text, spec, window));

    spec.ropeTheta = 150000.0;
    const bool ropeGiven = text.has("rope_scaling") || text.has("rope_parameters");
    DAY0_TRY(readRope(text, spec));
    if (!ropeGiven) {
        // GptOssConfig's default rope: YaRN ×32 over 4096 original positions, no truncation.
        RopeScaling& s = spec.ropeScaling;
        s.type = "yarn";
        s.factor = 32.0;
        s.betaFast = 32.0;
        s.betaSlow = 1.0;
        s.originalMaxPositions = 4096;
        s.truncate = false;
    }

    DAY0_TRY(readQuantizationOf(input, spec));
    if (spec.quantization) {
        const QuantizationSpec& q = *spec.quantization;
        if (q.scheme != QuantScheme::Mxfp4) {
            text.notModelled("quantization_config",
                fmt::format("gpt_oss weights quantised as {} ({}) are not modelled (Day0 models "
                            "the published MXFP4 experts and unquantised BF16)",
                    q.method, quantSchemeName(q.scheme)));
            spec.quantization.reset();
        } else if (spec.hiddenSize % 32 != 0 || spec.intermediateSize % 32 != 0) {
            return Error::badInput(fmt::format("{}: MXFP4 experts need hidden_size ({}) and "
                                               "intermediate_size ({}) in blocks of 32",
                text.origin, spec.hiddenSize, spec.intermediateSize));
        }
    }
    // Default layout: model.*, lm_head (no language_model level).
    return success();
}

namespace {

void addAttention(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    // modules_to_not_convert covers self_attn; the Mxfp4 scheme never quantises a Linear.
    addStandardAttention(b, p);
    // One sink logit per query head: split with the heads.
    b.tensor(p + ".sinks", { s.numHeads }, s.dtype, R::ColumnParallel, Component::Attention);
}

// The fused experts of one layer: MXFP4 blocks and scales, or the unquantised parameters.
void addExperts(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const std::int64_t e = s.moe->numExperts;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t w = s.moe->expertIntermediate;
    const Component c = Component::RoutedExperts;
    const auto packed
        = [&](const std::string& name, std::int64_t out, std::int64_t in, ParallelRole role) {
              // [E, out, in/32, 16] bytes of two E2M1 values: params count the logical elements.
              b.tensor(name + "_blocks", { e, out, in / 32, 16 }, DType::U8, role, c,
                  TensorKind::Weight, -1, e);
              b.last().packFactor = 2;
              b.tensor(name + "_scales", { e, out, in / 32 }, DType::U8, role, c, TensorKind::Scale,
                  -1, e);
          };
    if (s.quantization && s.quantization->scheme == QuantScheme::Mxfp4) {
        packed(p + ".gate_up_proj", 2 * w, h, R::ColumnParallel);
    } else {
        b.tensor(p + ".gate_up_proj", { e, h, 2 * w }, s.dtype, R::ColumnParallel, c,
            TensorKind::Weight, -1, e);
    }
    b.tensor(p + ".gate_up_proj_bias", { e, 2 * w }, s.dtype, R::ColumnParallel, c,
        TensorKind::Bias, -1, e);
    if (s.quantization && s.quantization->scheme == QuantScheme::Mxfp4) {
        packed(p + ".down_proj", h, w, R::RowParallel);
    } else {
        b.tensor(
            p + ".down_proj", { e, w, h }, s.dtype, R::RowParallel, c, TensorKind::Weight, -1, e);
    }
    // Added once after the row-parallel reduction.
    b.tensor(p + ".down_proj_bias", { e, h }, s.dtype, R::Replicated, c, TensorKind::Bias, -1, e);
}

} // namespace

void addGptOssTextTower(GraphBuilder& b)
{
    addDecoderTower(b, [](GraphBuilder& g, const std::string& p, const LayerSpec&, std::int64_t) {
        const ModelSpec& s = g.spec();
        const std::int64_t h = s.hiddenSize;
        const std::int64_t e = s.moe->numExperts;
        g.norm(p + ".input_layernorm", h);
        addAttention(g, p + ".self_attn");
        g.norm(p + ".post_attention_layernorm", h);
        g.tensor(p + ".mlp.router.weight", { e, h }, s.dtype, R::Replicated, Component::Router);
        g.tensor(p + ".mlp.router.bias", { e }, s.dtype, R::Replicated, Component::Router,
            TensorKind::Bias);
        addExperts(g, p + ".mlp.experts");
    });
}

} // namespace day0::model::detail
