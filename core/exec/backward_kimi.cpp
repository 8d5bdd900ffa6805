// The gradient pass's Kimi Delta Attention (gradient_pass.h): Kimi-Linear's KDA layer
// (kimi_delta.cpp's Forward::kimiDeltaBlock; vLLM kda.py, FLA fla/layers/kda.py) forward, keeping
// what its backward reads, and its backward. Kimi-Linear's other layers are the pass's own: MLA
// without RoPE (backward_mla.cpp), the dense first layer, and the MoE with its sigmoid router,
// selection bias and shared experts (backward_ffn.cpp).
//
// The rule runs in its recurrent form, one token after the other from a zero state
// (kimiDeltaRecurrent; the engine's chunked prefill is the same rule, kimi_delta.h), keeping the
// state before each token; its backward is the Gated DeltaNet's (delta_rule_backward.h) with a
// log decay per key channel: Ŝ = diag(e^g) S_{t−1}.
#include "exec/backward_ops.h"
#include "exec/delta_rule_backward.h"
#include "exec/forward.h"
#include "exec/gated_head_norm.h"
#include "exec/gradient_pass.h"
#include "exec/kimi_delta.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::exec::detail {

namespace {

/// The KDA layer's widths: heads, head_dim (keys and values alike), their product and the conv
/// taps.
struct KdaDims {
    std::int64_t heads, d, width, kernel;

    explicit KdaDims(const model::LinearAttentionSpec& la)
        : heads(la.valueHeads)
        , d(la.valueHeadDim)
        , width(la.valueHeads * la.valueHeadDim)
        , kernel(la.convKernel)
    {
    }
};

constexpr const char* kProjections[3] = { "q", "k", "v" };

template <typename T> T siluDerivative(T x)
{
    const T s = sigmoid(x);
    return s * (T(1) + x * (T(1) - s));
}

/// pre[t, c] = Σ_j w[c, j] · x[t + j − (K − 1), c]: a causal depthwise conv from a zero window
/// over `width` channels of rows `stride` apart.
template <typename T>
void causalConv(const T* x, const T* w, T* pre, std::int64_t n, std::int64_t width,
    std::int64_t stride, std::int64_t kernel)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < width; ++c) {
            T sum = T(0);
            for (std::int64_t j = 0; j < kernel; ++j) {
                const std::int64_t src = t + j - (kernel - 1);
                if (src >= 0) {
                    sum += w[c * kernel + j] * x[src * stride + c];
                }
            }
            pre[t * stride + c] = sum;
        }
    }
}

/// Its backward from dpre: dw and dx accumulated.
template <typename T>
void causalConvBackward(const T* x, const T* w, const T* dpre, T* dw, T* dx, std::int64_t n,
    std::int64_t width, std::int64_t stride, std::int64_t kernel)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < kernel; ++j) {
            const std::int64_t src = t + j - (kernel - 1);
            if (src < 0) {
                continue;
            }
            for (std::int64_t c = 0; c < width; ++c) {
                const T g = dpre[t * stride + c];
                dw[c * kernel + j] += g * x[src * stride + c];
                dx[src * stride + c] += g * w[c * kernel + j];
            }
        }
    }
}

} // namespace

