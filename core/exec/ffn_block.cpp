// The feed-forward sub-blocks of Forward: gated MLPs and mixture-of-experts.
#include "exec/emulated_ops.h"
#include "exec/forward.h"
#include "exec/kimi_k3_ops.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T>
void Forward<T>::mlp(const std::string& module, const std::string& gate, const std::string& up,
    const std::string& down, const T* x, T* out, std::int64_t n, std::int64_t inter, int layer,
    Taps<T>& taps, std::int64_t width)
{
    const std::int64_t h = width > 0 ? width : m_spec.hiddenSize;
    const bool capture = module.find(".experts.") == std::string::npos;
    std::vector<T> g(std::size_t(n * inter));
    std::vector<T> u(std::size_t(n * inter));
    linear(module + "." + gate, x, g.data(), n, h, inter, OpKind::Linear, layer, taps, capture);
    linear(module + "." + up, x, u.data(), n, h, inter, OpKind::Linear, layer, taps, capture);
    const PrecisionMode mode = m_plan.modeFor(OpKind::Mlp, layer);
    if (m_swigluLimit > 0) {
        // gpt-oss's clamped SwiGLU: gate clamped from above, up both ways and shifted by one
        // (GptOssExperts._apply_gate); the gated product is then the quick GELU's.
        const T limit = T(m_swigluLimit);
        for (std::int64_t j = 0; j < n * inter; ++j) {
            g[std::size_t(j)] = std::min(g[std::size_t(j)], limit);
            u[std::size_t(j)] = std::clamp(u[std::size_t(j)], -limit, limit) + T(1);
        }
        roundAct(u.data(), n * inter, mode);
    }
    if (m_situ) {
        // Kimi-K3 SituAndMul, in fp32 in the official code (its inputs cast up, the product
        // cast back: rounded here).
        if constexpr (std::is_same_v<T, float>) {
            m_ops.hostOnly("Kimi-K3 SiTU-GLU activation");
        }
        situGlu(g.data(), u.data(), n * inter, m_spec.situBeta, m_spec.situLinearBeta);
        roundAct(g.data(), n * inter, mode);
    } else if constexpr (std::is_same_v<T, float>) {
        m_ops.gatedActivation(g.data(), u.data(), n * inter, m_activation, mode);
    } else {
        gatedActivate(g.data(), u.data(), n * inter, m_activation);
    }
    linear(module + "." + down, g.data(), out, n, inter, h, OpKind::Linear, layer, taps, capture);
}

template <typename T>
Routing Forward<T>::routeAndRecord(const std::string& router, const T* logits, std::int64_t n,
    std::int64_t experts, const T* bias, Taps<T>& taps)
{
    Routing routing;
    if constexpr (std::is_same_v<T, float>) {
        routing = m_ops.route(logits, n, m_router, bias);
    } else {
        routing = route(logits, n, m_router, bias);
    }
    taps.recordIds(router + "#topk", routing.experts, { n, routing.k });
    // Sigmoid routers rank by σ(logit) + bias, which the logits alone do not give: recorded so
    // that a comparison measures a flipped choice's margin on that scale.
    const std::string scoreName = router + "#score";
    if (m_router.scoring == model::RouterScoring::Sigmoid && taps.wants(scoreName)) {
        std::vector<double> selection;
        if constexpr (std::is_same_v<T, float>) {
            selection = selectionScoresFloat(logits, n, m_router, bias);
        } else {
            selection = selectionScores(logits, n, m_router, bias);
        }
        const std::vector<T> recorded(selection.begin(), selection.end());
        taps.record(scoreName, recorded.data(), { n, experts }, "router_score");
    }
    return routing;
}

