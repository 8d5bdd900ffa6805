#include "exec/forward.h"

#include "exec/batch_decode.h"
#include "exec/emulated_ops.h"
#include "exec/ops.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

template <typename T>
Forward<T>::Forward(const model::ModelSpec& spec, const WeightTable& weights, PrecisionPlan plan,
    std::int64_t capacity)
    : m_spec(spec)
    , m_weights(weights)
    , m_plan(std::move(plan))
    , m_capacity(capacity)
{
}

template <typename T> Result<void> Forward<T>::init()
{
    if (m_spec.family == model::Family::Gemma4) {
        return gemma4Init();
    }
    if (m_spec.family == model::Family::DeepseekV4) {
        return deepseekV4Init();
    }
    if (m_spec.family == model::Family::NemotronH) {
        return nemotronHInit();
    }
    // MiniMax-M3 spells it swigluoai: the same form (Automodel minimax_m3_vl swiglu_oai).
    if (m_spec.hiddenAct == "swiglu_oai" || m_spec.hiddenAct == "swigluoai") {
        // gpt-oss: (clamp(up) + 1) · g·σ(α·g) with g = min(gate, limit); with α = 1.702
        // (unsupportedFeatures refuses another) g·σ(α·g) is the quick GELU.
        m_activation = Activation::QuickGelu;
        m_swigluLimit = m_spec.swigluLimit;
    } else if (m_spec.family == model::Family::KimiLinear && m_spec.hiddenAct == "situ") {
        m_situ = true; // Kimi-K3 SituAndMul (mlp in ffn_block.cpp)
    } else {
        auto act = parseActivation(m_spec.hiddenAct);
        if (!act) {
            return act.error();
        }
        m_activation = *act;
    }
    if (m_spec.attentionSinks) {
        m_sinks.resize(std::size_t(m_spec.numLayers));
        for (int l = 0; l < int(m_spec.numLayers); ++l) {
            const T* sinks = weight(fmt::format("model.layers.{}.self_attn.sinks", l));
            if (sinks == nullptr) {
                return Error::internal(fmt::format("layer {} has no attention sinks", l));
            }
            // Sinks are stored in BF16 or F32, so float holds them exactly.
            m_sinks[std::size_t(l)].assign(sinks, sinks + m_spec.numHeads);
        }
    }
    const bool mla = m_spec.attention == model::AttentionKind::MLA;
    // Partial rotary (MiniMax-M2: 64 of 128 lanes): the first lanes rotate, the rest pass.
    const std::int64_t rotary = mla
        ? m_spec.mla.qkRopeHeadDim
        : std::int64_t(double(m_spec.headDim) * m_spec.partialRotaryFactor);
    auto rope = makeRope(rotary, m_spec.ropeTheta, m_spec.ropeScaling,
        // Llama-4 rotates (even, odd) lane pairs as complex numbers (HF apply_rotary_emb).
        mla || m_spec.family == model::Family::Llama4 ? RopeLayout::Interleaved
                                                      : RopeLayout::RotateHalf);
    if (!rope) {
        return rope.error();
    }
    m_rope = std::move(*rope);
    if (m_spec.family == model::Family::Qwen3Vl || m_spec.family == model::Family::Qwen3VlMoe) {
        setInterleavedMrope(m_rope, m_spec.ropeScaling.mropeSection);
    }
    if (m_spec.blockSparse) {
        DAY0_TRY(blockSparseInit());
    }
    if (mla && m_spec.mla.indexerHeads > 0) {
        const auto& m = m_spec.mla;
        if (m.indexerTopK <= 0 || m.indexerHeadDim < m.qkRopeHeadDim || m.qkRopeHeadDim % 2 != 0) {
            return Error::unsupported(fmt::format("DSA indexer with index_topk {}, index_head_dim "
                                                  "{} and qk_rope_head_dim {}: needs a positive "
                                                  "top-k and an even rotary width within the head",
                m.indexerTopK, m.indexerHeadDim, m.qkRopeHeadDim));
        }
        m_indexerRope = m_rope;
        m_indexerRope.layout
            = m.indexerRopeInterleave ? RopeLayout::Interleaved : RopeLayout::RotateHalf;
        m_indexerKeys.assign(std::size_t(m_spec.numLayers), {});
        for (int l = 0; l < int(m_spec.numLayers); ++l) {
            if (m_spec.layers[std::size_t(l)].mixer == model::MixerKind::SparseMla) {
                m_indexerKeys[std::size_t(l)].assign(
                    std::size_t(m_capacity * m.indexerHeadDim), T(0));
            }
        }
    }
    if (mla) {
        m_attentionScale
            = 1.0 / std::sqrt(double(m_spec.mla.qkNopeHeadDim + m_spec.mla.qkRopeHeadDim));
        const auto& s = m_spec.ropeScaling;
        if (s.type == "yarn" && s.mscaleAllDim > 0.0) {
            const double m = yarnMscale(s.factor, s.mscaleAllDim);
            m_attentionScale *= m * m;
        }
    } else {
        m_attentionScale = 1.0 / std::sqrt(double(m_spec.headDim));
    }
    if (m_spec.moe) {
        m_router = routerConfig(*m_spec.moe);
        if (m_spec.family == model::Family::Mixtral) {
            m_router.normTopkProb = true; // HF Mixtral always renormalises the top-k weights
        }
    }
    m_caches.resize(std::size_t(m_spec.numLayers));
    for (std::size_t l = 0; l < m_caches.size(); ++l) {
        auto& c = m_caches[l];
        const model::LayerSpec& layer = m_spec.layers[l];
        if (!layer.attends() || layer.mixer == model::MixerKind::KimiDelta) {
            continue; // Nemotron-NAS no-op and linear blocks, KDA layers keep no KV cache
        }
        std::int64_t kw = m_spec.kvHeadsOf(layer) * m_spec.headDim;
        std::int64_t vw = kw;
        if (mla) {
            kw = m_spec.numHeads * (m_spec.mla.qkNopeHeadDim + m_spec.mla.qkRopeHeadDim);
            vw = m_spec.numHeads * m_spec.mla.vHeadDim;
        }
        c.k.assign(std::size_t(m_capacity * kw), T(0));
        c.v.assign(std::size_t(m_capacity * vw), T(0));
    }
    gatedDeltaNetInit();
    kimiDeltaInit();
    return success();
}

