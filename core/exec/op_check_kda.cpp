// opcheck rows of Kimi-Linear's KDA layers: the delta rule with a decay per key channel in its
// chunked and recurrent forms (kimi_delta.h) and the sigmoid-gated o_norm, in the target (inputs
// and output rounded as the engine's emulation rounds them, the arithmetic in fp32) against fp64.
// The short convolutions and the q/k L2 norm are Gated DeltaNet's operators (gated_delta_net.h).
// And Kimi-K3's SiTU-GLU and attention-residual mix (kimi_k3_ops.h).
#include "exec/emulated_ops.h"
#include "exec/kimi_delta.h"
#include "exec/kimi_k3_ops.h"
#include "exec/op_check_checker.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec::detail {

void OpChecker::kimiDeltaOps(const model::LinearAttentionSpec& la)
{
    const std::int64_t n = m_options.tokens;
    const PrecisionMode m = mode(OpKind::Attention);
    const std::int64_t heads = la.valueHeads;
    const std::int64_t d = la.valueHeadDim;
    // Unit keys and queries, per-channel decays e^g ≤ 1, betas in (0, 1); the fp64 recurrent
    // form is the reference of both forms.
    const DeltaRuleShape shape { n, heads, d, d };
    auto q = random(n * heads * d);
    auto k = random(n * heads * d);
    l2NormalizeRows(q.data(), n * heads, d, 1e-6);
    l2NormalizeRows(k.data(), n * heads, d, 1e-6);
    for (auto& v : q) {
        v /= std::sqrt(double(d));
    }
    const auto v = random(n * heads * d);
    auto g = random(n * heads * d, 0.5);
    for (auto& x : g) {
        x = -std::fabs(x);
    }
    auto beta = random(n * heads);
    for (auto& b : beta) {
        b = sigmoid(b);
    }
    std::vector<double> state(std::size_t(heads * d * d), 0.0);
    std::vector<double> ref(v.size());
    kimiDeltaRecurrent(
        q.data(), k.data(), v.data(), g.data(), beta.data(), state.data(), ref.data(), shape);
    const std::int64_t chunk = std::max<std::int64_t>(1, n / 4); // boundaries inside the check
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
            kimiDeltaChunked(qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), st.data(),
                tgt.data(), shape, chunk);
        } else {
            kimiDeltaRecurrent(qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), st.data(),
                tgt.data(), shape);
        }
        roundActivations(tgt, m);
        add(chunked ? fmt::format("kda delta rule (chunked; checked with chunk {})", chunk)
                    : std::string("kda delta rule (recurrent)"),
            fmt::format("[{}, {}, {}→{}], per-channel decay, fp32 state", n, heads, d, d),
            OpKind::Attention, m,
            chunked ? "native (per head, within chunks)" : "native (per head, per token)", ref,
            tgt);
    }
    {
        // o_norm: norm(o) · w, then · sigmoid(gate), over one head.
        const PrecisionMode nm = mode(OpKind::Norm);
        const std::int64_t rows = n * heads;
        const auto o = random(rows * d);
        const auto z = random(rows * d, 2.0);
        const auto w = random(d, 0.1, 1.0);
        std::vector<double> out(o.size());
        auto tgt = toFloat(o);
        roundActivations(tgt, nm);
        const auto zf = toFloat(z);
        for (std::int64_t r = 0; r < rows; ++r) {
            double sum = 0.0;
            double sumF = 0.0;
            for (std::int64_t i = 0; i < d; ++i) {
                sum += o[std::size_t(r * d + i)] * o[std::size_t(r * d + i)];
                sumF += double(tgt[std::size_t(r * d + i)]) * tgt[std::size_t(r * d + i)];
            }
            const double inv = 1.0 / std::sqrt(sum / double(d) + m_spec.normEps);
            const float invF = float(1.0 / std::sqrt(sumF / double(d) + m_spec.normEps));
            for (std::int64_t i = 0; i < d; ++i) {
                const auto j = std::size_t(r * d + i);
                out[j] = o[j] * inv * w[std::size_t(i)] * sigmoid(z[j]);
                float y = tgt[j] * invF;
                roundActivations({ &y, 1 }, nm);
                y *= float(w[std::size_t(i)]);
                roundActivations({ &y, 1 }, nm);
                tgt[j] = y * sigmoid(zf[j]);
            }
        }
        roundActivations(tgt, nm);
        add("kda o_norm (norm · w · sigmoid(gate), per head)",
            fmt::format("[{}, {}, {}]", n, heads, d), OpKind::Norm, nm, "native", out, tgt);
    }
}

void OpChecker::situGluOp(std::int64_t inter)
{
    const std::int64_t n = m_options.tokens * inter;
    const double beta = m_spec.situBeta;
    const double linear = m_spec.situLinearBeta;
    const auto g = random(n, 2.0 * beta);
    const auto u = random(n, linear > 0.0 ? 2.0 * linear : 4.0);
    std::vector<double> ref = g;
    situGlu(ref.data(), u.data(), n, beta, linear);
    const PrecisionMode m = mode(OpKind::Mlp);
    auto gf = toFloat(g);
    auto uf = toFloat(u);
    roundActivations(gf, m);
    roundActivations(uf, m);
    situGlu(gf.data(), uf.data(), n, beta, linear);
    roundActivations(gf, m);
    add(fmt::format("SiTU-GLU (beta {}, linear_beta {})", beta,
            linear > 0.0 ? fmt::format("{}", linear) : std::string("none")),
        fmt::format("[{}, {}]", m_options.tokens, inter), OpKind::Mlp, m,
        "native (fp32, on the host)", ref, gf);
}

void OpChecker::attnResOp(std::int64_t blocks)
{
    const std::int64_t n = m_options.tokens;
    const std::int64_t h = m_spec.hiddenSize;
    const PrecisionMode m = mode(OpKind::DecoderLayer);
    std::vector<std::vector<double>> values;
    for (std::int64_t j = 0; j < blocks + 1; ++j) {
        values.push_back(random(n * h, 1.0 + double(j)));
    }
    const auto w = random(h, 0.1, 1.0);
    const auto r = random(h, 0.05);
    std::vector<double> score(static_cast<std::size_t>(h));
    std::vector<float> scoreF(static_cast<std::size_t>(h));
    for (std::int64_t c = 0; c < h; ++c) {
        score[std::size_t(c)] = w[std::size_t(c)] * r[std::size_t(c)];
        scoreF[std::size_t(c)] = float(w[std::size_t(c)]) * float(r[std::size_t(c)]);
    }
    std::vector<const double*> pointers;
    std::vector<std::vector<float>> valuesF;
    for (const auto& v : values) {
        pointers.push_back(v.data());
        valuesF.push_back(toFloat(v));
        roundActivations(valuesF.back(), m);
    }
    std::vector<const float*> pointersF;
    for (const auto& v : valuesF) {
        pointersF.push_back(v.data());
    }
    std::vector<double> ref(std::size_t(n * h));
    std::vector<float> tgt(ref.size());
    attnResMix<double>(pointers, n, h, score.data(), m_spec.normEps, ref.data());
    attnResMix<float>(pointersF, n, h, scoreF.data(), m_spec.normEps, tgt.data());
    roundActivations(tgt, m);
    add(fmt::format("attention-residual mix (softmax over {} blocks + the partial sum)", blocks),
        fmt::format("[{}, {}, {}]", n, blocks + 1, h), OpKind::DecoderLayer, m,
        "native (fp32, on the host)", ref, tgt);
}

} // namespace day0::exec::detail