template <typename T>
void Forward<T>::moeBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps)
{
    const LayerNames names = layerNames(m_spec, layer);
    const auto& moe = *m_spec.moe;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    std::vector<T> logits(std::size_t(n * e));
    linear(names.router, x, logits.data(), n, h, e, OpKind::Router, layer, taps, false);
    taps.record(names.router, logits.data(), { n, e }, "router");
    const Routing routing
        = routeAndRecord(names.router, logits.data(), n, e, weight(names.scoreBias), taps);
    // Llama-4 (Llama4TextMoe) scales the expert's input by the router score, not its output.
    const bool scaleInput = m_spec.family == model::Family::Llama4;

    // Kimi-K3's latent MoE (routed_expert_hidden_size): the router reads the hidden state, the
    // routed experts run on routed_expert_down_proj(x), and their weighted sum goes through
    // routed_expert_norm (latent_moe_use_norm) and routed_expert_up_proj; the shared experts
    // stay at the hidden size (HF KimiK3 LatentMoE, vLLM models/kimi_linear.py).
    const bool latent = moe.latentSize > 0;
    const std::int64_t rw = latent ? moe.latentSize : h; // the routed experts' width
    std::vector<T> down;
    const T* routedIn = x;
    if (latent) {
        down.resize(std::size_t(n * rw));
        linear(names.ffn + ".routed_expert_down_proj", x, down.data(), n, h, rw, OpKind::Linear,
            layer, taps, false);
        routedIn = down.data();
    }

    // The rows of each expert, expert by expert (tokens in order inside), and their weights.
    std::vector<T> permuted;
    std::vector<std::int64_t> offsets;
    std::vector<std::int64_t> sourceRow;
    if constexpr (std::is_same_v<T, float>) {
        m_ops.permuteTokens(routedIn, n, rw, routing, e, permuted, offsets, sourceRow);
    } else {
        permuted.resize(routing.experts.size() * std::size_t(rw));
        // route() only picks experts in [0, e), the one error permuteRows reports.
        (void)permuteRows(routedIn, n, rw, routing, e, permuted.data(), offsets, sourceRow);
    }
    // Rows hold tokens in order inside each expert, so one pass over (token, choice) in that
    // order meets each expert's rows in turn.
    std::vector<double> rowWeight(sourceRow.size());
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    for (std::size_t i = 0; i < routing.experts.size(); ++i) {
        rowWeight[std::size_t(next[std::size_t(routing.experts[i])]++)] = routing.weights[i];
    }

    std::vector<T> acc(std::size_t(n * rw), T(0));
    std::vector<T> result;
    for (std::int64_t ex = 0; ex < e; ++ex) {
        const std::int64_t first = offsets[std::size_t(ex)];
        const std::int64_t m = offsets[std::size_t(ex + 1)] - first;
        if (m == 0) {
            continue;
        }
        T* rows = permuted.data() + first * rw;
        result.resize(std::size_t(m * rw));
        if (scaleInput) {
            for (std::int64_t i = 0; i < m; ++i) {
                // HF casts the sigmoid score to the activations' dtype before the product.
                T w = T(rowWeight[std::size_t(first + i)]);
                roundAct(&w, 1, m_plan.modeFor(OpKind::Moe, layer));
                for (std::int64_t c = 0; c < rw; ++c) {
                    rows[i * rw + c] *= w;
                }
            }
            roundAct(rows, m * rw, m_plan.modeFor(OpKind::Mlp, layer));
        }
        mlp(fmt::format("{}.experts.{}", names.ffn, ex), names.expertGate, names.expertUp,
            names.expertDown, rows, result.data(), m, moe.expertIntermediate, layer, taps, rw);
        for (std::int64_t i = 0; i < m; ++i) {
            T* dst = acc.data() + sourceRow[std::size_t(first + i)] * rw;
            const T w = scaleInput ? T(1) : T(rowWeight[std::size_t(first + i)]);
            for (std::int64_t c = 0; c < rw; ++c) {
                dst[c] += w * result[std::size_t(i * rw + c)];
            }
        }
    }
    if (latent) {
        roundAct(acc.data(), n * rw, m_plan.modeFor(OpKind::Moe, layer));
        if (moe.latentNorm) {
            rmsNormOp(names.ffn + ".routed_expert_norm", acc.data(), acc.data(), n, rw, layer);
        }
        std::vector<T> up(std::size_t(n * h));
        linear(names.ffn + ".routed_expert_up_proj", acc.data(), up.data(), n, rw, h,
            OpKind::Linear, layer, taps, false);
        acc = std::move(up);
    }
    if (!names.shared.empty()) {
        std::vector<T> shared(std::size_t(n * h));
        mlp(names.shared, "gate_proj", "up_proj", "down_proj", x, shared.data(), n,
            moe.sharedIntermediate, layer, taps);
        // The module's own output (HF's shared_expert), before the block gates it.
        taps.record(names.shared, shared.data(), { n, h });
        if (moe.sharedExpertGate) {
            // Qwen2-MoE: the shared expert is scaled by sigmoid(shared_expert_gate(x)).
            std::vector<T> gate(static_cast<std::size_t>(n));
            linear(names.ffn + ".shared_expert_gate", x, gate.data(), n, h, 1, OpKind::Linear,
                layer, taps, false);
            for (std::int64_t t = 0; t < n; ++t) {
                const T s = T(1) / (T(1) + std::exp(-gate[std::size_t(t)]));
                for (std::int64_t c = 0; c < h; ++c) {
                    shared[std::size_t(t * h + c)] *= s;
                }
            }
        }
        addInPlace(acc.data(), shared.data(), n * h);
    }
    std::copy(acc.begin(), acc.end(), out);
    roundAct(out, n * h, m_plan.modeFor(OpKind::Moe, layer));
}

template void Forward<float>::mlp(const std::string&, const std::string&, const std::string&,
    const std::string&, const float*, float*, std::int64_t, std::int64_t, int, Taps<float>&,
    std::int64_t);
template void Forward<double>::mlp(const std::string&, const std::string&, const std::string&,
    const std::string&, const double*, double*, std::int64_t, std::int64_t, int, Taps<double>&,
    std::int64_t);
template void Forward<float>::moeBlock(int, const float*, float*, std::int64_t, Taps<float>&);
template void Forward<double>::moeBlock(int, const double*, double*, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
