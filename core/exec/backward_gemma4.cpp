// The gradient pass's Gemma-4 decoder layer (gradient_pass.h), the forward of gemma4_block.cpp
// keeping what the backward reads, and its backward in reverse:
//   in → input_layernorm → attention → post_attention_layernorm → + in = mid
//   mid → pre_feedforward_layernorm → gelu-tanh GLU → post_feedforward_layernorm → + mid
//   → times layer_scalar (a buffer in HF: no gradient of its own).
// Attention: q_norm / k_norm per head before RoPE, the weightless v_norm on the values (with
// attention_k_eq_v the values are k_proj's raw output, so k_proj's gradient sums both paths),
// scaling 1, the sliding layers' window with their own RoPE, the full layers' global_head_dim,
// KV heads and RoPE. The scaled embedding and the soft-capped logits are backward.cpp's. What
// this does not cover (per-layer inputs, KV-shared layers, the MoE block) backwardUnsupported
// names.
#include "exec/backward_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <type_traits>

namespace day0::exec::detail {

namespace {

bool fullLayer(const model::LayerSpec& layer) { return layer.mixer != model::MixerKind::Sliding; }

} // namespace

template <typename T> Result<void> GradientPass<T>::gemma4Init()
{
    auto tables = gemma4Tables(m_spec);
    if (!tables) {
        return tables.error();
    }
    m_activation = tables->activation;
    m_rope = std::move(tables->full);
    m_slidingRope = std::move(tables->sliding);
    m_scale = 1.0; // Gemma4TextAttention.scaling: q_norm and k_norm stand for 1/sqrt(d)
    if (m_spec.moe) {
        m_router = routerConfig(*m_spec.moe); // softmax, top-k, renormalised (as the engine's)
    }
    return success();
}

template <typename T>
Result<void> GradientPass<T>::gemma4LayerForward(int l, std::vector<T>& hidden)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = fmt::format("model.layers.{}", l);
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    LayerActivations<T>& a = m_layers[std::size_t(l)];
    a.in = hidden;
    a.xn1.resize(hidden.size());
    norm(a.in.data(), m_p.value(p + ".input_layernorm.weight"), a.xn1.data(), n, h);
    a.attnOut.resize(hidden.size());
    gemma4AttentionForward(l, a, a.attnOut.data());
    std::vector<T> branch(hidden.size());
    norm(a.attnOut.data(), m_p.value(p + ".post_attention_layernorm.weight"), branch.data(), n, h);
    a.mid = a.in;
    addInPlace(a.mid.data(), branch.data(), n * h);
    round(a.mid); // emulated: the residual adds round as the engine's (gemma4_block.cpp)
    a.xn2.resize(hidden.size());
    norm(a.mid.data(), m_p.value(p + ".pre_feedforward_layernorm.weight"), a.xn2.data(), n, h);
    a.ffnOut.resize(hidden.size());
    mlpForward(
        p + ".mlp", a.xn2.data(), n, m_spec.ffnWidthOf(layer), a.g, a.u, a.act, a.ffnOut.data());
    const T* ffnIn = a.ffnOut.data();
    if (layer.moe() && m_spec.moe) {
        // post_feedforward_layernorm_1(mlp) + post_feedforward_layernorm_2(experts(residual)).
        gemma4MoeForward(l, a, branch.data());
        a.ffnSum.resize(hidden.size());
        norm(a.ffnOut.data(), m_p.value(p + ".post_feedforward_layernorm_1.weight"),
            a.ffnSum.data(), n, h);
        addInPlace(a.ffnSum.data(), branch.data(), n * h);
        round(a.ffnSum);
        ffnIn = a.ffnSum.data();
    }
    norm(ffnIn, m_p.value(p + ".post_feedforward_layernorm.weight"), branch.data(), n, h);
    a.unscaled = a.mid;
    addInPlace(a.unscaled.data(), branch.data(), n * h);
    round(a.unscaled);
    const T scalar = *m_p.value(p + ".layer_scalar");
    for (std::size_t i = 0; i < hidden.size(); ++i) {
        hidden[i] = a.unscaled[i] * scalar;
    }
    round(hidden);
    return success();
}

