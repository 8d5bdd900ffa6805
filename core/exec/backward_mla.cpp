// DeepSeek multi-head latent attention in the gradient pass (gradient_pass.h): the forward of
// Forward::mlaBlock for a whole sequence from position 0 (low-rank q through q_a_proj,
// q_a_layernorm and q_b_proj, the compressed kv through kv_a_proj_with_mqa, kv_a_layernorm and
// kv_b_proj, interleaved RoPE on the decoupled rope lanes of each query head and the one shared
// rope key) and its backward. Emulated bf16/fp16 (GradientOptions::emulated) rounds as the
// dense attention does: the forward at the engine's emulated MLA boundaries (each projection's
// output, both latent norms, RoPE, scores, probabilities and context), the backward at every
// activation gradient an op passes on (o_proj's, q_b_proj's and kv_b_proj's input gradients
// after their tensor-parallel sums, attention's q/k/v gradients, the shared rope key's gradient
// summed over all heads, RoPE's and the latent norms' input gradients); the fp64/fp32 passes
// round nothing.
#include "exec/backward_ops.h"
#include "exec/gradient_pass.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::exec::detail {

namespace {

/// The widths both passes use: hidden, query heads, each head's no-RoPE and RoPE lanes and their
/// sum, the value head width and the compressed kv rank.
struct MlaDims {
    std::int64_t h, heads, nope, rd, qk, vd, kvr;
};

MlaDims mlaDims(const model::ModelSpec& spec)
{
    const auto& m = spec.mla;
    return { spec.hiddenSize, spec.numHeads, m.qkNopeHeadDim, m.qkRopeHeadDim,
        m.qkNopeHeadDim + m.qkRopeHeadDim, m.vHeadDim, m.kvLoraRank };
}

} // namespace

template <typename T> void GradientPass<T>::mlaForward(int l, LayerActivations<T>& a, T* out)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::string p = attn(l);
    const auto& m = m_spec.mla;
    const auto [h, heads, nope, rd, qk, vd, kvr] = mlaDims(m_spec);
    a.q.resize(std::size_t(n * heads * qk));
    if (m.qLoraRank > 0) {
        a.qa.resize(std::size_t(n * m.qLoraRank));
        a.qaNormed.resize(a.qa.size());
        project(a.xn1.data(), m_p.value(p + ".q_a_proj.weight"), nullptr, a.qa.data(), n, h,
            m.qLoraRank);
        norm(a.qa.data(), m_p.value(p + ".q_a_layernorm.weight"), a.qaNormed.data(), n, m.qLoraRank,
            m.latentNormEps);
        project(a.qaNormed.data(), m_p.value(p + ".q_b_proj.weight"), nullptr, a.q.data(), n,
            m.qLoraRank, heads * qk);
    } else {
        project(
            a.xn1.data(), m_p.value(p + ".q_proj.weight"), nullptr, a.q.data(), n, h, heads * qk);
    }
    const std::int64_t ckvWidth = kvr + rd;
    a.ckv.resize(std::size_t(n * ckvWidth));
    project(a.xn1.data(), m_p.value(p + ".kv_a_proj_with_mqa.weight"), nullptr, a.ckv.data(), n, h,
        ckvWidth);
    std::vector<T> latent(std::size_t(n * kvr));
    std::vector<T> kPe(std::size_t(n * rd));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.ckv.begin() + t * ckvWidth, kvr, latent.begin() + t * kvr);
        std::copy_n(a.ckv.begin() + t * ckvWidth + kvr, rd, kPe.begin() + t * rd);
    }
    a.latentNormed.resize(latent.size());
    norm(latent.data(), m_p.value(p + ".kv_a_layernorm.weight"), a.latentNormed.data(), n, kvr,
        m.latentNormEps);
    a.kv.resize(std::size_t(n * heads * (nope + vd)));
    project(a.latentNormed.data(), m_p.value(p + ".kv_b_proj.weight"), nullptr, a.kv.data(), n, kvr,
        heads * (nope + vd));
    std::vector<T> qPe(std::size_t(n * heads * rd));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(a.q.begin() + i * qk + nope, rd, qPe.begin() + i * rd);
    }
    if (!m.noRope) { // Kimi-Linear's mla_use_nope: the rope lanes are not rotated
        rotate(qPe.data(), heads, rd);
        rotate(kPe.data(), 1, rd);
    }
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(qPe.begin() + i * rd, rd, a.q.begin() + i * qk + nope);
    }
    // Keys [heads, nope | shared rope key] and values, as the engine's cache holds them.
    a.k.resize(std::size_t(n * heads * qk));
    a.v.resize(std::size_t(n * heads * vd));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            const T* src = a.kv.data() + (t * heads + hd) * (nope + vd);
            T* key = a.k.data() + (t * heads + hd) * qk;
            std::copy_n(src, nope, key);
            std::copy_n(kPe.begin() + t * rd, rd, key + nope);
            std::copy_n(src + nope, vd, a.v.data() + (t * heads + hd) * vd);
        }
    }
    a.ctx.resize(std::size_t(n * heads * vd));
    // GLM-5's DSA: only the keys the indexer selects (backward_glm.cpp); the backward reads the
    // probabilities, zero where a key was dropped.
    dsaSelect(l, a);
    AttentionMask<T> mask;
    mask.selected = a.selection;
    mask.selectedPerQuery = a.selection.empty() ? 0 : m.indexerTopK;
    causalAttentionForward<T>(a.q.data(), a.k.data(), a.v.data(), a.ctx.data(), a.probs, n, heads,
        heads, qk, vd, m_scale, attentionRounding(), mask);
    round(a.ctx);
    if (m.outputGate) {
        // Kimi-K3's mla_use_output_gate: the context times σ(g_proj(x)), one gate per value
        // channel, before o_proj (a.ungated keeps it ungated).
        a.outGate.resize(a.ctx.size());
        project(a.xn1.data(), m_p.value(p + ".g_proj.weight"), nullptr, a.outGate.data(), n, h,
            heads * vd);
        applyOutputGate(a);
    }
    project(a.ctx.data(), m_p.value(p + ".o_proj.weight"), nullptr, out, n, heads * vd, h);
}

