// The text tower of Qwen3-Next, Qwen3.5 and Qwen3.6: Gated DeltaNet and gated-attention layers,
// MoE with a gated shared expert or dense MLPs, and the top-level MTP block. The reader and the
// layout are in family_qwen_next.cpp.
//
// Where the names, shapes and dtypes come from (research/qwen_next_35.md §4–5):
// - Qwen3-Next (transformers modular_qwen3_next.py @ 043bb8dd, Qwen3NextGatedDeltaNet):
//   linear_attn.in_proj_qkvz [2·key_dim + 2·value_dim, H], in_proj_ba [2·nv, H], conv1d
//   [conv_dim, 1, K] without bias, dt_bias [nv] and A_log [nv] without ".weight", norm [dv],
//   out_proj [H, value_dim]; experts one module per expert (conversion_mapping.py @ 000c33fd:
//   qwen3_next = qwen2_moe); shared_expert + shared_expert_gate [1, H].
// - Qwen3.5 (modular_qwen3_5.py @ 009e78d6): in_proj_qkv [conv_dim, H], in_proj_z
//   [value_dim, H], in_proj_b / in_proj_a [nv, H]; A_log and linear_attn.norm stored in F32
//   (real Qwen3.5-27B header: A_log F32 [48]; its index total_size needs the norms in F32 too;
//   the 397B audit counts 90 F32 tensors = 45 + 45), in BF16 by Qwen3.6 (vLLM #51836, #51385):
//   altDtype lets both verify; dt_bias BF16 (27B shard offsets).
// - Qwen3.5-MoE BF16 main layers: experts.gate_up_proj [E, 2·Ie, H] (gate rows first) and
//   experts.down_proj [E, H, Ie], no ".weight" (397B audit: 1038 text tensors; slime #1799,
//   sglang-jax #1251). MTP experts of Qwen3.5 one per expert (397B audit: 1553 MTP tensors;
//   mbridge #145). Qwen3.6 fuses its MTP experts too; config.json cannot tell, and Day0 lists
//   the Qwen3.5 layout.
// - Attention (Qwen3NextAttention): q_proj [2·nh·hd, H] (query and sigmoid output gate per
//   head), k_proj/v_proj [nkv·hd, H], o_proj [H, nh·hd], q_norm/k_norm [hd].
// - MTP (vLLM qwen3_5_mtp.py @ 01d99805, qwen3_next_mtp.py): mtp.pre_fc_norm_embedding,
//   mtp.pre_fc_norm_hidden, mtp.fc [H, 2H], mtp.layers.{j} (full attention + the main FFN kind),
//   mtp.norm; no embedding or head of its own. vLLM: "mtp.fc is stored as BF16 in NVFP4
//   checkpoints but is missing from hf_quant_config.json exclude_modules": ModelOpt leaves all
//   of mtp.* unquantised.
// - NVFP4 (nvidia/Qwen3.5-397B-A17B-NVFP4, 122B): only the routed experts are quantised, per
//   expert; the exclude list covers attention, GDN, shared experts, lm_head, vision, MTP; the
//   router is a plain parameter in transformers 5 and stays BF16.

#include "model/graph_builder.h"

#include <string>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

std::string str(std::int64_t v) { return std::to_string(v); }

// What a module of this block may be: ModelOpt never quantises the MTP block.
struct Scope {
    bool mtp = false;
    bool quantizable = true;
};

Scope scopeOf(const ModelSpec& s, bool mtp)
{
    const bool modelOpt = s.quantization && s.quantization->method == "modelopt";
    return { mtp, !(mtp && modelOpt) };
}

LinearOptions options(ParallelRole role, Component component, const Scope& scope, bool bias = false)
{
    LinearOptions o { role, component, bias };
    o.quantizable = scope.quantizable;
    return o;
}