template <typename T> Result<void> GradientPass<T>::gemma4LayerBackward(int l, std::vector<T>& dh)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = fmt::format("model.layers.{}", l);
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    const LayerActivations<T>& a = m_layers[std::size_t(l)];
    DAY0_TRY(m_acts.recordAndInject(p, dh.data(), { n, h }));
    const bool rounded = m_rounded.contains(l);
    const auto boundary = [&](std::vector<T>& g) {
        if (rounded) {
            roundTo(g);
        } else {
            round(g);
        }
    };
    // out = s · (mid + post_ffn(ffn)): the residual and the post-norm's output both get s · dh.
    const T scalar = *m_p.value(p + ".layer_scalar");
    std::vector<T> dmid(dh.size());
    for (std::size_t i = 0; i < dh.size(); ++i) {
        dmid[i] = dh[i] * scalar;
    }
    boundary(dmid);
    m_acts.record(p + ".post_feedforward_layernorm", dmid.data(), { n, h });
    std::vector<T> dffn(dh.size(), T(0));
    const std::string postFfn = p + ".post_feedforward_layernorm.weight";
    const bool moe = layer.moe() && m_spec.moe;
    rmsNormBackward<T>(moe ? a.ffnSum.data() : a.ffnOut.data(), m_p.value(postFfn), dmid.data(),
        dffn.data(), m_p.grad(postFfn), n, h, m_spec.normEps);
    boundary(dffn);
    if (moe) {
        // dffn is the sum's: each branch's post-norm takes it back to its own output.
        std::vector<T> dexperts(dh.size(), T(0));
        const std::string post2 = p + ".post_feedforward_layernorm_2.weight";
        rmsNormBackward<T>(a.expertsOut.data(), m_p.value(post2), dffn.data(), dexperts.data(),
            m_p.grad(post2), n, h, m_spec.normEps);
        boundary(dexperts);
        std::vector<T> dmlp(dh.size(), T(0));
        const std::string post1 = p + ".post_feedforward_layernorm_1.weight";
        rmsNormBackward<T>(a.ffnOut.data(), m_p.value(post1), dffn.data(), dmlp.data(),
            m_p.grad(post1), n, h, m_spec.normEps);
        boundary(dmlp);
        dffn = std::move(dmlp);
        m_acts.record(p + ".experts", dexperts.data(), { n, h });
        gemma4MoeBackward(l, a, dexperts.data(), dmid.data());
    }
    m_acts.record(p + ".mlp", dffn.data(), { n, h });
    std::vector<T> dxn2(dh.size(), T(0));
    mlpBackward(p + ".mlp", a.xn2.data(), n, m_spec.ffnWidthOf(layer), a.g, a.u, a.act, dffn.data(),
        dxn2.data());
    boundary(dxn2);
    m_acts.record(p + ".pre_feedforward_layernorm", dxn2.data(), { n, h });
    const std::string preFfn = p + ".pre_feedforward_layernorm.weight";
    rmsNormBackward<T>(a.mid.data(), m_p.value(preFfn), dxn2.data(), dmid.data(), m_p.grad(preFfn),
        n, h, m_spec.normEps);
    boundary(dmid);
    // mid = in + post_attn(attention(norm(in))).
    m_acts.record(p + ".post_attention_layernorm", dmid.data(), { n, h });
    std::vector<T> dattn(dh.size(), T(0));
    const std::string postAttn = p + ".post_attention_layernorm.weight";
    rmsNormBackward<T>(a.attnOut.data(), m_p.value(postAttn), dmid.data(), dattn.data(),
        m_p.grad(postAttn), n, h, m_spec.normEps);
    boundary(dattn);
    m_acts.record(attn(l), dattn.data(), { n, h });
    std::vector<T> dxn1(dh.size(), T(0));
    gemma4AttentionBackward(l, a, dattn.data(), dxn1.data());
    boundary(dxn1);
    m_acts.record(p + ".input_layernorm", dxn1.data(), { n, h });
    dh = dmid;
    const std::string in = p + ".input_layernorm.weight";
    rmsNormBackward<T>(
        a.in.data(), m_p.value(in), dxn1.data(), dh.data(), m_p.grad(in), n, h, m_spec.normEps);
    boundary(dh);
    return success();
}

