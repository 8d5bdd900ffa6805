// DeepSeek-V4's MoE in the gradient pass (backward_deepseek_v4.h): the forward's routing
// (deepseekV4Route: top-k of the sqrtsoftplus scores + the selection bias, or tid2eid on the hash
// layers), the clamped SwiGLU experts and shared expert, and their backward; the combine weights'
// gradients reach the router through the chosen scores (renormalised, times
// routed_scaling_factor), on the hash layers too: only the choice itself carries none.
#include "exec/backward_deepseek_v4.h"
#include "exec/backward_ops.h"
#include "exec/ops.h"

#include <algorithm>
#include <cmath>

namespace day0::exec::detail {

namespace {

double sigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// The clamped SwiGLU `m` (deepseekV4ClampedMlp) on `rows` rows of x, keeping g and u as
/// projected and act = silu(min(g, L)) · clamp(u, −L, L).
template <typename T>
void clampedMlpForward(const DeepseekV4Step<T>& st, const std::string& m, const T* x,
    std::int64_t rows, std::int64_t width, T* g, T* u, T* act, T* out)
{
    const std::int64_t h = st.spec.hiddenSize;
    const double limit = st.spec.swigluLimit;
    linear<T>(x, st.w(m + ".w1.weight"), nullptr, g, rows, h, width);
    linear<T>(x, st.w(m + ".w3.weight"), nullptr, u, rows, h, width);
    for (std::int64_t i = 0; i < rows * width; ++i) {
        T gi = g[i];
        T ui = u[i];
        if (limit > 0) {
            gi = std::min(gi, T(limit));
            ui = std::clamp(ui, T(-limit), T(limit));
        }
        act[i] = gi / (T(1) + std::exp(-gi)) * ui;
    }
    linear<T>(act, st.w(m + ".w2.weight"), nullptr, out, rows, width, h);
}

/// Its backward from `dout`: SwiGLU's on the clamped values (swigluBackward), no gradient where
/// a clamp bites (torch.clamp passes it at the bound), the weights' gradients accumulated and
/// the input's added to `dx`.
template <typename T>
void clampedMlpBackward(const DeepseekV4Step<T>& st, const std::string& m, const T* x,
    std::int64_t rows, std::int64_t width, const T* g, const T* u, const T* act, const T* dout,
    T* dx)
{
    const std::int64_t h = st.spec.hiddenSize;
    const double limit = st.spec.swigluLimit;
    const std::size_t count = std::size_t(rows * width);
    std::vector<T> dact(count);
    linearBackward<T>(act, st.w(m + ".w2.weight"), dout, dact.data(), st.dw(m + ".w2.weight"),
        nullptr, rows, width, h, false);
    std::vector<T> gc(g, g + count);
    std::vector<T> uc(u, u + count);
    if (limit > 0) {
        for (std::size_t i = 0; i < count; ++i) {
            gc[i] = std::min(gc[i], T(limit));
            uc[i] = std::clamp(uc[i], T(-limit), T(limit));
        }
    }
    std::vector<T> dg(count);
    std::vector<T> du(count);
    swigluBackward<T>(gc.data(), uc.data(), dact.data(), dg.data(), du.data(), std::int64_t(count));
    if (limit > 0) {
        for (std::size_t i = 0; i < count; ++i) {
            dg[i] = g[i] > T(limit) ? T(0) : dg[i];
            du[i] = u[i] < T(-limit) || u[i] > T(limit) ? T(0) : du[i];
        }
    }
    linearBackward<T>(x, st.w(m + ".w1.weight"), dg.data(), dx, st.dw(m + ".w1.weight"), nullptr,
        rows, h, width, true);
    linearBackward<T>(x, st.w(m + ".w3.weight"), du.data(), dx, st.dw(m + ".w3.weight"), nullptr,
        rows, h, width, true);
}

} // namespace

/// The MoE on a.xn2 into a.moeOut (mixtureOfExperts): the forward's routing (deepseekV4Route),
/// each chosen expert weighted, plus the shared expert.
template <typename T>
void deepseekV4MoeForward(const DeepseekV4Step<T>& st, DeepseekV4Saved<T>& a,
    std::span<const std::int64_t> ids,
    std::vector<std::pair<std::string, numerics::Tensor>>& routing)
{
    const auto& moe = *st.spec.moe;
    const std::int64_t n = st.n;
    const std::int64_t h = st.spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = moe.topK;
    const std::int64_t width = moe.expertIntermediate;
    deepseekV4Route<T>(st.ctx.table, st.spec, st.layer, ids, a.xn2.data(), n, a.chosen, a.weights);
    std::vector<T> logits(std::size_t(n * e));
    linear<T>(a.xn2.data(), st.w(".ffn.gate.weight"), nullptr, logits.data(), n, h, e);
    a.logits.assign(logits.begin(), logits.end());
    routing.emplace_back(fmt::format("model.layers.{}.mlp.gate#topk", st.layer),
        numerics::Tensor::fromInts({ n, k }, a.chosen));
    a.g.resize(std::size_t(n * k * width));
    a.u.resize(a.g.size());
    a.act.resize(a.g.size());
    a.y.resize(std::size_t(n * k * h));
    std::vector<double> acc(std::size_t(n * h), 0.0);
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int64_t row = t * k + j;
            clampedMlpForward(st, fmt::format(".ffn.experts.{}", a.chosen[std::size_t(row)]),
                a.xn2.data() + t * h, 1, width, a.g.data() + row * width, a.u.data() + row * width,
                a.act.data() + row * width, a.y.data() + row * h);
            for (std::int64_t c = 0; c < h; ++c) {
                acc[std::size_t(t * h + c)]
                    += a.weights[std::size_t(row)] * double(a.y[std::size_t(row * h + c)]);
            }
        }
    }
    const std::int64_t shared = moe.sharedIntermediate;
    a.sharedG.resize(std::size_t(n * shared));
    a.sharedU.resize(a.sharedG.size());
    a.sharedAct.resize(a.sharedG.size());
    a.moeOut.resize(std::size_t(n * h));
    clampedMlpForward(st, ".ffn.shared_experts", a.xn2.data(), n, shared, a.sharedG.data(),
        a.sharedU.data(), a.sharedAct.data(), a.moeOut.data());
    for (std::int64_t i = 0; i < n * h; ++i) {
        a.moeOut[std::size_t(i)] = T(acc[std::size_t(i)] + double(a.moeOut[std::size_t(i)]));
    }
}

