// The gradient pass's decoder layer (gradient_pass.h): its forward keeping what the backward
// reads, its backward in reverse (norms, residuals, tensor-parallel sums, emulated rounding of
// single layers), and standard attention (MHA/GQA/MQA, biases, per-head QK-norm).
#include "exec/backward_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

namespace day0::exec::detail {

template <typename T> Result<void> GradientPass<T>::layerForward(int l, std::vector<T>& hidden)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const LayerNames names = layerNames(m_spec, l);
    LayerActivations<T>& a = m_layers[std::size_t(l)];
    a.in = hidden;
    a.xn1.resize(hidden.size());
    norm(a.in.data(), m_p.value(names.prefix + ".input_layernorm.weight"), a.xn1.data(), n, h);
    std::vector<T> branch(hidden.size());
    if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::KimiDelta) {
        kimiDeltaForward(l, a, branch.data()); // no tensor parallelism (lossAndGradients)
    } else if (m_spec.attention == model::AttentionKind::MLA) {
        mlaForward(l, a, branch.data());
        DAY0_TRY(tpSum(branch.data(), n * h)); // o_proj is row-parallel by heads
    } else if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::GatedDeltaNet) {
        deltaNetForward(l, a, branch.data()); // no tensor parallelism (lossAndGradients)
    } else {
        attentionForward(l, a, branch.data());
        DAY0_TRY(tpSum(branch.data(), n * h));
        if (const T* bias = m_p.value(attn(l) + ".o_proj.bias"); bias && m_tpSum) {
            for (std::int64_t t = 0; t < n; ++t) {
                addInPlace(branch.data() + t * h, bias, h);
            }
        }
    }
    round(branch); // a tensor-parallel sum of rounded partials, rounded again
    a.mid = a.in;
    addInPlace(a.mid.data(), branch.data(), n * h);
    round(a.mid);
    a.xn2.resize(hidden.size());
    norm(a.mid.data(), m_p.value(names.prefix + ".post_attention_layernorm.weight"), a.xn2.data(),
        n, h);
    if (m_spec.layers[std::size_t(l)].moe() && llama4()) {
        llama4MoeForward(l, a, branch.data()); // no tensor parallelism (lossAndGradients)
    } else if (m_spec.layers[std::size_t(l)].moe()) {
        moeForward(l, a, branch.data());
    } else {
        const std::int64_t inter = m_spec.ffnWidthOf(m_spec.layers[std::size_t(l)]);
        mlpForward(names.ffn, a.xn2.data(), n, inter, a.g, a.u, a.act, branch.data());
    }
    DAY0_TRY(tpSum(branch.data(), n * h));
    round(branch);
    hidden = a.mid;
    addInPlace(hidden.data(), branch.data(), n * h);
    round(hidden);
    return success();
}

template <typename T> Result<void> GradientPass<T>::layerBackward(int l, std::vector<T>& dh)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const LayerNames names = layerNames(m_spec, l);
    const LayerActivations<T>& a = m_layers[std::size_t(l)];
    DAY0_TRY(m_acts.recordAndInject(names.prefix, dh.data(), { n, h }));
    const bool rounded = m_rounded.contains(l);
    // The activation gradients this layer passes on: rounded to roundedTo for a rounded layer,
    // else to the pass's emulated format (none in fp64/fp32).
    const auto boundary = [&](std::vector<T>& g) {
        if (rounded) {
            roundTo(g);
        } else {
            round(g);
        }
    };
    // hidden = mid + ffn(norm(mid)): the ffn's output gradient is dh itself.
    m_acts.record(names.ffn, dh.data(), { n, h });
    std::vector<T> dxn2(std::size_t(n * h), T(0));
    if (m_spec.layers[std::size_t(l)].moe() && llama4()) {
        llama4MoeBackward(l, a, dh.data(), dxn2.data());
    } else if (m_spec.layers[std::size_t(l)].moe()) {
        DAY0_TRY(moeBackward(l, a, dh.data(), dxn2.data()));
    } else {
        const std::int64_t inter = m_spec.ffnWidthOf(m_spec.layers[std::size_t(l)]);
        mlpBackward(names.ffn, a.xn2.data(), n, inter, a.g, a.u, a.act, dh.data(), dxn2.data());
        DAY0_TRY(tpSum(dxn2.data(), n * h));
    }
    boundary(dxn2);
    m_acts.record(names.prefix + ".post_attention_layernorm", dxn2.data(), { n, h });
    const std::string post = names.prefix + ".post_attention_layernorm.weight";
    rmsNormBackward<T>(a.mid.data(), m_p.value(post), dxn2.data(), dh.data(), m_p.grad(post), n, h,
        m_spec.normEps);
    // mid = in + attention(norm(in)): the attention's output gradient is dmid.
    const bool mla = m_spec.attention == model::AttentionKind::MLA;
    boundary(dh);
    m_acts.record(mixerAnchor(l), dh.data(), { n, h });
    std::vector<T> dxn1(std::size_t(n * h), T(0));
    if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::KimiDelta) {
        kimiDeltaBackward(l, a, dh.data(), dxn1.data());
    } else if (mla) {
        DAY0_TRY(mlaBackward(l, a, dh.data(), dxn1.data()));
    } else if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::GatedDeltaNet) {
        deltaNetBackward(l, a, dh.data(), dxn1.data());
    } else {
        attentionBackward(l, a, dh.data(), dxn1.data());
        DAY0_TRY(tpSum(dxn1.data(), n * h));
    }
    boundary(dxn1);
    m_acts.record(names.prefix + ".input_layernorm", dxn1.data(), { n, h });
    const std::string in = names.prefix + ".input_layernorm.weight";
    rmsNormBackward<T>(
        a.in.data(), m_p.value(in), dxn1.data(), dh.data(), m_p.grad(in), n, h, m_spec.normEps);
    boundary(dh);
    return success();
}

