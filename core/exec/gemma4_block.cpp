// Gemma-4's text tower on the reference engine (model_type gemma4 / gemma4_text).
//
// Written from transformers' modeling_gemma4.py @ 0246b4f3335464614ef1de66531f9131a44ec801
// (Gemma4TextModel, Gemma4TextDecoderLayer, Gemma4TextAttention, Gemma4TextRouter,
// Gemma4TextExperts, Gemma4RMSNorm, Gemma4TextScaledWordEmbedding, Gemma4ForCausalLM) and
// modeling_rope_utils.py's proportional RoPE. What it computes:
// - the token embedding times sqrt(hidden_size), the scale taken in the activations' dtype;
// - Gemma4RMSNorm: x · (mean(x²) + eps)^-½ · w, the weight as stored (not 1 + w); v_norm and the
//   router's norm have no weight;
// - per layer: input_layernorm → attention → post_attention_layernorm → residual; then
//   pre_feedforward_layernorm → dense MLP (gelu_pytorch_tanh gated), and with enable_moe_block
//   the MoE branch beside it, fed the residual stream (not the MLP's input):
//   post_feedforward_layernorm_1(mlp) + post_feedforward_layernorm_2(experts(
//   pre_feedforward_layernorm_2(residual))), then post_feedforward_layernorm → residual; the
//   layer's output is multiplied by its stored layer_scalar;
// - attention: q_norm / k_norm per head before RoPE, v_norm (weightless) on the values, scaling
//   1 (the norms stand for 1/sqrt(d)); sliding layers (window) with head_dim, full layers with
//   global_head_dim and, with attention_k_eq_v, num_global_key_value_heads and the raw k_proj
//   output as the values;
// - RoPE per layer type: "default" (all of head_dim rotated) and "proportional" (HF
//   _compute_proportional_rope_parameters: int(partial · d // 2) frequencies 1/θ^(2i/d) over the
//   whole head's rotate-half pairs, the remaining pairs with frequency 0, i.e. left as they are);
// - the router: RMS-normalised residual · scale · hidden_size^-½ → proj → softmax over all
//   experts → top-k → renormalised → times per_expert_scale of the chosen experts;
// - the final logits soft-capped: cap · tanh(logits / cap);
// - per-layer input embeddings (E2B/E4B; Gemma4TextModel.get_per_layer_inputs and
//   project_per_layer_inputs): each token's row of embed_tokens_per_layer times
//   sqrt(width) (the scale in the weights' dtype), plus per_layer_model_projection of the scaled
//   embedding times hidden_size^-½, RMS-normalised per layer by per_layer_projection_norm, the
//   sum times 2^-½; layer l then adds post_per_layer_input_norm(per_layer_projection(
//   act(per_layer_input_gate(h)) · input_l)) to its output before layer_scalar;
// - KV-shared layers (the last num_kv_shared_layers; Gemma4TextAttention.is_kv_shared_layer):
//   their queries attend to the keys and values of the last unshared layer of their kind
//   (store_full_length_kv), which they neither project nor cache; their MLPs are twice as wide
//   with use_double_wide_mlp (the spec's per-layer width).
// What it does not compute (bidirectional text attention, quantised experts, other RoPE types)
// unsupported_features.cpp refuses by name before a Forward exists.
#include "base/thread_pool.h"
#include "exec/attention.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

bool fullLayer(const model::LayerSpec& layer) { return layer.mixer != model::MixerKind::Sliding; }

/// The first of Gemma-4's KV-shared layers (numLayers when none).
std::int64_t firstKvShared(const model::ModelSpec& spec)
{
    return spec.numLayers - spec.kvSharedLayers;
}

} // namespace