void addDenseMlp(GraphBuilder& b, const std::string& p, std::int64_t width, Component component,
    const Scope& scope)
{
    const std::int64_t h = b.spec().hiddenSize;
    b.linear(p + ".gate_proj", width, h, options(R::ColumnParallel, component, scope));
    b.linear(p + ".up_proj", width, h, options(R::ColumnParallel, component, scope));
    b.linear(p + ".down_proj", h, width, options(R::RowParallel, component, scope));
}

void addGatedAttention(GraphBuilder& b, const std::string& p, const Scope& scope)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t q = s.numHeads * s.headDim;
    const std::int64_t kv = s.numKvHeads * s.headDim;
    const Component c = Component::Attention;
    // Each head's query rows are followed by its gate rows.
    const std::int64_t qRows = s.attentionOutputGate ? 2 * q : q;
    b.linear(p + ".q_proj", qRows, h, options(R::ColumnParallel, c, scope, s.attentionBias));
    b.linear(p + ".k_proj", kv, h, options(R::ColumnParallel, c, scope, s.attentionBias));
    b.linear(p + ".v_proj", kv, h, options(R::ColumnParallel, c, scope, s.attentionBias));
    b.linear(p + ".o_proj", h, q, options(R::RowParallel, c, scope, s.attentionOutputBias));
    b.norm(p + ".q_norm", s.headDim);
    b.norm(p + ".k_norm", s.headDim);
}

void addGatedDeltaNet(GraphBuilder& b, const std::string& p, const Scope& scope)
{
    const ModelSpec& s = b.spec();
    const LinearAttentionSpec& la = *s.linearAttention;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t keyDim = la.keyHeads * la.keyHeadDim;
    const std::int64_t valueDim = la.valueHeads * la.valueHeadDim;
    const std::int64_t convDim = 2 * keyDim + valueDim;
    const Component c = Component::Attention;
    const LinearOptions col = options(R::ColumnParallel, c, scope);
    if (s.family == Family::Qwen3Next) {
        // Rows grouped per key head: q, k, v, z of the group; then b and a per group.
        b.linear(p + ".in_proj_qkvz", 2 * keyDim + 2 * valueDim, h, col);
        b.linear(p + ".in_proj_ba", 2 * la.valueHeads, h, col);
    } else {
        b.linear(p + ".in_proj_qkv", convDim, h, col);
        b.linear(p + ".in_proj_z", valueDim, h, col);
        b.linear(p + ".in_proj_b", la.valueHeads, h, col);
        b.linear(p + ".in_proj_a", la.valueHeads, h, col);
    }
    // Depthwise causal conv over the q|k|v channels, no bias.
    b.tensor(p + ".conv1d.weight", { convDim, 1, la.convKernel }, s.dtype, R::ColumnParallel, c);
    b.tensor(p + ".dt_bias", { la.valueHeads }, s.dtype, R::ColumnParallel, c);
    // Qwen3.5 keeps A_log and the gated norm in F32, Qwen3.6 in BF16; Qwen3-Next's dtype of
    // the two is not established (BF16 as torch_dtype says, F32 accepted).
    const bool f32 = s.family != Family::Qwen3Next;
    const DType stored = f32 ? DType::F32 : s.dtype;
    const DType other = f32 ? s.dtype : DType::F32;
    b.tensor(p + ".A_log", { la.valueHeads }, stored, R::ColumnParallel, c);
    b.last().altDtype = other;
    // RMSNormGated over one value head, shared by all heads.
    b.tensor(p + ".norm.weight", { la.valueHeadDim }, stored, R::Replicated, Component::Norm);
    b.last().altDtype = other;
    b.linear(p + ".out_proj", h, valueDim, options(R::RowParallel, c, scope));
}