template <typename T> std::int64_t GradientPass<T>::keptBytes(std::size_t extra) const
{
    std::size_t elements = extra;
    std::size_t others = 0; // doubles and indices, 8 bytes each
    for (const auto& a : m_layers) {
        for (const auto* v : { &a.in, &a.xn1, &a.qPre, &a.kPre, &a.q, &a.k, &a.v, &a.probs,
                 &a.sinkProbs, &a.ctx, &a.mid, &a.xn2, &a.g, &a.u, &a.act, &a.qa, &a.qaNormed,
                 &a.ckv, &a.latentNormed, &a.kv, &a.sharedG, &a.sharedU, &a.sharedAct, &a.vPre,
                 &a.attnOut, &a.ffnOut, &a.unscaled, &a.routerIn, &a.expertsOut, &a.ffnSum, &a.proj,
                 &a.convPre, &a.conv, &a.dt, &a.ssd, &a.gatedOut, &a.latentIn, &a.latentSum }) {
            elements += v->size();
        }
        others += a.scores.size() + a.routing.experts.size() + a.routing.weights.size()
            + a.selection.size();
        for (const auto& e : a.experts) {
            elements += e.x.size() + e.g.size() + e.u.size() + e.act.size() + e.y.size();
            others += e.token.size() + e.slot.size();
        }
        // Qwen3-Next / Qwen3.5 (backward_qwen3next.cpp).
        for (const auto* v :
            { &a.outGate, &a.ungated, &a.sharedGate, &a.sharedOut, &a.mixed, &a.convPre, &a.qkUnit,
                &a.z, &a.decayIn, &a.beta, &a.decay, &a.states, &a.core, &a.gatedCore }) {
            elements += v->size();
        }
        elements += a.decayLow.size() + a.gateLow.size(); // Kimi-Linear (backward_kimi.cpp)
    }
    return std::int64_t(elements * sizeof(T) + others * 8);
}

template <typename T> void GradientPass<T>::attentionForward(int l, LayerActivations<T>& a, T* out)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]);
    const std::string p = attn(l);
    a.q.resize(std::size_t(n * heads * d));
    a.k.resize(std::size_t(n * kvHeads * d));
    a.v.resize(std::size_t(n * kvHeads * d));
    // Qwen3-Next's q_proj emits each head's query, then its output gate.
    const bool gated = m_spec.attentionOutputGate;
    if (gated) {
        std::vector<T> both(std::size_t(n * heads * 2 * d));
        project(a.xn1.data(), m_p.value(p + ".q_proj.weight"), m_p.value(p + ".q_proj.bias"),
            both.data(), n, h, heads * 2 * d);
        splitQueryGate(both, a.q, a);
    } else {
        project(a.xn1.data(), m_p.value(p + ".q_proj.weight"), m_p.value(p + ".q_proj.bias"),
            a.q.data(), n, h, heads * d);
    }
    project(a.xn1.data(), m_p.value(p + ".k_proj.weight"), m_p.value(p + ".k_proj.bias"),
        a.k.data(), n, h, kvHeads * d);
    project(a.xn1.data(), m_p.value(p + ".v_proj.weight"), m_p.value(p + ".v_proj.bias"),
        a.v.data(), n, h, kvHeads * d);
    if (m_spec.qkNormAcrossHeads) {
        acrossHeadsNormForward(l, a); // MiniMax-M2
    }
    // Qwen3 normalises each head before RoPE, Hunyuan after it.
    const bool normAfterRope = m_spec.family == model::Family::Hunyuan;
    const auto headNorms = [&] {
        const LayerNames names = layerNames(m_spec, l);
        a.qPre = a.q;
        a.kPre = a.k;
        norm(a.qPre.data(), m_p.value(names.qNorm + ".weight"), a.q.data(), n * heads, d);
        norm(a.kPre.data(), m_p.value(names.kNorm + ".weight"), a.k.data(), n * kvHeads, d);
    };
    if (m_spec.qkNorm && !normAfterRope) {
        headNorms();
    }
    if (llama4()) {
        llama4QueryKeyForward(l, a); // RoPE and the L2 norm, or the temperature
    } else if (m_spec.layers[std::size_t(l)].rope) {
        rotate(a.q.data(), heads, d);
        rotate(a.k.data(), kvHeads, d);
    }
    if (m_spec.qkNorm && normAfterRope) {
        headNorms();
    }
    a.ctx.resize(std::size_t(n * heads * d));
    AttentionMask<T> mask = attentionMask(l);
    if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::BlockSparse) {
        msaSelect(l, a, mask); // MiniMax-M3
    }
    causalAttentionForward<T>(a.q.data(), a.k.data(), a.v.data(), a.ctx.data(), a.probs, n, heads,
        kvHeads, d, d, m_scale, attentionRounding(), mask, &a.sinkProbs);
    round(a.ctx);
    if (gated) {
        applyOutputGate(a);
    }
    // Under tensor parallelism `out` is a partial sum: the bias joins after the reduction.
    project(a.ctx.data(), m_p.value(p + ".o_proj.weight"),
        m_tpSum ? nullptr : m_p.value(p + ".o_proj.bias"), out, n, heads * d, h);
}