template <typename T>
void GradientPass<T>::gemma4AttentionForward(int l, LayerActivations<T>& a, T* out)
{
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDimOf(layer);
    const std::int64_t heads = m_spec.headsOf(layer);
    const std::int64_t kvHeads = m_spec.kvHeadsOf(layer);
    const std::string p = attn(l);
    const Rope& rope = fullLayer(layer) ? m_rope : m_slidingRope;
    a.qPre.resize(std::size_t(n * heads * d));
    a.kPre.resize(std::size_t(n * kvHeads * d));
    project(a.xn1.data(), m_p.value(p + ".q_proj.weight"), m_p.value(p + ".q_proj.bias"),
        a.qPre.data(), n, h, heads * d);
    project(a.xn1.data(), m_p.value(p + ".k_proj.weight"), m_p.value(p + ".k_proj.bias"),
        a.kPre.data(), n, h, kvHeads * d);
    if (layer.sharedKv) {
        a.vPre = a.kPre; // attention_k_eq_v: the values are k_proj's output before k_norm
    } else {
        a.vPre.resize(a.kPre.size());
        project(a.xn1.data(), m_p.value(p + ".v_proj.weight"), m_p.value(p + ".v_proj.bias"),
            a.vPre.data(), n, h, kvHeads * d);
    }
    a.q.resize(a.qPre.size());
    a.k.resize(a.kPre.size());
    a.v.resize(a.vPre.size());
    norm(a.qPre.data(), m_p.value(p + ".q_norm.weight"), a.q.data(), n * heads, d);
    norm(a.kPre.data(), m_p.value(p + ".k_norm.weight"), a.k.data(), n * kvHeads, d);
    a.v = a.vPre; // v_norm (with_scale=False), as the engine's
    unitRmsNorm(a.v.data(), n * kvHeads, d, m_spec.normEps);
    round(a.v);
    if constexpr (std::is_same_v<T, float>) {
        emulatedRope(a.q.data(), n, heads, d, m_positions, rope, {}, m_mode);
        emulatedRope(a.k.data(), n, kvHeads, d, m_positions, rope, {}, m_mode);
    } else {
        applyRope<T>(a.q.data(), n, heads, d, m_positions, rope);
        applyRope<T>(a.k.data(), n, kvHeads, d, m_positions, rope);
    }
    a.ctx.resize(std::size_t(n * heads * d));
    AttentionMask<T> mask;
    mask.window = fullLayer(layer) ? 0 : layer.slidingWindow;
    causalAttentionForward<T>(a.q.data(), a.k.data(), a.v.data(), a.ctx.data(), a.probs, n, heads,
        kvHeads, d, d, m_scale, attentionRounding(), mask);
    round(a.ctx);
    project(a.ctx.data(), m_p.value(p + ".o_proj.weight"), m_p.value(p + ".o_proj.bias"), out, n,
        heads * d, h);
}

template <typename T>
void GradientPass<T>::gemma4AttentionBackward(
    int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDimOf(layer);
    const std::int64_t heads = m_spec.headsOf(layer);
    const std::int64_t kvHeads = m_spec.kvHeadsOf(layer);
    const std::string p = attn(l);
    const Rope& rope = fullLayer(layer) ? m_rope : m_slidingRope;
    std::vector<T> dctx(a.ctx.size());
    linearBackward<T>(a.ctx.data(), m_p.value(p + ".o_proj.weight"), dout, dctx.data(),
        m_p.grad(p + ".o_proj.weight"), m_p.grad(p + ".o_proj.bias"), n, heads * d, h, false);
    round(dctx);
    std::vector<T> dq(a.q.size());
    std::vector<T> dk(a.k.size(), T(0));
    std::vector<T> dv(a.v.size(), T(0));
    AttentionMask<T> mask;
    mask.window = fullLayer(layer) ? 0 : layer.slidingWindow;
    causalAttentionBackward<T>(a.q.data(), a.k.data(), a.v.data(), a.probs, dctx.data(), dq.data(),
        dk.data(), dv.data(), n, heads, kvHeads, d, d, m_scale, mask);
    // Emulated: each op's input gradient in the model's dtype (as the standard attention's).
    for (auto* g : { &dq, &dk, &dv }) {
        round(*g);
    }
    ropeBackward<T>(dq.data(), n, heads, d, m_positions, rope);
    ropeBackward<T>(dk.data(), n, kvHeads, d, m_positions, rope);
    round(dq);
    round(dk);
    std::vector<T> dqPre(dq.size(), T(0));
    std::vector<T> dkPre(dk.size(), T(0));
    std::vector<T> dvPre(dv.size(), T(0));
    rmsNormBackward<T>(a.qPre.data(), m_p.value(p + ".q_norm.weight"), dq.data(), dqPre.data(),
        m_p.grad(p + ".q_norm.weight"), n * heads, d, m_spec.normEps);
    rmsNormBackward<T>(a.kPre.data(), m_p.value(p + ".k_norm.weight"), dk.data(), dkPre.data(),
        m_p.grad(p + ".k_norm.weight"), n * kvHeads, d, m_spec.normEps);
    rmsNormBackward<T>(
        a.vPre.data(), nullptr, dv.data(), dvPre.data(), nullptr, n * kvHeads, d, m_spec.normEps);
    round(dqPre);
    round(dkPre);
    round(dvPre);
    if (layer.sharedKv) {
        addInPlace(dkPre.data(), dvPre.data(), std::int64_t(dkPre.size())); // k_proj feeds both
        round(dkPre);
    }
    const auto inputGradient
        = [&](const std::string& proj, const std::vector<T>& dy, std::int64_t width) {
              linearBackward<T>(a.xn1.data(), m_p.value(p + proj + ".weight"), dy.data(), dxn1,
                  m_p.grad(p + proj + ".weight"), m_p.grad(p + proj + ".bias"), n, h, width, true);
          };
    inputGradient(".q_proj", dqPre, heads * d);
    inputGradient(".k_proj", dkPre, kvHeads * d);
    if (!layer.sharedKv) {
        inputGradient(".v_proj", dvPre, kvHeads * d);
    }
}

