// Gemma-4's vision tower of Forward (transformers modeling_gemma4.py math: Gemma4VisionModel,
// Gemma4VisionPatchEmbedder, Gemma4VisionEncoderLayer, Gemma4VisionAttention with its 2-D
// rotary, Gemma4VisionPooler, the standardisation buffers, Gemma4MultimodalEmbedder): a linear
// patch embedding of 2·(pixel − 0.5) plus a learned table row per axis, encoder layers with
// sandwich RMSNorms, q/k/v norms, a rotary over x and one over y (each on half the head), full
// attention with scaling 1 and a gated GELU-tanh MLP, a k × k average pool by patch position
// times sqrt(hidden), (h − std_bias) · std_scale, then embed_vision's weightless RMSNorm and
// projection to the text width. The image-token rows' two-way attention in the text tower is
// gemma4ImageBlockAttention.
#include "exec/attention.h"
#include "exec/emulated_ops.h"
#include "exec/forward.h"
#include "exec/vision_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

/// Gemma4VisionRotaryEmbedding + apply_multidimensional_rope: the head splits into an x half
/// and a y half; each turns rotate-half style with head_dim/4 frequencies theta^(−2i/(head/2)).
template <typename T>
void rotate2d(T* v, std::int64_t n, std::int64_t heads, std::int64_t hd,
    std::span<const std::int64_t> xs, std::span<const std::int64_t> ys, double theta)
{
    const std::int64_t half = hd / 2;
    const std::int64_t quarter = hd / 4;
    std::vector<double> inv(static_cast<std::size_t>(quarter));
    for (std::int64_t i = 0; i < quarter; ++i) {
        inv[std::size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(half));
    }
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t h = 0; h < heads; ++h) {
            for (int axis = 0; axis < 2; ++axis) {
                const double pos = double(axis == 0 ? xs[std::size_t(t)] : ys[std::size_t(t)]);
                T* part = v + (t * heads + h) * hd + axis * half;
                for (std::int64_t i = 0; i < quarter; ++i) {
                    const double angle = pos * inv[std::size_t(i)];
                    const double c = std::cos(angle);
                    const double s = std::sin(angle);
                    const double a = double(part[i]);
                    const double b = double(part[i + quarter]);
                    part[i] = T(a * c - b * s);
                    part[i + quarter] = T(b * c + a * s);
                }
            }
        }
    }
}

} // namespace

std::vector<WeightRequirement> gemma4VisionWeights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    const auto& v = *spec.vision;
    const std::string& p = spec.layout.visionPrefix;
    const std::int64_t e = v.hiddenSize;
    const std::int64_t q = v.numHeads * v.headDim;
    const std::int64_t kv = v.numKvHeads * v.headDim;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto clippable = [&](const std::string& m, std::int64_t out, std::int64_t in) {
        add(m + ".linear.weight", { out, in });
        if (v.clippedLinears) {
            for (const char* scalar :
                { ".input_min", ".input_max", ".output_min", ".output_max" }) {
                add(m + scalar, {});
            }
        }
    };
    add(p + ".patch_embedder.input_proj.weight", { e, v.inChannels * v.patchSize * v.patchSize });
    add(p + ".patch_embedder.position_embedding_table", { 2, v.positionTableSize, e });
    for (std::int64_t j = 0; j < v.depth; ++j) {
        const std::string blk = fmt::format("{}.encoder.layers.{}", p, j);
        for (const char* norm : { ".input_layernorm", ".post_attention_layernorm",
                 ".pre_feedforward_layernorm", ".post_feedforward_layernorm" }) {
            add(blk + norm + ".weight", { e });
        }
        clippable(blk + ".self_attn.q_proj", q, e);
        clippable(blk + ".self_attn.k_proj", kv, e);
        clippable(blk + ".self_attn.v_proj", kv, e);
        clippable(blk + ".self_attn.o_proj", e, q);
        add(blk + ".self_attn.q_norm.weight", { v.headDim });
        add(blk + ".self_attn.k_norm.weight", { v.headDim });
        clippable(blk + ".mlp.gate_proj", v.intermediateSize, e);
        clippable(blk + ".mlp.up_proj", v.intermediateSize, e);
        clippable(blk + ".mlp.down_proj", e, v.intermediateSize);
    }
    if (v.standardize) {
        add(p + ".std_bias", { e });
        add(p + ".std_scale", { e });
    }
    add(spec.layout.projectorPrefix + ".embedding_projection.weight", { v.outHiddenSize, e });
    return w;
}

