// The sharded forward of Gemma-4's text decoder (gemma4 / gemma4_text), the single-rank engine's
// exec/gemma4_block.cpp over this rank's heads and MLP lanes:
// - the embedding vocab-parallel, then times sqrt(hidden_size); the per-layer input embeddings
//   (E2B/E4B) from embed_tokens_per_layer (vocab-parallel, summed over the TP group) and the
//   replicated per_layer_model_projection and its norm, computed on the first stage for every
//   layer and sent to the later stages with the hidden rows;
// - attention column-parallel by heads (q/k/v_proj; KV heads replicated as head r / (tp / kv)
//   when TP exceeds them), the per-head q_norm / k_norm and the weightless v_norm local, the
//   RoPE of the layer type (sliding: default, full: proportional over global_head_dim), scaling
//   1, o_proj row-parallel; a KV-shared layer reads the cache of its source layer, which must
//   lie in the same pipeline stage;
// - the sandwich norms (post_attention_layernorm, pre/post_feedforward_layernorm) on the
//   reduced rows, the gated MLP (double-wide in the KV-shared layers) column/row-parallel;
// - the per-layer input branch (per_layer_input_gate / per_layer_projection replicated) on the
//   rank's rows, then layer_scalar; the final logits soft-capped.
// - the MoE block beside the MLP (gemma-4-26b-a4b): the router replicated (weightless norm of
//   the residual stream, its scale, softmax top-k renormalised, per_expert_scale), the experts
//   (unpacked from experts.gate_up_proj / down_proj) over EP through moe.cpp's dispatch on
//   pre_feedforward_layernorm_2 of the residual stream, each branch post-normed and summed.
// The full layers' own KV heads (num_global_key_value_heads) and attention_k_eq_v are sliced by
// core/checkpoint per layer.
#include "exec/attention.h"
#include "exec/forward.h"
#include "parallel/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::parallel::detail {

namespace {

bool fullLayer(const model::LayerSpec& layer) { return layer.mixer != model::MixerKind::Sliding; }

} // namespace

std::int64_t ParallelForward::localKvHeads(const model::LayerSpec& layer) const
{
    const std::int64_t kv = m_spec.kvHeadsOf(layer);
    return kv >= m_layout.tp ? kv / m_layout.tp : 1;
}

std::int64_t ParallelForward::perLayerInputFloats(std::int64_t n) const
{
    return m_spec.family == model::Family::Gemma4 ? n * m_spec.numLayers * m_spec.perLayerInputSize
                                                  : 0;
}

Result<void> ParallelForward::gemma4Init()
{
    auto full = exec::detail::gemma4Rope(m_spec, true);
    if (!full) {
        return full.error();
    }
    m_rope = std::move(*full);
    auto sliding = exec::detail::gemma4Rope(m_spec, false);
    if (!sliding) {
        return sliding.error();
    }
    m_slidingRope = std::move(*sliding);
    if (m_spec.moe) {
        // The reader's softmax scoring with normTopkProb, as the single-rank engine routes.
        m_router = exec::routerConfig(*m_spec.moe);
    }
    const int tp = m_layout.tp;
    const std::int64_t firstShared = m_spec.numLayers - m_spec.kvSharedLayers;
    m_kvSource.assign(std::size_t(m_spec.numLayers), 0);
    for (std::int64_t l = 0; l < m_spec.numLayers; ++l) {
        const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
        const std::int64_t kv = m_spec.kvHeadsOf(layer);
        if (m_spec.headsOf(layer) % tp != 0 || (kv >= tp ? kv % tp != 0 : tp % kv != 0)) {
            return Error::badInput(fmt::format("--plan: tp={} does not split the {} query and {} "
                                               "KV heads of layer {}",
                tp, m_spec.headsOf(layer), kv, l));
        }
        if (m_spec.ffnWidthOf(layer) % tp != 0) {
            return Error::badInput(fmt::format("--plan: tp={} does not divide the {} MLP lanes "
                                               "of layer {}",
                tp, m_spec.ffnWidthOf(layer), l));
        }
        // As the single-rank engine: the last unshared layer of the same kind.
        int source = int(l);
        if (l >= firstShared) {
            for (std::int64_t j = 0; j < firstShared; ++j) {
                if (fullLayer(m_spec.layers[std::size_t(j)]) == fullLayer(layer)) {
                    source = int(j);
                }
            }
            if (source == int(l)) {
                return Error::badInput(fmt::format(
                    "gemma4 KV-shared layer {} has no earlier layer of its kind to read", l));
            }
        }
        m_kvSource[std::size_t(l)] = source;
        const bool here = l >= m_layers.first && l < m_layers.second;
        if (here && source < m_layers.first) {
            return Error::unsupported(
                fmt::format("--plan: sharded runs of gemma4 with KV-shared layer {} in pipeline "
                            "stage {} and the layer {} whose cache it reads "
                            "(num_kv_shared_layers) in an earlier stage; cut the stages so that "
                            "both lie in one (layers=...)",
                    l, m_coord.stage, source));
        }
    }
    return success();
}

