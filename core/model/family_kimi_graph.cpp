// The Kimi-Linear / Kimi-K3 text tower (KimiLinearForCausalLM): KDA and MLA layers, the dense
// first layer, block_sparse_moe with Kimi-K3's latent experts, and Block Attention Residuals.
//
// Names, shapes and dtypes (research note kimi_ct.md (not in the repository) §3, §5.3):
// - Kimi-K3: the real shard model-00002-of-000096 of HF moonshotai/Kimi-K3 @
//   9f62e4e9fffbd0a83ddd60e1c209d828994b3569, layer 1 (a k3x_converter test, search index id
//   57454096190; tests/data/model/listings/kimi-k3-shard00002-layer1.tsv): every KDA, AttnRes
//   and MoE tensor, F32 q/k/v_conv1d [P, 1, K], A_log [head_dim], dt_bias [P], o_norm [head_dim]
//   and e_score_correction_bias; BF16 latent projections; MXFP4 experts w1/w2/w3; the shard's
//   size is byte-exact with these. MLA layers: vLLM-TPU K3 MultiHeadLatentAttention (search
//   index id 70197412270) and the DeepSeek MLA names; the model-level output_attn_res_* from
//   modeling_kimi_linear.py l.1103-1108 (search index id 59322289100).
// - Kimi-Linear: vLLM vllm/model_executor/layers/kda.py @ 01a7e5d9 and a Kimi-Linear header
//   test (search index id 60705895790): the same KDA names with g_a_proj / g_b_proj, A_log
//   [1, 1, heads, 1] (loader-inferred); the dtypes of A_log, dt_bias, the convolutions and
//   o_norm on disk are not verified (vLLM casts them to F32), so BF16 is accepted beside F32.

#include "model/graph_builder.h"

#include <string>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

// Block Attention Residuals of `<p>_res_{norm,proj}`: an RMSNorm and a Linear hidden → 1 that
// score the stack of block outputs (Kimi-K3; BF16 in the real shard, never quantised).
void addAttnRes(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    b.tensor(p + "_res_norm.weight", { h }, s.dtype, R::Replicated, Component::Residual);
    b.tensor(p + "_res_proj.weight", { 1, h }, s.dtype, R::Replicated, Component::Residual);
}

// A tensor KDA keeps in F32; Kimi-Linear's may be stored at the model dtype (not verified).
void kdaF32(GraphBuilder& b, std::string name, std::vector<std::int64_t> shape, ParallelRole role,
    Component component, TensorKind kind = TensorKind::Weight)
{
    const ModelSpec& s = b.spec();
    b.tensor(std::move(name), std::move(shape), DType::F32, role, component, kind);
    if (!s.linearAttention->paddedALog) {
        b.last().altDtype = s.dtype;
    }
}

// Kimi Delta Attention (modeling_kimi_linear.py KimiDeltaAttention), in the shard's order.
void addKdaAttention(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const LinearAttentionSpec& la = *s.linearAttention;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t heads = la.valueHeads;
    const std::int64_t d = la.valueHeadDim;
    const std::int64_t width = heads * d;
    const Component c = Component::Attention;
    for (const char* x : { "q", "k", "v" }) {
        b.linear(p + "." + x + "_proj", width, h, { R::ColumnParallel, c });
        // Depthwise causal Conv1d without bias, one filter per channel.
        kdaF32(
            b, p + "." + x + "_conv1d.weight", { width, 1, la.convKernel }, R::ColumnParallel, c);
    }
    // Forget gate: low-rank hidden → head_dim → width.
    b.linear(p + ".f_a_proj", d, h, { R::Replicated, c });
    b.linear(p + ".f_b_proj", width, d, { R::ColumnParallel, c });
    if (la.paddedALog) {
        kdaF32(b, p + ".A_log", { d }, R::Replicated, c); // heads' values, zero-padded
    } else {
        kdaF32(b, p + ".A_log", { 1, 1, heads, 1 }, R::Replicated, c);
    }
    kdaF32(b, p + ".dt_bias", { width }, R::ColumnParallel, c, TensorKind::Bias);
    b.linear(p + ".b_proj", heads, h, { R::ColumnParallel, c }); // β per head
    if (la.fullRankGate) {
        b.linear(p + ".g_proj", width, h, { R::ColumnParallel, c });
    } else {
        b.linear(p + ".g_a_proj", d, h, { R::Replicated, c });
        b.linear(p + ".g_b_proj", width, d, { R::ColumnParallel, c });
    }
    // The gated RMSNorm o_norm(o, g) over each head, one weight shared by the heads.
    kdaF32(b, p + ".o_norm.weight", { d }, R::Replicated, Component::Norm);
    b.linear(p + ".o_proj", h, width, { R::RowParallel, c });
}

// block_sparse_moe (KimiSparseMoeBlock): router on the full hidden state; with a latent, the
// routed experts run between routed_expert_down_proj and routed_expert_up_proj (and the latent
// norm); the shared experts run at the hidden size.
void addKimiMoe(GraphBuilder& b, const std::string& p)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    addRouter(b, p + ".gate");
    if (moe.latentSize > 0) {
        const Component c = Component::RoutedExperts; // the routed path, used by every token
        b.linear(p + ".routed_expert_down_proj", moe.latentSize, h, { R::Replicated, c });
        if (moe.latentNorm) {
            b.norm(p + ".routed_expert_norm", moe.latentSize);
        }
        b.linear(p + ".routed_expert_up_proj", h, moe.latentSize, { R::Replicated, c });
    }
    if (moe.sharedIntermediate > 0) {
        addDenseMlp(b, p + ".shared_experts", moe.sharedIntermediate, Component::SharedExperts);
    }
    // w1 = gate, w3 = up, w2 = down (the shard stores w1, w2, w3 per expert).
    addPerExpertMlps(b, p + ".experts", "w1", "w3", "w2");
}

void addKimiLayer(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const bool attnRes = s.attnResBlockSize > 0;
    if (attnRes) {
        addAttnRes(b, p + ".self_attention");
    }
    b.norm(p + ".input_layernorm", s.hiddenSize);
    if (layer.mixer == MixerKind::KimiDelta) {
        addKdaAttention(b, p + ".self_attn");
    } else {
        addMlaAttention(b, p + ".self_attn", layer);
    }
    if (attnRes) {
        addAttnRes(b, p + ".mlp");
    }
    b.norm(p + ".post_attention_layernorm", s.hiddenSize);
    if (layer.moe()) {
        addKimiMoe(b, p + ".block_sparse_moe");
    } else {
        addDenseMlp(b, p + ".mlp", s.ffnWidthOf(layer), Component::DenseMlp);
    }
}

} // namespace

void addKimiLinearTextTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    addEmbedding(b);
    addDecoderLayers(
        b, [](GraphBuilder& g, const std::string& p, const LayerSpec& layer, std::int64_t) {
            addKimiLayer(g, p, layer);
        });
    addFinalNorm(b);
    if (s.attnResBlockSize > 0) {
        // The last AttnRes mix feeds the final norm inside KimiLinearModel.forward; it has no
        // module of its own, so its two tensors travel with the final norm's block.
        addAttnRes(b, s.layout.textPrefix + ".output_attn");
    }
    addLmHead(b);
}

} // namespace day0::model::detail