template <typename T>
void Forward<T>::gemma4ClippedLinear(const std::string& module, const T* x, T* y, std::int64_t n,
    std::int64_t in, std::int64_t out, int layer, Taps<T>& taps)
{
    const bool clip = m_spec.vision->clippedLinears;
    std::vector<T> clamped;
    const T* src = x;
    if (clip) {
        const T lo = *weight(module + ".input_min");
        const T hi = *weight(module + ".input_max");
        clamped.assign(x, x + n * in);
        for (auto& value : clamped) {
            value = std::clamp(value, lo, hi);
        }
        src = clamped.data();
    }
    linear(module + ".linear", src, y, n, in, out, OpKind::Linear, layer, taps, false);
    if (clip) {
        const T lo = *weight(module + ".output_min");
        const T hi = *weight(module + ".output_max");
        for (std::int64_t i = 0; i < n * out; ++i) {
            y[i] = std::clamp(y[i], lo, hi);
        }
    }
    taps.record(module, y, { n, out });
}

template <typename T>
void Forward<T>::gemma4VisionLayer(int layer, T* x, std::int64_t n,
    std::span<const std::int64_t> xs, std::span<const std::int64_t> ys, double eps, Taps<T>& taps)
{
    const auto& v = *m_spec.vision;
    const std::string blk = fmt::format("{}.encoder.layers.{}", m_spec.layout.visionPrefix, layer);
    const std::int64_t e = v.hiddenSize;
    const std::int64_t hd = v.headDim;
    const std::int64_t heads = v.numHeads;
    const std::int64_t kvHeads = v.numKvHeads;
    const PrecisionMode normMode = m_plan.modeFor(OpKind::Norm, layer);
    const auto norm
        = [&](const std::string& module, T* data, std::int64_t rows, std::int64_t width) {
              rmsNorm<T>(data, module.empty() ? nullptr : weight(module + ".weight"), data, rows,
                  width, eps);
              roundAct(data, rows * width, normMode);
          };
    std::vector<T> y(x, x + n * e);
    norm(blk + ".input_layernorm", y.data(), n, e);
    const std::string a = blk + ".self_attn";
    std::vector<T> q(std::size_t(n * heads * hd));
    std::vector<T> k(std::size_t(n * kvHeads * hd));
    std::vector<T> val(std::size_t(n * kvHeads * hd));
    gemma4ClippedLinear(a + ".q_proj", y.data(), q.data(), n, e, heads * hd, layer, taps);
    gemma4ClippedLinear(a + ".k_proj", y.data(), k.data(), n, e, kvHeads * hd, layer, taps);
    gemma4ClippedLinear(a + ".v_proj", y.data(), val.data(), n, e, kvHeads * hd, layer, taps);
    norm(a + ".q_norm", q.data(), n * heads, hd);
    norm(a + ".k_norm", k.data(), n * kvHeads, hd);
    norm("", val.data(), n * kvHeads, hd); // v_norm: no weight
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    rotate2d(q.data(), n, heads, hd, xs, ys, m_visionRopeTheta);
    rotate2d(k.data(), n, kvHeads, hd, xs, ys, m_visionRopeTheta);
    roundAct(q.data(), n * heads * hd, mode);
    roundAct(k.data(), n * kvHeads * hd, mode);
    AttentionShape shape;
    shape.queries = n;
    shape.keys = n;
    shape.heads = heads;
    shape.kvHeads = kvHeads;
    shape.headDim = hd;
    shape.valueDim = hd;
    shape.scale = 1.0; // Gemma4VisionAttention.scaling: the q/k norms stand for 1/sqrt(d)
    shape.causal = false; // one image, no padding: every patch sees every patch
    std::vector<T> context(std::size_t(n * heads * hd));
    if constexpr (std::is_same_v<T, float>) {
        m_ops.attention(q.data(), k.data(), val.data(), context.data(), shape, mode);
    } else {
        attention<T>(q.data(), k.data(), val.data(), context.data(), shape);
    }
    roundAct(context.data(), n * heads * hd, mode);
    gemma4ClippedLinear(a + ".o_proj", context.data(), y.data(), n, heads * hd, e, layer, taps);
    taps.record(a, y.data(), { n, e });
    norm(blk + ".post_attention_layernorm", y.data(), n, e);
    const PrecisionMode residual = m_plan.modeFor(OpKind::DecoderLayer, layer);
    addInPlace(x, y.data(), n * e);
    roundAct(x, n * e, residual);

    std::copy_n(x, n * e, y.data());
    norm(blk + ".pre_feedforward_layernorm", y.data(), n, e);
    const std::int64_t inter = v.intermediateSize;
    std::vector<T> gate(std::size_t(n * inter));
    std::vector<T> up(std::size_t(n * inter));
    gemma4ClippedLinear(blk + ".mlp.gate_proj", y.data(), gate.data(), n, e, inter, layer, taps);
    gemma4ClippedLinear(blk + ".mlp.up_proj", y.data(), up.data(), n, e, inter, layer, taps);
    const Activation act = *parseActivation(v.hiddenAct); // checked by gemma4VisionTower
    if constexpr (std::is_same_v<T, float>) {
        emulatedGatedActivation(
            gate.data(), up.data(), n * inter, act, m_plan.modeFor(OpKind::Mlp, layer));
    } else {
        gatedActivate<T>(gate.data(), up.data(), n * inter, act);
    }
    gemma4ClippedLinear(blk + ".mlp.down_proj", gate.data(), y.data(), n, inter, e, layer, taps);
    taps.record(blk + ".mlp", y.data(), { n, e });
    norm(blk + ".post_feedforward_layernorm", y.data(), n, e);
    addInPlace(x, y.data(), n * e);
    roundAct(x, n * e, residual);
    taps.record(blk, x, { n, e });
}

