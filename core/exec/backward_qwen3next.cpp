// The gradient pass's pieces of the Qwen3-Next hybrid and Qwen3.5's text model (gradient_pass.h):
// the Gated DeltaNet layer (transformers' Qwen3NextGatedDeltaNet, the engine's
// Forward::gatedDeltaNetBlock in gated_delta_net.cpp) forward and backward, the full-attention
// layers' sigmoid output gate (Qwen3NextAttention: q_proj emits each head's query, then its
// gate) and the shared expert's sigmoid gate (Qwen3NextSparseMoeBlock). The zero-centred norms
// (1 + w) are plain RMSNorms on 1 + w (backward.cpp init), the q/k norms, partial RoPE, router and
// experts those of the other families.
//
// The delta rule runs in its recurrent form, one token after the other from a zero state (the
// engine's chunked prefill is the same rule, gated_delta_net.h), and keeps the state before each
// token; its backward walks the tokens in reverse (delta_rule_backward.h, with one decay per
// head: Ŝ = e^g S_{t−1}).
#include "exec/backward_ops.h"
#include "exec/delta_rule_backward.h"
#include "exec/forward.h"
#include "exec/gated_delta_net.h"
#include "exec/gated_head_norm.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace day0::exec::detail {

namespace {

/// The Gated DeltaNet's widths.
struct DeltaDims {
    std::int64_t nk, nv, dk, dv, r, keyDim, valueDim, convDim, kernel;

    explicit DeltaDims(const model::LinearAttentionSpec& la)
        : nk(la.keyHeads)
        , nv(la.valueHeads)
        , dk(la.keyHeadDim)
        , dv(la.valueHeadDim)
        , r(la.valueHeads / la.keyHeads)
        , keyDim(la.keyHeads * la.keyHeadDim)
        , valueDim(la.valueHeads * la.valueHeadDim)
        , convDim(2 * la.keyHeads * la.keyHeadDim + la.valueHeads * la.valueHeadDim)
        , kernel(la.convKernel)
    {
    }
    /// One key head's rows of Qwen3-Next's in_proj_qkvz: its q, its k, its r value heads' v
    /// and their z.
    [[nodiscard]] std::int64_t group() const { return 2 * dk + 2 * r * dv; }
};

template <typename T> T siluDerivative(T x)
{
    const T s = sigmoid(x);
    return s * (T(1) + x * (T(1) - s));
}

} // namespace

bool emulatedAsStored(const model::ModelSpec& spec, const std::string& name)
{
    const auto endsWithAny = [&](std::initializer_list<const char*> leaves) {
        return std::any_of(
            leaves.begin(), leaves.end(), [&](const char* leaf) { return name.ends_with(leaf); });
    };
    if (isQwenNext(spec)) {
        // gated_delta_net.cpp: the conv, A_log, dt_bias and the gated norm's weight.
        return name.find(".linear_attn.") != std::string::npos
            && endsWithAny({ ".conv1d.weight", ".A_log", ".dt_bias", ".norm.weight" });
    }
    if (spec.family == model::Family::NemotronH) {
        // nemotron_h_block.cpp: Mamba-2's conv with its bias, A_log, D, dt_bias, the gated group
        // norm's weight (the block's own norm is ".norm.weight" outside the mixer).
        return endsWithAny({ ".mixer.conv1d.weight", ".mixer.conv1d.bias", ".mixer.A_log",
            ".mixer.D", ".mixer.dt_bias", ".mixer.norm.weight" });
    }
    if (spec.family == model::Family::Gemma4) {
        // gemma4_block.cpp: the router's scales and the layer scalar.
        return endsWithAny({ ".router.scale", ".router.per_expert_scale", ".layer_scalar" });
    }
    return false;
}

template <typename T> std::string GradientPass<T>::mixerAnchor(int l) const
{
    return m_spec.layers[std::size_t(l)].mixer == model::MixerKind::GatedDeltaNet
        ? fmt::format("model.layers.{}.linear_attn", l)
        : attn(l);
}

