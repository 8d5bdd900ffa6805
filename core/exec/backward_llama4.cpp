// The gradient pass of Llama-4's text model (gradient_pass.h), as the engine's forward runs it
// (attention_block.cpp, ffn_block.cpp) and HF's modeling_llama4 computes it: on RoPE layers the
// queries and keys rotate as (even, odd) lane pairs, then each head is RMS-normalised without a
// weight (Llama4TextL2Norm, use_qk_norm) and attends within its attention_chunk_size chunk (the
// chunk is attention's mask, AttentionMask::chunk); on NoPE layers the queries are scaled by the
// temperature of their position (attn_temperature_tuning) and attend causally over everything.
// The MoE (Llama4TextMoe) scales each chosen expert's INPUT by the sigmoid of the token's router
// logit (top-k over the raw logits, no normalisation) and adds the shared expert; dense layers are
// the plain gated MLP of intermediate_size_mlp (the standard layer's). Experts that receive no
// token keep zero gradients, which packLlama4Experts gathers into the checkpoint's fused tensors.
#include "exec/attention.h"
#include "exec/backward_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <string>

namespace day0::exec::detail {

template <typename T> void GradientPass<T>::llama4QueryKeyForward(int l, LayerActivations<T>& a)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]);
    if (m_spec.layers[std::size_t(l)].rope) {
        rotate(a.q.data(), heads, d);
        rotate(a.k.data(), kvHeads, d);
        if (m_spec.qkL2Norm) {
            // The rotated q and k, which the norm's backward reads.
            a.qPre = a.q;
            a.kPre = a.k;
            unitRmsNorm(a.q.data(), n * heads, d, m_spec.normEps);
            unitRmsNorm(a.k.data(), n * kvHeads, d, m_spec.normEps);
        }
        return;
    }
    if (m_spec.attnTemperatureScale > 0.0) {
        for (std::int64_t t = 0; t < n; ++t) {
            const T s = T(attentionTemperature(
                m_positions[std::size_t(t)], m_spec.attnFloorScale, m_spec.attnTemperatureScale));
            T* row = a.q.data() + t * heads * d;
            for (std::int64_t c = 0; c < heads * d; ++c) {
                row[c] *= s;
            }
        }
    }
}

template <typename T>
void GradientPass<T>::llama4QueryKeyBackward(
    int l, const LayerActivations<T>& a, std::vector<T>& dq, std::vector<T>& dk)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t d = m_spec.headDim;
    const std::int64_t heads = m_spec.numHeads;
    const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]);
    if (m_spec.layers[std::size_t(l)].rope) {
        if (m_spec.qkL2Norm) {
            std::vector<T> dqPre(dq.size(), T(0));
            std::vector<T> dkPre(dk.size(), T(0));
            rmsNormBackward<T>(a.qPre.data(), nullptr, dq.data(), dqPre.data(), nullptr, n * heads,
                d, m_spec.normEps);
            rmsNormBackward<T>(a.kPre.data(), nullptr, dk.data(), dkPre.data(), nullptr,
                n * kvHeads, d, m_spec.normEps);
            dq = std::move(dqPre);
            dk = std::move(dkPre);
        }
        ropeBackward<T>(dq.data(), n, heads, d, m_positions, m_rope);
        ropeBackward<T>(dk.data(), n, kvHeads, d, m_positions, m_rope);
        return;
    }
    if (m_spec.attnTemperatureScale > 0.0) {
        // q' = s_t · q: the scale is a constant of the position.
        for (std::int64_t t = 0; t < n; ++t) {
            const T s = T(attentionTemperature(
                m_positions[std::size_t(t)], m_spec.attnFloorScale, m_spec.attnTemperatureScale));
            T* row = dq.data() + t * heads * d;
            for (std::int64_t c = 0; c < heads * d; ++c) {
                row[c] *= s;
            }
        }
    }
}

template <typename T> void GradientPass<T>::llama4MoeForward(int l, LayerActivations<T>& a, T* out)
{
    const LayerNames names = layerNames(m_spec, l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    // Llama4Router: a plain linear without bias, the top-k of the raw logits, each chosen
    // expert's score σ(logit) (route() with the sigmoid scoring and no normalisation).
    std::vector<T> logits(std::size_t(n * e));
    linear<T>(a.xn2.data(), m_p.value(names.router + ".weight"), nullptr, logits.data(), n, h, e);
    const std::vector<double> wide(logits.begin(), logits.end());
    a.routing = routeAndKeep(names.router, wide, n, nullptr);
    a.scores = selectionScores(wide.data(), n, m_router, nullptr);
    a.groupByExpert(n, e);
    std::fill_n(out, n * h, T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        auto& x = a.experts[std::size_t(ex)];
        const auto m = std::int64_t(x.token.size());
        if (m == 0) {
            continue; // HF runs it on zero rows: a zero output and zero gradients
        }
        // The expert's input: the token's row times its score (Llama4TextMoe's routed_in).
        x.x.resize(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const T w = T(a.routing.weights[std::size_t(t * a.routing.k + x.slot[std::size_t(i)])]);
            for (std::int64_t c = 0; c < h; ++c) {
                x.x[std::size_t(i * h + c)] = w * a.xn2[std::size_t(t * h + c)];
            }
        }
        x.y.resize(std::size_t(m * h));
        mlpForward(fmt::format("{}.experts.{}", names.ffn, ex), x.x.data(), m,
            moe.expertIntermediate, x.g, x.u, x.act, x.y.data());
        for (std::int64_t i = 0; i < m; ++i) {
            addInPlace(out + x.token[std::size_t(i)] * h, x.y.data() + i * h, h);
        }
    }
    std::vector<T> shared(std::size_t(n * h));
    mlpForward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
        a.sharedAct, shared.data());
    addInPlace(out, shared.data(), n * h);
}

