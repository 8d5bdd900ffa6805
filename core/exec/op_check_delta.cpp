// opcheck rows of the Gated DeltaNet layers (Qwen3-Next, Qwen3.5) and of their gated attention:
// each operator of gated_delta_net.cpp in the target (inputs and output rounded as the engine's
// emulation rounds them, the arithmetic in fp32) against fp64.
#include "exec/emulated_ops.h"
#include "exec/gated_delta_net.h"
#include "exec/op_check_checker.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec::detail {

namespace {

} // namespace

void OpChecker::gatedDeltaNetOps(const model::LinearAttentionSpec& la, bool outputGate)
{
    const std::int64_t n = m_options.tokens;
    const PrecisionMode m = mode(OpKind::Attention);
    const std::int64_t convDim = 2 * la.keyHeads * la.keyHeadDim + la.valueHeads * la.valueHeadDim;
    {
        const auto x = random(n * convDim);
        const auto w = random(convDim * la.convKernel, 0.5);
        std::vector<double> window(std::size_t((la.convKernel - 1) * convDim), 0.0);
        std::vector<double> ref(x.size());
        causalConv1dSilu(x.data(), ref.data(), n, convDim, w.data(), la.convKernel, window.data());
        auto xf = toFloat(x);
        roundActivations(xf, m);
        const auto wf = toFloat(w);
        std::vector<float> wfWindow(window.size(), 0.0f);
        std::vector<float> tgt(xf.size());
        causalConv1dSilu(
            xf.data(), tgt.data(), n, convDim, wf.data(), la.convKernel, wfWindow.data());
        roundActivations(tgt, m);
        add(fmt::format("gated deltanet causal conv1d + silu ({} taps)", la.convKernel),
            fmt::format("[{}, {}]", n, convDim), OpKind::Attention, m, "native (depthwise loop)",
            ref, tgt);
    }
    {
        const std::int64_t rows = n * la.keyHeads;
        std::vector<double> ref = random(rows * la.keyHeadDim);
        auto tgt = toFloat(ref);
        roundActivations(tgt, m);
        l2NormalizeRows(ref.data(), rows, la.keyHeadDim, 1e-6);
        l2NormalizeRows(tgt.data(), rows, la.keyHeadDim, 1e-6);
        roundActivations(tgt, m);
        add("gated deltanet q/k l2norm (per head)",
            fmt::format("[{}, {}, {}]", n, la.keyHeads, la.keyHeadDim), OpKind::Attention, m,
            "native", ref, tgt);
    }
    // The delta rule: unit keys and queries, decays e^g ≤ 1, betas in (0, 1); the fp64
    // recurrent form is the reference of both forms.
    const DeltaRuleShape shape { n, la.valueHeads, la.keyHeadDim, la.valueHeadDim };
    auto q = random(n * la.valueHeads * la.keyHeadDim);
    auto k = random(n * la.valueHeads * la.keyHeadDim);
    l2NormalizeRows(q.data(), n * la.valueHeads, la.keyHeadDim, 1e-6);
    l2NormalizeRows(k.data(), n * la.valueHeads, la.keyHeadDim, 1e-6);
    for (auto& v : q) {
        v /= std::sqrt(double(la.keyHeadDim));
    }
    const auto v = random(n * la.valueHeads * la.valueHeadDim);
    auto g = random(n * la.valueHeads, 0.5);
    auto beta = random(n * la.valueHeads);
    for (std::size_t i = 0; i < g.size(); ++i) {
        g[i] = -std::fabs(g[i]);
        beta[i] = sigmoid(beta[i]);
    }
    std::vector<double> state(std::size_t(la.valueHeads * la.keyHeadDim * la.valueHeadDim), 0.0);
    std::vector<double> ref(v.size());
    gatedDeltaRecurrent(
        q.data(), k.data(), v.data(), g.data(), beta.data(), state.data(), ref.data(), shape);
    // Chunks of a quarter of the rows put chunk boundaries inside the check.
    const std::int64_t chunk = std::max<std::int64_t>(1, n / 4);
    for (const bool chunked : { true, false }) {
        auto qf = toFloat(q);
        auto kf = toFloat(k);
        auto vf = toFloat(v);
        auto bf = toFloat(beta);
        for (auto* x : { &qf, &kf, &vf, &bf }) {
            roundActivations(*x, m);
        }
        const auto gf = toFloat(g);
        std::vector<float> st(state.size(), 0.0f);
        std::vector<float> tgt(ref.size());
        if (chunked) {
            gatedDeltaChunked(qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), st.data(),
                tgt.data(), shape, chunk);
        } else {
            gatedDeltaRecurrent(qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), st.data(),
                tgt.data(), shape);
        }
        roundActivations(tgt, m);
        add(chunked ? fmt::format("gated delta rule (chunked; checked with chunk {})", chunk)
                    : std::string("gated delta rule (recurrent)"),
            fmt::format(
                "[{}, {}, {}→{}], fp32 state", n, la.valueHeads, la.keyHeadDim, la.valueHeadDim),
            OpKind::Attention, m,
            chunked ? "native (per head, GEMM within chunks)" : "native (per head, per token)", ref,
            tgt);
    }
    {
        // The gated RMSNorm over one value head: norm(o) · w, then · silu(z).
        const PrecisionMode nm = mode(OpKind::Norm);
        const std::int64_t rows = n * la.valueHeads;
        const std::int64_t dv = la.valueHeadDim;
        const auto o = random(rows * dv);
        const auto z = random(rows * dv);
        const auto w = random(dv, 0.1, 1.0);
        std::vector<double> ref(o.size());
        auto tgt = toFloat(o);
        roundActivations(tgt, nm);
        const auto zf = toFloat(z);
        for (std::int64_t r = 0; r < rows; ++r) {
            double sum = 0.0;
            double sumF = 0.0;
            for (std::int64_t i = 0; i < dv; ++i) {
                sum += o[std::size_t(r * dv + i)] * o[std::size_t(r * dv + i)];
                sumF += double(tgt[std::size_t(r * dv + i)]) * tgt[std::size_t(r * dv + i)];
            }
            const double inv = 1.0 / std::sqrt(sum / double(dv) + m_spec.normEps);
            const float invF = float(1.0 / std::sqrt(sumF / double(dv) + m_spec.normEps));
            for (std::int64_t i = 0; i < dv; ++i) {
                const auto j = std::size_t(r * dv + i);
                ref[j] = o[j] * inv * w[std::size_t(i)] * z[j] * sigmoid(z[j]);
                float y = tgt[j] * invF;
                roundActivations({ &y, 1 }, nm);
                y *= float(w[std::size_t(i)]);
                roundActivations({ &y, 1 }, nm);
                tgt[j] = y * zf[j] * sigmoid(zf[j]);
            }
        }
        roundActivations(tgt, nm);
        add("gated rms_norm (norm · w · silu(z), per value head)",
            fmt::format("[{}, {}, {}]", n, la.valueHeads, dv), OpKind::Norm, nm, "native", ref,
            tgt);
    }
    if (outputGate) {
        const std::int64_t width = m_spec.numHeads * m_spec.headDim;
        const auto x = random(n * width);
        const auto gate = random(n * width, 2.0);
        std::vector<double> ref(x.size());
        auto tgt = toFloat(x);
        const auto gateF = toFloat(gate);
        roundActivations(tgt, m);
        for (std::size_t i = 0; i < ref.size(); ++i) {
            ref[i] = x[i] * sigmoid(gate[i]);
            tgt[i] *= sigmoid(gateF[i]);
        }
        roundActivations(tgt, m);
        add("attention output gate (· sigmoid(gate))", fmt::format("[{}, {}]", n, width),
            OpKind::Attention, m, "native", ref, tgt);
    }
}

} // namespace day0::exec::detail