std::vector<WeightRequirement> gemma4Weights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    const std::int64_t h = spec.hiddenSize;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto addMlp = [&](const std::string& module, std::int64_t inter) {
        add(module + ".gate_proj.weight", { inter, h });
        add(module + ".up_proj.weight", { inter, h });
        add(module + ".down_proj.weight", { h, inter });
    };
    add("model.embed_tokens.weight", { spec.vocabSize, h });
    const std::int64_t ple = spec.perLayerInputSize;
    if (ple > 0) {
        add("model.embed_tokens_per_layer.weight",
            { spec.perLayerInputVocab, spec.numLayers * ple });
        add("model.per_layer_model_projection.weight", { spec.numLayers * ple, h });
        add("model.per_layer_projection_norm.weight", { ple });
    }
    for (int l = 0; l < int(spec.numLayers); ++l) {
        const model::LayerSpec& layer = spec.layers[std::size_t(l)];
        const std::string p = fmt::format("model.layers.{}", l);
        const std::string attn = p + ".self_attn";
        const std::int64_t d = spec.headDimOf(layer);
        const std::int64_t q = spec.headsOf(layer) * d;
        const std::int64_t kv = spec.kvHeadsOf(layer) * d;
        for (const char* norm : { ".input_layernorm", ".post_attention_layernorm",
                 ".pre_feedforward_layernorm", ".post_feedforward_layernorm" }) {
            add(p + norm + ".weight", { h });
        }
        // A KV-shared layer projects no keys or values: the E2B checkpoint still ships its
        // k_proj / v_proj / k_norm, which HF ignores on load, and so does the engine.
        const bool kvShared = l >= firstKvShared(spec);
        add(attn + ".q_proj.weight", { q, h });
        if (!kvShared) {
            add(attn + ".k_proj.weight", { kv, h });
        }
        if (!kvShared && !layer.sharedKv) {
            add(attn + ".v_proj.weight", { kv, h });
        }
        add(attn + ".o_proj.weight", { h, q });
        if (spec.attentionBias) {
            add(attn + ".q_proj.bias", { q });
            if (!kvShared) {
                add(attn + ".k_proj.bias", { kv });
            }
            if (!kvShared && !layer.sharedKv) {
                add(attn + ".v_proj.bias", { kv });
            }
            add(attn + ".o_proj.bias", { h });
        }
        add(attn + ".q_norm.weight", { d });
        if (!kvShared) {
            add(attn + ".k_norm.weight", { d });
        }
        addMlp(p + ".mlp", spec.ffnWidthOf(layer));
        if (layer.moe() && spec.moe) {
            const auto& moe = *spec.moe;
            add(p + ".router.proj.weight", { moe.numExperts, h });
            add(p + ".router.scale", { h });
            add(p + ".router.per_expert_scale", { moe.numExperts });
            for (std::int64_t e = 0; e < moe.numExperts; ++e) {
                addMlp(fmt::format("{}.experts.{}", p, e), moe.expertIntermediate);
            }
            for (const char* norm : { ".pre_feedforward_layernorm_2",
                     ".post_feedforward_layernorm_1", ".post_feedforward_layernorm_2" }) {
                add(p + norm + ".weight", { h });
            }
        }
        if (ple > 0) {
            add(p + ".per_layer_input_gate.weight", { ple, h });
            add(p + ".per_layer_projection.weight", { h, ple });
            add(p + ".post_per_layer_input_norm.weight", { h });
        }
        add(p + ".layer_scalar", { 1 });
    }
    add("model.norm.weight", { h });
    w.push_back({ "lm_head.weight", { spec.vocabSize, h }, spec.tieEmbeddings });
    return w;
}