template <typename T>
Result<VisionFeatures<T>> Forward<T>::gemma4VisionTower(std::span<const double> patches,
    std::int64_t gridH, std::int64_t gridW, Taps<T>& taps, std::stop_token stop)
{
    const auto& v = *m_spec.vision;
    const std::string& p = m_spec.layout.visionPrefix;
    const std::int64_t e = v.hiddenSize;
    const std::int64_t k = std::max<std::int64_t>(v.poolingKernel, 1);
    const std::int64_t n = gridH * gridW;
    const std::int64_t patchWidth = v.inChannels * v.patchSize * v.patchSize;
    if (std::int64_t(patches.size()) != n * patchWidth || gridH % k != 0 || gridW % k != 0) {
        return Error::internal(
            fmt::format("vision input: {} values for a {}x{} grid of {}-wide patches (pool {})",
                patches.size(), gridH, gridW, patchWidth, k));
    }
    if (auto act = parseActivation(v.hiddenAct); !act) {
        return act.error().withContext(m_spec.origin + ": vision_config hidden_activation");
    }
    if (v.headDim % 4 != 0 || v.numKvHeads <= 0 || v.numHeads % v.numKvHeads != 0) {
        return Error::badInput(fmt::format("{}: vision head_dim {} must be divisible by 4 (a "
                                           "rotary over x and one over y)",
            m_spec.origin, v.headDim));
    }
    auto rules = gemma4ImageRules(m_spec);
    if (!rules) {
        return rules.error();
    }
    m_visionRopeTheta = rules->visionRopeTheta;
    // Gemma4ImageProcessor's positions: (x, y) = (column, row) of each patch, raster order.
    std::vector<std::int64_t> xs(static_cast<std::size_t>(n));
    std::vector<std::int64_t> ys(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        xs[std::size_t(i)] = i % gridW;
        ys[std::size_t(i)] = i / gridW;
    }
    // Gemma4VisionPatchEmbedder: input_proj(2 · (pixel − 0.5)) + table[0][x] + table[1][y].
    std::vector<T> in(std::size_t(n * patchWidth));
    for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = T(2.0 * (patches[i] - 0.5));
    }
    roundAct(in.data(), n * patchWidth, m_plan.modeFor(OpKind::Linear, -1));
    std::vector<T> x(std::size_t(n * e));
    linear(p + ".patch_embedder.input_proj", in.data(), x.data(), n, patchWidth, e, OpKind::Linear,
        -1, taps, true);
    const T* table = weight(p + ".patch_embedder.position_embedding_table");
    const std::int64_t rows = v.positionTableSize;
    for (std::int64_t i = 0; i < n; ++i) {
        const T* px = table + xs[std::size_t(i)] * e;
        const T* py = table + (rows + ys[std::size_t(i)]) * e;
        T* row = x.data() + i * e;
        for (std::int64_t j = 0; j < e; ++j) {
            row[j] += px[j] + py[j];
        }
    }
    roundAct(x.data(), n * e, m_plan.modeFor(OpKind::Embedding, -1));
    taps.record(p + ".patch_embedder", x.data(), { n, e });

    for (int b = 0; b < int(v.depth); ++b) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        gemma4VisionLayer(b, x.data(), n, xs, ys, rules->visionEps, taps);
    }
    taps.record(p + ".encoder", x.data(), { n, e });

    // Gemma4VisionPooler: the mean of each k × k block of patches (by position), times
    // sqrt(hidden); soft token (x / k) + (width / k) · (y / k).
    VisionFeatures<T> out;
    const std::int64_t across = gridW / k;
    out.tokens = across * (gridH / k);
    std::vector<double> pooled(std::size_t(out.tokens * e), 0.0);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t token = xs[std::size_t(i)] / k + across * (ys[std::size_t(i)] / k);
        for (std::int64_t j = 0; j < e; ++j) {
            pooled[std::size_t(token * e + j)] += double(x[std::size_t(i * e + j)]);
        }
    }
    const double root = std::sqrt(double(e));
    std::vector<T> h(pooled.size());
    for (std::size_t i = 0; i < pooled.size(); ++i) {
        h[i] = T(T(pooled[i] / double(k * k)) * T(root));
    }
    roundAct(h.data(), out.tokens * e, m_plan.modeFor(OpKind::Embedding, -1));
    taps.record(p + ".pooler", h.data(), { out.tokens, e });
    if (v.standardize) {
        const T* bias = weight(p + ".std_bias");
        const T* scale = weight(p + ".std_scale");
        for (std::int64_t t = 0; t < out.tokens; ++t) {
            for (std::int64_t j = 0; j < e; ++j) {
                T& value = h[std::size_t(t * e + j)];
                value = (value - bias[j]) * scale[j];
            }
        }
    }
    taps.record(p, h.data(), { out.tokens, e });

    // Gemma4MultimodalEmbedder: a weightless RMSNorm, then the projection to the text width.
    const std::string projector = m_spec.layout.projectorPrefix;
    rmsNorm<T>(h.data(), nullptr, h.data(), out.tokens, e, rules->visionEps);
    roundAct(h.data(), out.tokens * e, m_plan.modeFor(OpKind::Norm, -1));
    out.embeds.assign(std::size_t(out.tokens * v.outHiddenSize), T(0));
    linear(projector + ".embedding_projection", h.data(), out.embeds.data(), out.tokens, e,
        v.outHiddenSize, OpKind::Linear, -1, taps, true);
    taps.record(projector, out.embeds.data(), { out.tokens, v.outHiddenSize });
    return out;
}

