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
#include <map>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

constexpr double kVisionEps = 1e-6; // every LayerNorm of the Qwen3-VL tower

std::string visionPrefix(const model::ModelSpec& spec)
{
    return spec.layout.visionPrefix.empty() ? std::string("model.visual")
                                            : spec.layout.visionPrefix;
}

bool isQwenTower(const std::string& kind)
{
    return kind == "qwen2_vl" || kind == "qwen2_5_vl" || kind == "qwen3_vl";
}

/// Module names of a tower's merger: norm, first and second linear.
struct MergerNames {
    std::string norm;
    std::string fc1;
    std::string fc2;
};

MergerNames mergerNames(const std::string& kind)
{
    if (kind == "qwen3_vl") {
        return { ".norm", ".linear_fc1", ".linear_fc2" };
    }
    return { ".ln_q", ".mlp.0", ".mlp.2" };
}

} // namespace

std::vector<WeightRequirement> visionWeights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    if (spec.vision && spec.vision->kind == "gemma4") {
        return gemma4VisionWeights(spec);
    }
    if (!spec.vision || !isQwenTower(spec.vision->kind)) {
        return w;
    }
    const auto& v = *spec.vision;
    const bool qwen3 = v.kind == "qwen3_vl";
    const bool rms = v.kind == "qwen2_5_vl"; // RMSNorm without bias, SwiGLU MLP
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
    const auto addNorm = [&](const std::string& m, std::int64_t width) {
        add(m + ".weight", { width });
        if (!rms) {
            add(m + ".bias", { width });
        }
    };
    add(p + ".patch_embed.proj.weight",
        { d, v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize });
    if (qwen3) {
        add(p + ".patch_embed.proj.bias", { d });
        add(p + ".pos_embed.weight", { v.numPositionEmbeddings, d });
    }
    for (std::int64_t b = 0; b < v.depth; ++b) {
        const std::string blk = fmt::format("{}.blocks.{}", p, b);
        addNorm(blk + ".norm1", d);
        addNorm(blk + ".norm2", d);
        addLinear(blk + ".attn.qkv", 3 * d, d);
        addLinear(blk + ".attn.proj", d, d);
        if (rms) {
            addLinear(blk + ".mlp.gate_proj", v.intermediateSize, d);
            addLinear(blk + ".mlp.up_proj", v.intermediateSize, d);
            addLinear(blk + ".mlp.down_proj", d, v.intermediateSize);
        } else {
            const std::string fc = qwen3 ? ".mlp.linear_fc" : ".mlp.fc";
            addLinear(blk + fc + "1", v.intermediateSize, d);
            addLinear(blk + fc + "2", d, v.intermediateSize);
        }
    }
    const MergerNames names = mergerNames(v.kind);
    const auto addMerger = [&](const std::string& m, std::int64_t normWidth) {
        addNorm(m + names.norm, normWidth);
        addLinear(m + names.fc1, merged, merged);
        addLinear(m + names.fc2, v.outHiddenSize, merged);
    };
    addMerger(p + ".merger", d);
    for (std::size_t j = 0; qwen3 && j < v.deepstackIndexes.size(); ++j) {
        addMerger(fmt::format("{}.deepstack_merger_list.{}", p, j), merged);
    }
    return w;
}