template <typename T> void GradientPass<T>::deltaNetForward(int l, LayerActivations<T>& a, T* out)
{
    const DeltaDims d(*m_spec.linearAttention);
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = mixerAnchor(l);
    a.mixed.resize(std::size_t(n * d.convDim));
    a.z.resize(std::size_t(n * d.valueDim));
    std::vector<T> b(std::size_t(n * d.nv));
    a.decayIn.resize(std::size_t(n * d.nv));
    if (m_spec.family == model::Family::Qwen3Next) {
        // Rows grouped per key head (gated_delta_net.cpp): unpacked as the engine unpacks them.
        std::vector<T> qkvz(std::size_t(n * d.nk * d.group()));
        std::vector<T> ba(std::size_t(n * 2 * d.nv));
        project(a.xn1.data(), m_p.value(p + ".in_proj_qkvz.weight"), nullptr, qkvz.data(), n, h,
            d.nk * d.group());
        project(
            a.xn1.data(), m_p.value(p + ".in_proj_ba.weight"), nullptr, ba.data(), n, h, 2 * d.nv);
        for (std::int64_t t = 0; t < n; ++t) {
            T* row = a.mixed.data() + t * d.convDim;
            for (std::int64_t kh = 0; kh < d.nk; ++kh) {
                const T* src = qkvz.data() + (t * d.nk + kh) * d.group();
                std::copy_n(src, d.dk, row + kh * d.dk);
                std::copy_n(src + d.dk, d.dk, row + d.keyDim + kh * d.dk);
                std::copy_n(src + 2 * d.dk, d.r * d.dv, row + 2 * d.keyDim + kh * d.r * d.dv);
                std::copy_n(src + 2 * d.dk + d.r * d.dv, d.r * d.dv,
                    a.z.data() + t * d.valueDim + kh * d.r * d.dv);
                const T* bsrc = ba.data() + t * 2 * d.nv + kh * 2 * d.r;
                std::copy_n(bsrc, d.r, b.data() + t * d.nv + kh * d.r);
                std::copy_n(bsrc + d.r, d.r, a.decayIn.data() + t * d.nv + kh * d.r);
            }
        }
    } else {
        project(a.xn1.data(), m_p.value(p + ".in_proj_qkv.weight"), nullptr, a.mixed.data(), n, h,
            d.convDim);
        project(a.xn1.data(), m_p.value(p + ".in_proj_z.weight"), nullptr, a.z.data(), n, h,
            d.valueDim);
        project(a.xn1.data(), m_p.value(p + ".in_proj_b.weight"), nullptr, b.data(), n, h, d.nv);
        project(a.xn1.data(), m_p.value(p + ".in_proj_a.weight"), nullptr, a.decayIn.data(), n, h,
            d.nv);
    }
    // The causal depthwise conv from a zero window, kept before its SiLU.
    const T* w = m_p.value(p + ".conv1d.weight");
    a.convPre.assign(std::size_t(n * d.convDim), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < d.kernel; ++j) {
            const std::int64_t src = t + j - (d.kernel - 1); // in[t + j] of zeros ++ mixed
            if (src < 0) {
                continue;
            }
            for (std::int64_t c = 0; c < d.convDim; ++c) {
                a.convPre[std::size_t(t * d.convDim + c)]
                    += w[c * d.kernel + j] * a.mixed[std::size_t(src * d.convDim + c)];
            }
        }
    }
    // Its SiLU output, rounded where the engine rounds it (emulated): the L2 norm's input and v.
    a.conv.resize(a.convPre.size());
    for (std::size_t i = 0; i < a.convPre.size(); ++i) {
        const T x = a.convPre[i];
        a.conv[i] = x * sigmoid(x);
    }
    round(a.conv);
    a.qkUnit.resize(std::size_t(n * 2 * d.keyDim));
    std::vector<T> v(std::size_t(n * d.valueDim));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(
            a.conv.begin() + t * d.convDim, 2 * d.keyDim, a.qkUnit.begin() + t * 2 * d.keyDim);
        std::copy_n(
            a.conv.begin() + t * d.convDim + 2 * d.keyDim, d.valueDim, v.begin() + t * d.valueDim);
    }
    l2NormalizeRows(a.qkUnit.data(), n * 2 * d.nk, d.dk, 1e-6);
    round(a.qkUnit);
    // Value head j reads key head j / r; q scaled by dk^-½.
    const T scale = T(1.0 / std::sqrt(double(d.dk)));
    std::vector<T> q(std::size_t(n * d.nv * d.dk));
    std::vector<T> k(q.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < d.nv; ++j) {
            const T* qs = a.qkUnit.data() + t * 2 * d.keyDim + (j / d.r) * d.dk;
            for (std::int64_t i = 0; i < d.dk; ++i) {
                q[std::size_t((t * d.nv + j) * d.dk + i)] = qs[i] * scale;
                k[std::size_t((t * d.nv + j) * d.dk + i)] = qs[d.keyDim + i];
            }
        }
    }
    const T* aLog = m_p.value(p + ".A_log");
    const T* dtBias = m_p.value(p + ".dt_bias");
    a.beta.resize(std::size_t(n * d.nv));
    a.decay.resize(std::size_t(n * d.nv));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < d.nv; ++j) {
            const std::size_t i = std::size_t(t * d.nv + j);
            a.decayIn[i] += dtBias[j];
            a.beta[i] = sigmoid(b[i]);
            a.decay[i] = -std::exp(aLog[j]) * softplus(a.decayIn[i]);
        }
    }
    round(a.beta); // β is in the model's dtype, the decay g in fp32 (transformers)
    // The rule token after token, keeping the state before each.
    const std::int64_t stateSize = d.nv * d.dk * d.dv;
    std::vector<T> state(std::size_t(stateSize), T(0));
    a.states.resize(std::size_t(n * stateSize));
    a.core.resize(std::size_t(n * d.valueDim));
    const DeltaRuleShape one { 1, d.nv, d.dk, d.dv };
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy(state.begin(), state.end(), a.states.begin() + t * stateSize);
        gatedDeltaRecurrent(q.data() + t * d.nv * d.dk, k.data() + t * d.nv * d.dk,
            v.data() + t * d.valueDim, a.decay.data() + t * d.nv, a.beta.data() + t * d.nv,
            state.data(), a.core.data() + t * d.valueDim, one);
    }
    if (emulated() && n > 1) {
        // The engine's prefill runs the chunked form: the same rule, summed in another order,
        // so its output (rounded next) is taken from the same kernel. The backward reads the
        // states the recurrent form kept, which differ from the chunked form's by fp32
        // arithmetic only.
        std::fill(state.begin(), state.end(), T(0));
        gatedDeltaChunked(q.data(), k.data(), v.data(), a.decay.data(), a.beta.data(), state.data(),
            a.core.data(), { n, d.nv, d.dk, d.dv }, kDeltaRuleChunk);
    }
    round(a.core);
    // The gated RMSNorm over each value head (the engine's, with its roundings), then out_proj.
    a.gatedCore = a.core;
    gatedHeadNorm(a.gatedCore.data(), a.z.data(), m_p.value(p + ".norm.weight"), n * d.nv, d.dv,
        m_spec.normEps, HeadGate::Silu, [this](T* x, std::int64_t count) { round(x, count); });
    project(a.gatedCore.data(), m_p.value(p + ".out_proj.weight"), nullptr, out, n, d.valueDim, h);
}

