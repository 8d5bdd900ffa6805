// The Qwen3-VL vision tower of Forward (transformers modeling_qwen3_vl.py math): Conv3d patch
// embedding as a linear over flattened patches, learned positions bilinearly interpolated to the
// patch grid, ViT blocks (LayerNorm, fused qkv with 2-D rotary, full attention within the image,
// GELU-tanh MLP), the 2×2 patch merger and the deepstack mergers.
#include "exec/attention.h"
#include "exec/emulated_ops.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

constexpr double kVisionEps = 1e-6; // every LayerNorm of the Qwen3-VL tower

std::string visionPrefix(const model::ModelSpec& spec)
{
    return spec.layout.visionPrefix.empty() ? std::string("model.visual")
                                            : spec.layout.visionPrefix;
}

} // namespace

std::vector<WeightRequirement> visionWeights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    if (!spec.vision || spec.vision->kind != "qwen3_vl") {
        return w;
    }
    const auto& v = *spec.vision;
    const std::string p = visionPrefix(spec);
    const std::int64_t d = v.hiddenSize;
    const std::int64_t merged = d * v.spatialMergeSize * v.spatialMergeSize;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto addLinear = [&](const std::string& m, std::int64_t out, std::int64_t in) {
        add(m + ".weight", { out, in });
        add(m + ".bias", { out });
    };
    add(p + ".patch_embed.proj.weight",
        { d, v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize });
    add(p + ".patch_embed.proj.bias", { d });
    add(p + ".pos_embed.weight", { v.numPositionEmbeddings, d });
    for (std::int64_t b = 0; b < v.depth; ++b) {
        const std::string blk = fmt::format("{}.blocks.{}", p, b);
        for (const char* norm : { ".norm1", ".norm2" }) {
            add(blk + norm + ".weight", { d });
            add(blk + norm + ".bias", { d });
        }
        addLinear(blk + ".attn.qkv", 3 * d, d);
        addLinear(blk + ".attn.proj", d, d);
        addLinear(blk + ".mlp.linear_fc1", v.intermediateSize, d);
        addLinear(blk + ".mlp.linear_fc2", d, v.intermediateSize);
    }
    const auto addMerger = [&](const std::string& m, std::int64_t normWidth) {
        add(m + ".norm.weight", { normWidth });
        add(m + ".norm.bias", { normWidth });
        addLinear(m + ".linear_fc1", merged, merged);
        addLinear(m + ".linear_fc2", v.outHiddenSize, merged);
    };
    addMerger(p + ".merger", d);
    for (std::size_t j = 0; j < v.deepstackIndexes.size(); ++j) {
        addMerger(fmt::format("{}.deepstack_merger_list.{}", p, j), merged);
    }
    return w;
}

template <typename T>
void Forward<T>::layerNormOp(const std::string& module, const T* x, T* y, std::int64_t n,
    std::int64_t dim, int layer, double eps)
{
    layerNorm<T>(x, weight(module + ".weight"), weight(module + ".bias"), y, n, dim, eps);
    roundAct(y, n * dim, m_plan.modeFor(OpKind::Norm, layer));
}