template <typename T>
Result<void> GradientPass<T>::mlaBackward(
    int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::string p = attn(l);
    const auto& m = m_spec.mla;
    const auto [h, heads, nope, rd, qk, vd, kvr] = mlaDims(m_spec);
    const auto sum = [this](std::vector<T>& v) { return tpSum(v.data(), std::int64_t(v.size())); };
    std::vector<T> dctx(a.ctx.size());
    linearBackward<T>(a.ctx.data(), m_p.value(p + ".o_proj.weight"), dout, dctx.data(),
        m_p.grad(p + ".o_proj.weight"), nullptr, n, heads * vd, h, false);
    round(dctx);
    if (m.outputGate) {
        const std::vector<T> dgate = outputGateBackward(a, dctx);
        linearBackward<T>(a.xn1.data(), m_p.value(p + ".g_proj.weight"), dgate.data(), dxn1,
            m_p.grad(p + ".g_proj.weight"), nullptr, n, h, heads * vd, true);
    }
    std::vector<T> dq(a.q.size());
    std::vector<T> dk(a.k.size(), T(0));
    std::vector<T> dv(a.v.size(), T(0));
    causalAttentionBackward<T>(a.q.data(), a.k.data(), a.v.data(), a.probs, dctx.data(), dq.data(),
        dk.data(), dv.data(), n, heads, heads, qk, vd, m_scale);
    for (auto* g : { &dq, &dk, &dv }) {
        round(*g); // fp32 inside, as a fused attention kernel
    }
    // Split the key and value gradients back into kv_b_proj's output and the shared rope key.
    std::vector<T> dkv(a.kv.size());
    std::vector<T> dkPe(std::size_t(n * rd), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            T* dst = dkv.data() + (t * heads + hd) * (nope + vd);
            const T* key = dk.data() + (t * heads + hd) * qk;
            std::copy_n(key, nope, dst);
            std::copy_n(dv.data() + (t * heads + hd) * vd, vd, dst + nope);
            for (std::int64_t c = 0; c < rd; ++c) {
                dkPe[std::size_t(t * rd + c)] += key[nope + c];
            }
        }
    }
    // Each TP rank's heads read the one shared rope key: their shares add up, and the sum over
    // all heads is rounded once (the broadcast's gradient, fp32-accumulated).
    DAY0_TRY(sum(dkPe));
    round(dkPe);
    if (!m.noRope) {
        ropeBackward<T>(dkPe.data(), n, 1, rd, m_positions, m_rope);
        round(dkPe);
    }
    std::vector<T> dqPe(std::size_t(n * heads * rd));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(dq.begin() + i * qk + nope, rd, dqPe.begin() + i * rd);
    }
    if (!m.noRope) {
        ropeBackward<T>(dqPe.data(), n, heads, rd, m_positions, m_rope);
        round(dqPe);
    }
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(dqPe.begin() + i * rd, rd, dq.begin() + i * qk + nope);
    }
    // kv path: kv_b_proj, kv_a_layernorm, kv_a_proj_with_mqa.
    std::vector<T> dLatentNormed(a.latentNormed.size());
    linearBackward<T>(a.latentNormed.data(), m_p.value(p + ".kv_b_proj.weight"), dkv.data(),
        dLatentNormed.data(), m_p.grad(p + ".kv_b_proj.weight"), nullptr, n, kvr,
        heads * (nope + vd), false);
    DAY0_TRY(sum(dLatentNormed)); // kv_b_proj is column-parallel by heads
    round(dLatentNormed);
    const std::int64_t ckvWidth = kvr + rd;
    std::vector<T> latent(std::size_t(n * kvr));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.ckv.begin() + t * ckvWidth, kvr, latent.begin() + t * kvr);
    }
    std::vector<T> dLatent(latent.size(), T(0));
    rmsNormBackward<T>(latent.data(), m_p.value(p + ".kv_a_layernorm.weight"), dLatentNormed.data(),
        dLatent.data(), m_p.grad(p + ".kv_a_layernorm.weight"), n, kvr, m.latentNormEps);
    round(dLatent);
    std::vector<T> dckv(a.ckv.size());
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(dLatent.begin() + t * kvr, kvr, dckv.begin() + t * ckvWidth);
        std::copy_n(dkPe.begin() + t * rd, rd, dckv.begin() + t * ckvWidth + kvr);
    }
    // dxn1 sums the down projections' input gradients in fp32; the layer rounds it once.
    linearBackward<T>(a.xn1.data(), m_p.value(p + ".kv_a_proj_with_mqa.weight"), dckv.data(), dxn1,
        m_p.grad(p + ".kv_a_proj_with_mqa.weight"), nullptr, n, h, ckvWidth, true);
    // q path.
    if (m.qLoraRank > 0) {
        std::vector<T> dqaNormed(a.qaNormed.size());
        linearBackward<T>(a.qaNormed.data(), m_p.value(p + ".q_b_proj.weight"), dq.data(),
            dqaNormed.data(), m_p.grad(p + ".q_b_proj.weight"), nullptr, n, m.qLoraRank, heads * qk,
            false);
        DAY0_TRY(sum(dqaNormed)); // q_b_proj is column-parallel by heads
        round(dqaNormed);
        std::vector<T> dqa(a.qa.size(), T(0));
        rmsNormBackward<T>(a.qa.data(), m_p.value(p + ".q_a_layernorm.weight"), dqaNormed.data(),
            dqa.data(), m_p.grad(p + ".q_a_layernorm.weight"), n, m.qLoraRank, m.latentNormEps);
        round(dqa);
        linearBackward<T>(a.xn1.data(), m_p.value(p + ".q_a_proj.weight"), dqa.data(), dxn1,
            m_p.grad(p + ".q_a_proj.weight"), nullptr, n, h, m.qLoraRank, true);
    } else {
        // q_proj is column-parallel by heads: its share of dxn1 is summed before it joins.
        std::vector<T> dxq(std::size_t(n * h), T(0));
        linearBackward<T>(a.xn1.data(), m_p.value(p + ".q_proj.weight"), dq.data(), dxq.data(),
            m_p.grad(p + ".q_proj.weight"), nullptr, n, h, heads * qk, true);
        DAY0_TRY(sum(dxq));
        for (std::size_t i = 0; i < dxq.size(); ++i) {
            dxn1[i] += dxq[i];
        }
    }
    return success();
}

#define DAY0_MLA_PASS(T)                                                                           \
    template void GradientPass<T>::mlaForward(int, LayerActivations<T>&, T*);                      \
    template Result<void> GradientPass<T>::mlaBackward(                                            \
        int, const LayerActivations<T>&, const T*, T*);

DAY0_MLA_PASS(float)
DAY0_MLA_PASS(double)

#undef DAY0_MLA_PASS

} // namespace day0::exec::detail