template <typename T> bool Forward<T>::hasWeight(const std::string& name) const
{
    return m_weights.tensors.contains(name);
}

template <typename T> const T* Forward<T>::weight(const std::string& name) const
{
    const auto it = m_weights.tensors.find(name);
    return it == m_weights.tensors.end() ? nullptr : it->second.template data<T>();
}

namespace {

/// A streamed run's table holds one layer at a time: the rounded copies of weights that left it
/// are dropped, so they are held for one layer too. The cache is ordered by name and a layer's
/// names are contiguous, so stale copies (the layer before) sit at one of its ends: checking
/// both keeps a whole-model table's misses O(1).
void dropStaleRounded(
    std::map<std::pair<std::string, int>, std::vector<float>>& rounded, const WeightTable& table)
{
    if (rounded.empty()) {
        return;
    }
    const auto stale
        = [&](const auto& entry) { return !table.tensors.contains(entry.first.first); };
    if (!stale(*rounded.begin()) && !stale(*rounded.rbegin())) {
        return;
    }
    std::erase_if(rounded, stale);
}

} // namespace

template <typename T>
const T* Forward<T>::gemmWeight(
    const std::string& name, PrecisionMode mode, std::int64_t rows, std::int64_t cols)
{
    const T* raw = weight(name);
    if constexpr (std::is_same_v<T, float>) {
        if (mode == PrecisionMode::F32 || mode == PrecisionMode::F64 || raw == nullptr) {
            return raw;
        }
        const bool fp8 = mode == PrecisionMode::F8E4M3 || mode == PrecisionMode::F8E5M2;
        if (fp8 && m_weights.exactFp8.contains(name)) {
            return raw; // already on the fp8 grid with its published block scales
        }
        const std::pair<std::string, int> key { name, int(mode) };
        if (!m_rounded.contains(key)) {
            dropStaleRounded(m_rounded, m_weights);
        }
        auto& slot = m_rounded[key];
        if (slot.empty()) {
            slot.assign(raw, raw + rows * cols);
            roundGemmInput(slot, rows, cols, mode, m_plan.fp8Scaling, true);
        }
        return slot.data();
    } else {
        (void)mode;
        (void)rows;
        (void)cols;
        return raw;
    }
}