namespace {

// One layer type's RoPE over a head of `d` lanes: "default" rotates every pair with
// 1/θ^(2i/d); "proportional" keeps the first int(partial · d // 2) of those frequencies, divided
// by `factor`, and gives the other pairs frequency 0 (cos 1, sin 0: unrotated).
Result<Rope> ropeOfType(std::int64_t d, double theta, const model::RopeScaling& scaling,
    double partial, const char* layerType)
{
    if (scaling.type != "default" && scaling.type != "proportional") {
        return Error::unsupported(fmt::format("RoPE type '{}' of the gemma4 {} layers (the engine "
                                              "computes default and proportional)",
            scaling.type, layerType));
    }
    model::RopeScaling plain;
    auto rope = makeRope(d, theta, plain, RopeLayout::RotateHalf);
    if (!rope) {
        return rope.error();
    }
    if (scaling.type == "proportional") {
        // HF: int(rope_proportion * head_dim // 2), the floor division of a float.
        const auto angles = std::int64_t(std::floor(partial * double(d) / 2.0));
        for (std::size_t i = 0; i < rope->invFreq.size(); ++i) {
            rope->invFreq[i] = std::int64_t(i) < angles ? rope->invFreq[i] / scaling.factor : 0.0;
        }
    }
    return rope;
}

} // namespace

Result<Rope> gemma4Rope(const model::ModelSpec& spec, bool full)
{
    if (!full) {
        const model::LocalRope local = spec.slidingRope.value_or(
            model::LocalRope { spec.ropeTheta, spec.ropeScaling, spec.partialRotaryFactor });
        return ropeOfType(spec.headDim, local.theta, local.scaling, local.partialRotaryFactor,
            "sliding_attention");
    }
    // The full layers' RoPE spans global_head_dim (HF passes head_dim_key "global_head_dim" to
    // proportional RoPE); the sliding layers' spans head_dim.
    std::int64_t fullDim = spec.headDim;
    for (const auto& layer : spec.layers) {
        if (fullLayer(layer)) {
            fullDim = spec.headDimOf(layer);
            break;
        }
    }
    if (spec.ropeScaling.type == "default" && fullDim != spec.headDim) {
        return Error::unsupported(fmt::format("default RoPE on gemma4 full layers of head width {} "
                                              "(HF's default RoPE spans head_dim {})",
            fullDim, spec.headDim));
    }
    return ropeOfType(
        fullDim, spec.ropeTheta, spec.ropeScaling, spec.partialRotaryFactor, "full_attention");
}

Result<Gemma4Tables> gemma4Tables(const model::ModelSpec& spec)
{
    Gemma4Tables t;
    auto act = parseActivation(spec.hiddenAct);
    if (!act) {
        return act.error();
    }
    t.activation = *act;
    auto full = gemma4Rope(spec, true);
    if (!full) {
        return full.error();
    }
    t.full = std::move(*full);
    auto sliding = gemma4Rope(spec, false);
    if (!sliding) {
        return sliding.error();
    }
    t.sliding = std::move(*sliding);
    return t;
}

template <typename T> Result<void> Forward<T>::gemma4Init()
{
    auto tables = gemma4Tables(m_spec);
    if (!tables) {
        return tables.error();
    }
    m_activation = tables->activation;
    m_rope = std::move(tables->full);
    m_slidingRope = std::move(tables->sliding);
    if (m_spec.moe) {
        m_router = routerConfig(*m_spec.moe);
    }
    // Each KV-shared layer reads the cache of the last unshared layer of its kind (the config
    // reader has checked that there is one); it keeps no cache of its own.
    const std::int64_t firstShared = firstKvShared(m_spec);
    m_kvSource.resize(std::size_t(m_spec.numLayers));
    for (std::int64_t l = 0; l < m_spec.numLayers; ++l) {
        int source = int(l);
        if (l >= firstShared) {
            for (std::int64_t j = 0; j < firstShared; ++j) {
                if (fullLayer(m_spec.layers[std::size_t(j)])
                    == fullLayer(m_spec.layers[std::size_t(l)])) {
                    source = int(j);
                }
            }
            if (source == int(l)) {
                return Error::badInput(fmt::format(
                    "gemma4 KV-shared layer {} has no earlier layer of its kind to read", l));
            }
        }
        m_kvSource[std::size_t(l)] = source;
    }
    m_caches.resize(std::size_t(m_spec.numLayers));
    for (std::size_t l = 0; l < m_caches.size(); ++l) {
        if (m_kvSource[l] != int(l)) {
            continue;
        }
        const auto& layer = m_spec.layers[l];
        const std::int64_t width = m_spec.kvHeadsOf(layer) * m_spec.headDimOf(layer);
        m_caches[l].k.assign(std::size_t(m_capacity * width), T(0));
        m_caches[l].v.assign(std::size_t(m_capacity * width), T(0));
    }
    return success();
}