template <typename T> void GradientPass<T>::kimiDeltaForward(int l, LayerActivations<T>& a, T* out)
{
    const KdaDims d(*m_spec.linearAttention);
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = attn(l);
    const std::int64_t stride = 3 * d.width; // a token's q | k | v
    // q, k, v: each its projection, its own causal conv from a zero window, SiLU.
    a.mixed.resize(std::size_t(n * stride));
    a.convPre.resize(a.mixed.size());
    std::vector<T> projected(std::size_t(n * d.width));
    for (int i = 0; i < 3; ++i) {
        const std::string name = fmt::format("{}.{}_", p, kProjections[i]);
        project(a.xn1.data(), m_p.value(name + "proj.weight"), nullptr, projected.data(), n, h,
            d.width);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(projected.begin() + t * d.width, d.width,
                a.mixed.begin() + t * stride + i * d.width);
        }
        causalConv(a.mixed.data() + i * d.width, m_p.value(name + "conv1d.weight"),
            a.convPre.data() + i * d.width, n, d.width, stride, d.kernel);
    }
    a.qkUnit.resize(std::size_t(n * 2 * d.width));
    std::vector<T> v(std::size_t(n * d.width));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < stride; ++c) {
            const T x = a.convPre[std::size_t(t * stride + c)];
            const T y = x * sigmoid(x);
            if (c < 2 * d.width) {
                a.qkUnit[std::size_t(t * 2 * d.width + c)] = y;
            } else {
                v[std::size_t(t * d.width + c - 2 * d.width)] = y;
            }
        }
    }
    l2NormalizeRows(a.qkUnit.data(), n * 2 * d.heads, d.d, 1e-6);
    const T scale = T(1.0 / std::sqrt(double(d.d)));
    std::vector<T> q(std::size_t(n * d.width));
    std::vector<T> k(q.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < d.width; ++c) {
            q[std::size_t(t * d.width + c)] = a.qkUnit[std::size_t(t * 2 * d.width + c)] * scale;
            k[std::size_t(t * d.width + c)] = a.qkUnit[std::size_t(t * 2 * d.width + d.width + c)];
        }
    }
    // The per-channel log decay g = −e^A_log[head] · softplus(f_b(f_a(x)) + dt_bias), β = σ(b).
    a.decayLow.resize(std::size_t(n * d.d));
    a.decayIn.resize(std::size_t(n * d.width));
    project(a.xn1.data(), m_p.value(p + ".f_a_proj.weight"), nullptr, a.decayLow.data(), n, h, d.d);
    project(a.decayLow.data(), m_p.value(p + ".f_b_proj.weight"), nullptr, a.decayIn.data(), n, d.d,
        d.width);
    const T* aLog = m_p.value(p + ".A_log");
    const T* dtBias = m_p.value(p + ".dt_bias");
    // Kimi-K3's safe gate (gate_lower_bound lb): g = lb · σ(e^A_log[head] · (f + dt_bias)).
    const T lowerBound = T(m_spec.linearAttention->gateLowerBound);
    a.decay.resize(a.decayIn.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < d.width; ++c) {
            const std::size_t i = std::size_t(t * d.width + c);
            a.decayIn[i] += dtBias[c];
            const T rate = std::exp(aLog[c / d.d]);
            a.decay[i] = lowerBound != T(0) ? lowerBound * sigmoid(rate * a.decayIn[i])
                                            : -rate * softplus(a.decayIn[i]);
        }
    }
    a.beta.resize(std::size_t(n * d.heads));
    project(a.xn1.data(), m_p.value(p + ".b_proj.weight"), nullptr, a.beta.data(), n, h, d.heads);
    for (T& b : a.beta) {
        b = sigmoid(b);
    }
    // The rule token after token, keeping the state before each.
    const std::int64_t stateSize = d.heads * d.d * d.d;
    std::vector<T> state(std::size_t(stateSize), T(0));
    a.states.resize(std::size_t(n * stateSize));
    a.core.resize(std::size_t(n * d.width));
    const DeltaRuleShape one { 1, d.heads, d.d, d.d };
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy(state.begin(), state.end(), a.states.begin() + t * stateSize);
        const std::int64_t at = t * d.width;
        kimiDeltaRecurrent(q.data() + at, k.data() + at, v.data() + at, a.decay.data() + at,
            a.beta.data() + t * d.heads, state.data(), a.core.data() + at, one);
    }
    // o_norm: RMS norm over each head · w · σ(g_b(g_a(x))) (Kimi-K3's use_full_rank_gate:
    // σ(g_proj(x))), then o_proj.
    a.z.resize(std::size_t(n * d.width));
    if (m_spec.linearAttention->fullRankGate) {
        project(a.xn1.data(), m_p.value(p + ".g_proj.weight"), nullptr, a.z.data(), n, h, d.width);
    } else {
        a.gateLow.resize(std::size_t(n * d.d));
        project(
            a.xn1.data(), m_p.value(p + ".g_a_proj.weight"), nullptr, a.gateLow.data(), n, h, d.d);
        project(a.gateLow.data(), m_p.value(p + ".g_b_proj.weight"), nullptr, a.z.data(), n, d.d,
            d.width);
    }
    a.gatedCore = a.core;
    gatedHeadNorm(a.gatedCore.data(), a.z.data(), m_p.value(p + ".o_norm.weight"), n * d.heads, d.d,
        m_spec.normEps, HeadGate::Sigmoid, [](T*, std::int64_t) {});
    project(a.gatedCore.data(), m_p.value(p + ".o_proj.weight"), nullptr, out, n, d.width, h);
}