template <typename T> void Forward<T>::roundAct(T* data, std::int64_t n, PrecisionMode mode) const
{
    if constexpr (std::is_same_v<T, float>) {
        roundActivations({ data, std::size_t(n) }, mode);
    } else {
        (void)data;
        (void)n;
        (void)mode;
    }
}

template <typename T>
void Forward<T>::linear(const std::string& module, const T* x, T* y, std::int64_t n,
    std::int64_t in, std::int64_t out, OpKind kind, int layer, Taps<T>& taps, bool capture)
{
    PrecisionMode mode = m_plan.modeFor(kind, layer);
    // Llama-4's router is a plain linear in the model's dtype (Llama4Router), not an fp32 one.
    // Hunyuan's router is an FP32 nn.Linear, its input cast up (HunYuanTopKGate).
    const bool fp32Router = (m_router.scoring == model::RouterScoring::Sigmoid
                                && m_spec.family != model::Family::Llama4)
        || m_spec.family == model::Family::Hunyuan;
    if (kind == OpKind::Router && fp32Router && !m_plan.perLayer.contains(layer)
        && !m_plan.perOpKind.contains(OpKind::Router) && mode != PrecisionMode::F64) {
        mode = PrecisionMode::F32; // DeepSeek-V3 computes its router in fp32 (HF and reference)
    }
    const std::string weightName = module == "lm_head" && !hasWeight("lm_head.weight")
        ? std::string("model.embed_tokens.weight")
        : module + ".weight";
    const T* w = gemmWeight(weightName, mode, out, in);
    const T* bias = weight(module + ".bias");
    if constexpr (std::is_same_v<T, float>) {
        m_ops.linear(x, w, bias, y, n, in, out, mode, m_plan.fp8Scaling);
    } else {
        exec::linear<T>(x, w, bias, y, n, in, out);
    }
    if (capture) {
        taps.record(module, y, { n, out });
    }
}

template <typename T>
void Forward<T>::rmsNormOp(const std::string& module, const T* x, T* y, std::int64_t n,
    std::int64_t dim, int layer, std::optional<double> ownEps)
{
    const PrecisionMode mode = m_plan.modeFor(OpKind::Norm, layer);
    const T* w = weight(module + ".weight");
    const double eps = ownEps.value_or(m_spec.normEps);
    if constexpr (std::is_same_v<T, float>) {
        m_ops.rmsNorm(x, w, y, n, dim, eps, mode);
        return;
    }
    rmsNorm<T>(x, w, y, n, dim, eps);
}

