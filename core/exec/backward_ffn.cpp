// The gradient pass's feed-forward blocks (gradient_pass.h): gated MLPs (SwiGLU, Gemma-4's
// gelu-tanh GLU, gpt-oss's clamped SwiGLU with biased experts) and mixture-of-experts with the
// router's backward through its softmax or sigmoid scores and the top-k normalisation (gpt-oss's
// softmax over the chosen logits is the renormalised top-k of the full softmax); experts that
// receive no token keep a zero gradient.
#include "exec/backward_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <algorithm>
#include <array>
#include <string>

namespace day0::exec::detail {

namespace {

/// The gate, up and down projections' names in `module`: gate_proj / up_proj / down_proj, or
/// Mixtral's w1 / w3 / w2 for the experts of the families that keep them (MiniMax-M2).
std::array<std::string, 3> mlpLeaves(const model::ModelSpec& spec, const std::string& module)
{
    if (module.find(".experts.") != std::string::npos) {
        const LayerNames names = layerNames(spec, 0);
        return { names.expertGate, names.expertUp, names.expertDown };
    }
    return { "gate_proj", "up_proj", "down_proj" };
}

} // namespace

template <typename T>
void GradientPass<T>::mlpForward(const std::string& module, const T* x, std::int64_t rows,
    std::int64_t inter, std::vector<T>& g, std::vector<T>& u, std::vector<T>& act, T* out)
{
    const std::int64_t h = m_spec.hiddenSize;
    const auto [gate, up, down] = mlpLeaves(m_spec, module);
    const std::string gp = module + "." + gate;
    const std::string upp = module + "." + up;
    const std::string dp = module + "." + down;
    g.resize(std::size_t(rows * inter));
    u.resize(std::size_t(rows * inter));
    // gpt-oss's experts carry biases (null elsewhere).
    project(x, m_p.value(gp + ".weight"), m_p.value(gp + ".bias"), g.data(), rows, h, inter);
    project(x, m_p.value(upp + ".weight"), m_p.value(upp + ".bias"), u.data(), rows, h, inter);
    if (m_spec.swigluLimit > 0.0 && emulated()) {
        // gpt-oss emulated as the engine's (ffn_block.cpp): the clamped gate, the clamped and
        // shifted up rounded, then the quick GELU's gated product with its roundings.
        const T limit = T(m_spec.swigluLimit);
        act.resize(g.size());
        std::vector<T> up(u.size());
        for (std::size_t j = 0; j < g.size(); ++j) {
            act[j] = std::min(g[j], limit);
            up[j] = std::clamp(u[j], -limit, limit) + T(1);
        }
        round(up);
        if constexpr (std::is_same_v<T, float>) {
            emulatedGatedActivation(
                act.data(), up.data(), rows * inter, Activation::QuickGelu, m_mode);
        }
    } else if (m_spec.swigluLimit > 0.0) {
        // gpt-oss: g and u stay as projected (before the clamps), which the backward masks by.
        act.resize(g.size());
        clampedSwiglu<T>(
            g.data(), u.data(), act.data(), rows * inter, m_spec.swigluLimit, m_spec.swigluAlpha);
    } else {
        act = g;
        if constexpr (std::is_same_v<T, float>) {
            emulatedGatedActivation(act.data(), u.data(), rows * inter, m_activation, m_mode);
        } else {
            gatedActivate(act.data(), u.data(), rows * inter, m_activation);
        }
    }
    project(act.data(), m_p.value(dp + ".weight"), m_p.value(dp + ".bias"), out, rows, inter, h);
}

template <typename T>
void GradientPass<T>::mlpBackward(const std::string& module, const T* x, std::int64_t rows,
    std::int64_t inter, const std::vector<T>& g, const std::vector<T>& u, const std::vector<T>& act,
    const T* dout, T* dx)
{
    const std::int64_t h = m_spec.hiddenSize;
    const auto [gate, up, down] = mlpLeaves(m_spec, module);
    const std::string gp = module + "." + gate;
    const std::string upp = module + "." + up;
    const std::string dp = module + "." + down;
    std::vector<T> dact(act.size());
    linearBackward<T>(act.data(), m_p.value(dp + ".weight"), dout, dact.data(),
        m_p.grad(dp + ".weight"), m_p.grad(dp + ".bias"), rows, inter, h, false);
    round(dact);
    std::vector<T> dg(act.size());
    std::vector<T> du(act.size());
    if (m_spec.swigluLimit > 0.0) {
        clampedSwigluBackward<T>(g.data(), u.data(), dact.data(), dg.data(), du.data(),
            rows * inter, m_spec.swigluLimit, m_spec.swigluAlpha);
    } else if (m_activation == Activation::GeluTanh) {
        geluTanhGluBackward<T>(g.data(), u.data(), dact.data(), dg.data(), du.data(), rows * inter);
    } else {
        swigluBackward<T>(g.data(), u.data(), dact.data(), dg.data(), du.data(), rows * inter);
    }
    round(dg);
    round(du);
    linearBackward<T>(x, m_p.value(gp + ".weight"), dg.data(), dx, m_p.grad(gp + ".weight"),
        m_p.grad(gp + ".bias"), rows, h, inter, true);
    linearBackward<T>(x, m_p.value(upp + ".weight"), du.data(), dx, m_p.grad(upp + ".weight"),
        m_p.grad(upp + ".bias"), rows, h, inter, true);
}

template <typename T> void GradientPass<T>::moeForward(int l, LayerActivations<T>& a, T* out)
{
    const LayerNames names = layerNames(m_spec, l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    std::vector<T> logits(std::size_t(n * e));
    // A softmax router runs in the model's dtype, a sigmoid one in fp32 (as the engine's).
    if (m_router.scoring == model::RouterScoring::Sigmoid) {
        linear<T>(
            a.xn2.data(), m_p.value(names.router + ".weight"), nullptr, logits.data(), n, h, e);
    } else {
        // gpt-oss's router has a bias over all experts (null elsewhere).
        project(a.xn2.data(), m_p.value(names.router + ".weight"),
            m_p.value(names.router + ".bias"), logits.data(), n, h, e);
    }
    // Routed in double as the engine routes (router.h), on the same scores.
    const std::vector<double> wide(logits.begin(), logits.end());
    std::vector<double> bias;
    if (const T* b = m_p.value(names.scoreBias); b != nullptr && moe.expertScoreBias) {
        bias.assign(b, b + e);
    }
    a.routing = routeAndKeep(names.router, wide, n, bias.empty() ? nullptr : bias.data());
    a.scores = selectionScores(wide.data(), n, m_router, nullptr);
    a.groupByExpert(n, e);
    std::fill_n(out, n * h, T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        auto& x = a.experts[std::size_t(ex)];
        const auto m = std::int64_t(x.token.size());
        if (m == 0) {
            continue;
        }
        x.x.resize(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(a.xn2.begin() + x.token[std::size_t(i)] * h, h, x.x.begin() + i * h);
        }
        x.y.resize(std::size_t(m * h));
        mlpForward(fmt::format("{}.experts.{}", names.ffn, ex), x.x.data(), m,
            moe.expertIntermediate, x.g, x.u, x.act, x.y.data());
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const T w = T(a.routing.weights[std::size_t(t * a.routing.k + x.slot[std::size_t(i)])]);
            for (std::int64_t c = 0; c < h; ++c) {
                out[t * h + c] += w * x.y[std::size_t(i * h + c)];
            }
        }
    }
    if (!names.shared.empty()) {
        std::vector<T> shared(std::size_t(n * h));
        mlpForward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
            a.sharedAct, shared.data());
        if (moe.sharedExpertGate) {
            sharedGateForward(l, a, shared); // Qwen3-Next: σ(shared_expert_gate(x)) · shared
        }
        addInPlace(out, shared.data(), n * h);
    }
}