Result<void> ParallelForward::gemma4PerLayerInputs(
    std::span<const std::int64_t> ids, const float* embedded, std::int64_t n)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t width = m_spec.perLayerInputSize;
    const std::int64_t all = m_spec.numLayers * width;
    const std::int64_t vocab = m_spec.perLayerInputVocab;
    const std::string table = "model.embed_tokens_per_layer.weight";
    const auto it = m_weights.tensors.find(table);
    if (it == m_weights.tensors.end()) {
        return Error::internal(fmt::format("rank {}: holds no slice of '{}'", m_coord.rank, table));
    }
    // The token part: this rank's vocabulary rows, summed over the TP group, times sqrt(width).
    const std::int64_t rows = it->second.shape()[0];
    const std::int64_t per = (vocab + m_layout.tp - 1) / m_layout.tp;
    const std::int64_t lo = m_layout.tp == 1 ? 0 : std::min(vocab, per * m_coord.tpRank);
    std::vector<float> tokens(std::size_t(n * all), 0.0F);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = ids[std::size_t(i)];
        if (id < 0 || id >= vocab) {
            return Error::badInput(fmt::format(
                "token id {} is outside the per-layer input vocabulary [0, {})", id, vocab));
        }
        if (id >= lo && id < lo + rows) {
            std::copy_n(it->second.data<float>() + (id - lo) * all, all, tokens.begin() + i * all);
        }
    }
    DAY0_TRY(reduceTp(tokens.data(), n * all));
    const auto scale = float(std::sqrt(double(width)));
    for (float& x : tokens) {
        x *= scale;
    }
    // The context part: the scaled embedding projected, times hidden_size^-1/2, normalised per
    // layer over its width; the sum times 2^-1/2.
    m_perLayerInputs.assign(std::size_t(n * all), 0.0F);
    DAY0_TRY(linearOp(
        "model.per_layer_model_projection", embedded, m_perLayerInputs.data(), n, h, all, true));
    const auto root = float(1.0 / std::sqrt(double(h)));
    for (float& x : m_perLayerInputs) {
        x *= root;
    }
    m_ops.rmsNorm(m_perLayerInputs.data(), weight("model.per_layer_projection_norm.weight"),
        m_perLayerInputs.data(), n * m_spec.numLayers, width, m_spec.normEps,
        exec::PrecisionMode::F32);
    const auto half = float(1.0 / std::sqrt(2.0));
    for (std::size_t i = 0; i < m_perLayerInputs.size(); ++i) {
        m_perLayerInputs[i] = (m_perLayerInputs[i] + tokens[i]) * half;
    }
    return backendStatus();
}

