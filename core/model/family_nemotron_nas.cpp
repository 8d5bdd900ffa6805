// Nemotron-NAS (`nemotron-nas`, DeciLM: Llama-3.3-Nemotron-Super-49B and its relatives): a
// Llama decoder whose every layer is described by its own `block_configs` entry.
//
// Where the facts come from (research note nemotron_modelopt.md (not in the repository), Part C):
// - Block semantics (attention no_op: no attention and no input_layernorm; replace_with_linear:
//   one Linear(H, H) `self_attn.linear_attn`; n_heads_in_group: GQA group size; ffn no_op: no
//   MLP and no post_attention_layernorm; replace_with_linear: `mlp.linear_mlp`; ffn_mult → width):
//   vLLM `nemotron_nas.py` @ 00bd1493, TensorRT-LLM `modeling_nemotron_nas.py` (index id
//   74152027), NeMo AutoModel's DeciLM (index id 52388203514, whose docstrings name the HF
//   checkpoint keys of the linear replacements).
// - `_ffn_mult_to_intermediate_size`: int(2 · ffn_mult · H / 3), rounded up to a multiple of
//   256 (the same in vLLM, SGLang, TensorRT-LLM, MLX and NVIDIA's aiconfigurator, which quotes
//   HF's modeling_decilm.py); DeciLM rounds ffn_mult to 6 decimals when it loads the config.
// - Tensor names: Llama's (`model.layers.N.self_attn.{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`,
//   gated SwiGLU), `model.embed_tokens`, `model.norm`, `lm_head`.

#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

// DeciLM `_ffn_mult_to_intermediate_size`, in Python's double arithmetic.
std::int64_t ffnWidth(double ffnMult, std::int64_t hidden)
{
    const double mult = std::round(ffnMult * 1e6) / 1e6;
    auto width = static_cast<std::int64_t>(2.0 * mult * double(hidden) / 3.0);
    if (width % 256 != 0) {
        width += 256 - width % 256;
    }
    return width;
}

// Attention-kernel variants of a block that add no tensors; Day0 models their off values only.
void readAttentionVariants(const Section& a, JsonReader& r)
{
    boolMustBe(r, "unshifted_sink", false);
    boolMustBe(r, "use_prefill_window_in_sink_attention", false);
    for (const char* key : { "num_sink_tokens", "sparsify", "window_length" }) {
        if (a.has(key)) {
            a.notModelled(key,
                fmt::format("DeciLM attention '{}' (sink tokens, sparse or windowed attention) is "
                            "not modelled",
                    key));
        }
    }
}