template <typename T>
void GradientPass<T>::deltaNetBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const DeltaDims d(*m_spec.linearAttention);
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = mixerAnchor(l);
    // out_proj, then the gated norm y = norm(o)·w · silu(z): dz = dy·norm(o)·w·silu'(z), and
    // norm(o)·w is an RMSNorm whose output gradient is dy·silu(z).
    std::vector<T> dgated(a.gatedCore.size());
    linearBackward<T>(a.gatedCore.data(), m_p.value(p + ".out_proj.weight"), dout, dgated.data(),
        m_p.grad(p + ".out_proj.weight"), nullptr, n, d.valueDim, h, false);
    round(dgated);
    const T* normW = m_p.value(p + ".norm.weight");
    std::vector<T> dz(a.z.size());
    std::vector<T> dnormed(a.z.size());
    for (std::int64_t row = 0; row < n * d.nv; ++row) {
        const T* o = a.core.data() + row * d.dv;
        double sum = 0.0;
        for (std::int64_t i = 0; i < d.dv; ++i) {
            sum += double(o[i]) * double(o[i]);
        }
        const T inv = T(1.0 / std::sqrt(sum / double(d.dv) + m_spec.normEps));
        for (std::int64_t i = 0; i < d.dv; ++i) {
            const std::size_t at = std::size_t(row * d.dv + i);
            const T zi = a.z[at];
            dz[at] = dgated[at] * o[i] * inv * normW[i] * siluDerivative(zi);
            dnormed[at] = dgated[at] * zi * sigmoid(zi);
        }
    }
    // Emulated: the gradients of the gate's input z and of the rounded norm(o)·w, then o's.
    round(dz);
    round(dnormed);
    std::vector<T> dcore(a.core.size(), T(0));
    rmsNormBackward<T>(a.core.data(), normW, dnormed.data(), dcore.data(),
        m_p.grad(p + ".norm.weight"), n * d.nv, d.dv, m_spec.normEps);
    round(dcore);

    // The rule in reverse (delta_rule_backward.h), value head by value head, on q, k, v, g and
    // β gathered from what the forward kept.
    const T scale = T(1.0 / std::sqrt(double(d.dk)));
    const std::int64_t stateSize = d.dk * d.dv;
    std::vector<T> dqUnit(a.qkUnit.size(), T(0)); // q and k per key head, after the L2 norm
    std::vector<T> dconv(std::size_t(n * d.convDim), T(0));
    std::vector<T> dbeta(a.beta.size(), T(0));
    std::vector<T> ddecay(a.decay.size(), T(0));
    {
        std::vector<T> q(std::size_t(n * d.dk));
        std::vector<T> k(q.size());
        std::vector<T> v(std::size_t(n * d.dv));
        std::vector<T> g(static_cast<std::size_t>(n));
        std::vector<T> beta(g.size());
        std::vector<T> dO(v.size());
        std::vector<T> dq(q.size());
        std::vector<T> dk(q.size());
        std::vector<T> dv(v.size());
        std::vector<T> dg(g.size());
        std::vector<T> db(g.size());
        for (std::int64_t j = 0; j < d.nv; ++j) {
            const std::int64_t kh = j / d.r;
            for (std::int64_t t = 0; t < n; ++t) {
                const std::size_t hv = std::size_t(t * d.nv + j);
                const T* qk = a.qkUnit.data() + t * 2 * d.keyDim;
                for (std::int64_t i = 0; i < d.dk; ++i) {
                    q[std::size_t(t * d.dk + i)] = qk[kh * d.dk + i] * scale;
                    k[std::size_t(t * d.dk + i)] = qk[d.keyDim + kh * d.dk + i];
                }
                // v as the rule read it: SiLU of the conv (rounded where the forward rounds).
                std::copy_n(a.conv.data() + t * d.convDim + 2 * d.keyDim + j * d.dv, d.dv,
                    v.begin() + t * d.dv);
                std::copy_n(dcore.data() + t * d.valueDim + j * d.dv, d.dv, dO.begin() + t * d.dv);
                g[std::size_t(t)] = a.decay[hv];
                beta[std::size_t(t)] = a.beta[hv];
            }
            for (auto* x : { &dq, &dk, &dv, &dg, &db }) {
                std::fill(x->begin(), x->end(), T(0));
            }
            const DeltaHeadTrace<T> trace { n, d.dk, d.dv, q.data(), k.data(), v.data(), g.data(),
                false, beta.data(), a.states.data() + j * stateSize, d.nv * stateSize };
            deltaRuleBackward(
                trace, dO.data(), { dq.data(), dk.data(), dv.data(), dg.data(), db.data() });
            for (std::int64_t t = 0; t < n; ++t) {
                const std::size_t hv = std::size_t(t * d.nv + j);
                T* dqRow = dqUnit.data() + t * 2 * d.keyDim + kh * d.dk;
                T* dkRow = dqRow + d.keyDim;
                for (std::int64_t i = 0; i < d.dk; ++i) {
                    dqRow[i] += dq[std::size_t(t * d.dk + i)] * scale;
                    dkRow[i] += dk[std::size_t(t * d.dk + i)];
                }
                std::copy_n(dv.begin() + t * d.dv, d.dv,
                    dconv.begin() + t * d.convDim + 2 * d.keyDim + j * d.dv);
                ddecay[hv] = dg[std::size_t(t)];
                dbeta[hv] = db[std::size_t(t)];
            }
        }
    }
    // Emulated: the rule's input gradients, in its inputs' dtype (q, k, v and β; g is fp32).
    round(dqUnit);
    round(dconv);
    round(dbeta);
    // The L2 norm x / sqrt(Σx² + ε) is the RMSNorm of ε / dk, divided by √dk.
    for (T& g : dqUnit) {
        g *= scale;
    }
    std::vector<T> conv(std::size_t(n * 2 * d.keyDim));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.conv.begin() + t * d.convDim, 2 * d.keyDim, conv.begin() + t * 2 * d.keyDim);
    }
    std::vector<T> dqk(conv.size(), T(0));
    rmsNormBackward<T>(conv.data(), nullptr, dqUnit.data(), dqk.data(), nullptr, n * 2 * d.nk, d.dk,
        1e-6 / double(d.dk));
    round(dqk);
    // The conv's SiLU, then its taps over zeros ++ mixed.
    const T* w = m_p.value(p + ".conv1d.weight");
    T* dw = m_p.grad(p + ".conv1d.weight");
    std::vector<T> dmixed(a.mixed.size(), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < d.convDim; ++c) {
            const std::size_t at = std::size_t(t * d.convDim + c);
            const T dy = c < 2 * d.keyDim ? dqk[std::size_t(t * 2 * d.keyDim + c)] : dconv[at];
            dconv[at] = dy * siluDerivative(a.convPre[at]);
        }
        for (std::int64_t j = 0; j < d.kernel; ++j) {
            const std::int64_t src = t + j - (d.kernel - 1);
            if (src < 0) {
                continue;
            }
            for (std::int64_t c = 0; c < d.convDim; ++c) {
                const T dpre = dconv[std::size_t(t * d.convDim + c)];
                dw[c * d.kernel + j] += dpre * a.mixed[std::size_t(src * d.convDim + c)];
                dmixed[std::size_t(src * d.convDim + c)] += dpre * w[c * d.kernel + j];
            }
        }
    }
    round(dmixed); // the conv's input gradient
    // β = σ(b); g = −e^A · softplus(a + dt_bias) (softplus' = σ, 1 above torch's threshold 20).
    const T* aLog = m_p.value(p + ".A_log");
    T* daLog = m_p.grad(p + ".A_log");
    T* ddt = m_p.grad(p + ".dt_bias");
    std::vector<T> db(a.beta.size());
    std::vector<T> da(a.beta.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < d.nv; ++j) {
            const std::size_t i = std::size_t(t * d.nv + j);
            db[i] = dbeta[i] * a.beta[i] * (T(1) - a.beta[i]);
            daLog[j] += ddecay[i] * a.decay[i];
            const T x = a.decayIn[i];
            da[i] = ddecay[i] * -std::exp(aLog[j]) * (x > T(20) ? T(1) : sigmoid(x));
            ddt[j] += da[i];
        }
    }
    round(db); // the gradients of b and a, in_proj outputs in the model's dtype
    round(da);
    // The in-projections' input gradients into dxn1.
    const auto inputGradient
        = [&](const std::string& proj, const std::vector<T>& dy, std::int64_t width) {
              linearBackward<T>(a.xn1.data(), m_p.value(p + proj + ".weight"), dy.data(), dxn1,
                  m_p.grad(p + proj + ".weight"), nullptr, n, h, width, true);
          };
    if (m_spec.family == model::Family::Qwen3Next) {
        std::vector<T> dqkvz(std::size_t(n * d.nk * d.group()));
        std::vector<T> dba(std::size_t(n * 2 * d.nv));
        for (std::int64_t t = 0; t < n; ++t) {
            const T* row = dmixed.data() + t * d.convDim;
            for (std::int64_t kh = 0; kh < d.nk; ++kh) {
                T* dst = dqkvz.data() + (t * d.nk + kh) * d.group();
                std::copy_n(row + kh * d.dk, d.dk, dst);
                std::copy_n(row + d.keyDim + kh * d.dk, d.dk, dst + d.dk);
                std::copy_n(row + 2 * d.keyDim + kh * d.r * d.dv, d.r * d.dv, dst + 2 * d.dk);
                std::copy_n(dz.data() + t * d.valueDim + kh * d.r * d.dv, d.r * d.dv,
                    dst + 2 * d.dk + d.r * d.dv);
                T* bdst = dba.data() + t * 2 * d.nv + kh * 2 * d.r;
                std::copy_n(db.data() + t * d.nv + kh * d.r, d.r, bdst);
                std::copy_n(da.data() + t * d.nv + kh * d.r, d.r, bdst + d.r);
            }
        }
        inputGradient(".in_proj_qkvz", dqkvz, d.nk * d.group());
        inputGradient(".in_proj_ba", dba, 2 * d.nv);
    } else {
        inputGradient(".in_proj_qkv", dmixed, d.convDim);
        inputGradient(".in_proj_z", dz, d.valueDim);
        inputGradient(".in_proj_b", db, d.nv);
        inputGradient(".in_proj_a", da, d.nv);
    }
}