template <typename T>
void Forward<T>::visionBlock(int block, T* x, std::int64_t n, std::span<const std::int64_t> rows,
    std::span<const std::int64_t> cols, Taps<T>& taps)
{
    const auto& v = *m_spec.vision;
    const std::string blk = fmt::format("{}.blocks.{}", visionPrefix(m_spec), block);
    const std::int64_t d = v.hiddenSize;
    const std::int64_t heads = v.numHeads;
    const std::int64_t hd = d / heads;
    std::vector<T> y(std::size_t(n * d));
    layerNormOp(blk + ".norm1", x, y.data(), n, d, block, kVisionEps);
    std::vector<T> qkv(std::size_t(n * 3 * d));
    linear(blk + ".attn.qkv", y.data(), qkv.data(), n, d, 3 * d, OpKind::Linear, block, taps, true);
    // qkv rows are [3, heads, hd]; q and k are copied out to be rotated.
    std::vector<T> q(std::size_t(n * d));
    std::vector<T> k(std::size_t(n * d));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(qkv.data() + t * 3 * d, d, q.data() + t * d);
        std::copy_n(qkv.data() + t * 3 * d + d, d, k.data() + t * d);
    }
    std::vector<std::int64_t> positions3(std::size_t(3 * n), 0);
    std::copy(rows.begin(), rows.end(), positions3.begin());
    std::copy(cols.begin(), cols.end(), positions3.begin() + n);
    const std::span<const std::int64_t> zeros(positions3.data() + 2 * n, std::size_t(n));
    applyRope<T>(q.data(), n, heads, hd, zeros, m_visionRope, positions3);
    applyRope<T>(k.data(), n, heads, hd, zeros, m_visionRope, positions3);
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, block);
    roundAct(q.data(), n * d, mode);
    roundAct(k.data(), n * d, mode);
    AttentionShape shape;
    shape.queries = n;
    shape.keys = n;
    shape.heads = heads;
    shape.kvHeads = heads;
    shape.headDim = hd;
    shape.valueDim = hd;
    shape.vStride = 3 * d;
    shape.scale = 1.0 / std::sqrt(double(hd));
    shape.causal = false; // one image: every patch sees every patch
    AttentionRounding<T> rounding;
    if constexpr (std::is_same_v<T, float>) {
        if (isEmulated(mode)) {
            rounding = [mode](float* p, std::int64_t count) {
                roundActivations({ p, std::size_t(count) }, mode);
            };
        }
    }
    std::vector<T> context(std::size_t(n * d));
    attention<T>(q.data(), k.data(), qkv.data() + 2 * d, context.data(), shape, rounding, rounding);
    roundAct(context.data(), n * d, mode);
    linear(
        blk + ".attn.proj", context.data(), y.data(), n, d, d, OpKind::Linear, block, taps, true);
    taps.record(blk + ".attn", y.data(), { n, d });
    const PrecisionMode residual = m_plan.modeFor(OpKind::DecoderLayer, block);
    addInPlace(x, y.data(), n * d);
    roundAct(x, n * d, residual);

    layerNormOp(blk + ".norm2", x, y.data(), n, d, block, kVisionEps);
    std::vector<T> inner(std::size_t(n * v.intermediateSize));
    linear(blk + ".mlp.linear_fc1", y.data(), inner.data(), n, d, v.intermediateSize,
        OpKind::Linear, block, taps, true);
    activate<T>(inner.data(), n * v.intermediateSize, *parseActivation(v.hiddenAct));
    roundAct(inner.data(), n * v.intermediateSize, m_plan.modeFor(OpKind::Mlp, block));
    linear(blk + ".mlp.linear_fc2", inner.data(), y.data(), n, v.intermediateSize, d,
        OpKind::Linear, block, taps, true);
    taps.record(blk + ".mlp", y.data(), { n, d });
    addInPlace(x, y.data(), n * d);
    roundAct(x, n * d, residual);
    taps.record(blk, x, { n, d });
}