template <typename T>
Routing GradientPass<T>::routeAndKeep(const std::string& router, const std::vector<double>& logits,
    std::int64_t n, const double* bias)
{
    const std::int64_t e = std::int64_t(logits.size()) / n;
    Routing routing = route(logits.data(), n, m_router, bias);
    using numerics::Tensor;
    m_routing.emplace_back(router, Tensor::fromDoubles({ n, e }, logits).to(computeType<T>()));
    if (m_router.scoring == model::RouterScoring::Sigmoid) {
        m_routing.emplace_back(router + "#score",
            Tensor::fromDoubles({ n, e }, selectionScores(logits.data(), n, m_router, bias))
                .to(computeType<T>()));
    }
    m_routing.emplace_back(router + "#topk", Tensor::fromInts({ n, routing.k }, routing.experts));
    return routing;
}

template <typename T>
Result<void> GradientPass<T>::moeBackward(
    int l, const LayerActivations<T>& a, const T* dout, T* dxn2)
{
    const LayerNames names = layerNames(m_spec, l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = a.routing.k;
    if (!names.shared.empty()) {
        // A gated shared expert's own output gradient is the block's times its gate.
        std::vector<T> gated;
        if (moe.sharedExpertGate) {
            gated = sharedGateBackward(l, a, dout, dxn2);
        }
        const T* dshared = moe.sharedExpertGate ? gated.data() : dout;
        m_acts.record(names.shared, dshared, { n, h });
        mlpBackward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
            a.sharedAct, dshared, dxn2);
    }
    // ∂L/∂(combine weight) of each (token, choice), and each expert's own backward.
    std::vector<double> dweight(std::size_t(n * k), 0.0);
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
            const T w = T(a.routing.weights[choice]);
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dy[std::size_t(i * h + c)] = w * dout[t * h + c];
                dot += double(dout[t * h + c]) * double(x.y[std::size_t(i * h + c)]);
            }
            dweight[choice] = dot;
        }
        round(dy);
        std::vector<T> dx(std::size_t(m * h), T(0));
        mlpBackward(fmt::format("{}.experts.{}", names.ffn, ex), x.x.data(), m,
            moe.expertIntermediate, x.g, x.u, x.act, dy.data(), dx.data());
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            for (std::int64_t c = 0; c < h; ++c) {
                dxn2[t * h + c] += dx[std::size_t(i * h + c)];
            }
        }
    }
    if (m_tpSum) {
        DAY0_TRY(m_tpSum(dweight.data(), std::int64_t(dweight.size()), DType::F64));
        DAY0_TRY(tpSum(dxn2, n * h));
    }
    const bool sigmoid = m_router.scoring == model::RouterScoring::Sigmoid;
    std::vector<T> dlogits = routerLogitsBackward(a, dweight, n, sigmoid);
    if (!sigmoid) {
        round(dlogits); // the gradient of the router's logits, in the model's dtype
    }
    m_acts.record(names.router, dlogits.data(), { n, e });
    linearBackward<T>(a.xn2.data(), m_p.value(names.router + ".weight"), dlogits.data(), dxn2,
        m_p.grad(names.router + ".weight"), m_p.grad(names.router + ".bias"), n, h, e, true);
    return success();
}