template <typename T>
void GradientPass<T>::splitQueryGate(
    const std::vector<T>& both, std::vector<T>& q, LayerActivations<T>& a)
{
    const std::int64_t d = m_spec.headDim;
    const std::int64_t rows = std::int64_t(both.size()) / (2 * d); // tokens × heads
    q.resize(std::size_t(rows * d));
    a.outGate.resize(std::size_t(rows * d));
    for (std::int64_t i = 0; i < rows; ++i) {
        std::copy_n(both.begin() + i * 2 * d, d, q.begin() + i * d);
        std::copy_n(both.begin() + i * 2 * d + d, d, a.outGate.begin() + i * d);
    }
}

template <typename T> void GradientPass<T>::applyOutputGate(LayerActivations<T>& a)
{
    a.ungated = a.ctx;
    for (std::size_t i = 0; i < a.ctx.size(); ++i) {
        a.ctx[i] *= sigmoid(a.outGate[i]);
    }
    round(a.ctx); // the engine's emulated forward rounds the gated context
}

template <typename T>
std::vector<T> GradientPass<T>::outputGateBackward(
    const LayerActivations<T>& a, std::vector<T>& dctx) const
{
    std::vector<T> dgate(dctx.size());
    for (std::size_t i = 0; i < dctx.size(); ++i) {
        const T s = sigmoid(a.outGate[i]);
        dgate[i] = dctx[i] * a.ungated[i] * s * (T(1) - s);
        dctx[i] *= s;
    }
    // Emulated: both are gradients of tensors in the model's dtype.
    round(dgate);
    round(dctx);
    return dgate;
}

