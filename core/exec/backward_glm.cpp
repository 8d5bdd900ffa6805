// What the gradient pass (gradient_pass.h) adds for GLM-4.5, GLM-5 and MiniMax-M2. GLM-4.5's
// partial rotary, biased q/k/v, per-head q/k norms, sigmoid router with its correction bias,
// shared experts and leading dense layers are the standard layer's (backward_layer.cpp,
// backward_ffn.cpp); here are:
// - MiniMax-M2's q/k RMSNorm across all heads (qk_norm_type "per_layer"): one norm over each
//   token's whole q projection and one over its whole k projection, before RoPE;
// - GLM-5's DSA indexer: the keys each query's MLA attends to (exec::indexerScores and
//   exec::selectTopKeys on the indexer's q, k and head weights, as Forward::dsaIndexer). The
//   selection is an integer top-k: in autograd (HF's GlmMoeDsaIndexer, the twin
//   plugins/torch/day0_torch_dsa.py) the mask built from it carries no gradient back, so the
//   indexer's weights get zero gradients, and the attention's backward over the kept keys is
//   that of its probabilities (zero where dropped). Emulated bf16/fp16 rounds the indexer as
//   the engine's emulated forward does (its projections, k_norm's output, its RoPE), so that
//   both select the same keys.
#include "exec/backward_ops.h"
#include "exec/dsa_indexer.h"
#include "exec/emulated_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::exec::detail {

template <typename T> void GradientPass<T>::acrossHeadsNormForward(int l, LayerActivations<T>& a)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t qDim = m_spec.numHeads * m_spec.headDim;
    const std::int64_t kDim = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]) * m_spec.headDim;
    const std::string p = attn(l);
    a.qPre = a.q;
    a.kPre = a.k;
    norm(a.qPre.data(), m_p.value(p + ".q_norm.weight"), a.q.data(), n, qDim);
    norm(a.kPre.data(), m_p.value(p + ".k_norm.weight"), a.k.data(), n, kDim);
}

template <typename T>
void GradientPass<T>::acrossHeadsNormBackward(
    int l, const LayerActivations<T>& a, std::vector<T>& dq, std::vector<T>& dk)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t qDim = m_spec.numHeads * m_spec.headDim;
    const std::int64_t kDim = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]) * m_spec.headDim;
    const std::string p = attn(l);
    std::vector<T> dqPre(dq.size(), T(0));
    std::vector<T> dkPre(dk.size(), T(0));
    rmsNormBackward<T>(a.qPre.data(), m_p.value(p + ".q_norm.weight"), dq.data(), dqPre.data(),
        m_p.grad(p + ".q_norm.weight"), n, qDim, m_spec.normEps);
    rmsNormBackward<T>(a.kPre.data(), m_p.value(p + ".k_norm.weight"), dk.data(), dkPre.data(),
        m_p.grad(p + ".k_norm.weight"), n, kDim, m_spec.normEps);
    dq = std::move(dqPre);
    dk = std::move(dkPre);
    round(dq);
    round(dk);
}

template <typename T> void GradientPass<T>::dsaSelect(int l, LayerActivations<T>& a)
{
    const auto& m = m_spec.mla;
    a.selection.clear();
    if (m.indexerHeads <= 0) {
        return;
    }
    if (m_spec.layers[std::size_t(l)].mixer != model::MixerKind::SparseMla) {
        // GLM-5.2's "shared" layers reuse the previous layer's selection (none before the first).
        if (l > 0) {
            a.selection = m_layers[std::size_t(l - 1)].selection;
        }
        return;
    }
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = m.indexerHeads;
    const std::int64_t d = m.indexerHeadDim;
    const std::string ix = attn(l) + ".indexer";
    // q from the normed query latent, one key per token from the layer's input, both rotated on
    // their first qk_rope_head_dim lanes (GLM-5: adjacent pairs; DeepSeek-V3.2: halves).
    std::vector<T> q(std::size_t(n * heads * d));
    project(a.qaNormed.data(), m_p.value(ix + ".wq_b.weight"), nullptr, q.data(), n, m.qLoraRank,
        heads * d);
    std::vector<T> k(std::size_t(n * d));
    project(a.xn1.data(), m_p.value(ix + ".wk.weight"), nullptr, k.data(), n, h, d);
    layerNorm<T>(k.data(), m_p.value(ix + ".k_norm.weight"), m_p.value(ix + ".k_norm.bias"),
        k.data(), n, d, 1e-6);
    round(k); // the engine's layerNormOp rounds its output when emulated
    Rope rope = m_rope;
    rope.layout = m.indexerRopeInterleave ? RopeLayout::Interleaved : RopeLayout::RotateHalf;
    if constexpr (std::is_same_v<T, float>) {
        emulatedRope(q.data(), n, heads, d, m_positions, rope, {}, m_mode);
        emulatedRope(k.data(), n, 1, d, m_positions, rope, {}, m_mode);
    } else {
        applyRope<T>(q.data(), n, heads, d, m_positions, rope);
        applyRope<T>(k.data(), n, 1, d, m_positions, rope);
    }
    std::vector<T> w(std::size_t(n * heads));
    project(a.xn1.data(), m_p.value(ix + ".weights_proj.weight"), nullptr, w.data(), n, h, heads);
    const T scale = T(1.0 / std::sqrt(double(heads)) / std::sqrt(double(d)));
    for (T& v : w) {
        v *= scale;
    }
    IndexerShape shape;
    shape.queries = n;
    shape.keys = n;
    shape.heads = heads;
    shape.headDim = d;
    std::vector<T> scores(std::size_t(n * n));
    indexerScores<T>(q.data(), k.data(), w.data(), scores.data(), shape);
    a.selection = selectTopKeys<T>(scores.data(), n, n, m.indexerTopK);
}

#define DAY0_GRADIENT_GLM(T)                                                                       \
    template void GradientPass<T>::acrossHeadsNormForward(int, LayerActivations<T>&);              \
    template void GradientPass<T>::acrossHeadsNormBackward(                                        \
        int, const LayerActivations<T>&, std::vector<T>&, std::vector<T>&);                        \
    template void GradientPass<T>::dsaSelect(int, LayerActivations<T>&);

DAY0_GRADIENT_GLM(float)
DAY0_GRADIENT_GLM(double)

#undef DAY0_GRADIENT_GLM

} // namespace day0::exec::detail
