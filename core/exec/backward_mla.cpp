// DeepSeek multi-head latent attention in the gradient pass (backward_pass.h): the forward of
// Forward::mlaBlock for a whole sequence from position 0 (low-rank q through q_a_proj,
// q_a_layernorm and q_b_proj, the compressed kv through kv_a_proj_with_mqa, kv_a_layernorm and
// kv_b_proj, interleaved RoPE on the decoupled rope lanes of each query head and the one shared
// rope key) and its backward.
#include "exec/backward_ops.h"
#include "exec/backward_pass.h"
#include "exec/ops.h"

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

template <typename T>
void mlaForward(const model::ModelSpec& spec, const ParameterSet<T>& p, const Rope& rope,
    double scale, int layer, LayerActivations<T>& a, std::span<const std::int64_t> positions,
    std::int64_t n, T* out)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const auto& m = spec.mla;
    const auto [h, heads, nope, rd, qk, vd, kvr] = mlaDims(spec);
    a.q.resize(std::size_t(n * heads * qk));
    if (m.qLoraRank > 0) {
        a.qa.resize(std::size_t(n * m.qLoraRank));
        a.qaNormed.resize(a.qa.size());
        linear<T>(a.xn1.data(), p.value(attn + ".q_a_proj.weight"), nullptr, a.qa.data(), n, h,
            m.qLoraRank);
        rmsNorm<T>(a.qa.data(), p.value(attn + ".q_a_layernorm.weight"), a.qaNormed.data(), n,
            m.qLoraRank, spec.normEps);
        linear<T>(a.qaNormed.data(), p.value(attn + ".q_b_proj.weight"), nullptr, a.q.data(), n,
            m.qLoraRank, heads * qk);
    } else {
        linear<T>(
            a.xn1.data(), p.value(attn + ".q_proj.weight"), nullptr, a.q.data(), n, h, heads * qk);
    }
    const std::int64_t ckvWidth = kvr + rd;
    a.ckv.resize(std::size_t(n * ckvWidth));
    linear<T>(a.xn1.data(), p.value(attn + ".kv_a_proj_with_mqa.weight"), nullptr, a.ckv.data(), n,
        h, ckvWidth);
    std::vector<T> latent(std::size_t(n * kvr));
    std::vector<T> kPe(std::size_t(n * rd));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.ckv.begin() + t * ckvWidth, kvr, latent.begin() + t * kvr);
        std::copy_n(a.ckv.begin() + t * ckvWidth + kvr, rd, kPe.begin() + t * rd);
    }
    a.latentNormed.resize(latent.size());
    rmsNorm<T>(latent.data(), p.value(attn + ".kv_a_layernorm.weight"), a.latentNormed.data(), n,
        kvr, spec.normEps);
    a.kv.resize(std::size_t(n * heads * (nope + vd)));
    linear<T>(a.latentNormed.data(), p.value(attn + ".kv_b_proj.weight"), nullptr, a.kv.data(), n,
        kvr, heads * (nope + vd));
    std::vector<T> qPe(std::size_t(n * heads * rd));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(a.q.begin() + i * qk + nope, rd, qPe.begin() + i * rd);
    }
    applyRope<T>(qPe.data(), n, heads, rd, positions, rope);
    applyRope<T>(kPe.data(), n, 1, rd, positions, rope);
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
    causalAttentionForward<T>(
        a.q.data(), a.k.data(), a.v.data(), a.ctx.data(), a.probs, n, heads, heads, qk, vd, scale);
    linear<T>(a.ctx.data(), p.value(attn + ".o_proj.weight"), nullptr, out, n, heads * vd, h);
}