template <typename T> void GradientPass<T>::gemma4MoeForward(int l, LayerActivations<T>& a, T* out)
{
    const std::string p = fmt::format("model.layers.{}", l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    // Gemma4TextRouter: the weightless RMS norm of the residual, times scale and h^-½, projected.
    a.routerIn = a.mid;
    unitRmsNorm(a.routerIn.data(), n, h, m_spec.normEps); // as the engine's
    const T* scale = m_p.value(p + ".router.scale");
    const T root = T(1.0 / std::sqrt(double(h)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            a.routerIn[std::size_t(t * h + c)]
                = a.routerIn[std::size_t(t * h + c)] * scale[c] * root;
        }
    }
    round(a.routerIn);
    std::vector<T> logits(std::size_t(n * e));
    project(
        a.routerIn.data(), m_p.value(p + ".router.proj.weight"), nullptr, logits.data(), n, h, e);
    // Softmax over every expert, top-k, renormalised, routed in double as the engine routes;
    // per_expert_scale joins at the combine (the routing keeps the renormalised weights).
    const std::vector<double> wide(logits.begin(), logits.end());
    a.routing = routeAndKeep(p + ".router", wide, n, nullptr);
    a.scores = selectionScores(wide.data(), n, m_router, nullptr);
    std::vector<T> xe(a.mid.size());
    norm(a.mid.data(), m_p.value(p + ".pre_feedforward_layernorm_2.weight"), xe.data(), n, h);
    const T* perExpert = m_p.value(p + ".router.per_expert_scale");
    a.groupByExpert(n, e);
    a.expertsOut.assign(a.mid.size(), T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        auto& x = a.experts[std::size_t(ex)];
        const auto m = std::int64_t(x.token.size());
        if (m == 0) {
            continue;
        }
        x.x.resize(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(xe.begin() + x.token[std::size_t(i)] * h, h, x.x.begin() + i * h);
        }
        x.y.resize(std::size_t(m * h));
        mlpForward(fmt::format("{}.experts.{}", p, ex), x.x.data(), m, moe.expertIntermediate, x.g,
            x.u, x.act, x.y.data());
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const T w = T(a.routing.weights[std::size_t(t * a.routing.k + x.slot[std::size_t(i)])]
                * double(perExpert[ex]));
            for (std::int64_t c = 0; c < h; ++c) {
                a.expertsOut[std::size_t(t * h + c)] += w * x.y[std::size_t(i * h + c)];
            }
        }
    }
    round(a.expertsOut);
    norm(a.expertsOut.data(), m_p.value(p + ".post_feedforward_layernorm_2.weight"), out, n, h);
}

