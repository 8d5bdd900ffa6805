// The gradient pass (backward.h): a forward that keeps each op's inputs, the cross-entropy, and
// the backward of every layer in reverse, op by op (backward_ops.h, backward_mla.cpp).
#include "exec/backward.h"

#include "exec/backward_ops.h"
#include "exec/backward_pass.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/ops.h"
#include "numerics/float_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

namespace day0::exec {

namespace {

using detail::LayerActivations;
using numerics::Shape;
using numerics::Tensor;

template <typename T> constexpr DType computeType()
{
    return std::is_same_v<T, double> ? DType::F64 : DType::F32;
}

/// Tensors no gradient reaches by construction: they only rank the experts (a buffer in HF).
bool untrainable(const std::string& name) { return name.ends_with("e_score_correction_bias"); }

template <typename T> class GradientPass {
public:
    GradientPass(const model::ModelSpec& spec, const GradientOptions& options, std::stop_token stop)
        : m_spec(spec)
        , m_stop(std::move(stop))
        , m_progress(options.progress)
        , m_tpSum(options.tpSum)
    {
        m_acts.enabled = options.activations;
        m_acts.inject = options.inject;
        m_rounded.insert(options.roundedLayers.begin(), options.roundedLayers.end());
        m_roundedTo = options.roundedTo;
    }

    /// Reads (converting where needed) every weight the model needs and zeroes the gradients.
    Result<void> init(const std::map<std::string, Tensor>& weights)
    {
        for (const auto& req : detail::requiredWeights(m_spec)) {
            const auto it = weights.find(req.name);
            if (it == weights.end()) {
                if (req.optional) {
                    continue;
                }
                return Error::badInput(fmt::format("gradients: weight '{}' is missing", req.name));
            }
            const Tensor& t = it->second;
            if (t.shape() != Shape(req.shape.begin(), req.shape.end())) {
                return Error::badInput(fmt::format("gradients: weight '{}' has shape [{}], the "
                                                   "model needs [{}]",
                    req.name, fmt::join(t.shape(), ", "), fmt::join(req.shape, ", ")));
            }
            const T* data = nullptr;
            if (t.dtype() == computeType<T>() && t.isContiguous()) {
                data = t.template data<T>();
            } else {
                auto [slot, fresh]
                    = m_converted.emplace(req.name, t.contiguous().to(computeType<T>()));
                data = slot->second.template data<T>();
            }
            m_p.values[req.name] = data;
            m_p.shapes[req.name] = t.shape();
            if (!untrainable(req.name)) {
                m_p.grads[req.name].assign(std::size_t(t.numel()), T(0));
            }
        }
        const bool mla = m_spec.attention == model::AttentionKind::MLA;
        const std::int64_t rotary = mla
            ? m_spec.mla.qkRopeHeadDim
            : std::int64_t(double(m_spec.headDim) * m_spec.partialRotaryFactor);
        auto rope = makeRope(rotary, m_spec.ropeTheta, m_spec.ropeScaling,
            mla ? RopeLayout::Interleaved : RopeLayout::RotateHalf);
        if (!rope) {
            return rope.error();
        }
        m_rope = std::move(*rope);
        if (mla) {
            m_scale = 1.0 / std::sqrt(double(m_spec.mla.qkNopeHeadDim + m_spec.mla.qkRopeHeadDim));
            const auto& s = m_spec.ropeScaling;
            if (s.type == "yarn" && s.mscaleAllDim > 0.0) {
                const double m = yarnMscale(s.factor, s.mscaleAllDim);
                m_scale *= m * m;
            }
        } else {
            m_scale = 1.0 / std::sqrt(double(m_spec.headDim));
        }
        if (m_spec.moe) {
            m_router = routerConfig(*m_spec.moe);
        }
        return success();
    }

    Result<GradientResult> run(
        std::span<const std::int64_t> ids, std::span<const std::int64_t> targets)
    {
        const std::int64_t n = std::int64_t(ids.size());
        const std::int64_t h = m_spec.hiddenSize;
        const std::int64_t vocab = m_spec.vocabSize;
        m_positions.resize(std::size_t(n));
        for (std::int64_t i = 0; i < n; ++i) {
            m_positions[std::size_t(i)] = i;
        }
        // Forward, keeping each layer's activations.
        std::vector<T> hidden(std::size_t(n * h));
        DAY0_TRY(
            embedding<T>(ids, m_p.value("model.embed_tokens.weight"), vocab, h, hidden.data()));
        m_layers.assign(std::size_t(m_spec.numLayers), {});
        if (m_progress != nullptr) {
            m_progress->setTotal(2 * m_spec.numLayers);
            m_progress->setStage("forward");
        }
        for (int l = 0; l < int(m_spec.numLayers); ++l) {
            if (m_stop.stop_requested()) {
                return Error::cancelled();
            }
            DAY0_TRY(layerForward(l, hidden));
            if (m_progress != nullptr) {
                m_progress->advance();
            }
        }
        const std::vector<T>& finalIn = hidden;
        std::vector<T> xf(std::size_t(n * h));
        rmsNorm<T>(finalIn.data(), m_p.value("model.norm.weight"), xf.data(), n, h, m_spec.normEps);
        const std::string head = headWeight();
        std::vector<T> logits(std::size_t(n * vocab));
        linear<T>(xf.data(), m_p.value(head), nullptr, logits.data(), n, h, vocab);

        GradientResult result;
        result.keptBytes = keptBytes(finalIn.size() + xf.size() + logits.size());
        std::vector<T> dlogits(logits.size());
        result.loss = detail::crossEntropy<T>(
            logits.data(), targets, vocab, dlogits.data(), result.counted);
        result.logits = Tensor::zeros({ n, vocab }, computeType<T>());
        std::copy(logits.begin(), logits.end(), result.logits.template data<T>());

        // Backward.
        DAY0_TRY(m_acts.recordAndInject("lm_head", dlogits.data(), { n, vocab }));
        std::vector<T> dxf(std::size_t(n * h));
        detail::linearBackward<T>(xf.data(), m_p.value(head), dlogits.data(), dxf.data(),
            m_p.grad(head), nullptr, n, h, vocab, false);
        DAY0_TRY(m_acts.recordAndInject("model.norm", dxf.data(), { n, h }));
        std::vector<T> dh(std::size_t(n * h), T(0));
        detail::rmsNormBackward<T>(finalIn.data(), m_p.value("model.norm.weight"), dxf.data(),
            dh.data(), m_p.grad("model.norm.weight"), n, h, m_spec.normEps);
        if (m_progress != nullptr) {
            m_progress->setStage("backward");
        }
        for (int l = int(m_spec.numLayers) - 1; l >= 0; --l) {
            if (m_stop.stop_requested()) {
                return Error::cancelled();
            }
            DAY0_TRY(layerBackward(l, dh));
            if (m_progress != nullptr) {
                m_progress->advance();
            }
        }
        DAY0_TRY(m_acts.recordAndInject("model.embed_tokens", dh.data(), { n, h }));
        T* dEmbed = m_p.grad("model.embed_tokens.weight");
        for (std::int64_t i = 0; i < n; ++i) {
            const T* src = dh.data() + i * h;
            T* dst = dEmbed + ids[std::size_t(i)] * h;
            for (std::int64_t c = 0; c < h; ++c) {
                dst[c] += src[c];
            }
        }
        DAY0_TRY(sumHeadNormGradients());
        for (auto& [name, grad] : m_p.grads) {
            Tensor t = Tensor::zeros(m_p.shapes[name], computeType<T>());
            std::copy(grad.begin(), grad.end(), t.template data<T>());
            result.parameters.emplace(name, std::move(t));
        }
        // In the backward's order, so that a comparison's first divergence follows the
        // gradient from the loss down.
        result.activations = std::move(m_acts.list);
        return result;
    }

private:
    /// lm_head.weight, or the embedding table it is tied to.
    std::string headWeight() const
    {
        return m_p.values.contains("lm_head.weight") ? "lm_head.weight"
                                                     : "model.embed_tokens.weight";
    }

    std::string attn(int l) const { return fmt::format("model.layers.{}.self_attn", l); }

    /// Rounds a gradient to the emulated format of GradientOptions::roundedLayers.
    void roundTo(std::vector<T>& values) const
    {
        for (T& v : values) {
            v = T(numerics::roundToFormat(float(v), m_roundedTo));
        }
    }

    /// Sums `count` values at `data` over the TP group (nothing without tensor parallelism).
    Result<void> tpSum(T* data, std::int64_t count) const
    {
        return m_tpSum ? m_tpSum(data, count, computeType<T>()) : success();
    }

    /// With tensor parallelism each rank's per-head q/k norm gradients cover its own heads only.
    Result<void> sumHeadNormGradients()
    {
        if (!m_tpSum || !m_spec.qkNorm) {
            return success();
        }
        for (int l = 0; l < int(m_spec.numLayers); ++l) {
            const detail::LayerNames names = detail::layerNames(m_spec, l);
            for (const auto& norm : { names.qNorm, names.kNorm }) {
                auto& grad = m_p.grads[norm + ".weight"];
                DAY0_TRY(tpSum(grad.data(), std::int64_t(grad.size())));
            }
        }
        return success();
    }

    Result<void> layerForward(int l, std::vector<T>& hidden)
    {
        const std::int64_t n = std::int64_t(m_positions.size());
        const std::int64_t h = m_spec.hiddenSize;
        const detail::LayerNames names = detail::layerNames(m_spec, l);
        LayerActivations<T>& a = m_layers[std::size_t(l)];
        a.in = hidden;
        a.xn1.resize(hidden.size());
        rmsNorm<T>(a.in.data(), m_p.value(names.prefix + ".input_layernorm.weight"), a.xn1.data(),
            n, h, m_spec.normEps);
        std::vector<T> branch(hidden.size());
        if (m_spec.attention == model::AttentionKind::MLA) {
            detail::mlaForward<T>(
                m_spec, m_p, m_rope, m_scale, l, a, m_positions, n, branch.data());
            DAY0_TRY(tpSum(branch.data(), n * h)); // o_proj is row-parallel by heads
        } else {
            attentionForward(l, a, branch.data());
            DAY0_TRY(tpSum(branch.data(), n * h));
            if (const T* bias = m_p.value(attn(l) + ".o_proj.bias"); bias && m_tpSum) {
                for (std::int64_t t = 0; t < n; ++t) {
                    addInPlace(branch.data() + t * h, bias, h);
                }
            }
        }
        a.mid = a.in;
        addInPlace(a.mid.data(), branch.data(), n * h);
        a.xn2.resize(hidden.size());
        rmsNorm<T>(a.mid.data(), m_p.value(names.prefix + ".post_attention_layernorm.weight"),
            a.xn2.data(), n, h, m_spec.normEps);
        if (m_spec.layers[std::size_t(l)].moe()) {
            moeForward(l, a, branch.data());
        } else {
            const std::int64_t inter = m_spec.ffnWidthOf(m_spec.layers[std::size_t(l)]);
            mlpForward(names.ffn, a.xn2.data(), n, inter, a.g, a.u, a.act, branch.data());
        }
        DAY0_TRY(tpSum(branch.data(), n * h));
        hidden = a.mid;
        addInPlace(hidden.data(), branch.data(), n * h);
        return success();
    }

    Result<void> layerBackward(int l, std::vector<T>& dh)
    {
        const std::int64_t n = std::int64_t(m_positions.size());
        const std::int64_t h = m_spec.hiddenSize;
        const detail::LayerNames names = detail::layerNames(m_spec, l);
        const LayerActivations<T>& a = m_layers[std::size_t(l)];
        DAY0_TRY(m_acts.recordAndInject(names.prefix, dh.data(), { n, h }));
        const bool rounded = m_rounded.contains(l);
        // hidden = mid + ffn(norm(mid)): the ffn's output gradient is dh itself.
        m_acts.record(names.ffn, dh.data(), { n, h });
        std::vector<T> dxn2(std::size_t(n * h), T(0));
        if (m_spec.layers[std::size_t(l)].moe()) {
            DAY0_TRY(moeBackward(l, a, dh.data(), dxn2.data()));
        } else {
            const std::int64_t inter = m_spec.ffnWidthOf(m_spec.layers[std::size_t(l)]);
            mlpBackward(names.ffn, a.xn2.data(), n, inter, a.g, a.u, a.act, dh.data(), dxn2.data());
            DAY0_TRY(tpSum(dxn2.data(), n * h));
        }
        if (rounded) {
            roundTo(dxn2);
        }
        m_acts.record(names.prefix + ".post_attention_layernorm", dxn2.data(), { n, h });
        const std::string post = names.prefix + ".post_attention_layernorm.weight";
        detail::rmsNormBackward<T>(a.mid.data(), m_p.value(post), dxn2.data(), dh.data(),
            m_p.grad(post), n, h, m_spec.normEps);
        // mid = in + attention(norm(in)): the attention's output gradient is dmid.
        const bool mla = m_spec.attention == model::AttentionKind::MLA;
        if (rounded) {
            roundTo(dh);
        }
        m_acts.record(attn(l), dh.data(), { n, h });
        std::vector<T> dxn1(std::size_t(n * h), T(0));
        if (mla) {
            detail::TpSumOf<T> sum;
            if (m_tpSum) {
                sum = [this](T* data, std::int64_t count) { return tpSum(data, count); };
            }
            DAY0_TRY(detail::mlaBackward<T>(
                m_spec, m_p, m_rope, m_scale, l, a, m_positions, n, dh.data(), dxn1.data(), sum));
        } else {
            attentionBackward(l, a, dh.data(), dxn1.data());
            DAY0_TRY(tpSum(dxn1.data(), n * h));
        }
        if (rounded) {
            roundTo(dxn1);
        }
        m_acts.record(names.prefix + ".input_layernorm", dxn1.data(), { n, h });
        const std::string in = names.prefix + ".input_layernorm.weight";
        detail::rmsNormBackward<T>(
            a.in.data(), m_p.value(in), dxn1.data(), dh.data(), m_p.grad(in), n, h, m_spec.normEps);
        if (rounded) {
            roundTo(dh);
        }
        return success();
    }

    // --- standard attention (MHA/GQA/MQA, biases, per-head QK-norm) ---

    /// The bytes of every layer's saved tensors plus `extra` elements of T.
    [[nodiscard]] std::int64_t keptBytes(std::size_t extra) const
    {
        std::size_t elements = extra;
        std::size_t others = 0; // doubles and indices, 8 bytes each
        for (const auto& a : m_layers) {
            for (const auto* v : { &a.in, &a.xn1, &a.qPre, &a.kPre, &a.q, &a.k, &a.v, &a.probs,
                     &a.ctx, &a.mid, &a.xn2, &a.g, &a.u, &a.act, &a.qa, &a.qaNormed, &a.ckv,
                     &a.latentNormed, &a.kv, &a.sharedG, &a.sharedU, &a.sharedAct }) {
                elements += v->size();
            }
            others += a.scores.size() + a.routing.experts.size() + a.routing.weights.size();
            for (const auto& e : a.experts) {
                elements += e.x.size() + e.g.size() + e.u.size() + e.act.size() + e.y.size();
                others += e.token.size() + e.slot.size();
            }
        }
        return std::int64_t(elements * sizeof(T) + others * 8);
    }

    void attentionForward(int l, LayerActivations<T>& a, T* out)
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
        linear<T>(a.xn1.data(), m_p.value(p + ".q_proj.weight"), m_p.value(p + ".q_proj.bias"),
            a.q.data(), n, h, heads * d);
        linear<T>(a.xn1.data(), m_p.value(p + ".k_proj.weight"), m_p.value(p + ".k_proj.bias"),
            a.k.data(), n, h, kvHeads * d);
        linear<T>(a.xn1.data(), m_p.value(p + ".v_proj.weight"), m_p.value(p + ".v_proj.bias"),
            a.v.data(), n, h, kvHeads * d);
        if (m_spec.qkNorm) {
            const detail::LayerNames names = detail::layerNames(m_spec, l);
            a.qPre = a.q;
            a.kPre = a.k;
            rmsNorm<T>(a.qPre.data(), m_p.value(names.qNorm + ".weight"), a.q.data(), n * heads, d,
                m_spec.normEps);
            rmsNorm<T>(a.kPre.data(), m_p.value(names.kNorm + ".weight"), a.k.data(), n * kvHeads,
                d, m_spec.normEps);
        }
        if (m_spec.layers[std::size_t(l)].rope) {
            applyRope<T>(a.q.data(), n, heads, d, m_positions, m_rope);
            applyRope<T>(a.k.data(), n, kvHeads, d, m_positions, m_rope);
        }
        a.ctx.resize(std::size_t(n * heads * d));
        detail::causalAttentionForward<T>(a.q.data(), a.k.data(), a.v.data(), a.ctx.data(), a.probs,
            n, heads, kvHeads, d, d, m_scale);
        // Under tensor parallelism `out` is a partial sum: the bias joins after the reduction.
        linear<T>(a.ctx.data(), m_p.value(p + ".o_proj.weight"),
            m_tpSum ? nullptr : m_p.value(p + ".o_proj.bias"), out, n, heads * d, h);
    }