Result<void> readBlockAttention(const Section& block, ModelSpec& spec, LayerSpec& layer)
{
    JsonReader outer = block.reader();
    if (!block.has("attention") || !block.at("attention").is_object()) {
        outer.fail("attention", "must be an object");
        return outer.error();
    }
    const Section a = block.child("attention");
    JsonReader r = a.reader();
    const bool noOp = r.boolOr("no_op", false);
    const bool linear = r.boolOr("replace_with_linear", false);
    readAttentionVariants(a, r);
    if (r.ok() && noOp && linear) {
        r.fail("replace_with_linear", "is true but so is 'no_op'");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (noOp || linear) {
        layer.mixer = noOp ? MixerKind::None : MixerKind::Linear;
        (void)r.intOr("n_heads_in_group", 0); // no attention: the group size describes nothing
        if (!r.ok()) {
            return r.error();
        }
        return success();
    }
    const std::int64_t group = r.requirePositive("n_heads_in_group");
    if (r.ok() && spec.numHeads % group != 0) {
        r.fail("n_heads_in_group",
            fmt::format("({}) must divide num_attention_heads ({})", group, spec.numHeads));
    }
    if (!r.ok()) {
        return r.error();
    }
    layer.mixer = MixerKind::Attention;
    layer.numKvHeads = spec.numHeads / group;
    return success();
}

Result<void> readBlockFfn(const Section& block, ModelSpec& spec, LayerSpec& layer)
{
    JsonReader outer = block.reader();
    if (!block.has("ffn") || !block.at("ffn").is_object()) {
        outer.fail("ffn", "must be an object");
        return outer.error();
    }
    const Section f = block.child("ffn");
    JsonReader r = f.reader();
    const bool noOp = r.boolOr("no_op", false);
    const bool linear = r.boolOr("replace_with_linear", false);
    if (f.has("sparsify")) {
        f.notModelled("sparsify", "DeciLM ffn 'sparsify' is not modelled");
    }
    if (r.ok() && noOp && linear) {
        r.fail("replace_with_linear", "is true but so is 'no_op'");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (noOp || linear) {
        layer.ffn = noOp ? FfnKind::None : FfnKind::Linear;
        (void)r.numberOr("ffn_mult", 0.0); // no MLP: the multiplier describes nothing
        if (!r.ok()) {
            return r.error();
        }
        return success();
    }
    if (!r.has("ffn_mult")) {
        r.fail("ffn_mult", "is missing (the block has an MLP)");
        return r.error();
    }
    const double mult = r.numberOr("ffn_mult", 0.0);
    if (r.ok() && !(mult > 0.0)) {
        r.fail("ffn_mult", fmt::format("must be positive, found {}", mult));
    }
    if (!r.ok()) {
        return r.error();
    }
    layer.ffn = FfnKind::Dense;
    layer.ffnWidth = ffnWidth(mult, spec.hiddenSize);
    return success();
}

} // namespace

Result<void> readNemotronNas(const ConfigInput& input, ModelSpec& spec)
{
    const Section& s = input.text;
    JsonReader r = s.reader();
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.vocabSize = r.requirePositive("vocab_size");
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    spec.hiddenAct = r.stringOr("hidden_act", "silu"); // DeciLM's MLP is gated for any act
    spec.attentionBias = r.boolOr("attention_bias", false);
    spec.attentionOutputBias = spec.attentionBias;
    spec.mlpBias = r.boolOr("mlp_bias", false);
    if (r.has("head_dim")) {
        spec.headDim = r.requirePositive("head_dim");
    } else if (r.ok() && spec.hiddenSize % spec.numHeads != 0) {
        r.fail("num_attention_heads",
            fmt::format("({}) does not divide 'hidden_size' ({}) and 'head_dim' is not given",
                spec.numHeads, spec.hiddenSize));
    } else if (r.ok()) {
        spec.headDim = spec.hiddenSize / spec.numHeads;
    }
    if (!r.ok()) {
        return r.error();
    }
    // Every width and KV-head count is per layer; top-level num_key_value_heads and
    // intermediate_size are null in DeciLM configs (a value there is not read, so it fails the
    // key audit rather than being silently ignored).
    if (!s.has("block_configs") || !s.at("block_configs").is_array()) {
        r.fail("block_configs", "must be a list with one entry per layer");
        return r.error();
    }
    const auto& blocks = s.at("block_configs");
    if (std::int64_t(blocks.size()) != spec.numLayers) {
        r.fail("block_configs",
            fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                blocks.size(), spec.numLayers));
        return r.error();
    }
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const std::string name = fmt::format("block_configs[{}]", i);
        if (!blocks[i].is_object()) {
            r.fail("block_configs", fmt::format("entry {} must be an object", i));
            return r.error();
        }
        const Section block = s.element(blocks[i], name);
        DAY0_TRY(readBlockAttention(block, spec, spec.layers[i]));
        DAY0_TRY(readBlockFfn(block, spec, spec.layers[i]));
    }
    // Model-wide figures for the summaries: the first attention layer's KV heads, the widest MLP.
    spec.numKvHeads = spec.numHeads;
    bool first = true;
    for (const auto& layer : spec.layers) {
        if (layer.mixer == MixerKind::Attention && first) {
            spec.numKvHeads = layer.numKvHeads;
            first = false;
        }
        spec.intermediateSize = std::max(spec.intermediateSize, layer.ffnWidth);
    }
    spec.attention = spec.numKvHeads == spec.numHeads ? AttentionKind::MHA
        : spec.numKvHeads == 1                        ? AttentionKind::MQA
                                                      : AttentionKind::GQA;
    DAY0_TRY(readRope(s, spec));
    return readQuantizationOf(input, spec);
}

void addNemotronNasTextTower(GraphBuilder& b)
{
    addDecoderTower(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            const ModelSpec& s = g.spec();
            const std::int64_t h = s.hiddenSize;
            const Component attn = Component::Attention;
            // A no-op block also drops its norm; a linear replacement keeps it.
            if (layer.mixer == MixerKind::Attention) {
                const std::int64_t q = s.headsOf(layer) * s.headDimOf(layer);
                const std::int64_t kv = s.kvHeadsOf(layer) * s.headDimOf(layer);
                g.norm(p + ".input_layernorm", h);
                g.linear(
                    p + ".self_attn.q_proj", q, h, { R::ColumnParallel, attn, s.attentionBias });
                g.linear(
                    p + ".self_attn.k_proj", kv, h, { R::ColumnParallel, attn, s.attentionBias });
                g.linear(
                    p + ".self_attn.v_proj", kv, h, { R::ColumnParallel, attn, s.attentionBias });
                g.linear(
                    p + ".self_attn.o_proj", h, q, { R::RowParallel, attn, s.attentionOutputBias });
            } else if (layer.mixer == MixerKind::Linear) {
                // No reference engine splits the replacement: every rank keeps it whole.
                g.norm(p + ".input_layernorm", h);
                g.linear(p + ".self_attn.linear_attn", h, h, { R::Replicated, attn });
            }
            if (layer.ffn == FfnKind::Dense) {
                g.norm(p + ".post_attention_layernorm", h);
                addDenseMlp(g, p + ".mlp", s.ffnWidthOf(layer), Component::DenseMlp);
            } else if (layer.ffn == FfnKind::Linear) {
                g.norm(p + ".post_attention_layernorm", h);
                g.linear(p + ".mlp.linear_mlp", h, h, { R::Replicated, Component::DenseMlp });
            }
        });
}

} // namespace day0::model::detail