template <typename T>
void Forward<T>::visionMerger(const std::string& module, const T* x, std::int64_t n,
    bool postShuffleNorm, int layer, std::vector<T>& out, Taps<T>& taps)
{
    const auto& v = *m_spec.vision;
    const std::int64_t d = v.hiddenSize;
    const std::int64_t width = d * v.spatialMergeSize * v.spatialMergeSize;
    const std::int64_t tokens = n * d / width;
    // Consecutive patches of one merge window form one row of `width`: the norm runs before
    // (merger) or after (deepstack mergers) that shuffle, which is a plain reinterpretation.
    std::vector<T> y(std::size_t(n * d));
    if (postShuffleNorm) {
        layerNormOp(module + ".norm", x, y.data(), tokens, width, layer, kVisionEps);
    } else {
        layerNormOp(module + ".norm", x, y.data(), n, d, layer, kVisionEps);
    }
    std::vector<T> inner(std::size_t(tokens * width));
    linear(module + ".linear_fc1", y.data(), inner.data(), tokens, width, width, OpKind::Linear,
        layer, taps, true);
    activate<T>(inner.data(), tokens * width, Activation::Gelu); // nn.GELU(): exact erf
    roundAct(inner.data(), tokens * width, m_plan.modeFor(OpKind::Mlp, layer));
    out.assign(std::size_t(tokens * v.outHiddenSize), T(0));
    linear(module + ".linear_fc2", inner.data(), out.data(), tokens, width, v.outHiddenSize,
        OpKind::Linear, layer, taps, true);
    taps.record(module, out.data(), { tokens, v.outHiddenSize });
}