    void attentionBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
    {
        const std::int64_t n = std::int64_t(m_positions.size());
        const std::int64_t h = m_spec.hiddenSize;
        const std::int64_t d = m_spec.headDim;
        const std::int64_t heads = m_spec.numHeads;
        const std::int64_t kvHeads = m_spec.kvHeadsOf(m_spec.layers[std::size_t(l)]);
        const std::string p = attn(l);
        std::vector<T> dctx(a.ctx.size());
        detail::linearBackward<T>(a.ctx.data(), m_p.value(p + ".o_proj.weight"), dout, dctx.data(),
            m_p.grad(p + ".o_proj.weight"), m_p.grad(p + ".o_proj.bias"), n, heads * d, h, false);
        std::vector<T> dq(a.q.size());
        std::vector<T> dk(a.k.size(), T(0));
        std::vector<T> dv(a.v.size(), T(0));
        detail::causalAttentionBackward<T>(a.q.data(), a.k.data(), a.v.data(), a.probs, dctx.data(),
            dq.data(), dk.data(), dv.data(), n, heads, kvHeads, d, d, m_scale);
        if (m_spec.layers[std::size_t(l)].rope) {
            detail::ropeBackward<T>(dq.data(), n, heads, d, m_positions, m_rope);
            detail::ropeBackward<T>(dk.data(), n, kvHeads, d, m_positions, m_rope);
        }
        if (m_spec.qkNorm) {
            const detail::LayerNames names = detail::layerNames(m_spec, l);
            std::vector<T> dqPre(dq.size(), T(0));
            std::vector<T> dkPre(dk.size(), T(0));
            detail::rmsNormBackward<T>(a.qPre.data(), m_p.value(names.qNorm + ".weight"), dq.data(),
                dqPre.data(), m_p.grad(names.qNorm + ".weight"), n * heads, d, m_spec.normEps);
            detail::rmsNormBackward<T>(a.kPre.data(), m_p.value(names.kNorm + ".weight"), dk.data(),
                dkPre.data(), m_p.grad(names.kNorm + ".weight"), n * kvHeads, d, m_spec.normEps);
            dq = std::move(dqPre);
            dk = std::move(dkPre);
        }
        const auto project
            = [&](const std::string& proj, const std::vector<T>& dy, std::int64_t width) {
                  detail::linearBackward<T>(a.xn1.data(), m_p.value(p + proj + ".weight"),
                      dy.data(), dxn1, m_p.grad(p + proj + ".weight"), m_p.grad(p + proj + ".bias"),
                      n, h, width, true);
              };
        project(".q_proj", dq, heads * d);
        project(".k_proj", dk, kvHeads * d);
        project(".v_proj", dv, kvHeads * d);
    }