// Routed experts one module per expert; the quantisation rule is decided once per projection.
void addPerExpertMlps(GraphBuilder& b, const std::string& p, const Scope& scope)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t w = moe.expertIntermediate;
    const std::string first = p + ".0.";
    const auto decide = [&](const char* projection) {
        return scope.quantizable && b.quantizes(first + projection) ? 1 : 0;
    };
    const int qGate = decide("gate_proj");
    const int qUp = decide("up_proj");
    const int qDown = decide("down_proj");
    b.reserve(std::size_t(moe.numExperts) * 3 * (s.quantization ? 4 : 1));
    std::string module;
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        LinearOptions col = options(R::ColumnParallel, Component::RoutedExperts, scope);
        col.expert = static_cast<std::int32_t>(e);
        LinearOptions row = options(R::RowParallel, Component::RoutedExperts, scope);
        row.expert = col.expert;
        module.assign(p).append(".").append(str(e)).append(".");
        const std::size_t stem = module.size();
        col.quantized = qGate;
        b.linear(module.append("gate_proj"), w, h, col);
        module.resize(stem);
        col.quantized = qUp;
        b.linear(module.append("up_proj"), w, h, col);
        module.resize(stem);
        row.quantized = qDown;
        b.linear(module.append("down_proj"), h, w, row);
    }
}

void addMoe(GraphBuilder& b, const std::string& p, const Scope& scope)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t e = moe.numExperts;
    // Qwen3_5MoeTopKRouter is a plain parameter: never quantised.
    b.tensor(p + ".gate.weight", { e, h }, s.dtype, R::Replicated, Component::Router);
    if (moe.packedExperts && !scope.mtp) {
        const std::int64_t w = moe.expertIntermediate;
        b.tensor(p + ".experts.gate_up_proj", { e, 2 * w, h }, s.dtype, R::ColumnParallel,
            Component::RoutedExperts, TensorKind::Weight, -1, e);
        b.tensor(p + ".experts.down_proj", { e, h, w }, s.dtype, R::RowParallel,
            Component::RoutedExperts, TensorKind::Weight, -1, e);
    } else {
        addPerExpertMlps(b, p + ".experts", scope);
    }
    addDenseMlp(b, p + ".shared_expert", moe.sharedIntermediate, Component::SharedExperts, scope);
    // The shared expert's output is scaled by sigmoid(shared_expert_gate(x)).
    b.linear(
        p + ".shared_expert_gate", 1, h, options(R::Replicated, Component::SharedExperts, scope));
}

void addLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer, const Scope& scope)
{
    const ModelSpec& s = b.spec();
    b.norm(p + ".input_layernorm", s.hiddenSize);
    if (layer.mixer == MixerKind::GatedDeltaNet) {
        addGatedDeltaNet(b, p + ".linear_attn", scope);
    } else {
        addGatedAttention(b, p + ".self_attn", scope);
    }
    b.norm(p + ".post_attention_layernorm", s.hiddenSize);
    if (layer.moe()) {
        addMoe(b, p + ".mlp", scope);
    } else {
        addDenseMlp(b, p + ".mlp", s.ffnWidthOf(layer), Component::DenseMlp, scope);
    }
}

// The MTP block: its first block ("mtp") also holds the fusing projection and the norms every
// step shares; further layers are blocks of their own.
void addMtp(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const Scope scope = scopeOf(s, true);
    for (std::int64_t j = 0; j < s.numMtpLayers; ++j) {
        const LayerSpec& layer = s.mtpLayers[std::size_t(j)];
        const auto index = static_cast<std::int32_t>(s.numLayers + j);
        b.begin(j == 0 ? "mtp" : "mtp.layers." + str(j), BlockKind::Mtp, index, layer.moe());
        if (j == 0) {
            b.norm("mtp.pre_fc_norm_embedding", h);
            b.norm("mtp.pre_fc_norm_hidden", h);
            // Input: [norm(embedding), norm(hidden)] concatenated.
            b.linear("mtp.fc", h, 2 * h, options(R::Replicated, Component::Mtp, scope));
        }
        addLayer(b, "mtp.layers." + str(j), layer, scope);
        if (j == 0) {
            b.norm("mtp.norm", h);
        }
    }
}

} // namespace

void addQwenNextTextTower(GraphBuilder& b)
{
    const Scope scope = scopeOf(b.spec(), false);
    addDecoderTower(
        b, [&scope](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            addLayer(g, p, layer, scope);
        });
    addMtp(b);
}

} // namespace day0::model::detail