template <typename T>
void GradientPass<T>::llama4MoeBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn2)
{
    const LayerNames names = layerNames(m_spec, l);
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = a.routing.k;
    m_acts.record(names.shared, dout, { n, h });
    mlpBackward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
        a.sharedAct, dout, dxn2);
    // Each expert's output joins the block's unweighted; its input is w·x, so the input's
    // gradient g gives dx += w·g and ∂L/∂w = g·x.
    std::vector<double> dweight(std::size_t(n * k), 0.0);
    for (std::int64_t ex = 0; ex < e; ++ex) {
        const auto& x = a.experts[std::size_t(ex)];
        const auto m = std::int64_t(x.token.size());
        if (m == 0) {
            continue; // its gradients stay zero
        }
        std::vector<T> dy(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(dout + x.token[std::size_t(i)] * h, h, dy.begin() + i * h);
        }
        std::vector<T> dx(std::size_t(m * h), T(0));
        mlpBackward(fmt::format("{}.experts.{}", names.ffn, ex), x.x.data(), m,
            moe.expertIntermediate, x.g, x.u, x.act, dy.data(), dx.data());
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const std::size_t choice = std::size_t(t * k + x.slot[std::size_t(i)]);
            const T w = T(a.routing.weights[choice]);
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                const T g = dx[std::size_t(i * h + c)];
                dot += double(g) * double(a.xn2[std::size_t(t * h + c)]);
                dxn2[t * h + c] += w * g;
            }
            dweight[choice] = dot;
        }
    }
    // The score σ(logit) of each chosen expert: ∂L/∂logit = ∂L/∂w · σ(1 − σ), zero elsewhere.
    const std::vector<T> dlogits = routerLogitsBackward(a, dweight, n, true);
    m_acts.record(names.router, dlogits.data(), { n, e });
    linearBackward<T>(a.xn2.data(), m_p.value(names.router + ".weight"), dlogits.data(), dxn2,
        m_p.grad(names.router + ".weight"), nullptr, n, h, e, true);
}

void packLlama4Experts(
    const model::ModelSpec& spec, int l, std::map<std::string, numerics::Tensor>& grads)
{
    const std::int64_t e = spec.moe->numExperts;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t inter = spec.moe->expertIntermediate;
    const std::string base = layerNames(spec, l).ffn + ".experts";
    std::vector<std::string> names;
    DType dtype = DType::F64;
    for (std::int64_t x = 0; x < e; ++x) {
        for (const char* leaf : { "gate_proj.weight", "up_proj.weight", "down_proj.weight" }) {
            names.push_back(fmt::format("{}.{}.{}", base, x, leaf));
            const auto it = grads.find(names.back());
            if (it == grads.end()) {
                return;
            }
            dtype = it->second.dtype();
        }
    }
    // Llama4TextExperts: gate_up_proj [E, H, 2I] (gate the first I columns), down_proj [E, I, H]
    // (x · W, the transposes of the per-expert Linear weights).
    std::vector<double> gateUp(std::size_t(e * h * 2 * inter));
    std::vector<double> down(std::size_t(e * inter * h));
    for (std::int64_t x = 0; x < e; ++x) {
        const auto gate = grads.at(names[std::size_t(x * 3)]).toDoubles(); // [I, H]
        const auto up = grads.at(names[std::size_t(x * 3 + 1)]).toDoubles(); // [I, H]
        const auto dn = grads.at(names[std::size_t(x * 3 + 2)]).toDoubles(); // [H, I]
        for (std::int64_t j = 0; j < inter; ++j) {
            for (std::int64_t c = 0; c < h; ++c) {
                const std::size_t at = std::size_t((x * h + c) * 2 * inter + j);
                gateUp[at] = gate[std::size_t(j * h + c)];
                gateUp[at + std::size_t(inter)] = up[std::size_t(j * h + c)];
                down[std::size_t((x * inter + j) * h + c)] = dn[std::size_t(c * inter + j)];
            }
        }
    }
    for (const auto& name : names) {
        grads.erase(name);
    }
    grads.emplace(base + ".gate_up_proj",
        numerics::Tensor::fromDoubles({ e, h, 2 * inter }, gateUp).to(dtype));
    grads.emplace(
        base + ".down_proj", numerics::Tensor::fromDoubles({ e, inter, h }, down).to(dtype));
}

#define DAY0_GRADIENT_LLAMA4(T)                                                                    \
    template void GradientPass<T>::llama4QueryKeyForward(int, LayerActivations<T>&);               \
    template void GradientPass<T>::llama4QueryKeyBackward(                                         \
        int, const LayerActivations<T>&, std::vector<T>&, std::vector<T>&);                        \
    template void GradientPass<T>::llama4MoeForward(int, LayerActivations<T>&, T*);                \
    template void GradientPass<T>::llama4MoeBackward(int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_LLAMA4(float)
DAY0_GRADIENT_LLAMA4(double)

#undef DAY0_GRADIENT_LLAMA4

} // namespace day0::exec::detail