    // --- gated MLPs and mixture-of-experts ---

    void mlpForward(const std::string& module, const T* x, std::int64_t rows, std::int64_t inter,
        std::vector<T>& g, std::vector<T>& u, std::vector<T>& act, T* out)
    {
        const std::int64_t h = m_spec.hiddenSize;
        g.resize(std::size_t(rows * inter));
        u.resize(std::size_t(rows * inter));
        linear<T>(x, m_p.value(module + ".gate_proj.weight"), nullptr, g.data(), rows, h, inter);
        linear<T>(x, m_p.value(module + ".up_proj.weight"), nullptr, u.data(), rows, h, inter);
        act = g;
        gatedActivate(act.data(), u.data(), rows * inter, Activation::Silu);
        linear<T>(
            act.data(), m_p.value(module + ".down_proj.weight"), nullptr, out, rows, inter, h);
    }

    void mlpBackward(const std::string& module, const T* x, std::int64_t rows, std::int64_t inter,
        const std::vector<T>& g, const std::vector<T>& u, const std::vector<T>& act, const T* dout,
        T* dx)
    {
        const std::int64_t h = m_spec.hiddenSize;
        std::vector<T> dact(act.size());
        detail::linearBackward<T>(act.data(), m_p.value(module + ".down_proj.weight"), dout,
            dact.data(), m_p.grad(module + ".down_proj.weight"), nullptr, rows, inter, h, false);
        std::vector<T> dg(act.size());
        std::vector<T> du(act.size());
        detail::swigluBackward<T>(
            g.data(), u.data(), dact.data(), dg.data(), du.data(), rows * inter);
        detail::linearBackward<T>(x, m_p.value(module + ".gate_proj.weight"), dg.data(), dx,
            m_p.grad(module + ".gate_proj.weight"), nullptr, rows, h, inter, true);
        detail::linearBackward<T>(x, m_p.value(module + ".up_proj.weight"), du.data(), dx,
            m_p.grad(module + ".up_proj.weight"), nullptr, rows, h, inter, true);
    }