template <typename T>
std::vector<T> GradientPass<T>::joinQueryGate(
    const std::vector<T>& dq, const std::vector<T>& dgate) const
{
    const std::int64_t d = m_spec.headDim;
    const std::int64_t rows = std::int64_t(dq.size()) / d;
    std::vector<T> both(std::size_t(rows * 2 * d));
    for (std::int64_t i = 0; i < rows; ++i) {
        std::copy_n(dq.begin() + i * d, d, both.begin() + i * 2 * d);
        std::copy_n(dgate.begin() + i * d, d, both.begin() + i * 2 * d + d);
    }
    return both;
}

template <typename T>
void GradientPass<T>::sharedGateForward(int l, LayerActivations<T>& a, std::vector<T>& shared)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    a.sharedOut = shared;
    a.sharedGate.resize(std::size_t(n));
    project(a.xn2.data(), m_p.value(layerNames(m_spec, l).ffn + ".shared_expert_gate.weight"),
        nullptr, a.sharedGate.data(), n, h, 1);
    for (std::int64_t t = 0; t < n; ++t) {
        T& s = a.sharedGate[std::size_t(t)];
        s = sigmoid(s);
        for (std::int64_t c = 0; c < h; ++c) {
            shared[std::size_t(t * h + c)] *= s;
        }
    }
}