Result<void> ParallelForward::gemma4Attention(
    int layer, ShardCache& cache, const float* x, float* out, std::int64_t n, std::int64_t start)
{
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDimOf(spec);
    const std::int64_t heads = m_spec.headsOf(spec) / m_layout.tp;
    const std::int64_t kvHeads = localKvHeads(spec);
    const std::int64_t qDim = heads * d;
    const std::int64_t kvDim = kvHeads * d;
    const exec::Rope& rope = fullLayer(spec) ? m_rope : m_slidingRope;
    std::vector<float> q(std::size_t(n * qDim));
    DAY0_TRY(linearOp(attn + ".q_proj", x, q.data(), n, h, qDim));
    m_ops.rmsNorm(q.data(), weight(attn + ".q_norm.weight"), q.data(), n * heads, d, m_spec.normEps,
        exec::PrecisionMode::F32);
    m_ops.rope(q.data(), n, heads, d, m_positions, rope, {}, exec::PrecisionMode::F32);
    const int source = m_kvSource[std::size_t(layer)];
    auto& ck = cache.k[std::size_t(source)];
    auto& cv = cache.v[std::size_t(source)];
    if (std::int64_t(ck.size()) != cache.capacity * kvDim) {
        return Error::internal(fmt::format(
            "rank {}: layer {} finds no KV cache of layer {}", m_coord.rank, layer, source));
    }
    if (source == layer) {
        std::vector<float> k(std::size_t(n * kvDim));
        std::vector<float> v(std::size_t(n * kvDim));
        DAY0_TRY(linearOp(attn + ".k_proj", x, k.data(), n, h, kvDim));
        if (spec.sharedKv) {
            v = k; // attention_k_eq_v: k_proj's output before k_norm and RoPE
        } else {
            DAY0_TRY(linearOp(attn + ".v_proj", x, v.data(), n, h, kvDim));
        }
        m_ops.rmsNorm(k.data(), weight(attn + ".k_norm.weight"), k.data(), n * kvHeads, d,
            m_spec.normEps, exec::PrecisionMode::F32);
        exec::unitRmsNorm(v.data(), n * kvHeads, d, m_spec.normEps); // v_norm, no weight
        m_ops.rope(k.data(), n, kvHeads, d, m_positions, rope, {}, exec::PrecisionMode::F32);
        std::copy(k.begin(), k.end(), ck.begin() + start * kvDim);
        std::copy(v.begin(), v.end(), cv.begin() + start * kvDim);
    }
    // Scaling 1: q_norm and k_norm stand for 1/sqrt(d); the window is this layer's.
    const exec::AttentionShape shape
        = exec::decoderAttentionShape(spec, n, start, heads, kvHeads, d, d, 1.0);
    std::vector<float> context(std::size_t(n * qDim));
    m_ops.attention(
        q.data(), ck.data(), cv.data(), context.data(), shape, exec::PrecisionMode::F32);
    return linearOp(attn + ".o_proj", context.data(), out, n, qDim, h, true);
}

