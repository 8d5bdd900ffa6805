// The gradient pass (backward.h): reading the weights, the pass from the embedding through the
// layers to the cross-entropy and back (gradient_pass.h; a layer's own forward and backward are
// backward_layer.cpp's, the MLPs' and experts' backward_ffn.cpp's), and the public entry points.
#include "exec/backward.h"

#include "exec/backward_ops.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace day0::exec {

namespace detail {

using numerics::Shape;
using numerics::Tensor;

template <typename T>
Result<void> GradientPass<T>::init(const std::map<std::string, Tensor>& weights)
{
    // A sigmoid router computes in fp32 on its fp32 weight, as the engine's (DeepSeek-V3's
    // gate): its weight is not part of the low-precision copy.
    std::set<std::string> fp32Weights;
    if (m_spec.moe && m_spec.moe->scoring == model::RouterScoring::Sigmoid) {
        for (int l = 0; l < int(m_spec.numLayers); ++l) {
            fp32Weights.insert(layerNames(m_spec, l).router + ".weight");
        }
    }
    for (const auto& req : requiredWeights(m_spec)) {
        if (emulatedAsStored(m_spec, req.name)) {
            fp32Weights.insert(req.name);
        }
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
        // A zero-centred norm (Qwen3NextRMSNorm) scales by 1 + w: the pass computes with 1 + w.
        const bool offset = !m_engineNorms && zeroCentredNorm(m_spec, req.name);
        if (t.dtype() == computeType<T>() && t.isContiguous() && !emulated() && !offset) {
            data = t.template data<T>();
        } else {
            auto [slot, fresh] = m_converted.emplace(req.name, t.to(computeType<T>()));
            if (offset) {
                T* values = slot->second.template data<T>();
                for (std::int64_t i = 0; i < t.numel(); ++i) {
                    values[i] += T(1);
                }
            }
            if constexpr (std::is_same_v<T, float>) {
                // The model's low-precision copy of its weights, as the engine's GEMM weights.
                const std::int64_t cols = t.shape().empty() ? 1 : t.shape().back();
                if (!fp32Weights.contains(req.name)) {
                    roundGemmInput({ slot->second.template data<float>(), std::size_t(t.numel()) },
                        t.numel() / std::max<std::int64_t>(cols, 1), cols, m_mode,
                        Fp8Scaling::PerTensor, true);
                }
            }
            data = slot->second.template data<T>();
        }
        m_p.values[req.name] = data;
        m_p.shapes[req.name] = t.shape();
        if (!untrainable(req.name)) {
            m_p.grads[req.name].assign(std::size_t(t.numel()), T(0));
        }
    }
    if (deepseekV4()) {
        return deepseekV4Init(weights);
    }
    if (gemma4()) {
        return gemma4Init();
    }
    if (nemotronH()) {
        return nemotronHInit();
    }
    const bool mla = m_spec.attention == model::AttentionKind::MLA;
    const std::int64_t rotary = mla
        ? m_spec.mla.qkRopeHeadDim
        : std::int64_t(double(m_spec.headDim) * m_spec.partialRotaryFactor);
    // Llama-4 rotates (even, odd) lane pairs, as the engine's forward.
    auto rope = makeRope(rotary, m_spec.ropeTheta, m_spec.ropeScaling,
        mla || llama4() ? RopeLayout::Interleaved : RopeLayout::RotateHalf);
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

template <typename T>
Result<GradientResult> GradientPass<T>::run(
    std::span<const std::int64_t> ids, std::span<const std::int64_t> targets)
{
    if (deepseekV4()) {
        return deepseekV4Run(ids, targets);
    }
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t vocab = m_spec.vocabSize;
    m_positions.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) {
        m_positions[std::size_t(i)] = i;
    }
    // Forward, keeping each layer's activations.
    std::vector<T> hidden(std::size_t(n * h));
    DAY0_TRY(embed(ids, hidden));
    // Gemma's scaled embedding (Gemma4TextScaledWordEmbedding): the rows times sqrt(h).
    T embedScale = gemma4() ? T(std::sqrt(double(h))) : T(1);
    if (gemma4()) {
        round(&embedScale, 1); // cast to the weights' dtype first (as the engine's)
        for (T& x : hidden) {
            x *= embedScale;
        }
    }
    round(hidden);
    m_layers.assign(std::size_t(m_spec.numLayers), {});
    m_routing.clear();
    if (m_progress != nullptr) {
        m_progress->setTotal(2 * m_spec.numLayers);
        m_progress->setStage("forward");
    }
    for (int l = 0; l < int(m_spec.numLayers); ++l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        DAY0_TRY(gemma4()     ? gemma4LayerForward(l, hidden)
                : nemotronH() ? nemotronHLayerForward(l, hidden)
                              : layerForward(l, hidden));
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    const std::vector<T>& finalIn = hidden;
    std::vector<T> xf(std::size_t(n * h));
    const std::string finalNorm = finalNormModule() + ".weight";
    norm(finalIn.data(), m_p.value(finalNorm), xf.data(), n, h);
    const std::string head = headWeight();
    std::vector<T> logits(std::size_t(n * vocab));
    project(xf.data(), m_p.value(head), nullptr, logits.data(), n, h, vocab);
    // Final logit soft-capping (Gemma): cap · tanh(z / cap); `logits` keeps the capped values,
    // from which the backward's tanh' = 1 − (capped / cap)² follows.
    const double cap = m_spec.finalLogitSoftcap;
    if (cap > 0.0) {
        for (T& z : logits) {
            z = T(std::tanh(double(z) / cap) * cap);
        }
        round(logits);
    }

    GradientResult result;
    result.keptBytes = keptBytes(finalIn.size() + xf.size() + logits.size());
    std::vector<T> dlogits(logits.size());
    auto loss = crossEntropyOf(logits, targets, dlogits, result.counted);
    if (!loss) {
        return loss.error();
    }
    result.loss = *loss;
    round(dlogits);
    result.logits = Tensor::zeros({ n, vocab }, computeType<T>());
    std::copy(logits.begin(), logits.end(), result.logits.template data<T>());

    // Backward.
    DAY0_TRY(m_acts.recordAndInject("lm_head", dlogits.data(), { n, vocab }));
    if (cap > 0.0) {
        for (std::size_t i = 0; i < dlogits.size(); ++i) {
            const double t = double(logits[i]) / cap;
            dlogits[i] = T(double(dlogits[i]) * (1.0 - t * t));
        }
        round(dlogits); // the uncapped logits' gradient, in the model's dtype
    }
    std::vector<T> dxf(std::size_t(n * h));
    linearBackward<T>(xf.data(), m_p.value(head), dlogits.data(), dxf.data(), m_p.grad(head),
        nullptr, n, h, vocab, false);
    if (m_vocabTotal > 0) {
        DAY0_TRY(tpSum(dxf.data(), n * h)); // each rank's share of the vocabulary's
    }
    round(dxf);
    DAY0_TRY(m_acts.recordAndInject(finalNormModule(), dxf.data(), { n, h }));
    std::vector<T> dh(std::size_t(n * h), T(0));
    rmsNormBackward<T>(finalIn.data(), m_p.value(finalNorm), dxf.data(), dh.data(),
        m_p.grad(finalNorm), n, h, m_spec.normEps);
    round(dh);
    if (m_progress != nullptr) {
        m_progress->setStage("backward");
    }
    for (int l = int(m_spec.numLayers) - 1; l >= 0; --l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        DAY0_TRY(gemma4()     ? gemma4LayerBackward(l, dh)
                : nemotronH() ? nemotronHLayerBackward(l, dh)
                              : layerBackward(l, dh));
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    DAY0_TRY(m_acts.recordAndInject(embedModule(), dh.data(), { n, h }));
    if (gemma4()) {
        for (T& x : dh) {
            x *= embedScale;
        }
        round(dh); // the looked-up rows' gradient, in the model's dtype
    }
    embedBackward(ids, dh);
    DAY0_TRY(sumHeadNormGradients());
    for (auto& [name, grad] : m_p.grads) {
        Tensor t = Tensor::zeros(m_p.shapes[name], computeType<T>());
        std::copy(grad.begin(), grad.end(), t.template data<T>());
        result.parameters.emplace(name, std::move(t));
    }
    // In the backward's order, so that a comparison's first divergence follows the
    // gradient from the loss down.
    result.activations = std::move(m_acts.list);
    result.routing = std::move(m_routing);
    return result;
}

template <typename T> Result<void> GradientPass<T>::sumHeadNormGradients()
{
    if (!m_tpSum || !m_spec.qkNorm) {
        return success();
    }
    for (int l = 0; l < int(m_spec.numLayers); ++l) {
        const LayerNames names = layerNames(m_spec, l);
        for (const auto& norm : { names.qNorm, names.kNorm }) {
            auto& grad = m_p.grads[norm + ".weight"];
            DAY0_TRY(tpSum(grad.data(), std::int64_t(grad.size())));
        }
    }
    return success();
}

template class GradientPass<float>;
template class GradientPass<double>;

} // namespace detail

namespace {

using numerics::Tensor;

/// GradientOptions::emulated: bf16 or fp16 in float arithmetic, over what its rounding models.
Result<void> checkEmulated(const model::ModelSpec& spec, const GradientOptions& options)
{
    const auto mode = options.emulated;
    const auto name = precisionName(mode);
    if (mode != PrecisionMode::BF16 && mode != PrecisionMode::F16) {
        return Error::unsupported(fmt::format("gradients in {}: the backward emulates bf16 and "
                                              "fp16 compute only",
            name));
    }
    if (options.fp64) {
        return Error::badInput(fmt::format("gradients in {}: an emulated precision computes in "
                                           "float (fp64 must be off)",
            name));
    }
    if (!options.roundedLayers.empty()) {
        return Error::badInput(fmt::format("gradients in {}: rounded layers are for the fp64/fp32 "
                                           "pass (every layer is rounded already)",
            name));
    }
    if (const auto missing = emulatedBackwardUnsupported(spec); !missing.empty()) {
        return Error::unsupported(fmt::format("gradients of {} in {}: the emulated backward does "
                                              "not cover {}",
            spec.name, name, fmt::join(missing, "; ")));
    }
    return success();
}

template <typename T>
Result<GradientResult> runPass(const model::ModelSpec& spec,
    const std::map<std::string, Tensor>& weights, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, const GradientOptions& options, std::stop_token stop)
{
    detail::GradientPass<T> pass(spec, options, std::move(stop));
    DAY0_TRY(pass.init(weights));
    return pass.run(ids, targets);
}

/// The family whose tensor-parallel backward is not modelled, and why, by name; empty where
/// its ranks are the other families' (GLM-4.5's biased q/k/v are cut with their heads, GLM-5's
/// and DeepSeek-V3.2's DSA indexer is replicated, so every rank selects the same keys).
std::string tensorParallelGap(const model::ModelSpec& spec)
{
    using F = model::Family;
    if (detail::isQwenNext(spec)) {
        return fmt::format("{} (the Gated DeltaNet's heads, the attention output gate, the gated "
                           "shared expert)",
            model::familyName(spec.family));
    }
    switch (spec.family) {
    case F::Gemma4:
        return "Gemma-4 (layers of their own head widths and KV heads, k = v)";
    case F::NemotronH:
        return "Nemotron-H (Mamba-2 heads and groups, relu2 experts, the latent MoE)";
    case F::GptOss:
        return "gpt-oss (per-head attention sinks, packed biased experts)";
    case F::MiniMaxM2:
        return "MiniMax-M2 (q/k norms across all heads, of which a rank holds a share)";
    case F::DeepseekV4:
        return "DeepSeek-V4 (hyper-connection streams, the one K=V head and its compressors, "
               "grouped wo_a)";
    case F::MiniMaxM3:
        return "MiniMax-M3 (the MSA index branch, replicated beside the split heads)";
    case F::Llama4:
        return "Llama-4 (chunked and NoPE attention, the weightless q/k norm, experts fed their "
               "score-scaled input)";
    case F::KimiLinear:
        return "Kimi-Linear (Kimi Delta Attention's heads, convs and low-rank gates)";
    default:
        return {};
    }
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
    if (options.tpSum || options.vocabTotal > 0) {
        if (const auto gap = tensorParallelGap(spec); !gap.empty()) {
            return Error::unsupported(fmt::format(
                "gradients of {}: tensor parallelism of {} is not modelled", spec.name, gap));
        }
    }
    if (ids.empty()) {
        return Error::badInput("gradients: no token ids");
    }
    if (targets.size() != ids.size()) {
        return Error::badInput(fmt::format(
            "gradients: {} targets for {} token ids (one per id)", targets.size(), ids.size()));
    }
    const std::int64_t vocab = options.vocabTotal > 0 ? options.vocabTotal : spec.vocabSize;
    if (options.vocabTotal > 0) {
        if (!options.tpSum || !options.tpMax || options.vocabStart < 0
            || options.vocabStart + spec.vocabSize > options.vocabTotal) {
            return Error::internal(fmt::format("gradients: the vocab-parallel rows [{}, {}) of {} "
                                               "ids need a TP group's sum and maximum",
                options.vocabStart, options.vocabStart + spec.vocabSize, options.vocabTotal));
        }
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || ids[i] >= vocab) {
                return Error::badInput(fmt::format("gradients: token id {} at position {} is "
                                                   "outside the vocabulary [0, {})",
                    ids[i], i, vocab));
            }
        }
    }
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (targets[i] >= vocab) {
            return Error::badInput(fmt::format("gradients: target {} at position {} is outside "
                                               "the vocabulary [0, {})",
                targets[i], i, vocab));
        }
    }
    if (options.emulated != PrecisionMode::F32) {
        DAY0_TRY(checkEmulated(spec, options));
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
    options.engineNorms = true;
    return lossAndGradients(
        engine.spec(), engine.weightTable().tensors, ids, targets, options, std::move(stop));
}

} // namespace day0::exec
