// Gemma 4: the checkpoint tensors of the text tower, the vision tower, the audio tower and
// their projectors (Gemma4ForConditionalGeneration; Gemma4ForCausalLM for a text-only config).
//
// Where the names, shapes and dtypes come from (research note gemma4_hunyuan.md (not in the
// repository), A3–A4):
// - the tensor dump of the real google/gemma-4-E2B-it checkpoint (HF snapshot
//   b4a601102c3d45e2b7b50e2057a6d5ec8ed4adcf, 2011 BF16 tensors, via GitHub 1amageek/swift-lm
//   @ 50701220a9ed89d93004207e645d7adf90862871 docs/parameter-dumps/google_gemma-4-E2B-it.md;
//   copied to tests/data/model/listings/gemma-4-E2B-it.tsv and compared exactly);
// - a loader log of the real google/gemma-4-26B-A4B checkpoint with the layer-0 byte sizes
//   (search index id 59480249353; tests/data/model/listings/gemma-4-26B-A4B.layer0.bytes.txt):
//   router.{proj.weight, scale, per_expert_scale}, fused experts.gate_up_proj [E, 2I, H] and
//   experts.down_proj [E, H, I] without ".weight", layer_scalar [1], the seven norms, all BF16;
//   lm_head tied (not stored);
// - transformers modeling_gemma4.py @ 0246b4f3335464614ef1de66531f9131a44ec801: no v_proj on
//   attention_k_eq_v full layers, v_norm / router.norm / embedding_pre_projection_norm without
//   weights, Gemma4ClippableLinear wrapping nn.Linear as `.linear` (plus input/output min/max
//   buffers with use_clipped_linears), std_bias / std_scale with standardize;
// - NVIDIA ModelOpt NVFP4 exports (configs in tests/data/model/configs/frontier-sizes/): the 26B
//   stores its routed experts NVFP4 and split per expert (`experts.E.{gate,up,down}_proj`,
//   third-party manifests at search index ids 57548128492 and 69065276022), everything else
//   BF16; the 31B quantises the dense MLP and keeps attention BF16.
// - The E2B checkpoint still ships k_proj / v_proj / k_norm on its KV-shared layers although HF
//   builds none there (_keys_to_ignore_on_load_unexpected): listed as stored, marked optional.

#include "model/graph_builder.h"

#include <string>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

std::string str(std::int64_t v) { return std::to_string(v); }

LinearOptions options(ParallelRole role, Component component, bool bias = false)
{
    return LinearOptions { role, component, bias };
}

// Gemma4ClippableLinear: `<m>.linear.weight` and, with clipping, four BF16 scalars.
void clippable(GraphBuilder& b, const std::string& m, std::int64_t out, std::int64_t in,
    ParallelRole role, bool clipped)
{
    LinearOptions o { role, Component::Vision };
    o.quantizable = false; // every quantised release keeps the towers in BF16
    b.linear(m + ".linear", out, in, o);
    if (clipped) {
        for (const char* scalar : { "input_min", "input_max", "output_min", "output_max" }) {
            b.tensor(m + "." + scalar, {}, b.spec().dtype, R::Replicated, Component::Vision);
        }
    }
}

void addAttention(GraphBuilder& b, const std::string& p, const LayerSpec& layer, bool kvShared)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t d = s.headDimOf(layer);
    const std::int64_t q = s.headsOf(layer) * d;
    const std::int64_t kv = s.kvHeadsOf(layer) * d;
    const Component c = Component::Attention;
    b.linear(p + ".q_proj", q, h, options(R::ColumnParallel, c, s.attentionBias));
    b.linear(p + ".k_proj", kv, h, options(R::ColumnParallel, c, s.attentionBias));
    b.last().optional = kvShared;
    if (!layer.sharedKv) {
        b.linear(p + ".v_proj", kv, h, options(R::ColumnParallel, c, s.attentionBias));
        b.last().optional = kvShared;
    }
    b.linear(p + ".o_proj", h, q, options(R::RowParallel, c, s.attentionOutputBias));
    b.norm(p + ".q_norm", d);
    b.norm(p + ".k_norm", d);
    b.last().optional = kvShared;
}