template <typename T>
void Forward<T>::gemma4ImageBlockAttention(int layer, const T* q, std::int64_t start,
    std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim, T* context)
{
    // HF blockwise_overlay: a query in a run of image rows also sees every key of its run, on
    // top of its causal (and sliding) keys. Those together are one range of keys ending at the
    // run's last row, so each image row is one query at that position with the window widened
    // to the range's start.
    const Cache& cache
        = m_caches[std::size_t(m_kvSource.empty() ? layer : m_kvSource[std::size_t(layer)])];
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    const auto& rows = m_bidirectionalRows;
    const std::int64_t width = heads * headDim;
    for (std::size_t r = 0; r < rows.size();) {
        std::size_t end = r + 1;
        while (end < rows.size() && rows[end] == rows[end - 1] + 1) {
            ++end;
        }
        const std::int64_t first = start + rows[r];
        const std::int64_t last = start + rows[end - 1];
        for (std::size_t i = r; i < end; ++i) {
            const std::int64_t position = start + rows[i];
            AttentionShape shape
                = decoderAttentionShape(spec, 1, last, heads, kvHeads, headDim, headDim, 1.0);
            if (spec.slidingWindow > 0) {
                const std::int64_t lo
                    = std::min(first, std::max<std::int64_t>(0, position - spec.slidingWindow + 1));
                shape.window = last + 1 - lo;
            }
            const T* query = q + rows[i] * width;
            T* out = context + rows[i] * width;
            if constexpr (std::is_same_v<T, float>) {
                m_ops.attention(query, cache.k.data(), cache.v.data(), out, shape, mode);
            } else {
                attention<T>(query, cache.k.data(), cache.v.data(), out, shape);
            }
        }
        r = end;
    }
}

template void Forward<float>::gemma4ClippedLinear(const std::string&, const float*, float*,
    std::int64_t, std::int64_t, std::int64_t, int, Taps<float>&);
template void Forward<double>::gemma4ClippedLinear(const std::string&, const double*, double*,
    std::int64_t, std::int64_t, std::int64_t, int, Taps<double>&);
template void Forward<float>::gemma4VisionLayer(int, float*, std::int64_t,
    std::span<const std::int64_t>, std::span<const std::int64_t>, double, Taps<float>&);
template void Forward<double>::gemma4VisionLayer(int, double*, std::int64_t,
    std::span<const std::int64_t>, std::span<const std::int64_t>, double, Taps<double>&);
template Result<VisionFeatures<float>> Forward<float>::gemma4VisionTower(
    std::span<const double>, std::int64_t, std::int64_t, Taps<float>&, std::stop_token);
template Result<VisionFeatures<double>> Forward<double>::gemma4VisionTower(
    std::span<const double>, std::int64_t, std::int64_t, Taps<double>&, std::stop_token);
template void Forward<float>::gemma4ImageBlockAttention(
    int, const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);
template void Forward<double>::gemma4ImageBlockAttention(
    int, const double*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double*);

} // namespace day0::exec::detail