template <typename T>
Result<void> mlaBackward(const model::ModelSpec& spec, ParameterSet<T>& p, const Rope& rope,
    double scale, int layer, const LayerActivations<T>& a, std::span<const std::int64_t> positions,
    std::int64_t n, const T* dout, T* dxn1, const TpSumOf<T>& tpSum)
{
    const auto sum = [&tpSum](std::vector<T>& v) {
        return tpSum ? tpSum(v.data(), std::int64_t(v.size())) : success();
    };
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const auto& m = spec.mla;
    const auto [h, heads, nope, rd, qk, vd, kvr] = mlaDims(spec);
    std::vector<T> dctx(a.ctx.size());
    linearBackward<T>(a.ctx.data(), p.value(attn + ".o_proj.weight"), dout, dctx.data(),
        p.grad(attn + ".o_proj.weight"), nullptr, n, heads * vd, h, false);
    std::vector<T> dq(a.q.size());
    std::vector<T> dk(a.k.size(), T(0));
    std::vector<T> dv(a.v.size(), T(0));
    causalAttentionBackward<T>(a.q.data(), a.k.data(), a.v.data(), a.probs, dctx.data(), dq.data(),
        dk.data(), dv.data(), n, heads, heads, qk, vd, scale);
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
    ropeBackward<T>(dkPe.data(), n, 1, rd, positions, rope);
    // Each TP rank's heads read the one shared rope key: their shares add up.
    DAY0_TRY(sum(dkPe));
    std::vector<T> dqPe(std::size_t(n * heads * rd));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(dq.begin() + i * qk + nope, rd, dqPe.begin() + i * rd);
    }
    ropeBackward<T>(dqPe.data(), n, heads, rd, positions, rope);
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(dqPe.begin() + i * rd, rd, dq.begin() + i * qk + nope);
    }
    // kv path: kv_b_proj, kv_a_layernorm, kv_a_proj_with_mqa.
    std::vector<T> dLatentNormed(a.latentNormed.size());
    linearBackward<T>(a.latentNormed.data(), p.value(attn + ".kv_b_proj.weight"), dkv.data(),
        dLatentNormed.data(), p.grad(attn + ".kv_b_proj.weight"), nullptr, n, kvr,
        heads * (nope + vd), false);
    DAY0_TRY(sum(dLatentNormed)); // kv_b_proj is column-parallel by heads
    const std::int64_t ckvWidth = kvr + rd;
    std::vector<T> latent(std::size_t(n * kvr));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.ckv.begin() + t * ckvWidth, kvr, latent.begin() + t * kvr);
    }
    std::vector<T> dLatent(latent.size(), T(0));
    rmsNormBackward<T>(latent.data(), p.value(attn + ".kv_a_layernorm.weight"),
        dLatentNormed.data(), dLatent.data(), p.grad(attn + ".kv_a_layernorm.weight"), n, kvr,
        spec.normEps);
    std::vector<T> dckv(a.ckv.size());
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(dLatent.begin() + t * kvr, kvr, dckv.begin() + t * ckvWidth);
        std::copy_n(dkPe.begin() + t * rd, rd, dckv.begin() + t * ckvWidth + kvr);
    }
    linearBackward<T>(a.xn1.data(), p.value(attn + ".kv_a_proj_with_mqa.weight"), dckv.data(), dxn1,
        p.grad(attn + ".kv_a_proj_with_mqa.weight"), nullptr, n, h, ckvWidth, true);
    // q path.
    if (m.qLoraRank > 0) {
        std::vector<T> dqaNormed(a.qaNormed.size());
        linearBackward<T>(a.qaNormed.data(), p.value(attn + ".q_b_proj.weight"), dq.data(),
            dqaNormed.data(), p.grad(attn + ".q_b_proj.weight"), nullptr, n, m.qLoraRank,
            heads * qk, false);
        DAY0_TRY(sum(dqaNormed)); // q_b_proj is column-parallel by heads
        std::vector<T> dqa(a.qa.size(), T(0));
        rmsNormBackward<T>(a.qa.data(), p.value(attn + ".q_a_layernorm.weight"), dqaNormed.data(),
            dqa.data(), p.grad(attn + ".q_a_layernorm.weight"), n, m.qLoraRank, spec.normEps);
        linearBackward<T>(a.xn1.data(), p.value(attn + ".q_a_proj.weight"), dqa.data(), dxn1,
            p.grad(attn + ".q_a_proj.weight"), nullptr, n, h, m.qLoraRank, true);
    } else {
        // q_proj is column-parallel by heads: its share of dxn1 is summed before it joins.
        std::vector<T> dxq(std::size_t(n * h), T(0));
        linearBackward<T>(a.xn1.data(), p.value(attn + ".q_proj.weight"), dq.data(), dxq.data(),
            p.grad(attn + ".q_proj.weight"), nullptr, n, h, heads * qk, true);
        DAY0_TRY(sum(dxq));
        for (std::size_t i = 0; i < dxq.size(); ++i) {
            dxn1[i] += dxq[i];
        }
    }
    return success();
}

#define DAY0_MLA_PASS(T)                                                                           \
    template void mlaForward<T>(const model::ModelSpec&, const ParameterSet<T>&, const Rope&,      \
        double, int, LayerActivations<T>&, std::span<const std::int64_t>, std::int64_t, T*);       \
    template Result<void> mlaBackward<T>(const model::ModelSpec&, ParameterSet<T>&, const Rope&,   \
        double, int, const LayerActivations<T>&, std::span<const std::int64_t>, std::int64_t,      \
        const T*, T*, const TpSumOf<T>&);

DAY0_MLA_PASS(float)
DAY0_MLA_PASS(double)

#undef DAY0_MLA_PASS

} // namespace day0::exec::detail