template <typename T>
void Forward<T>::layerNormOp(const std::string& module, const T* x, T* y, std::int64_t n,
    std::int64_t dim, int layer, double eps)
{
    if (m_spec.vision && m_spec.vision->kind == "qwen2_5_vl") {
        rmsNorm<T>(x, weight(module + ".weight"), y, n, dim, eps); // Qwen2RMSNorm
    } else {
        layerNorm<T>(x, weight(module + ".weight"), weight(module + ".bias"), y, n, dim, eps);
    }
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
    const auto& full = v.fullAttentionBlocks;
    const std::int64_t window = v.kind == "qwen2_5_vl" && v.windowSize > 0
            && std::find(full.begin(), full.end(), std::int64_t(block)) == full.end()
        ? v.windowSize / v.spatialMergeSize / v.patchSize
        : 0;
    if (window <= 0) {
        attention<T>(
            q.data(), k.data(), qkv.data() + 2 * d, context.data(), shape, rounding, rounding);
    } else {
        // Qwen2.5-VL window attention: patches attend within their window of window × window
        // merged tokens (HF reorders by window and uses block-diagonal attention; gathering
        // each window's rows gives the same sums).
        const std::int64_t m = v.spatialMergeSize;
        std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> windows;
        for (std::int64_t i = 0; i < n; ++i) {
            windows[{ rows[std::size_t(i)] / m / window, cols[std::size_t(i)] / m / window }]
                .push_back(i);
        }
        for (const auto& [key, members] : windows) {
            const auto w = std::int64_t(members.size());
            std::vector<T> wq(std::size_t(w * d));
            std::vector<T> wk(std::size_t(w * d));
            std::vector<T> wv(std::size_t(w * d));
            for (std::int64_t r = 0; r < w; ++r) {
                const std::int64_t i = members[std::size_t(r)];
                std::copy_n(q.data() + i * d, d, wq.data() + r * d);
                std::copy_n(k.data() + i * d, d, wk.data() + r * d);
                std::copy_n(qkv.data() + i * 3 * d + 2 * d, d, wv.data() + r * d);
            }
            AttentionShape ws = shape;
            ws.queries = w;
            ws.keys = w;
            ws.vStride = 0;
            std::vector<T> wout(std::size_t(w * d));
            attention<T>(wq.data(), wk.data(), wv.data(), wout.data(), ws, rounding, rounding);
            for (std::int64_t r = 0; r < w; ++r) {
                std::copy_n(wout.data() + r * d, d, context.data() + members[std::size_t(r)] * d);
            }
        }
    }
    roundAct(context.data(), n * d, mode);
    linear(
        blk + ".attn.proj", context.data(), y.data(), n, d, d, OpKind::Linear, block, taps, true);
    taps.record(blk + ".attn", y.data(), { n, d });
    const PrecisionMode residual = m_plan.modeFor(OpKind::DecoderLayer, block);
    addInPlace(x, y.data(), n * d);
    roundAct(x, n * d, residual);

    layerNormOp(blk + ".norm2", x, y.data(), n, d, block, kVisionEps);
    const std::int64_t inter = v.intermediateSize;
    std::vector<T> inner(std::size_t(n * inter));
    const Activation act = *parseActivation(v.hiddenAct); // checked by visionTower
    const PrecisionMode mlpMode = m_plan.modeFor(OpKind::Mlp, block);
    if (v.kind == "qwen2_5_vl") {
        std::vector<T> up(std::size_t(n * inter));
        linear(blk + ".mlp.gate_proj", y.data(), inner.data(), n, d, inter, OpKind::Linear, block,
            taps, true);
        linear(blk + ".mlp.up_proj", y.data(), up.data(), n, d, inter, OpKind::Linear, block, taps,
            true);
        if constexpr (std::is_same_v<T, float>) {
            emulatedGatedActivation(inner.data(), up.data(), n * inter, act, mlpMode);
        } else {
            gatedActivate<T>(inner.data(), up.data(), n * inter, act);
        }
        linear(blk + ".mlp.down_proj", inner.data(), y.data(), n, inter, d, OpKind::Linear, block,
            taps, true);
    } else {
        const std::string fc = v.kind == "qwen3_vl" ? ".mlp.linear_fc" : ".mlp.fc";
        linear(
            blk + fc + "1", y.data(), inner.data(), n, d, inter, OpKind::Linear, block, taps, true);
        activate<T>(inner.data(), n * inter, act);
        roundAct(inner.data(), n * inter, mlpMode);
        linear(
            blk + fc + "2", inner.data(), y.data(), n, inter, d, OpKind::Linear, block, taps, true);
    }
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
    const MergerNames names = mergerNames(v.kind);
    std::vector<T> y(std::size_t(n * d));
    if (postShuffleNorm) {
        layerNormOp(module + names.norm, x, y.data(), tokens, width, layer, kVisionEps);
    } else {
        layerNormOp(module + names.norm, x, y.data(), n, d, layer, kVisionEps);
    }
    std::vector<T> inner(std::size_t(tokens * width));
    linear(module + names.fc1, y.data(), inner.data(), tokens, width, width, OpKind::Linear, layer,
        taps, true);
    activate<T>(inner.data(), tokens * width, Activation::Gelu); // nn.GELU(): exact erf
    roundAct(inner.data(), tokens * width, m_plan.modeFor(OpKind::Mlp, layer));
    out.assign(std::size_t(tokens * v.outHiddenSize), T(0));
    linear(module + names.fc2, inner.data(), out.data(), tokens, width, v.outHiddenSize,
        OpKind::Linear, layer, taps, true);
    taps.record(module, out.data(), { tokens, v.outHiddenSize });
}