void addMlp(GraphBuilder& b, const std::string& p, std::int64_t width)
{
    const std::int64_t h = b.spec().hiddenSize;
    const Component c = Component::DenseMlp;
    b.linear(p + ".gate_proj", width, h, options(R::ColumnParallel, c));
    b.linear(p + ".up_proj", width, h, options(R::ColumnParallel, c));
    b.linear(p + ".down_proj", h, width, options(R::RowParallel, c));
}

// The third-party manifests of the NVFP4 26B show weight, weight_scale and weight_scale_2 on
// each expert projection but never input_scale: expected (input_activations are static), not
// seen, so optional.
void markInputScale(GraphBuilder& b, int quantized)
{
    if (quantized == 1 && b.spec().quantization->scheme == QuantScheme::Nvfp4
        && b.last().name.ends_with(".input_scale")) {
        b.last().optional = true;
    }
}

// Router, routed experts and the MoE branch's three norms (Gemma4TextDecoderLayer with
// enable_moe_block).
void addMoeBlock(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t w = moe.expertIntermediate;
    b.tensor(p + ".router.proj.weight", { e, h }, s.dtype, R::Replicated, Component::Router);
    b.tensor(p + ".router.scale", { h }, s.dtype, R::Replicated, Component::Router);
    b.tensor(p + ".router.per_expert_scale", { e }, s.dtype, R::Replicated, Component::Router);
    const std::string x = p + ".experts";
    if (b.quantizes(x + ".0.gate_proj")) {
        // ModelOpt splits the fused experts into one Linear per expert and projection.
        const int qGate = 1;
        const int qUp = b.quantizes(x + ".0.up_proj") ? 1 : 0;
        const int qDown = b.quantizes(x + ".0.down_proj") ? 1 : 0;
        b.reserve(std::size_t(e) * 12);
        for (std::int64_t i = 0; i < e; ++i) {
            LinearOptions col = options(R::ColumnParallel, Component::RoutedExperts);
            LinearOptions row = options(R::RowParallel, Component::RoutedExperts);
            col.expert = row.expert = static_cast<std::int32_t>(i);
            const std::string m = x + "." + str(i);
            col.quantized = qGate;
            b.linear(m + ".gate_proj", w, h, col);
            markInputScale(b, qGate);
            col.quantized = qUp;
            b.linear(m + ".up_proj", w, h, col);
            markInputScale(b, qUp);
            row.quantized = qDown;
            b.linear(m + ".down_proj", h, w, row);
            markInputScale(b, qDown);
        }
    } else {
        // BF16: gate and up fused along dim 1 (gate the first I rows), no ".weight" suffix.
        b.tensor(x + ".gate_up_proj", { e, 2 * w, h }, s.dtype, R::ColumnParallel,
            Component::RoutedExperts, TensorKind::Weight, -1, e);
        b.tensor(x + ".down_proj", { e, h, w }, s.dtype, R::RowParallel, Component::RoutedExperts,
            TensorKind::Weight, -1, e);
    }
    b.norm(p + ".pre_feedforward_layernorm_2", h);
    b.norm(p + ".post_feedforward_layernorm_1", h);
    b.norm(p + ".post_feedforward_layernorm_2", h);
}

void addDecoderLayer(GraphBuilder& b, const std::string& p, std::int64_t i)
{
    const ModelSpec& s = b.spec();
    const LayerSpec& layer = s.layers[std::size_t(i)];
    const std::int64_t h = s.hiddenSize;
    const bool kvShared = s.kvSharedLayers > 0 && i >= s.numLayers - s.kvSharedLayers;
    b.norm(p + ".input_layernorm", h);
    addAttention(b, p + ".self_attn", layer, kvShared);
    b.norm(p + ".post_attention_layernorm", h);
    b.norm(p + ".pre_feedforward_layernorm", h);
    addMlp(b, p + ".mlp", s.ffnWidthOf(layer));
    b.norm(p + ".post_feedforward_layernorm", h);
    if (layer.moe()) {
        addMoeBlock(b, p);
    }
    if (const std::int64_t ple = s.perLayerInputSize; ple > 0) {
        // The per-layer input branch: gate down to the PLE width, back up, normalised.
        b.linear(p + ".per_layer_input_gate", ple, h, options(R::Replicated, Component::DenseMlp));
        b.linear(p + ".per_layer_projection", h, ple, options(R::Replicated, Component::DenseMlp));
        b.norm(p + ".post_per_layer_input_norm", h);
    }
    // A persistent buffer scaling the layer output: one element, no ".weight".
    b.tensor(p + ".layer_scalar", { 1 }, s.dtype, R::Replicated, Component::Residual);
}