template <typename T>
void GradientPass<T>::attentionBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]);
    const std::string p = attn(l);
    std::vector<T> dctx(a.ctx.size());
    linearBackward<T>(a.ctx.data(), m_p.value(p + ".o_proj.weight"), dout, dctx.data(),
        m_p.grad(p + ".o_proj.weight"), m_p.grad(p + ".o_proj.bias"), n, heads * d, h, false);
    round(dctx);
    std::vector<T> dgate;
    if (m_spec.attentionOutputGate) {
        dgate = outputGateBackward(a, dctx);
    }
    std::vector<T> dq(a.q.size());
    std::vector<T> dk(a.k.size(), T(0));
    std::vector<T> dv(a.v.size(), T(0));
    causalAttentionBackward<T>(a.q.data(), a.k.data(), a.v.data(), a.probs, dctx.data(), dq.data(),
        dk.data(), dv.data(), n, heads, kvHeads, d, d, m_scale, attentionMask(l), &a.sinkProbs,
        m_p.grad(p + ".sinks"));
    for (auto* g : { &dq, &dk, &dv }) {
        round(*g);
    }
    const bool normAfterRope = m_spec.family == model::Family::Hunyuan;
    const auto headNormsBackward = [&] {
        const LayerNames names = layerNames(m_spec, l);
        std::vector<T> dqPre(dq.size(), T(0));
        std::vector<T> dkPre(dk.size(), T(0));
        rmsNormBackward<T>(a.qPre.data(), m_p.value(names.qNorm + ".weight"), dq.data(),
            dqPre.data(), m_p.grad(names.qNorm + ".weight"), n * heads, d, m_spec.normEps);
        rmsNormBackward<T>(a.kPre.data(), m_p.value(names.kNorm + ".weight"), dk.data(),
            dkPre.data(), m_p.grad(names.kNorm + ".weight"), n * kvHeads, d, m_spec.normEps);
        dq = std::move(dqPre);
        dk = std::move(dkPre);
        round(dq);
        round(dk);
    };
    if (m_spec.qkNorm && normAfterRope) {
        headNormsBackward();
    }
    if (llama4()) {
        llama4QueryKeyBackward(l, a, dq, dk);
    } else if (m_spec.layers[std::size_t(l)].rope) {
        ropeBackward<T>(dq.data(), n, heads, d, m_positions, m_rope);
        ropeBackward<T>(dk.data(), n, kvHeads, d, m_positions, m_rope);
        round(dq);
        round(dk);
    }
    if (m_spec.qkNorm && !normAfterRope) {
        headNormsBackward();
    }
    if (m_spec.qkNormAcrossHeads) {
        acrossHeadsNormBackward(l, a, dq, dk);
    }
    const auto inputGradient
        = [&](const std::string& proj, const std::vector<T>& dy, std::int64_t width) {
              linearBackward<T>(a.xn1.data(), m_p.value(p + proj + ".weight"), dy.data(), dxn1,
                  m_p.grad(p + proj + ".weight"), m_p.grad(p + proj + ".bias"), n, h, width, true);
          };
    if (m_spec.attentionOutputGate) {
        inputGradient(".q_proj", joinQueryGate(dq, dgate), heads * 2 * d);
    } else {
        inputGradient(".q_proj", dq, heads * d);
    }
    inputGradient(".k_proj", dk, kvHeads * d);
    inputGradient(".v_proj", dv, kvHeads * d);
}

#define DAY0_GRADIENT_LAYER(T)                                                                     \
    template Result<void> GradientPass<T>::layerForward(int, std::vector<T>&);                     \
    template Result<void> GradientPass<T>::layerBackward(int, std::vector<T>&);                    \
    template std::int64_t GradientPass<T>::keptBytes(std::size_t) const;                           \
    template void GradientPass<T>::attentionForward(int, LayerActivations<T>&, T*);                \
    template void GradientPass<T>::attentionBackward(int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_LAYER(float)
DAY0_GRADIENT_LAYER(double)

#undef DAY0_GRADIENT_LAYER

} // namespace day0::exec::detail