template <typename T>
std::vector<T> GradientPass<T>::routerLogitsBackward(const LayerActivations<T>& a,
    const std::vector<double>& dweight, std::int64_t n, bool sigmoid) const
{
    const std::int64_t e = m_spec.moe->numExperts;
    const std::int64_t k = a.routing.k;
    // Weights w_j = r·s_j / D over the chosen j (D = Σ s + ε with norm_topk_prob, else 1):
    // ∂L/∂s_j = r·(dw_j / D − Σ_i dw_i·s_i / D²); then through the softmax or the sigmoid.
    const double r = m_router.routedScalingFactor;
    std::vector<T> dlogits(std::size_t(n * e), T(0));
    std::vector<double> ds(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < n; ++t) {
        const double* s = a.scores.data() + t * e;
        std::fill(ds.begin(), ds.end(), 0.0);
        double sum = 0.0;
        double weighted = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = a.routing.experts[std::size_t(t * k + j)];
            sum += s[ex];
            weighted += dweight[std::size_t(t * k + j)] * s[ex];
        }
        const double denom = sigmoid ? sum + 1e-20 : sum;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = a.routing.experts[std::size_t(t * k + j)];
            const double dw = dweight[std::size_t(t * k + j)];
            ds[std::size_t(ex)]
                = m_router.normTopkProb ? r * (dw / denom - weighted / (denom * denom)) : r * dw;
        }
        double dot = 0.0;
        for (std::int64_t j = 0; j < e; ++j) {
            dot += s[j] * ds[std::size_t(j)];
        }
        for (std::int64_t j = 0; j < e; ++j) {
            const double dl = sigmoid ? ds[std::size_t(j)] * s[j] * (1.0 - s[j])
                                      : s[j] * (ds[std::size_t(j)] - dot);
            dlogits[std::size_t(t * e + j)] = T(dl);
        }
    }
    return dlogits;
}

#define DAY0_GRADIENT_FFN(T)                                                                       \
    template void GradientPass<T>::mlpForward(const std::string&, const T*, std::int64_t,          \
        std::int64_t, std::vector<T>&, std::vector<T>&, std::vector<T>&, T*);                      \
    template void GradientPass<T>::mlpBackward(const std::string&, const T*, std::int64_t,         \
        std::int64_t, const std::vector<T>&, const std::vector<T>&, const std::vector<T>&,         \
        const T*, T*);                                                                             \
    template void GradientPass<T>::moeForward(int, LayerActivations<T>&, T*);                      \
    template Result<void> GradientPass<T>::moeBackward(                                            \
        int, const LayerActivations<T>&, const T*, T*);                                            \
    template std::vector<T> GradientPass<T>::routerLogitsBackward(                                 \
        const LayerActivations<T>&, const std::vector<double>&, std::int64_t, bool) const;

DAY0_GRADIENT_FFN(float)
DAY0_GRADIENT_FFN(double)

#undef DAY0_GRADIENT_FFN

} // namespace day0::exec::detail