template <typename T>
std::vector<T> GradientPass<T>::sharedGateBackward(
    int l, const LayerActivations<T>& a, const T* dout, T* dxn2)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string gate = layerNames(m_spec, l).ffn + ".shared_expert_gate.weight";
    std::vector<T> dshared(std::size_t(n * h));
    std::vector<T> dlogit(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
        const T s = a.sharedGate[std::size_t(t)];
        T dot = T(0);
        for (std::int64_t c = 0; c < h; ++c) {
            const std::size_t i = std::size_t(t * h + c);
            dshared[i] = dout[i] * s;
            dot += dout[i] * a.sharedOut[i];
        }
        dlogit[std::size_t(t)] = dot * s * (T(1) - s);
    }
    // Emulated: the shared expert's output and the gate's logit are in the model's dtype.
    round(dshared);
    round(dlogit);
    linearBackward<T>(
        a.xn2.data(), m_p.value(gate), dlogit.data(), dxn2, m_p.grad(gate), nullptr, n, h, 1, true);
    return dshared;
}

#define DAY0_GRADIENT_QWEN3NEXT(T)                                                                 \
    template std::string GradientPass<T>::mixerAnchor(int) const;                                  \
    template void GradientPass<T>::deltaNetForward(int, LayerActivations<T>&, T*);                 \
    template void GradientPass<T>::deltaNetBackward(                                               \
        int, const LayerActivations<T>&, const T*, T*);                                            \
    template void GradientPass<T>::splitQueryGate(                                                 \
        const std::vector<T>&, std::vector<T>&, LayerActivations<T>&);                             \
    template void GradientPass<T>::applyOutputGate(LayerActivations<T>&);                          \
    template std::vector<T> GradientPass<T>::outputGateBackward(                                   \
        const LayerActivations<T>&, std::vector<T>&) const;                                        \
    template std::vector<T> GradientPass<T>::joinQueryGate(                                        \
        const std::vector<T>&, const std::vector<T>&) const;                                       \
    template void GradientPass<T>::sharedGateForward(int, LayerActivations<T>&, std::vector<T>&);  \
    template std::vector<T> GradientPass<T>::sharedGateBackward(                                   \
        int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_QWEN3NEXT(float)
DAY0_GRADIENT_QWEN3NEXT(double)

#undef DAY0_GRADIENT_QWEN3NEXT

} // namespace day0::exec::detail