template <typename T>
Result<void> Forward<T>::gemma4PerLayerInputs(
    std::span<const std::int64_t> ids, const T* embedded, std::int64_t n, Taps<T>& taps)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t width = m_spec.perLayerInputSize;
    const std::int64_t all = m_spec.numLayers * width;
    // The token part: embed_tokens_per_layer's rows times sqrt(width), the scale cast to the
    // weights' dtype first (Gemma4TextScaledWordEmbedding).
    const PrecisionMode embedMode = m_plan.modeFor(OpKind::Embedding, -1);
    std::vector<T> tokens(std::size_t(n * all));
    DAY0_TRY(embedding<T>(ids, weight("model.embed_tokens_per_layer.weight"),
        m_spec.perLayerInputVocab, all, tokens.data()));
    T scale = T(std::sqrt(double(width)));
    roundAct(&scale, 1, embedMode);
    for (auto& x : tokens) {
        x *= scale;
    }
    roundAct(tokens.data(), n * all, embedMode);
    // The context part: the scaled embedding projected, times hidden_size^-1/2, normalised per
    // layer over its width.
    m_perLayerInputs.assign(std::size_t(n * all), T(0));
    linear("model.per_layer_model_projection", embedded, m_perLayerInputs.data(), n, h, all,
        OpKind::Linear, -1, taps, true);
    const T root = T(1.0 / std::sqrt(double(h)));
    for (auto& x : m_perLayerInputs) {
        x *= root;
    }
    roundAct(m_perLayerInputs.data(), n * all, m_plan.modeFor(OpKind::Linear, -1));
    rmsNormOp("model.per_layer_projection_norm", m_perLayerInputs.data(), m_perLayerInputs.data(),
        n * m_spec.numLayers, width, -1);
    const T half = T(1.0 / std::sqrt(2.0));
    for (std::size_t i = 0; i < m_perLayerInputs.size(); ++i) {
        m_perLayerInputs[i] = (m_perLayerInputs[i] + tokens[i]) * half;
    }
    roundAct(m_perLayerInputs.data(), n * all, m_plan.modeFor(OpKind::Norm, -1));
    taps.record("model.per_layer_inputs", m_perLayerInputs.data(), { n, m_spec.numLayers, width });
    return success();
}

template <typename T> void Forward<T>::gemma4ScaleEmbedding(T* hidden, std::int64_t n)
{
    // Gemma4TextScaledWordEmbedding: the scale is cast to the weights' dtype first (a bf16 run
    // multiplies by sqrt(h) rounded to bf16).
    const PrecisionMode mode = m_plan.modeFor(OpKind::Embedding, -1);
    T scale = T(std::sqrt(double(m_spec.hiddenSize)));
    roundAct(&scale, 1, mode);
    for (std::int64_t i = 0; i < n * m_spec.hiddenSize; ++i) {
        hidden[i] *= scale;
    }
    roundAct(hidden, n * m_spec.hiddenSize, mode);
}

template <typename T> void Forward<T>::softCapLogits(T* logits, std::int64_t count)
{
    const double cap = m_spec.finalLogitSoftcap;
    const PrecisionMode mode = m_plan.modeFor(OpKind::Logits, -1);
    // A prefill's logits are tokens × vocabulary tanh's (256 × 2048 in exec_bench's shrunk
    // model: 8% of its prefill's CPU time under perf): split over the pool in fixed chunks, each
    // element computed alone, so the values do not depend on the split.
    constexpr std::int64_t kChunk = 8192;
    const std::int64_t chunks = (count + kChunk - 1) / kChunk;
    const auto capChunk = [&](std::size_t c) {
        const std::int64_t end = std::min(count, std::int64_t(c + 1) * kChunk);
        for (std::int64_t i = std::int64_t(c) * kChunk; i < end; ++i) {
            logits[i] = T(std::tanh(double(logits[i]) / cap) * cap);
        }
    };
    if (chunks > 1) {
        ThreadPool::global().parallelFor(std::size_t(chunks), capChunk);
    } else if (chunks == 1) {
        capChunk(0);
    }
    roundAct(logits, count, mode);
}