template <typename T>
Result<std::vector<T>> Forward<T>::step(std::span<const std::int64_t> ids, std::int64_t start,
    Taps<T>& taps, std::stop_token stop, const MultimodalStep<T>* mm)
{
    const bool sliced = m_sliceFirst >= 0;
    if (sliced
        && (m_spec.family == model::Family::NemotronH || m_spec.family == model::Family::DeepseekV4
            || m_spec.family == model::Family::Gemma4 || m_spec.attnResBlockSize > 0
            || mm != nullptr)) {
        return Error::unsupported(fmt::format("a slice of the layers of {}{} is not run (its "
                                              "layers read more than the residual stream)",
            m_spec.modelType, mm != nullptr ? " with an image" : ""));
    }
    if (m_spec.family == model::Family::NemotronH) {
        return nemotronHStep(ids, start, taps, stop); // its own layer kinds and names
    }
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = m_spec.hiddenSize;
    const DecodeBatch<T>* batch = currentDecodeBatch<T>();
    if (auto fits = checkStepCapacity(
            batch, start, n, m_capacity, [](const Forward<T>* f) { return f->m_capacity; });
        !fits) {
        return fits.error();
    }
    if (m_spec.family == model::Family::DeepseekV4) {
        return deepseekV4Step(ids, start, taps, stop);
    }
    std::vector<T> hidden(std::size_t(n * h));
    m_positions.resize(std::size_t(n));
    if (batch != nullptr) {
        // A batched step: each sequence's rows at its own positions.
        std::size_t row = 0;
        for (std::size_t i = 0; i < batch->seqs.size(); ++i) {
            for (std::int64_t t = 0; t < batch->count(i) && row < m_positions.size(); ++t) {
                m_positions[row++] = batch->starts[i] + t;
            }
        }
    } else {
        for (std::int64_t i = 0; i < n; ++i) {
            m_positions[std::size_t(i)] = start + i + m_positionDelta;
        }
    }
    m_positions3.clear();
    m_bidirectionalRows.clear();
    const VisionFeatures<T>* vision = nullptr;
    // Gemma-4: the image rows are embedded as the pad token (HF replaces the out-of-vocabulary
    // image ids before the lookup); the features replace those rows after it.
    std::vector<std::int64_t> padded;
    if (mm != nullptr) {
        const bool oneDimensional = m_spec.family == model::Family::Gemma4;
        if (mm->positions3.size() != std::size_t(oneDimensional ? 0 : 3 * n)) {
            return Error::internal(
                fmt::format("M-RoPE positions: {} values for {} tokens", mm->positions3.size(), n));
        }
        m_positions3 = mm->positions3;
        if (mm->imageBidirectional) {
            m_bidirectionalRows = mm->imageRows;
        }
        if (mm->imagePadId >= 0) {
            padded.assign(ids.begin(), ids.end());
            for (const auto row : mm->imageRows) {
                padded[std::size_t(row)] = mm->imagePadId;
            }
            ids = std::span<const std::int64_t>(padded);
        }
        vision = mm->vision;
        if (vision != nullptr && std::int64_t(mm->imageRows.size()) != vision->tokens) {
            return Error::internal(fmt::format(
                "{} image rows for {} image tokens", mm->imageRows.size(), vision->tokens));
        }
    }
    // Adds `rows` × h values of `src` to (or, with replace, writes them into) the image rows.
    const auto scatterImage = [&](std::vector<T>& dst, const std::vector<T>& src, bool replace) {
        for (std::size_t k = 0; k < mm->imageRows.size(); ++k) {
            T* row = dst.data() + mm->imageRows[k] * h;
            const T* from = src.data() + std::int64_t(k) * h;
            for (std::int64_t j = 0; j < h; ++j) {
                row[j] = replace ? from[j] : row[j] + from[j];
            }
        }
    };
    // Qwen3-VL deepstack: the features of deepstack merger l join after decoder layer l.
    const auto deepstackAfter = [&](int layer) {
        if (vision != nullptr && std::size_t(layer) < vision->deepstack.size()) {
            scatterImage(hidden, vision->deepstack[std::size_t(layer)], false);
        }
    };
    std::vector<T> x(std::size_t(n * h));
    std::vector<T> branch(std::size_t(n * h));
    if (!sliced) {
        const profile::TraceScope traced("model.embed_tokens");
        const PrecisionMode mode = m_plan.modeFor(OpKind::Embedding, -1);
        if constexpr (std::is_same_v<T, float>) {
            DAY0_TRY(m_ops.embedding(ids, weight("model.embed_tokens.weight"), m_spec.vocabSize, h,
                hidden.data(), mode));
        } else {
            DAY0_TRY(embedding<T>(
                ids, weight("model.embed_tokens.weight"), m_spec.vocabSize, h, hidden.data()));
            roundAct(hidden.data(), n * h, mode);
        }
    }
    if (m_spec.family == model::Family::Gemma4) {
        gemma4ScaleEmbedding(hidden.data(), n);
        if (m_spec.perLayerInputSize > 0) {
            DAY0_TRY(gemma4PerLayerInputs(ids, hidden.data(), n, taps));
        }
    }
    if (!sliced) {
        taps.record("model.embed_tokens", hidden.data(), { n, h });
    }
    // Kimi-K3's Block Attention Residuals: the step's sealed block sums (kimi_attn_res.cpp).
    std::vector<std::vector<T>> attnResBlocks;
    const int firstLayer = sliced ? m_sliceFirst : 0;
    const int endLayer = sliced ? m_sliceLast + 1 : int(m_spec.numLayers);
    for (int l = firstLayer; l < endLayer; ++l) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        const LayerNames names = layerNames(m_spec, l);
        const profile::TraceScope tracedLayer(names.prefix, profile::Category::Annotation);
        const std::string before
            = l == 0 ? "model.embed_tokens" : fmt::format("model.layers.{}", l - 1);
        if (!taps.inject(before, hidden.data(), n, h) && sliced && l == firstLayer) {
            return Error::internal(
                fmt::format("the slice from layer {} was given no input at '{}'", l, before));
        }
        if (l == 0 && vision != nullptr) {
            scatterImage(hidden, vision->embeds, true);
        } else if (l > 0) {
            deepstackAfter(l - 1);
        }
        taps.record(names.prefix + "#in0", hidden.data(), { n, h });
        if (m_spec.attnResBlockSize > 0) {
            kimiAttnResLayer(l, hidden.data(), attnResBlocks, n, start, taps);
            taps.record(names.prefix, hidden.data(), { n, h });
            if (m_ops.error()) {
                return *m_ops.error();
            }
            continue;
        }
        if (m_spec.family == model::Family::Gemma4) {
            gemma4Layer(l, hidden.data(), n, start, taps);
            if (m_ops.error()) {
                return *m_ops.error();
            }
            continue;
        }
        const PrecisionMode residualMode = m_plan.modeFor(OpKind::DecoderLayer, l);

        // Nemotron-NAS skips a no-op block with its norm and replaces a block by one linear.
        const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
        const bool attends = layer.mixer != model::MixerKind::None;
        const bool feeds = layer.ffn != model::FfnKind::None;
        if (attends) {
            rmsNormOp(names.prefix + ".input_layernorm", hidden.data(), x.data(), n, h, l);
            taps.record(names.prefix + ".input_layernorm", x.data(), { n, h });
            const bool delta = layer.mixer == model::MixerKind::GatedDeltaNet;
            const std::string mixer = names.prefix + (delta ? ".linear_attn" : ".self_attn");
            const profile::TraceScope traced(mixer);
            if (delta) {
                gatedDeltaNetBlock(l, x.data(), branch.data(), n, taps);
            } else if (layer.mixer == model::MixerKind::KimiDelta) {
                kimiDeltaBlock(l, x.data(), branch.data(), n, taps);
            } else if (layer.mixer == model::MixerKind::Linear) {
                linear(names.prefix + ".self_attn.linear_attn", x.data(), branch.data(), n, h, h,
                    OpKind::Linear, l, taps, false);
            } else if (m_spec.attention == model::AttentionKind::MLA) {
                mlaBlock(l, x.data(), branch.data(), n, start, taps);
            } else if (layer.mixer == model::MixerKind::BlockSparse) {
                blockSparseAttention(l, x.data(), branch.data(), n, start, taps);
            } else {
                attentionBlock(l, x.data(), branch.data(), n, start, taps);
            }
            taps.record(mixer, branch.data(), { n, h });
        }
        const std::string postNorm = names.prefix + ".post_attention_layernorm";
        if (feeds && !attends) {
            rmsNormOp(postNorm, hidden.data(), x.data(), n, h, l);
        } else if constexpr (std::is_same_v<T, float>) {
            if (feeds && residualMode == m_plan.modeFor(OpKind::Norm, l)) {
                // The residual add fused into the norm, as the backend's kernel computes it.
                m_ops.addRmsNorm(branch.data(), hidden.data(), weight(postNorm + ".weight"),
                    x.data(), n, h, m_spec.normEps, residualMode);
            } else {
                addInPlace(hidden.data(), branch.data(), n * h);
                roundAct(hidden.data(), n * h, residualMode);
                if (feeds) {
                    rmsNormOp(postNorm, hidden.data(), x.data(), n, h, l);
                }
            }
        } else {
            addInPlace(hidden.data(), branch.data(), n * h);
            if (feeds) {
                rmsNormOp(postNorm, hidden.data(), x.data(), n, h, l);
            }
        }
        if (feeds) {
            taps.record(postNorm, x.data(), { n, h });
            const bool moe = m_spec.moe && layer.moe();
            {
                const profile::TraceScope traced(names.ffn);
                if (layer.ffn == model::FfnKind::Linear) {
                    linear(names.ffn + ".linear_mlp", x.data(), branch.data(), n, h, h,
                        OpKind::Linear, l, taps, false);
                } else if (moe) {
                    moeBlock(l, x.data(), branch.data(), n, taps);
                } else {
                    mlp(names.ffn, "gate_proj", "up_proj", "down_proj", x.data(), branch.data(), n,
                        m_spec.ffnWidthOf(layer), l, taps);
                }
            }
            // Named explicitly: Llama-4's "feed_forward" is not a name the anchor classifier
            // knows.
            taps.record(names.ffn, branch.data(), { n, h }, moe ? "moe" : "mlp");
            addInPlace(hidden.data(), branch.data(), n * h);
            roundAct(hidden.data(), n * h, residualMode);
        }
        taps.record(names.prefix, hidden.data(), { n, h });
        if (m_ops.error()) {
            return *m_ops.error(); // a backend failed in this layer
        }
    }
    if (sliced) {
        // The boundary after the slice's last layer (a layer stream releases its weights).
        taps.inject(fmt::format("model.layers.{}", m_sliceLast), hidden.data(), n, h);
        return std::vector<T>();
    }
    if (stop.stop_requested()) {
        // Before a layer stream loads the final norm's and the head's weights for nothing.
        return Error::cancelled();
    }
    if (m_spec.numLayers > 0) {
        taps.inject(fmt::format("model.layers.{}", m_spec.numLayers - 1), hidden.data(), n, h);
        deepstackAfter(int(m_spec.numLayers) - 1);
    }
    if (m_spec.attnResBlockSize > 0) {
        // The last mix, before the final norm (KimiLinearModel.forward's output_attn_res).
        attnResMix("model.output_attn", attnResBlocks, hidden.data(), hidden.data(), n, -1);
    }
    rmsNormOp("model.norm", hidden.data(), x.data(), n, h, -1);
    taps.record("model.norm", x.data(), { n, h });
    taps.inject("model.norm", x.data(), n, h);
    std::vector<T> logits(std::size_t(n * m_spec.vocabSize));
    const profile::TraceScope tracedHead("lm_head");
    linear("lm_head", x.data(), logits.data(), n, h, m_spec.vocabSize, OpKind::Logits, -1, taps,
        false);
    if (m_spec.finalLogitSoftcap > 0.0) {
        softCapLogits(logits.data(), n * m_spec.vocabSize);
    }
    taps.record("lm_head", logits.data(), { n, m_spec.vocabSize });
    if (m_ops.error()) {
        return *m_ops.error();
    }
    return logits;
}

template class Forward<float>;
template class Forward<double>;

} // namespace day0::exec::detail