template <typename T>
void GradientPass<T>::kimiDeltaBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const KdaDims d(*m_spec.linearAttention);
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = attn(l);
    const std::int64_t stride = 3 * d.width;
    const auto inputGradient
        = [&](const std::string& proj, const std::vector<T>& dy, std::int64_t width) {
              linearBackward<T>(a.xn1.data(), m_p.value(p + proj + ".weight"), dy.data(), dxn1,
                  m_p.grad(p + proj + ".weight"), nullptr, n, h, width, true);
          };
    // o_proj, then o_norm y = norm(o)·w · σ(z): dz = dy·norm(o)·w·σ'(z), and norm(o)·w is an
    // RMSNorm whose output gradient is dy·σ(z).
    std::vector<T> dgated(a.gatedCore.size());
    linearBackward<T>(a.gatedCore.data(), m_p.value(p + ".o_proj.weight"), dout, dgated.data(),
        m_p.grad(p + ".o_proj.weight"), nullptr, n, d.width, h, false);
    const T* normW = m_p.value(p + ".o_norm.weight");
    std::vector<T> dz(a.z.size());
    std::vector<T> dnormed(a.z.size());
    for (std::int64_t row = 0; row < n * d.heads; ++row) {
        const T* o = a.core.data() + row * d.d;
        double sum = 0.0;
        for (std::int64_t i = 0; i < d.d; ++i) {
            sum += double(o[i]) * double(o[i]);
        }
        const T inv = T(1.0 / std::sqrt(sum / double(d.d) + m_spec.normEps));
        for (std::int64_t i = 0; i < d.d; ++i) {
            const std::size_t at = std::size_t(row * d.d + i);
            const T s = sigmoid(a.z[at]);
            dz[at] = dgated[at] * o[i] * inv * normW[i] * s * (T(1) - s);
            dnormed[at] = dgated[at] * s;
        }
    }
    std::vector<T> dcore(a.core.size(), T(0));
    rmsNormBackward<T>(a.core.data(), normW, dnormed.data(), dcore.data(),
        m_p.grad(p + ".o_norm.weight"), n * d.heads, d.d, m_spec.normEps);
    // The output gate: its low-rank pair, or Kimi-K3's full-rank g_proj.
    if (m_spec.linearAttention->fullRankGate) {
        inputGradient(".g_proj", dz, d.width);
    } else {
        std::vector<T> dgateLow(a.gateLow.size(), T(0));
        linearBackward<T>(a.gateLow.data(), m_p.value(p + ".g_b_proj.weight"), dz.data(),
            dgateLow.data(), m_p.grad(p + ".g_b_proj.weight"), nullptr, n, d.d, d.width, false);
        inputGradient(".g_a_proj", dgateLow, d.d);
    }

    // The rule in reverse, head by head, on q, k, v, g and β gathered from what the forward kept.
    const T scale = T(1.0 / std::sqrt(double(d.d)));
    const std::int64_t stateSize = d.d * d.d;
    std::vector<T> dqUnit(a.qkUnit.size(), T(0)); // q and k after the L2 norm
    std::vector<T> dconv(a.convPre.size(), T(0)); // q | k | v after the SiLU, then before it
    std::vector<T> ddecay(a.decay.size(), T(0));
    std::vector<T> dbeta(a.beta.size(), T(0));
    const auto tokenRows = [&](std::int64_t rows, std::int64_t width) {
        return std::vector<T>(std::size_t(rows * width));
    };
    auto q = tokenRows(n, d.d);
    auto k = tokenRows(n, d.d);
    auto v = tokenRows(n, d.d);
    auto g = tokenRows(n, d.d);
    auto dO = tokenRows(n, d.d);
    auto dq = tokenRows(n, d.d);
    auto dk = tokenRows(n, d.d);
    auto dv = tokenRows(n, d.d);
    auto dg = tokenRows(n, d.d);
    auto beta = tokenRows(n, 1);
    auto db = tokenRows(n, 1);
    for (std::int64_t hd = 0; hd < d.heads; ++hd) {
        for (std::int64_t t = 0; t < n; ++t) {
            const T* unit = a.qkUnit.data() + t * 2 * d.width + hd * d.d;
            const T* pre = a.convPre.data() + t * stride + 2 * d.width + hd * d.d;
            const std::size_t row = std::size_t(t * d.d);
            for (std::int64_t i = 0; i < d.d; ++i) {
                q[row + std::size_t(i)] = unit[i] * scale;
                k[row + std::size_t(i)] = unit[d.width + i];
                v[row + std::size_t(i)] = pre[i] * sigmoid(pre[i]);
            }
            std::copy_n(a.decay.begin() + t * d.width + hd * d.d, d.d, g.begin() + t * d.d);
            std::copy_n(dcore.begin() + t * d.width + hd * d.d, d.d, dO.begin() + t * d.d);
            beta[std::size_t(t)] = a.beta[std::size_t(t * d.heads + hd)];
        }
        for (auto* x : { &dq, &dk, &dv, &dg, &db }) {
            std::fill(x->begin(), x->end(), T(0));
        }
        const DeltaHeadTrace<T> trace { n, d.d, d.d, q.data(), k.data(), v.data(), g.data(), true,
            beta.data(), a.states.data() + hd * stateSize, d.heads * stateSize };
        deltaRuleBackward(
            trace, dO.data(), { dq.data(), dk.data(), dv.data(), dg.data(), db.data() });
        for (std::int64_t t = 0; t < n; ++t) {
            T* dunit = dqUnit.data() + t * 2 * d.width + hd * d.d;
            T* dvRow = dconv.data() + t * stride + 2 * d.width + hd * d.d;
            const std::size_t row = std::size_t(t * d.d);
            for (std::int64_t i = 0; i < d.d; ++i) {
                dunit[i] = dq[row + std::size_t(i)] * scale;
                dunit[d.width + i] = dk[row + std::size_t(i)];
                dvRow[i] = dv[row + std::size_t(i)];
            }
            std::copy_n(dg.begin() + t * d.d, d.d, ddecay.begin() + t * d.width + hd * d.d);
            dbeta[std::size_t(t * d.heads + hd)] = db[std::size_t(t)];
        }
    }
    // The L2 norm x / sqrt(Σx² + ε) is the RMSNorm of ε / d, divided by √d.
    const T unitScale = T(1.0 / std::sqrt(double(d.d)));
    for (T& x : dqUnit) {
        x *= unitScale;
    }
    std::vector<T> silu(a.qkUnit.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < 2 * d.width; ++c) {
            const T x = a.convPre[std::size_t(t * stride + c)];
            silu[std::size_t(t * 2 * d.width + c)] = x * sigmoid(x);
        }
    }
    std::vector<T> dqk(silu.size(), T(0));
    rmsNormBackward<T>(silu.data(), nullptr, dqUnit.data(), dqk.data(), nullptr, n * 2 * d.heads,
        d.d, 1e-6 / double(d.d));
    // The SiLUs, then each conv over its projection.
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < stride; ++c) {
            const std::size_t at = std::size_t(t * stride + c);
            const T dy = c < 2 * d.width ? dqk[std::size_t(t * 2 * d.width + c)] : dconv[at];
            dconv[at] = dy * siluDerivative(a.convPre[at]);
        }
    }
    std::vector<T> dmixed(a.mixed.size(), T(0));
    std::vector<T> dprojected(std::size_t(n * d.width));
    for (int i = 0; i < 3; ++i) {
        const std::string name = fmt::format(".{}_", kProjections[i]);
        causalConvBackward(a.mixed.data() + i * d.width, m_p.value(p + name + "conv1d.weight"),
            dconv.data() + i * d.width, m_p.grad(p + name + "conv1d.weight"),
            dmixed.data() + i * d.width, n, d.width, stride, d.kernel);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(dmixed.begin() + t * stride + i * d.width, d.width,
                dprojected.begin() + t * d.width);
        }
        inputGradient(name + "proj", dprojected, d.width);
    }
    // β = σ(b); g = −e^A_log[head] · softplus(x), x = f_b(f_a(x)) + dt_bias (softplus' = σ, 1
    // above torch's threshold 20), so ∂g/∂A_log = g; the safe gate g = lb · σ(e^A · x) has
    // ∂g/∂x = lb · σ'(e^A · x) · e^A and ∂g/∂A_log = ∂g/∂x · x.
    std::vector<T> db2(a.beta.size());
    for (std::size_t i = 0; i < db2.size(); ++i) {
        db2[i] = dbeta[i] * a.beta[i] * (T(1) - a.beta[i]);
    }
    inputGradient(".b_proj", db2, d.heads);
    const T* aLog = m_p.value(p + ".A_log");
    T* daLog = m_p.grad(p + ".A_log");
    T* ddt = m_p.grad(p + ".dt_bias");
    const T lowerBound = T(m_spec.linearAttention->gateLowerBound);
    std::vector<T> draw(a.decay.size());
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < d.width; ++c) {
            const std::size_t i = std::size_t(t * d.width + c);
            const T x = a.decayIn[i];
            const T rate = std::exp(aLog[c / d.d]);
            if (lowerBound != T(0)) {
                const T s = sigmoid(rate * x);
                draw[i] = ddecay[i] * lowerBound * s * (T(1) - s) * rate;
                daLog[c / d.d] += draw[i] * x;
            } else {
                daLog[c / d.d] += ddecay[i] * a.decay[i];
                draw[i] = ddecay[i] * -rate * (x > T(20) ? T(1) : sigmoid(x));
            }
            ddt[c] += draw[i];
        }
    }
    std::vector<T> ddecayLow(a.decayLow.size(), T(0));
    linearBackward<T>(a.decayLow.data(), m_p.value(p + ".f_b_proj.weight"), draw.data(),
        ddecayLow.data(), m_p.grad(p + ".f_b_proj.weight"), nullptr, n, d.d, d.width, false);
    inputGradient(".f_a_proj", ddecayLow, d.d);
}

#define DAY0_GRADIENT_KIMI(T)                                                                      \
    template void GradientPass<T>::kimiDeltaForward(int, LayerActivations<T>&, T*);                \
    template void GradientPass<T>::kimiDeltaBackward(int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_KIMI(float)
DAY0_GRADIENT_KIMI(double)

#undef DAY0_GRADIENT_KIMI

} // namespace day0::exec::detail