template <typename T>
void GradientPass<T>::gemma4MoeBackward(
    int l, const LayerActivations<T>& a, const T* dexperts, T* dmid)
{
    const std::string p = fmt::format("model.layers.{}", l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = a.routing.k;
    const T* perExpert = m_p.value(p + ".router.per_expert_scale");
    T* dPerExpert = m_p.grad(p + ".router.per_expert_scale");
    // Each token's combine weight is w_j · scale_e (w_j the renormalised top-k probability):
    // ∂L/∂(w_j · scale_e) = dexperts · y_e; scale_e's share is that times w_j, w_j's times
    // scale_e.
    std::vector<double> dweight(std::size_t(n * k), 0.0);
    std::vector<T> dxe(std::size_t(n * h), T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        const auto& x = a.experts[std::size_t(ex)];
        const auto m = std::int64_t(x.token.size());
        if (m == 0) {
            continue; // its gradients stay zero
        }
        std::vector<T> dy(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const std::size_t choice = std::size_t(t * k + x.slot[std::size_t(i)]);
            const double w = a.routing.weights[choice];
            const T combined = T(w * double(perExpert[ex]));
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dy[std::size_t(i * h + c)] = combined * dexperts[t * h + c];
                dot += double(dexperts[t * h + c]) * double(x.y[std::size_t(i * h + c)]);
            }
            dweight[choice] = dot * double(perExpert[ex]);
            dPerExpert[ex] += T(dot * w);
        }
        round(dy); // emulated: each expert's output gradient, in the model's dtype
        std::vector<T> dx(std::size_t(m * h), T(0));
        mlpBackward(fmt::format("{}.experts.{}", p, ex), x.x.data(), m, moe.expertIntermediate, x.g,
            x.u, x.act, dy.data(), dx.data());
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            for (std::int64_t c = 0; c < h; ++c) {
                dxe[std::size_t(t * h + c)] += dx[std::size_t(i * h + c)];
            }
        }
    }
    round(dxe); // the normed experts' input's gradient, summed over the experts
    const std::string pre2 = p + ".pre_feedforward_layernorm_2.weight";
    rmsNormBackward<T>(
        a.mid.data(), m_p.value(pre2), dxe.data(), dmid, m_p.grad(pre2), n, h, m_spec.normEps);
    // w_j = r · s_j / Σ_chosen s, s the softmax over every expert.
    std::vector<T> dlogits = routerLogitsBackward(a, dweight, n, false);
    round(dlogits); // the router's logits are in the model's dtype
    m_acts.record(p + ".router", dlogits.data(), { n, e });
    std::vector<T> dRouterIn(std::size_t(n * h), T(0));
    linearBackward<T>(a.routerIn.data(), m_p.value(p + ".router.proj.weight"), dlogits.data(),
        dRouterIn.data(), m_p.grad(p + ".router.proj.weight"), nullptr, n, h, e, false);
    round(dRouterIn);
    // routerIn = norm(mid) · scale · root: scale's gradient from norm(mid) = routerIn / scale
    // would divide by a learned value; recomputed from mid instead.
    std::vector<T> normed(std::size_t(n * h));
    rmsNorm<T>(a.mid.data(), nullptr, normed.data(), n, h, m_spec.normEps);
    const T* scale = m_p.value(p + ".router.scale");
    T* dScale = m_p.grad(p + ".router.scale");
    const T root = T(1.0 / std::sqrt(double(h)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            const std::size_t i = std::size_t(t * h + c);
            dScale[c] += dRouterIn[i] * normed[i] * root;
            dRouterIn[i] *= scale[c] * root;
        }
    }
    round(dRouterIn);
    rmsNormBackward<T>(
        a.mid.data(), nullptr, dRouterIn.data(), dmid, nullptr, n, h, m_spec.normEps);
}

#define DAY0_GRADIENT_GEMMA4(T)                                                                    \
    template Result<void> GradientPass<T>::gemma4Init();                                           \
    template Result<void> GradientPass<T>::gemma4LayerForward(int, std::vector<T>&);               \
    template Result<void> GradientPass<T>::gemma4LayerBackward(int, std::vector<T>&);              \
    template void GradientPass<T>::gemma4AttentionForward(int, LayerActivations<T>&, T*);          \
    template void GradientPass<T>::gemma4AttentionBackward(                                        \
        int, const LayerActivations<T>&, const T*, T*);                                            \
    template void GradientPass<T>::gemma4MoeForward(int, LayerActivations<T>&, T*);                \
    template void GradientPass<T>::gemma4MoeBackward(int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_GEMMA4(float)
DAY0_GRADIENT_GEMMA4(double)

#undef DAY0_GRADIENT_GEMMA4

} // namespace day0::exec::detail