template <typename T>
Result<VisionFeatures<T>> Forward<T>::visionTower(std::span<const double> patches,
    std::int64_t gridH, std::int64_t gridW, Taps<T>& taps, std::stop_token stop)
{
    if (!m_spec.vision || m_spec.vision->kind != "qwen3_vl") {
        return Error::unsupported(fmt::format("the vision tower of {} ({})", m_spec.modelType,
            m_spec.vision ? m_spec.vision->kind : std::string("none")));
    }
    const auto& v = *m_spec.vision;
    const std::string p = visionPrefix(m_spec);
    const std::int64_t d = v.hiddenSize;
    const std::int64_t m = v.spatialMergeSize;
    const std::int64_t n = gridH * gridW;
    const std::int64_t patchWidth = v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize;
    if (std::int64_t(patches.size()) != n * patchWidth || gridH % m != 0 || gridW % m != 0) {
        return Error::internal(
            fmt::format("vision input: {} values for a {}x{} grid of {}-wide patches (merge {})",
                patches.size(), gridH, gridW, patchWidth, m));
    }
    if (d % v.numHeads != 0 || (d / v.numHeads) % 4 != 0) {
        return Error::badInput(fmt::format("{}: vision hidden_size {} / num_heads {} must give a "
                                           "head width divisible by 4 (2-D rotary)",
            m_spec.origin, d, v.numHeads));
    }
    // 2-D rotary: head_dim/4 frequencies of base 10000 over head_dim/2; pair i < head_dim/4
    // turns with the patch row, the next head_dim/4 with its column (rotate-half layout).
    const std::int64_t hd = d / v.numHeads;
    m_visionRope = Rope {};
    m_visionRope.rotaryDim = hd;
    for (int part = 0; part < 2; ++part) {
        for (std::int64_t i = 0; i < hd / 4; ++i) {
            m_visionRope.invFreq.push_back(1.0 / std::pow(10000.0, double(2 * i) / double(hd / 2)));
            m_visionRope.pairComponent.push_back(part);
        }
    }
    std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
    std::vector<std::int64_t> cols(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t window = i / (m * m);
        const std::int64_t inner = i % (m * m);
        rows[std::size_t(i)] = (window / (gridW / m)) * m + inner / m;
        cols[std::size_t(i)] = (window % (gridW / m)) * m + inner % m;
    }

    std::vector<T> in(patches.begin(), patches.end());
    roundAct(in.data(), n * patchWidth, m_plan.modeFor(OpKind::Linear, -1));
    std::vector<T> x(std::size_t(n * d));
    linear(p + ".patch_embed.proj", in.data(), x.data(), n, patchWidth, d, OpKind::Linear, -1, taps,
        false);
    taps.record(p + ".patch_embed", x.data(), { n, d });

    // Learned positions on a side × side grid, bilinearly interpolated at linspace(0, side-1)
    // (HF fast_pos_embed_interpolate), added to each patch at its (row, column).
    const auto side = std::int64_t(std::lround(std::sqrt(double(v.numPositionEmbeddings))));
    if (side * side != v.numPositionEmbeddings) {
        return Error::badInput(fmt::format("{}: vision num_position_embeddings {} is not a square",
            m_spec.origin, v.numPositionEmbeddings));
    }
    const T* table = weight(p + ".pos_embed.weight");
    const auto at = [&](std::int64_t i, std::int64_t count) {
        return count == 1 ? 0.0 : double(i) * double(side - 1) / double(count - 1);
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const double fy = at(rows[std::size_t(i)], gridH);
        const double fx = at(cols[std::size_t(i)], gridW);
        const auto y0 = std::int64_t(fy);
        const auto x0 = std::int64_t(fx);
        const std::int64_t y1 = std::min(y0 + 1, side - 1);
        const std::int64_t x1 = std::min(x0 + 1, side - 1);
        const double dy = fy - double(y0);
        const double dx = fx - double(x0);
        const std::pair<std::int64_t, double> corners[] = {
            { y0 * side + x0, (1 - dy) * (1 - dx) },
            { y0 * side + x1, (1 - dy) * dx },
            { y1 * side + x0, dy * (1 - dx) },
            { y1 * side + x1, dy * dx },
        };
        T* row = x.data() + i * d;
        for (std::int64_t j = 0; j < d; ++j) {
            double s = 0.0;
            for (const auto& [index, w] : corners) {
                s += double(table[index * d + j]) * w;
            }
            row[j] += T(s);
        }
    }
    roundAct(x.data(), n * d, m_plan.modeFor(OpKind::Embedding, -1));

    VisionFeatures<T> out;
    out.tokens = n / (m * m);
    out.deepstack.resize(v.deepstackIndexes.size());
    for (int b = 0; b < int(v.depth); ++b) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        visionBlock(b, x.data(), n, rows, cols, taps);
        for (std::size_t j = 0; j < v.deepstackIndexes.size(); ++j) {
            if (v.deepstackIndexes[j] == b) {
                visionMerger(fmt::format("{}.deepstack_merger_list.{}", p, j), x.data(), n, true, b,
                    out.deepstack[j], taps);
            }
        }
    }
    visionMerger(p + ".merger", x.data(), n, false, -1, out.embeds, taps);
    for (std::size_t j = 0; j < out.deepstack.size(); ++j) {
        if (out.deepstack[j].empty()) {
            return Error::badInput(
                fmt::format("{}: deepstack_visual_indexes[{}] = {} is not a block (depth {})",
                    m_spec.origin, j, v.deepstackIndexes[j], v.depth));
        }
    }
    return out;
}

template void Forward<float>::layerNormOp(
    const std::string&, const float*, float*, std::int64_t, std::int64_t, int, double);
template void Forward<float>::visionBlock(int, float*, std::int64_t, std::span<const std::int64_t>,
    std::span<const std::int64_t>, Taps<float>&);
template void Forward<float>::visionMerger(
    const std::string&, const float*, std::int64_t, bool, int, std::vector<float>&, Taps<float>&);
template Result<VisionFeatures<float>> Forward<float>::visionTower(
    std::span<const double>, std::int64_t, std::int64_t, Taps<float>&, std::stop_token);
template void Forward<double>::layerNormOp(
    const std::string&, const double*, double*, std::int64_t, std::int64_t, int, double);
template void Forward<double>::visionBlock(int, double*, std::int64_t,
    std::span<const std::int64_t>, std::span<const std::int64_t>, Taps<double>&);
template void Forward<double>::visionMerger(const std::string&, const double*, std::int64_t, bool,
    int, std::vector<double>&, Taps<double>&);
template Result<VisionFeatures<double>> Forward<double>::visionTower(
    std::span<const double>, std::int64_t, std::int64_t, Taps<double>&, std::stop_token);

} // namespace day0::exec::detail