Result<void> ParallelForward::gemma4Experts(
    int layer, const std::vector<float>& hidden, std::int64_t n, std::vector<float>& branch)
{
    const std::string p = layerPrefix(layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t rows = localRows(n);
    // Gemma4TextRouter reads the residual stream, RMS-normalised without a weight, times its
    // learned scale and hidden_size^-1/2 (replicated: every rank routes every token).
    std::vector<float> gathered;
    auto residual = allTokens(hidden, n, gathered);
    if (!residual) {
        return residual.error();
    }
    std::vector<float> routed(*residual, *residual + n * h);
    exec::unitRmsNorm(routed.data(), n, h, m_spec.normEps);
    const float* scale = weight(p + ".router.scale");
    const auto root = float(1.0 / std::sqrt(double(h)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            routed[std::size_t(t * h + c)] = routed[std::size_t(t * h + c)] * scale[c] * root;
        }
    }
    // The experts read pre_feedforward_layernorm_2 of the residual stream.
    std::vector<float> x(hidden.size());
    m_ops.rmsNorm(hidden.data(), weight(p + ".pre_feedforward_layernorm_2.weight"), x.data(), rows,
        h, m_spec.normEps, exec::PrecisionMode::F32);
    std::vector<float> rowsOfAll;
    auto in = allTokens(x, n, rowsOfAll);
    if (!in) {
        return in.error();
    }
    // Each token's routed sum lives on its owning TP rank until the reduction.
    std::vector<float> acc(std::size_t(n * h), 0.0F);
    DAY0_TRY(routedExperts(layer, routed.data(), n, *in, h, acc.data()));
    std::vector<float> experts;
    DAY0_TRY(finishRowParallel(acc, n, {}, experts));
    const auto norm = [&](const std::string& name, float* values) {
        m_ops.rmsNorm(values, weight(name + ".weight"), values, rows, h, m_spec.normEps,
            exec::PrecisionMode::F32);
    };
    norm(p + ".post_feedforward_layernorm_2", experts.data());
    norm(p + ".post_feedforward_layernorm_1", branch.data());
    exec::addInPlace(branch.data(), experts.data(), rows * h);
    return backendStatus();
}

Result<void> ParallelForward::gemma4Layer(
    int layer, ShardCache& cache, std::vector<float>& hidden, std::int64_t n, std::int64_t start)
{
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::string p = layerPrefix(layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t rows = localRows(n);
    const auto norm = [&](const std::string& name, float* values) {
        m_ops.rmsNorm(values, weight(name + ".weight"), values, rows, h, m_spec.normEps,
            exec::PrecisionMode::F32);
    };
    std::vector<float> x(hidden.size());
    std::vector<float> partial(std::size_t(n * h));
    std::vector<float> branch;
    std::vector<float> gathered;
    m_ops.rmsNorm(hidden.data(), weight(p + ".input_layernorm.weight"), x.data(), rows, h,
        m_spec.normEps, exec::PrecisionMode::F32);
    auto in = allTokens(x, n, gathered);
    if (!in) {
        return in.error();
    }
    DAY0_TRY(gemma4Attention(layer, cache, *in, partial.data(), n, start));
    DAY0_TRY(finishRowParallel(partial, n, p + ".self_attn.o_proj", branch));
    // Gemma's post-attention norm normalises the attention output before the residual add.
    norm(p + ".post_attention_layernorm", branch.data());
    exec::addInPlace(hidden.data(), branch.data(), rows * h);
    m_ops.rmsNorm(hidden.data(), weight(p + ".pre_feedforward_layernorm.weight"), x.data(), rows, h,
        m_spec.normEps, exec::PrecisionMode::F32);
    in = allTokens(x, n, gathered);
    if (!in) {
        return in.error();
    }
    DAY0_TRY(mlpPartial(p + ".mlp", "gate_proj", "up_proj", "down_proj", *in, partial.data(), n,
        m_spec.ffnWidthOf(spec) / m_layout.tp));
    DAY0_TRY(finishRowParallel(partial, n, p + ".mlp.down_proj", branch));
    if (spec.moe() && m_spec.moe) {
        DAY0_TRY(gemma4Experts(layer, hidden, n, branch));
    }
    norm(p + ".post_feedforward_layernorm", branch.data());
    exec::addInPlace(hidden.data(), branch.data(), rows * h);
    if (const std::int64_t width = m_spec.perLayerInputSize; width > 0) {
        // The per-layer input branch on this rank's rows (replicated weights): act(gate(h)) times
        // the layer's input of each row's token, projected back, normalised, added.
        std::vector<float> gate(std::size_t(rows * width));
        DAY0_TRY(linearOp(p + ".per_layer_input_gate", hidden.data(), gate.data(), rows, h, width));
        std::vector<float> input(std::size_t(rows * width), 0.0F);
        const std::int64_t first = m_sp ? m_coord.tpRank * rows : 0;
        for (std::int64_t i = 0; i < rows && first + i < n; ++i) {
            std::copy_n(m_perLayerInputs.begin() + ((first + i) * m_spec.numLayers + layer) * width,
                width, input.begin() + i * width);
        }
        m_ops.gatedActivation(
            gate.data(), input.data(), rows * width, m_activation, exec::PrecisionMode::F32);
        branch.assign(std::size_t(rows * h), 0.0F);
        DAY0_TRY(linearOp(p + ".per_layer_projection", gate.data(), branch.data(), rows, width, h));
        norm(p + ".post_per_layer_input_norm", branch.data());
        exec::addInPlace(hidden.data(), branch.data(), rows * h);
    }
    const float layerScalar = *weight(p + ".layer_scalar");
    for (float& value : hidden) {
        value *= layerScalar;
    }
    return backendStatus();
}

} // namespace day0::parallel::detail