/// The MoE's backward from `dout`: the experts' and the shared expert's, the combine weights'
/// gradients through the renormalised sqrtsoftplus scores to the router's logits and weight;
/// the input's added to `dxn2`.
template <typename T>
void deepseekV4MoeBackward(
    const DeepseekV4Step<T>& st, const DeepseekV4Saved<T>& a, const T* dout, T* dxn2)
{
    const auto& moe = *st.spec.moe;
    const std::int64_t n = st.n;
    const std::int64_t h = st.spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = moe.topK;
    const std::int64_t width = moe.expertIntermediate;
    clampedMlpBackward(st, ".ffn.shared_experts", a.xn2.data(), n, moe.sharedIntermediate,
        a.sharedG.data(), a.sharedU.data(), a.sharedAct.data(), dout, dxn2);
    std::vector<double> dweight(std::size_t(n * k), 0.0);
    std::vector<T> dy(static_cast<std::size_t>(h));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int64_t row = t * k + j;
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dy[std::size_t(c)] = T(a.weights[std::size_t(row)] * double(dout[t * h + c]));
                dot += double(dout[t * h + c]) * double(a.y[std::size_t(row * h + c)]);
            }
            dweight[std::size_t(row)] = dot;
            clampedMlpBackward(st, fmt::format(".ffn.experts.{}", a.chosen[std::size_t(row)]),
                a.xn2.data() + t * h, 1, width, a.g.data() + row * width, a.u.data() + row * width,
                a.act.data() + row * width, dy.data(), dxn2 + t * h);
        }
    }
    // w_j = r · s_j / (Σ_i s_i + 1e-20) over the chosen (a hash table may name an expert twice:
    // each choice adds its share), s = sqrt(softplus(z)), ∂s/∂z = σ(z) / (2s).
    const double r = moe.routedScalingFactor;
    std::vector<T> dlogits(std::size_t(n * e), T(0));
    std::vector<double> ds(static_cast<std::size_t>(e));
    std::vector<double> score(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t i = 0; i < e; ++i) {
            score[std::size_t(i)] = std::sqrt(softplus(a.logits[std::size_t(t * e + i)]));
        }
        std::fill(ds.begin(), ds.end(), 0.0);
        double sum = 0.0;
        double weighted = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = std::size_t(a.chosen[std::size_t(t * k + j)]);
            sum += score[ex];
            weighted += dweight[std::size_t(t * k + j)] * score[ex];
        }
        const double denom = sum + 1e-20;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = std::size_t(a.chosen[std::size_t(t * k + j)]);
            const double dw = dweight[std::size_t(t * k + j)];
            ds[ex] += moe.normTopkProb ? r * (dw / denom - weighted / (denom * denom)) : r * dw;
        }
        for (std::int64_t i = 0; i < e; ++i) {
            const double s = score[std::size_t(i)];
            if (ds[std::size_t(i)] != 0.0 && s > 0.0) {
                // softplus' (torch's threshold 20: the identity above it, slope 1).
                const double z = a.logits[std::size_t(t * e + i)];
                const double slope = z > 20.0 ? 1.0 : sigmoidOf(z);
                dlogits[std::size_t(t * e + i)] = T(ds[std::size_t(i)] * slope / (2.0 * s));
            }
        }
    }
    linearBackward<T>(a.xn2.data(), st.w(".ffn.gate.weight"), dlogits.data(), dxn2,
        st.dw(".ffn.gate.weight"), nullptr, n, h, e, true);
}

#define DAY0_GRADIENT_DEEPSEEK_V4_MOE(T)                                                           \
    template void deepseekV4MoeForward<T>(const DeepseekV4Step<T>&, DeepseekV4Saved<T>&,           \
        std::span<const std::int64_t>, std::vector<std::pair<std::string, numerics::Tensor>>&);    \
    template void deepseekV4MoeBackward<T>(                                                        \
        const DeepseekV4Step<T>&, const DeepseekV4Saved<T>&, const T*, T*);

DAY0_GRADIENT_DEEPSEEK_V4_MOE(float)
DAY0_GRADIENT_DEEPSEEK_V4_MOE(double)

#undef DAY0_GRADIENT_DEEPSEEK_V4_MOE

} // namespace day0::exec::detail