void addVisionTower(GraphBuilder& b, const VisionSpec& v)
{
    const ModelSpec& s = b.spec();
    const std::string& prefix = s.layout.visionPrefix;
    const std::int64_t e = v.hiddenSize;
    const std::int64_t q = v.numHeads * v.headDim;
    const std::int64_t kv = v.numKvHeads * v.headDim;
    const bool clip = v.clippedLinears;

    const std::string patch = prefix + ".patch_embedder";
    b.begin(patch, BlockKind::VisionPatchEmbed);
    LinearOptions proj { R::Replicated, Component::Vision };
    proj.quantizable = false;
    b.linear(patch + ".input_proj", e, v.inChannels * v.patchSize * v.patchSize, proj);
    b.tensor(patch + ".position_embedding_table", { 2, v.positionTableSize, e }, s.dtype,
        R::Replicated, Component::Vision);

    for (std::int64_t j = 0; j < v.depth; ++j) {
        const std::string p = prefix + ".encoder.layers." + str(j);
        b.begin(p, BlockKind::VisionBlock, static_cast<std::int32_t>(j));
        for (const char* norm : { ".input_layernorm", ".post_attention_layernorm",
                 ".pre_feedforward_layernorm", ".post_feedforward_layernorm" }) {
            b.norm(p + norm, e);
        }
        const std::string a = p + ".self_attn";
        clippable(b, a + ".q_proj", q, e, R::ColumnParallel, clip);
        clippable(b, a + ".k_proj", kv, e, R::ColumnParallel, clip);
        clippable(b, a + ".v_proj", kv, e, R::ColumnParallel, clip);
        clippable(b, a + ".o_proj", e, q, R::RowParallel, clip);
        b.norm(a + ".q_norm", v.headDim);
        b.norm(a + ".k_norm", v.headDim);
        const std::string m = p + ".mlp";
        clippable(b, m + ".gate_proj", v.intermediateSize, e, R::ColumnParallel, clip);
        clippable(b, m + ".up_proj", v.intermediateSize, e, R::ColumnParallel, clip);
        clippable(b, m + ".down_proj", e, v.intermediateSize, R::RowParallel, clip);
    }
    if (v.standardize) {
        // Per-channel standardisation of the pooled output (persistent buffers of the tower).
        b.begin(prefix, BlockKind::VisionMerger);
        b.tensor(prefix + ".std_bias", { e }, s.dtype, R::Replicated, Component::Vision);
        b.tensor(prefix + ".std_scale", { e }, s.dtype, R::Replicated, Component::Vision);
    }
    const std::string projector = s.layout.projectorPrefix;
    b.begin(projector, BlockKind::VisionMerger);
    b.linear(projector + ".embedding_projection", v.outHiddenSize, e, proj);
}