    void moeForward(int l, LayerActivations<T>& a, T* out)
    {
        const detail::LayerNames names = detail::layerNames(m_spec, l);
        const auto& moe = *m_spec.moe;
        const std::int64_t n = std::int64_t(m_positions.size());
        const std::int64_t h = m_spec.hiddenSize;
        const std::int64_t e = moe.numExperts;
        std::vector<T> logits(std::size_t(n * e));
        linear<T>(
            a.xn2.data(), m_p.value(names.router + ".weight"), nullptr, logits.data(), n, h, e);
        // Routed in double as the engine routes (router.h), on the same scores.
        const std::vector<double> wide(logits.begin(), logits.end());
        std::vector<double> bias;
        if (const T* b = m_p.value(names.scoreBias); b != nullptr && moe.expertScoreBias) {
            bias.assign(b, b + e);
        }
        a.routing = route(wide.data(), n, m_router, bias.empty() ? nullptr : bias.data());
        a.scores = selectionScores(wide.data(), n, m_router, nullptr);
        a.experts.assign(std::size_t(e), {});
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t s = 0; s < a.routing.k; ++s) {
                auto& ex
                    = a.experts[std::size_t(a.routing.experts[std::size_t(t * a.routing.k + s)])];
                ex.token.push_back(t);
                ex.slot.push_back(s);
            }
        }
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
                const T w
                    = T(a.routing.weights[std::size_t(t * a.routing.k + x.slot[std::size_t(i)])]);
                for (std::int64_t c = 0; c < h; ++c) {
                    out[t * h + c] += w * x.y[std::size_t(i * h + c)];
                }
            }
        }
        if (!names.shared.empty()) {
            std::vector<T> shared(std::size_t(n * h));
            mlpForward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
                a.sharedAct, shared.data());
            addInPlace(out, shared.data(), n * h);
        }
    }

    /// Under tensor parallelism every rank routes the same way (replicated router) and runs its
    /// slice of each expert: the experts' outputs `x.y` are partial sums, so are the combine
    /// weights' gradients and the experts' input gradients, which are summed before the
    /// router's (replicated) share joins dxn2.
    Result<void> moeBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn2)
    {
        const detail::LayerNames names = detail::layerNames(m_spec, l);
        const auto& moe = *m_spec.moe;
        const std::int64_t n = std::int64_t(m_positions.size());
        const std::int64_t h = m_spec.hiddenSize;
        const std::int64_t e = moe.numExperts;
        const std::int64_t k = a.routing.k;
        if (!names.shared.empty()) {
            m_acts.record(names.shared, dout, { n, h });
            mlpBackward(names.shared, a.xn2.data(), n, moe.sharedIntermediate, a.sharedG, a.sharedU,
                a.sharedAct, dout, dxn2);
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
        // Weights w_j = r·s_j / D over the chosen j (D = Σ s + ε with norm_topk_prob, else 1):
        // ∂L/∂s_j = r·(dw_j / D − Σ_i dw_i·s_i / D²); then through the softmax or the sigmoid.
        const double r = m_router.routedScalingFactor;
        const bool sigmoid = m_router.scoring == model::RouterScoring::Sigmoid;
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
                ds[std::size_t(ex)] = m_router.normTopkProb
                    ? r * (dw / denom - weighted / (denom * denom))
                    : r * dw;
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
        m_acts.record(names.router, dlogits.data(), { n, e });
        detail::linearBackward<T>(a.xn2.data(), m_p.value(names.router + ".weight"), dlogits.data(),
            dxn2, m_p.grad(names.router + ".weight"), nullptr, n, h, e, true);
        return success();
    }

    const model::ModelSpec& m_spec;
    std::stop_token m_stop;
    Progress* m_progress;
    std::function<Result<void>(void*, std::int64_t, DType)> m_tpSum;
    detail::ParameterSet<T> m_p;
    std::map<std::string, Tensor> m_converted;
    detail::ActivationGrads<T> m_acts;
    std::vector<LayerActivations<T>> m_layers;
    std::vector<std::int64_t> m_positions;
    Rope m_rope;
    double m_scale = 1.0;
    RouterConfig m_router;
    std::set<int> m_rounded;
    DType m_roundedTo = DType::BF16;
};