template <typename T>
Result<VisionFeatures<T>> Forward<T>::visionTower(std::span<const double> patches,
    std::int64_t gridH, std::int64_t gridW, Taps<T>& taps, std::stop_token stop)
{
    if (m_spec.vision && m_spec.vision->kind == "gemma4") {
        return gemma4VisionTower(patches, gridH, gridW, taps, stop);
    }
    if (!m_spec.vision || !isQwenTower(m_spec.vision->kind)) {
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
    if (auto act = parseActivation(v.hiddenAct); !act) {
        return act.error().withContext(m_spec.origin + ": vision_config hidden_act");
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

    if (v.kind == "qwen3_vl") {
        // Learned positions on a side × side grid, bilinearly interpolated at linspace(0, side-1)
        // (HF fast_pos_embed_interpolate), added to each patch at its (row, column).
        const auto side = std::int64_t(std::lround(std::sqrt(double(v.numPositionEmbeddings))));
        if (side * side != v.numPositionEmbeddings) {
            return Error::badInput(
                fmt::format("{}: vision num_position_embeddings {} is not a square", m_spec.origin,
                    v.numPositionEmbeddings));
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
    }
    roundAct(x.data(), n * d, m_plan.modeFor(OpKind::Embedding, -1));

    // Qwen2.5-VL (HF get_window_index): the rows go window by window, in whole merge units,
    // through the blocks and the merger (so captures line up with HF's), and back after it.
    std::vector<std::int64_t> unitOrder;
    if (v.kind == "qwen2_5_vl" && v.windowSize > 0) {
        const std::int64_t size = std::max<std::int64_t>(v.windowSize / m / v.patchSize, 1);
        const std::int64_t lh = gridH / m;
        const std::int64_t lw = gridW / m;
        for (std::int64_t wh = 0; wh < lh; wh += size) {
            for (std::int64_t ww = 0; ww < lw; ww += size) {
                for (std::int64_t r = wh; r < std::min(wh + size, lh); ++r) {
                    for (std::int64_t c = ww; c < std::min(ww + size, lw); ++c) {
                        unitOrder.push_back(r * lw + c);
                    }
                }
            }
        }
        const std::int64_t unit = m * m;
        std::vector<T> permuted(x.size());
        std::vector<std::int64_t> pr(rows.size());
        std::vector<std::int64_t> pc(cols.size());
        for (std::size_t u = 0; u < unitOrder.size(); ++u) {
            for (std::int64_t k = 0; k < unit; ++k) {
                const std::int64_t from = unitOrder[u] * unit + k;
                const std::int64_t to = std::int64_t(u) * unit + k;
                std::copy_n(x.data() + from * d, d, permuted.data() + to * d);
                pr[std::size_t(to)] = rows[std::size_t(from)];
                pc[std::size_t(to)] = cols[std::size_t(from)];
            }
        }
        x = std::move(permuted);
        rows = std::move(pr);
        cols = std::move(pc);
    }

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
    if (!unitOrder.empty()) {
        const std::int64_t width = v.outHiddenSize;
        std::vector<T> restored(out.embeds.size());
        for (std::size_t u = 0; u < unitOrder.size(); ++u) {
            std::copy_n(out.embeds.data() + std::int64_t(u) * width, width,
                restored.data() + unitOrder[u] * width);
        }
        out.embeds = std::move(restored);
    }
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