void addAudioTower(GraphBuilder& b, const AudioSpec& a)
{
    const ModelSpec& s = b.spec();
    const std::string& prefix = s.layout.audioPrefix;
    const std::int64_t h = a.hiddenSize;
    const std::int64_t c0 = a.subsamplingChannels[0];
    const std::int64_t c1 = a.subsamplingChannels[1];
    const bool clip = a.clippedLinears;
    const Component c = Component::Vision;
    LinearOptions plain { R::Replicated, c };
    plain.quantizable = false;

    // Two 3×3 convolutions (each halving time and frequency) with LayerNorms without bias,
    // then a projection of (channels[0] / 4) · channels[1] features.
    const std::string sub = prefix + ".subsample_conv_projection";
    b.begin(sub, BlockKind::VisionPatchEmbed);
    b.tensor(sub + ".layer0.conv.weight", { c0, 1, 3, 3 }, s.dtype, R::Replicated, c);
    b.norm(sub + ".layer0.norm", c0);
    b.tensor(sub + ".layer1.conv.weight", { c1, c0, 3, 3 }, s.dtype, R::Replicated, c);
    b.norm(sub + ".layer1.norm", c1);
    b.linear(sub + ".input_proj_linear", h, (c0 / 4) * c1, plain);

    for (std::int64_t j = 0; j < a.depth; ++j) {
        const std::string p = prefix + ".layers." + str(j);
        b.begin(p, BlockKind::VisionBlock, static_cast<std::int32_t>(j));
        for (const char* ff : { ".feed_forward1", ".feed_forward2" }) {
            b.norm(p + ff + ".pre_layer_norm", h);
            clippable(b, p + ff + ".ffw_layer_1", 4 * h, h, R::ColumnParallel, clip);
            clippable(b, p + ff + ".ffw_layer_2", h, 4 * h, R::RowParallel, clip);
            b.norm(p + ff + ".post_layer_norm", h);
        }
        b.norm(p + ".norm_pre_attn", h);
        const std::string at = p + ".self_attn";
        clippable(b, at + ".q_proj", h, h, R::ColumnParallel, clip);
        clippable(b, at + ".k_proj", h, h, R::ColumnParallel, clip);
        clippable(b, at + ".v_proj", h, h, R::ColumnParallel, clip);
        clippable(b, at + ".post", h, h, R::RowParallel, clip);
        b.linear(at + ".relative_k_proj", h, h, plain);
        b.tensor(at + ".per_dim_scale", { h / a.numHeads }, s.dtype, R::Replicated, c);
        b.norm(p + ".norm_post_attn", h);
        const std::string conv = p + ".lconv1d";
        b.norm(conv + ".pre_layer_norm", h);
        clippable(b, conv + ".linear_start", 2 * h, h, R::ColumnParallel, clip);
        b.tensor(
            conv + ".depthwise_conv1d.weight", { h, 1, a.convKernel }, s.dtype, R::Replicated, c);
        b.norm(conv + ".conv_norm", h);
        clippable(b, conv + ".linear_end", h, h, R::RowParallel, clip);
        b.norm(p + ".norm_out", h);
    }
    b.begin(prefix + ".output_proj", BlockKind::VisionMerger);
    LinearOptions out = plain;
    out.bias = true;
    b.linear(prefix + ".output_proj", a.outputSize, h, out);

    const std::string projector = s.layout.audioProjectorPrefix;
    b.begin(projector, BlockKind::VisionMerger);
    b.linear(projector + ".embedding_projection", s.hiddenSize, a.outputSize, plain);
}

} // namespace

void addGemma4Towers(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    if (s.vision) {
        addVisionTower(b, *s.vision);
    }
    if (s.audio) {
        addAudioTower(b, *s.audio);
    }
}

void addGemma4TextTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    const std::string& prefix = s.layout.textPrefix;
    const std::int64_t h = s.hiddenSize;

    addEmbedding(b);
    if (const std::int64_t ple = s.perLayerInputSize; ple > 0) {
        // Per-layer input embeddings: a table of L·P per token, and a projection of the token
        // embedding to the same width, normalised per layer; computed once at the input.
        const std::int64_t width = s.numLayers * ple;
        const std::string table = prefix + ".embed_tokens_per_layer";
        b.begin(table, BlockKind::Embedding);
        b.tensor(table + ".weight", { s.perLayerInputVocab, width }, s.dtype, R::VocabParallel,
            Component::Embedding);
        const std::string projection = prefix + ".per_layer_model_projection";
        b.begin(projection, BlockKind::Embedding);
        b.tensor(
            projection + ".weight", { width, h }, s.dtype, R::Replicated, Component::Embedding);
        const std::string norm = prefix + ".per_layer_projection_norm";
        b.begin(norm, BlockKind::Embedding);
        b.tensor(norm + ".weight", { ple }, s.dtype, R::Replicated, Component::Embedding);
    }

    addDecoderLayers(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec&, std::int64_t i) {
            addDecoderLayer(g, p, i);
        });
    addFinalNorm(b);
    addLmHead(b);
}

} // namespace day0::model::detail