template <typename T>
void Forward<T>::gemma4Attention(
    int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDimOf(spec);
    const std::int64_t heads = m_spec.headsOf(spec);
    const std::int64_t kvHeads = m_spec.kvHeadsOf(spec);
    const std::int64_t qDim = heads * d;
    std::vector<T> q(std::size_t(n * qDim));
    linear(attn + ".q_proj", x, q.data(), n, h, qDim, OpKind::Linear, layer, taps, true);
    rmsNormOp(attn + ".q_norm", q.data(), q.data(), n * heads, d, layer);
    taps.record(attn + ".q_norm", q.data(), { n, heads, d });
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    const Rope& rope = fullLayer(spec) ? m_rope : m_slidingRope;
    rotate(q.data(), n, heads, d, rope, mode);
    std::vector<T> context(std::size_t(n * qDim));
    if (m_kvSource[std::size_t(layer)] == layer) {
        gemma4KeysValues(layer, x, n, start, taps);
    }
    // Gemma4TextAttention.scaling is 1: q_norm and k_norm replace the 1/sqrt(d). A KV-shared
    // layer reads its source's cache (causalAttention through m_kvSource).
    causalAttention(layer, q.data(), n, start, heads, kvHeads, d, d, 1.0, context.data());
    if (!m_bidirectionalRows.empty()) {
        gemma4ImageBlockAttention(layer, q.data(), start, heads, kvHeads, d, context.data());
    }
    linear(attn + ".o_proj", context.data(), out, n, qDim, h, OpKind::Linear, layer, taps, true);
}