template <typename T>
Result<GradientResult> runPass(const model::ModelSpec& spec,
    const std::map<std::string, Tensor>& weights, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, const GradientOptions& options, std::stop_token stop)
{
    GradientPass<T> pass(spec, options, std::move(stop));
    DAY0_TRY(pass.init(weights));
    return pass.run(ids, targets);
}

} // namespace

Result<GradientResult> lossAndGradients(const model::ModelSpec& spec,
    const std::map<std::string, Tensor>& weights, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, const GradientOptions& options, std::stop_token stop)
{
    if (const auto missing = backwardUnsupported(spec); !missing.empty()) {
        return Error::unsupported(fmt::format("gradients of {} ({}): the backward pass does not "
                                              "cover {}",
            spec.name, model::familyName(spec.family), fmt::join(missing, "; ")));
    }
    if (ids.empty()) {
        return Error::badInput("gradients: no token ids");
    }
    if (targets.size() != ids.size()) {
        return Error::badInput(fmt::format(
            "gradients: {} targets for {} token ids (one per id)", targets.size(), ids.size()));
    }
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (targets[i] >= spec.vocabSize) {
            return Error::badInput(fmt::format("gradients: target {} at position {} is outside "
                                               "the vocabulary [0, {})",
                targets[i], i, spec.vocabSize));
        }
    }
    if (options.fp64) {
        return runPass<double>(spec, weights, ids, targets, options, std::move(stop));
    }
    return runPass<float>(spec, weights, ids, targets, options, std::move(stop));
}

Result<GradientResult> lossAndGradients(const Engine& engine, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, bool activations, std::stop_token stop,
    Progress* progress)
{
    GradientOptions options;
    options.fp64 = engine.isF64();
    options.activations = activations;
    options.progress = progress;
    return lossAndGradients(
        engine.spec(), engine.weightTable().tensors, ids, targets, options, std::move(stop));
}

} // namespace day0::exec