template <typename T>
void Forward<T>::gemma4KeysValues(
    int layer, const T* x, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDimOf(spec);
    const std::int64_t kvHeads = m_spec.kvHeadsOf(spec);
    const std::int64_t kvDim = kvHeads * d;
    std::vector<T> k(std::size_t(n * kvDim));
    std::vector<T> v(std::size_t(n * kvDim));
    linear(attn + ".k_proj", x, k.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    if (spec.sharedKv) {
        v = k; // attention_k_eq_v: the values are k_proj's output, before k_norm and RoPE
    } else {
        linear(attn + ".v_proj", x, v.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    }
    rmsNormOp(attn + ".k_norm", k.data(), k.data(), n * kvHeads, d, layer);
    taps.record(attn + ".k_norm", k.data(), { n, kvHeads, d });
    const PrecisionMode normMode = m_plan.modeFor(OpKind::Norm, layer);
    unitRmsNorm(v.data(), n * kvHeads, d, m_spec.normEps); // v_norm: with_scale=False
    roundAct(v.data(), n * kvDim, normMode);
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    const Rope& rope = fullLayer(spec) ? m_rope : m_slidingRope;
    rotate(k.data(), n, kvHeads, d, rope, mode);
    Cache& cache = m_caches[std::size_t(layer)];
    std::copy(k.begin(), k.end(), cache.k.begin() + start * kvDim);
    std::copy(v.begin(), v.end(), cache.v.begin() + start * kvDim);
}

template <typename T>
void Forward<T>::gemma4Experts(int layer, const T* residual, T* out, std::int64_t n, Taps<T>& taps)
{
    const std::string p = fmt::format("model.layers.{}", layer);
    const auto& moe = *m_spec.moe;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const PrecisionMode normMode = m_plan.modeFor(OpKind::Norm, layer);

    // Gemma4TextRouter: weightless RMSNorm, times the learned scale and hidden_size^-1/2.
    std::vector<T> routed(residual, residual + n * h);
    unitRmsNorm(routed.data(), n, h, m_spec.normEps);
    const T* scale = weight(p + ".router.scale");
    const T root = T(1.0 / std::sqrt(double(h)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            routed[std::size_t(t * h + c)] = routed[std::size_t(t * h + c)] * scale[c] * root;
        }
    }
    roundAct(routed.data(), n * h, normMode);
    std::vector<T> logits(std::size_t(n * e));
    linear(p + ".router.proj", routed.data(), logits.data(), n, h, e, OpKind::Router, layer, taps,
        false);
    taps.record(p + ".router", logits.data(), { n, e }, "router");
    // Softmax over every expert, top-k of the probabilities, renormalised (routerConfig: the
    // reader's Softmax scoring with normTopkProb), then each weight times its expert's scale.
    Routing routing = routeAndRecord(p + ".router", logits.data(), n, e, nullptr, taps);
    const T* perExpert = weight(p + ".router.per_expert_scale");
    for (std::size_t i = 0; i < routing.experts.size(); ++i) {
        routing.weights[i] *= double(perExpert[routing.experts[i]]);
    }

    std::vector<T> x(std::size_t(n * h));
    rmsNormOp(p + ".pre_feedforward_layernorm_2", residual, x.data(), n, h, layer);
    std::vector<T> acc(std::size_t(n * h), T(0));
    std::vector<T> rows;
    std::vector<T> result;
    std::vector<std::int64_t> tokens;
    std::vector<double> weights;
    for (std::int64_t ex = 0; ex < e; ++ex) {
        tokens.clear();
        weights.clear();
        for (std::size_t i = 0; i < routing.experts.size(); ++i) {
            if (routing.experts[i] == ex) {
                tokens.push_back(std::int64_t(i) / routing.k);
                weights.push_back(routing.weights[i]);
            }
        }
        if (tokens.empty()) {
            continue;
        }
        const auto m = std::int64_t(tokens.size());
        rows.resize(std::size_t(m * h));
        result.resize(std::size_t(m * h));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(x.begin() + tokens[std::size_t(i)] * h, h, rows.begin() + i * h);
        }
        mlp(fmt::format("{}.experts.{}", p, ex), "gate_proj", "up_proj", "down_proj", rows.data(),
            result.data(), m, moe.expertIntermediate, layer, taps);
        for (std::int64_t i = 0; i < m; ++i) {
            T* dst = acc.data() + tokens[std::size_t(i)] * h;
            const T w = T(weights[std::size_t(i)]);
            for (std::int64_t c = 0; c < h; ++c) {
                dst[c] += w * result[std::size_t(i * h + c)];
            }
        }
    }
    roundAct(acc.data(), n * h, m_plan.modeFor(OpKind::Moe, layer));
    taps.record(p + ".experts", acc.data(), { n, h }, "moe");
    rmsNormOp(p + ".post_feedforward_layernorm_2", acc.data(), out, n, h, layer);
}

template <typename T>
void Forward<T>::gemma4Layer(
    int layer, T* hidden, std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    const std::string p = fmt::format("model.layers.{}", layer);
    const std::int64_t h = m_spec.hiddenSize;
    const PrecisionMode residualMode = m_plan.modeFor(OpKind::DecoderLayer, layer);
    std::vector<T> x(std::size_t(n * h));
    std::vector<T> branch(std::size_t(n * h));

    rmsNormOp(p + ".input_layernorm", hidden, x.data(), n, h, layer);
    taps.record(p + ".input_layernorm", x.data(), { n, h });
    gemma4Attention(layer, x.data(), branch.data(), n, start, taps);
    taps.record(p + ".self_attn", branch.data(), { n, h });
    // Gemma's post-attention norm normalises the attention output before the residual add.
    rmsNormOp(p + ".post_attention_layernorm", branch.data(), branch.data(), n, h, layer);
    taps.record(p + ".post_attention_layernorm", branch.data(), { n, h });
    addInPlace(hidden, branch.data(), n * h);
    roundAct(hidden, n * h, residualMode);

    rmsNormOp(p + ".pre_feedforward_layernorm", hidden, x.data(), n, h, layer);
    taps.record(p + ".pre_feedforward_layernorm", x.data(), { n, h });
    mlp(p + ".mlp", "gate_proj", "up_proj", "down_proj", x.data(), branch.data(), n,
        m_spec.ffnWidthOf(spec), layer, taps);
    taps.record(p + ".mlp", branch.data(), { n, h }, "mlp");
    if (spec.moe() && m_spec.moe) {
        // The experts read the residual stream (the MLP's input before its norm), each branch
        // with its own post-norm, summed before the shared post_feedforward_layernorm.
        std::vector<T> routed(std::size_t(n * h));
        gemma4Experts(layer, hidden, routed.data(), n, taps);
        rmsNormOp(p + ".post_feedforward_layernorm_1", branch.data(), branch.data(), n, h, layer);
        addInPlace(branch.data(), routed.data(), n * h);
        roundAct(branch.data(), n * h, m_plan.modeFor(OpKind::Moe, layer));
    }
    rmsNormOp(p + ".post_feedforward_layernorm", branch.data(), branch.data(), n, h, layer);
    taps.record(p + ".post_feedforward_layernorm", branch.data(), { n, h });
    addInPlace(hidden, branch.data(), n * h);
    roundAct(hidden, n * h, residualMode); // HF's residual add, before layer_scalar
    if (const std::int64_t width = m_spec.perLayerInputSize; width > 0) {
        // The per-layer input branch: act(gate(h)) times this layer's input, projected back,
        // normalised, added to the stream.
        std::vector<T> gate(std::size_t(n * width));
        linear(p + ".per_layer_input_gate", hidden, gate.data(), n, h, width, OpKind::Linear, layer,
            taps, true);
        std::vector<T> input(std::size_t(n * width));
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(m_perLayerInputs.begin() + (t * m_spec.numLayers + layer) * width, width,
                input.begin() + t * width);
        }
        const PrecisionMode mode = m_plan.modeFor(OpKind::Mlp, layer);
        if constexpr (std::is_same_v<T, float>) {
            m_ops.gatedActivation(gate.data(), input.data(), n * width, m_activation, mode);
        } else {
            gatedActivate(gate.data(), input.data(), n * width, m_activation);
        }
        linear(p + ".per_layer_projection", gate.data(), branch.data(), n, width, h, OpKind::Linear,
            layer, taps, true);
        rmsNormOp(p + ".post_per_layer_input_norm", branch.data(), branch.data(), n, h, layer);
        taps.record(p + ".post_per_layer_input_norm", branch.data(), { n, h });
        addInPlace(hidden, branch.data(), n * h);
        roundAct(hidden, n * h, residualMode);
    }
    const T layerScalar = *weight(p + ".layer_scalar");
    for (std::int64_t i = 0; i < n * h; ++i) {
        hidden[i] *= layerScalar;
    }
    roundAct(hidden, n * h, residualMode);
    taps.record(p, hidden, { n, h });
}

template Result<void> Forward<float>::gemma4Init();
template Result<void> Forward<double>::gemma4Init();
template void Forward<float>::gemma4ScaleEmbedding(float*, std::int64_t);
template void Forward<double>::gemma4ScaleEmbedding(double*, std::int64_t);
template void Forward<float>::softCapLogits(float*, std::int64_t);
template void Forward<double>::softCapLogits(double*, std::int64_t);
template Result<void> Forward<float>::gemma4PerLayerInputs(
    std::span<const std::int64_t>, const float*, std::int64_t, Taps<float>&);
template Result<void> Forward<double>::gemma4PerLayerInputs(
    std::span<const std::int64_t>, const double*, std::int64_t, Taps<double>&);
template void Forward<float>::gemma4Layer(int, float*, std::int64_t, std::int64_t, Taps<float>&);
template void Forward<double>::gemma4Layer(int, double*, std::int64_t, std::int64_t, Taps<double>&);

} // namespace day0::exec::detail
