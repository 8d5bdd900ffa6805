// The sharded fp32 forward of one rank: TP attention (standard and MLA), dense MLPs,
// vocab-parallel embedding and head. Routed experts live in parallel_moe.cpp.
#include "parallel/forward.h"

#include "exec/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::parallel::detail {

ParallelForward::ParallelForward(const model::ModelSpec& spec,
    const exec::detail::WeightTable& weights, const checkpoint::ShardLayout& layout,
    const checkpoint::RankCoord& coord, RankGroups groups)
    : m_spec(spec)
    , m_weights(weights)
    , m_layout(layout)
    , m_coord(coord)
    , m_groups(groups)
    , m_layers(checkpoint::stageLayers(layout, spec.numLayers, coord.stage))
    , m_sp(layout.sp && layout.tp > 1)
{
}

std::int64_t ParallelForward::localRows(std::int64_t n) const
{
    return m_sp ? (n + m_layout.tp - 1) / m_layout.tp : n;
}

Result<void> ParallelForward::finishRowParallel(std::vector<float>& partial, std::int64_t n,
    const std::string& biasModule, std::vector<float>& out)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t rows = localRows(n);
    out.resize(std::size_t(rows * h));
    if (!m_sp) {
        DAY0_TRY(reduceTp(partial.data(), n * h));
        std::copy_n(partial.begin(), n * h, out.begin());
    } else {
        // Padding rows (zeros) make every rank's share the same size.
        partial.resize(std::size_t(n * h));
        partial.resize(std::size_t(m_layout.tp * rows * h), 0.0F);
        DAY0_TRY(m_groups.tp->reduceScatter(
            partial.data(), out.data(), std::size_t(rows * h), DType::F32, comm::ReduceOp::Sum));
        partial.resize(std::size_t(n * h));
    }
    return biasModule.empty() ? success() : addBias(biasModule, out.data(), rows, h);
}

Result<const float*> ParallelForward::allTokens(
    const std::vector<float>& local, std::int64_t n, std::vector<float>& scratch)
{
    if (!m_sp) {
        return local.data();
    }
    const std::int64_t h = m_spec.hiddenSize;
    scratch.resize(std::size_t(m_layout.tp) * local.size());
    DAY0_TRY(m_groups.tp->allGather(local.data(), scratch.data(), local.size(), DType::F32));
    scratch.resize(std::size_t(n * h)); // the padding rows of the last rank go
    return static_cast<const float*>(scratch.data());
}

Result<void> ParallelForward::init()
{
    const int tp = m_layout.tp;
    if (m_spec.numLayers < m_layout.pp) {
        return Error::badInput(
            fmt::format("--plan: pp={} needs at least {} decoder layers, {} has {}", m_layout.pp,
                m_layout.pp, m_spec.name, m_spec.numLayers));
    }
    if (m_spec.numHeads % tp != 0) {
        return Error::badInput(fmt::format(
            "--plan: tp={} does not divide the {} attention heads", tp, m_spec.numHeads));
    }
    m_heads = m_spec.numHeads / tp;
    if (m_spec.family == model::Family::KimiLinear && m_spec.linearAttention
        && m_spec.linearAttention->valueHeads % tp != 0) {
        return Error::badInput(fmt::format("--plan: tp={} does not divide the {} KDA heads "
                                           "(linear_attn_config.num_heads)",
            tp, m_spec.linearAttention->valueHeads));
    }
    const bool mla = m_spec.attention == model::AttentionKind::MLA;
    if (mla) {
        m_kvHeads = m_heads;
    } else if (m_spec.numKvHeads >= tp) {
        if (m_spec.numKvHeads % tp != 0) {
            return Error::badInput(fmt::format(
                "--plan: tp={} does not divide the {} KV heads", tp, m_spec.numKvHeads));
        }
        m_kvHeads = m_spec.numKvHeads / tp;
    } else {
        m_kvHeads = 1; // replicated: rank r holds KV head r / (tp / kv)
    }
    // Nemotron-H's relu² MLPs are not gated: relu2Partial computes them.
    if (m_spec.family == model::Family::MiniMaxM3
        && (m_spec.hiddenAct == "swigluoai" || m_spec.hiddenAct == "swiglu_oai")) {
        // As the single-rank engine: (clamp(up) + 1) · g·σ(1.702·g) with g = min(gate, limit),
        // i.e. the quick GELU of the clamped gate; elementwise, so TP-local.
        m_activation = exec::Activation::QuickGelu;
        m_swigluLimit = m_spec.swigluLimit;
    } else if (m_spec.family != model::Family::NemotronH) {
        auto act = exec::parseActivation(m_spec.hiddenAct);
        if (!act) {
            return act.error();
        }
        m_activation = *act;
    }
    if (m_spec.family == model::Family::Gemma4) {
        m_scale = 1.0; // q_norm and k_norm stand for 1/sqrt(d)
        return gemma4Init();
    }
    if (m_spec.family == model::Family::DeepseekV4) {
        return deepseekV4Init();
    }
    // Partial rotary (Qwen3.5: a quarter of each head) as the single-rank engine builds it: the
    // first lanes rotate, the rest pass.
    const std::int64_t rotary = mla
        ? m_spec.mla.qkRopeHeadDim
        : std::int64_t(double(m_spec.headDim) * m_spec.partialRotaryFactor);
    auto rope = exec::makeRope(rotary, m_spec.ropeTheta, m_spec.ropeScaling,
        mla ? exec::RopeLayout::Interleaved : exec::RopeLayout::RotateHalf);
    if (!rope) {
        return rope.error();
    }
    m_rope = std::move(*rope);
    if (const auto& bs = m_spec.blockSparse; bs && m_spec.family == model::Family::MiniMaxM3
        && (bs->indexDim < m_rope.rotaryDim || bs->indexHeads != m_spec.numKvHeads)) {
        // As the single-rank engine (blockSparseInit): index head g serves KV group g.
        return Error::unsupported(fmt::format("MiniMax-M3 sparse attention with sparse_index_dim "
                                              "{} below the rotary width {}, or {} index heads "
                                              "for {} KV heads",
            bs->indexDim, m_rope.rotaryDim, bs->indexHeads, m_spec.numKvHeads));
    }
    if (mla) {
        m_scale = 1.0 / std::sqrt(double(m_spec.mla.qkNopeHeadDim + m_spec.mla.qkRopeHeadDim));
        const auto& s = m_spec.ropeScaling;
        if (s.type == "yarn" && s.mscaleAllDim > 0.0) {
            const double m = exec::yarnMscale(s.factor, s.mscaleAllDim);
            m_scale *= m * m;
        }
    } else {
        m_scale = 1.0 / std::sqrt(double(m_spec.headDim));
    }
    if (m_spec.moe) {
        m_router = exec::routerConfig(*m_spec.moe);
        if (m_spec.family == model::Family::Mixtral) {
            m_router.normTopkProb = true; // as the single-rank engine (HF Mixtral)
        }
    }
    return success();
}

ShardCache ParallelForward::newCache(std::int64_t capacity) const
{
    ShardCache c;
    c.capacity = capacity;
    c.k.resize(std::size_t(m_spec.numLayers));
    c.v.resize(std::size_t(m_spec.numLayers));
    std::int64_t kw = m_kvHeads * m_spec.headDim;
    std::int64_t vw = kw;
    if (m_spec.attention == model::AttentionKind::MLA) {
        kw = m_heads * (m_spec.mla.qkNopeHeadDim + m_spec.mla.qkRopeHeadDim);
        vw = m_heads * m_spec.mla.vHeadDim;
    }
    c.window.resize(std::size_t(m_spec.numLayers));
    c.state.resize(std::size_t(m_spec.numLayers));
    if (m_spec.family == model::Family::DeepseekV4) {
        c.v4.resize(std::size_t(m_spec.numLayers));
    }
    const int tp = m_layout.tp;
    for (std::int64_t l = m_layers.first; l < m_layers.second; ++l) {
        const auto i = std::size_t(l);
        const model::MixerKind mixer = m_spec.layers[i].mixer;
        if (m_spec.family == model::Family::DeepseekV4) {
            exec::detail::deepseekV4SizeLayer<float>(
                c.v4[i], m_spec, i, capacity, m_rope, m_compressRope);
            continue;
        }
        if (m_spec.family == model::Family::Gemma4) {
            // A KV-shared layer reads its source's cache and keeps none of its own.
            if (m_kvSource[i] == int(l)) {
                const std::int64_t width
                    = localKvHeads(m_spec.layers[i]) * m_spec.headDimOf(m_spec.layers[i]);
                c.k[i].assign(std::size_t(capacity * width), 0.0F);
                c.v[i].assign(std::size_t(capacity * width), 0.0F);
            }
            continue;
        }
        // The recurrent layers' states: fixed sizes over this rank's heads, zero at the start.
        if (mixer == model::MixerKind::GatedDeltaNet && m_spec.linearAttention) {
            const auto& la = *m_spec.linearAttention;
            const std::int64_t conv
                = (2 * la.keyHeads * la.keyHeadDim + la.valueHeads * la.valueHeadDim) / tp;
            c.window[i].assign(std::size_t((la.convKernel - 1) * conv), 0.0F);
            c.state[i].assign(
                std::size_t(la.valueHeads / tp * la.keyHeadDim * la.valueHeadDim), 0.0F);
        } else if (mixer == model::MixerKind::KimiDelta && m_spec.linearAttention) {
            const auto& la = *m_spec.linearAttention;
            const std::int64_t width = la.valueHeads / tp * la.valueHeadDim;
            c.window[i].assign(std::size_t(3 * (la.convKernel - 1) * width), 0.0F);
            c.state[i].assign(std::size_t(width * la.valueHeadDim), 0.0F);
        } else if (mixer == model::MixerKind::Mamba2 && m_spec.mamba) {
            const auto& m = *m_spec.mamba;
            c.window[i].assign(std::size_t((m.convKernel - 1) * m.convChannels() / tp), 0.0F);
            c.state[i].assign(std::size_t(m.inner() / tp * m.stateSize), 0.0F);
        } else if (mixer != model::MixerKind::None) {
            c.k[i].assign(std::size_t(capacity * kw), 0.0F);
            c.v[i].assign(std::size_t(capacity * vw), 0.0F);
        }
        if (mixer == model::MixerKind::BlockSparse && m_spec.blockSparse) {
            c.indexKeys.resize(std::size_t(m_spec.numLayers));
            c.indexKeys[i].assign(std::size_t(capacity * m_spec.blockSparse->indexDim), 0.0F);
        }
    }
    return c;
}

Result<void> ParallelForward::enterPhase(int phase)
{
    return m_phaseHook ? m_phaseHook(phase) : success();
}

const float* ParallelForward::weight(const std::string& name) const
{
    const auto it = m_weights.tensors.find(name);
    return it == m_weights.tensors.end() ? nullptr : it->second.data<float>();
}

Result<void> ParallelForward::linearOp(const std::string& module, const float* x, float* y,
    std::int64_t n, std::int64_t in, std::int64_t out, bool skipBias) const
{
    const std::string name = module == "lm_head" && weight("lm_head.weight") == nullptr
        ? embedName()
        : module + ".weight";
    const auto it = m_weights.tensors.find(name);
    if (it == m_weights.tensors.end()) {
        return Error::internal(fmt::format("rank {}: holds no slice of '{}'", m_coord.rank, name));
    }
    if (it->second.numel() != in * out) {
        return Error::internal(fmt::format("rank {}: slice of '{}' has {} elements, needs {}x{}",
            m_coord.rank, name, it->second.numel(), out, in));
    }
    m_ops.linear(x, it->second.data<float>(), nullptr, y, n, in, out, exec::PrecisionMode::F32,
        exec::Fp8Scaling::PerTensor);
    DAY0_TRY(backendStatus());
    if (!skipBias) {
        if (const float* b = weight(module + ".bias")) {
            for (std::int64_t t = 0; t < n; ++t) {
                exec::addInPlace(y + t * out, b, out);
            }
        }
    }
    return success();
}

Result<void> ParallelForward::backendStatus() const
{
    if (m_ops.error()) {
        return m_ops.error()->withContext(fmt::format("rank {}", m_coord.rank));
    }
    return success();
}

Result<void> ParallelForward::reduceTp(float* data, std::int64_t count)
{
    if (m_layout.tp == 1) {
        return success();
    }
    return m_groups.tp->allReduce(data, data, std::size_t(count), DType::F32, comm::ReduceOp::Sum);
}

Result<void> ParallelForward::addBias(
    const std::string& module, float* y, std::int64_t n, std::int64_t out)
{
    if (const float* b = weight(module + ".bias")) {
        for (std::int64_t t = 0; t < n; ++t) {
            exec::addInPlace(y + t * out, b, out);
        }
    }
    return success();
}

Result<std::vector<float>> ParallelForward::embed(std::span<const std::int64_t> ids)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t vocab = m_spec.vocabSize;
    DAY0_TRY(enterPhase(kEmbedPhase));
    const auto it = m_weights.tensors.find(embedName());
    if (it == m_weights.tensors.end()) {
        return Error::internal(fmt::format("rank {}: holds no embedding slice", m_coord.rank));
    }
    // Vocab-parallel rows [lo, lo + rows): ceil(V / tp) per rank, as core/checkpoint slices them.
    const std::int64_t rows = it->second.shape()[0];
    const std::int64_t per = (vocab + m_layout.tp - 1) / m_layout.tp;
    const std::int64_t lo = m_layout.tp == 1 ? 0 : std::min(vocab, per * m_coord.tpRank);
    std::vector<float> hidden(std::size_t(std::int64_t(ids.size()) * h), 0.0F);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::int64_t id = ids[i];
        if (id < 0 || id >= vocab) {
            return Error::badInput(
                fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab));
        }
        if (id >= lo && id < lo + rows) {
            std::copy_n(it->second.data<float>() + (id - lo) * h, h, hidden.begin() + i * h);
        }
    }
    std::vector<float> local;
    const auto n = std::int64_t(ids.size());
    DAY0_TRY(finishRowParallel(hidden, n, {}, local));
    m_stepIds.assign(ids.begin(), ids.end());
    if (m_spec.family == model::Family::DeepseekV4) {
        // Every one of the hc_mult streams starts as the embedding.
        const std::int64_t s = m_spec.hyperConnections->streams;
        std::vector<float> streams(local.size() * std::size_t(s));
        for (std::int64_t t = 0; t < localRows(n); ++t) {
            for (std::int64_t j = 0; j < s; ++j) {
                std::copy_n(local.begin() + t * h, h, streams.begin() + (t * s + j) * h);
            }
        }
        return streams;
    }
    if (m_spec.family == model::Family::Gemma4) {
        // Gemma4TextScaledWordEmbedding: times sqrt(hidden_size); the per-layer inputs read
        // every token's scaled row.
        const auto scale = float(std::sqrt(double(h)));
        for (float& x : local) {
            x *= scale;
        }
        if (m_spec.perLayerInputSize > 0) {
            std::vector<float> gathered;
            auto all = allTokens(local, n, gathered);
            if (!all) {
                return all.error();
            }
            DAY0_TRY(gemma4PerLayerInputs(ids, *all, n));
        }
    }
    return local;
}

Result<std::vector<float>> ParallelForward::head(const std::vector<float>& hidden, std::int64_t n)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t vocab = m_spec.vocabSize;
    const bool v4 = m_spec.family == model::Family::DeepseekV4;
    DAY0_TRY(enterPhase(int(m_spec.numLayers)));
    // DeepSeek-V4: hc_head folds the streams into one row first.
    const std::vector<float> collapsed = v4 ? deepseekV4Collapse(hidden, n) : std::vector<float> {};
    const float* rows = v4 ? collapsed.data() : hidden.data();
    std::vector<float> normed(std::size_t(localRows(n) * h));
    m_ops.rmsNorm(rows, weight(finalNormName()), normed.data(), localRows(n), h, m_spec.normEps,
        exec::PrecisionMode::F32);
    std::vector<float> gathered;
    auto rowsOfAll = allTokens(normed, n, gathered);
    if (!rowsOfAll) {
        return rowsOfAll.error();
    }
    const float* x = *rowsOfAll;
    const std::string headModule = v4 ? "head" : "lm_head"; // DeepSeek's native name
    const std::string headName = v4           ? "head.weight"
        : weight("lm_head.weight") != nullptr ? "lm_head.weight"
                                              : embedName();
    const auto it = m_weights.tensors.find(headName);
    if (it == m_weights.tensors.end()) {
        return Error::internal(fmt::format("rank {}: holds no output head slice", m_coord.rank));
    }
    const std::int64_t width = it->second.shape()[0];
    const int tp = m_layout.tp;
    const std::int64_t per = tp == 1 ? vocab : (vocab + tp - 1) / tp;
    // Local logits padded to `per` columns so the all-gather has one size on every rank.
    std::vector<float> local(std::size_t(n * per), 0.0F);
    std::vector<float> part(std::size_t(n * width));
    DAY0_TRY(linearOp(headModule, x, part.data(), n, h, width));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(part.begin() + t * width, width, local.begin() + t * per);
    }
    if (tp == 1) {
        softCap(local);
        return local;
    }
    std::vector<float> all(std::size_t(tp) * local.size());
    DAY0_TRY(m_groups.tp->allGather(local.data(), all.data(), local.size(), DType::F32));
    std::vector<float> logits(std::size_t(n * vocab));
    for (int r = 0; r < tp; ++r) {
        const std::int64_t lo = std::min(vocab, per * r);
        const std::int64_t w = std::min(vocab, per * (r + 1)) - lo;
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(all.begin() + std::int64_t(r) * n * per + t * per, w,
                logits.begin() + t * vocab + lo);
        }
    }
    softCap(logits);
    return logits;
}

void ParallelForward::softCap(std::vector<float>& logits) const
{
    // Gemma's final_logit_softcapping: cap · tanh(logits / cap), as the single-rank engine.
    const double cap = m_spec.finalLogitSoftcap;
    if (cap <= 0.0) {
        return;
    }
    for (float& x : logits) {
        x = float(std::tanh(double(x) / cap) * cap);
    }
}

Result<void> ParallelForward::layers(ShardCache& cache, std::vector<float>& hidden, std::int64_t n,
    std::int64_t start, std::stop_token stop)
{
    if (start + n > cache.capacity) {
        return Error::internal(
            fmt::format("KV cache holds {} tokens, step needs {}", cache.capacity, start + n));
    }
    m_segments.assign(1, StepSegment { &cache, 0, n, start });
    m_positions.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) {
        m_positions[std::size_t(i)] = start + i;
    }
    return runLayers(hidden, n, stop);
}

Result<void> ParallelForward::runLayers(
    std::vector<float>& hidden, std::int64_t n, std::stop_token stop)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t rows = localRows(n);
    if (std::int64_t(hidden.size()) != rows * hiddenWidth()) {
        return Error::internal(fmt::format("rank {}: {} hidden values for {} local rows of {}",
            m_coord.rank, hidden.size(), rows, n));
    }
    // The per-family blocks and the recurrent mixers run one sequence (batchRefusal).
    ShardCache& cache = *m_segments.front().cache;
    const std::int64_t start = m_segments.front().start;
    // x: the normed rows this rank holds; partial: a TP region's output before its reduction;
    // branch: the reduced output on this rank's rows; gathered: every token's normed row (SP).
    std::vector<float> x(hidden.size());
    std::vector<float> partial(std::size_t(n * h));
    std::vector<float> branch(hidden.size());
    std::vector<float> gathered;
    for (auto l = int(m_layers.first); l < int(m_layers.second); ++l) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        DAY0_TRY(enterPhase(l));
        if (m_spec.family == model::Family::NemotronH) {
            DAY0_TRY(nemotronHLayer(l, cache, hidden, n));
            continue;
        }
        if (m_spec.family == model::Family::Gemma4) {
            DAY0_TRY(gemma4Layer(l, cache, hidden, n, start));
            continue;
        }
        if (m_spec.family == model::Family::DeepseekV4) {
            DAY0_TRY(deepseekV4Layer(l, cache, hidden, n, start));
            continue;
        }
        const std::string prefix = layerPrefix(l);
        const model::MixerKind mixer = m_spec.layers[std::size_t(l)].mixer;
        const bool linear = mixer == model::MixerKind::GatedDeltaNet;
        m_ops.rmsNorm(hidden.data(), weight(prefix + ".input_layernorm.weight"), x.data(), rows, h,
            m_spec.normEps, exec::PrecisionMode::F32);
        auto in = allTokens(x, n, gathered);
        if (!in) {
            return in.error();
        }
        if (linear) {
            DAY0_TRY(gatedDeltaNet(l, cache, *in, partial.data(), n));
        } else if (mixer == model::MixerKind::KimiDelta) {
            DAY0_TRY(kimiDelta(l, cache, *in, partial.data(), n));
        } else if (mixer == model::MixerKind::BlockSparse) {
            DAY0_TRY(blockSparseAttention(l, cache, *in, partial.data(), n, start));
        } else if (m_spec.attention == model::AttentionKind::MLA) {
            DAY0_TRY(mla(l, *in, partial.data(), n));
        } else {
            DAY0_TRY(attention(l, *in, partial.data(), n));
        }
        DAY0_TRY(finishRowParallel(
            partial, n, prefix + (linear ? ".linear_attn.out_proj" : ".self_attn.o_proj"), branch));
        m_ops.addRmsNorm(branch.data(), hidden.data(),
            weight(prefix + ".post_attention_layernorm.weight"), x.data(), rows, h, m_spec.normEps,
            exec::PrecisionMode::F32);
        in = allTokens(x, n, gathered);
        if (!in) {
            return in.error();
        }
        if (m_spec.moe && m_spec.layers[std::size_t(l)].moe()) {
            DAY0_TRY(moe(l, *in, partial.data(), n));
            DAY0_TRY(finishRowParallel(partial, n, {}, branch));
        } else {
            DAY0_TRY(mlpPartial(prefix + ".mlp", "gate_proj", "up_proj", "down_proj", *in,
                partial.data(), n, m_spec.intermediateSize / m_layout.tp));
            DAY0_TRY(finishRowParallel(partial, n, prefix + ".mlp.down_proj", branch));
        }
        exec::addInPlace(hidden.data(), branch.data(), rows * h);
        DAY0_TRY(backendStatus());
    }
    return success();
}

Result<void> ParallelForward::attention(int layer, const float* x, float* out, std::int64_t n)
{
    const std::string attn = attentionModule(layer);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t qDim = m_heads * d;
    const std::int64_t kvDim = m_kvHeads * d;
    std::vector<float> q(std::size_t(n * qDim));
    std::vector<float> k(std::size_t(n * kvDim));
    std::vector<float> v(std::size_t(n * kvDim));
    // Qwen3-Next / Qwen3.5 (Qwen3NextAttention): q_proj emits each head's query then its output
    // gate, so the column slice by heads keeps each local head's pair.
    std::vector<float> gate;
    if (m_spec.attentionOutputGate) {
        std::vector<float> both(std::size_t(n * 2 * qDim));
        DAY0_TRY(linearOp(attn + ".q_proj", x, both.data(), n, h, 2 * qDim));
        gate.resize(std::size_t(n * qDim));
        for (std::int64_t i = 0; i < n * m_heads; ++i) {
            std::copy_n(both.begin() + i * 2 * d, d, q.begin() + i * d);
            std::copy_n(both.begin() + i * 2 * d + d, d, gate.begin() + i * d);
        }
    } else {
        DAY0_TRY(linearOp(attn + ".q_proj", x, q.data(), n, h, qDim));
    }
    DAY0_TRY(linearOp(attn + ".k_proj", x, k.data(), n, h, kvDim));
    DAY0_TRY(linearOp(attn + ".v_proj", x, v.data(), n, h, kvDim));
    if (m_spec.qkNorm) {
        m_ops.rmsNorm(q.data(), weight(attn + ".q_norm.weight"), q.data(), n * m_heads, d,
            m_spec.normEps, exec::PrecisionMode::F32);
        m_ops.rmsNorm(k.data(), weight(attn + ".k_norm.weight"), k.data(), n * m_kvHeads, d,
            m_spec.normEps, exec::PrecisionMode::F32);
    }
    if (m_spec.layers[std::size_t(layer)].rope) {
        m_ops.rope(q.data(), n, m_heads, d, m_positions, m_rope, {}, exec::PrecisionMode::F32);
        m_ops.rope(k.data(), n, m_kvHeads, d, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    }
    std::vector<float> context(std::size_t(n * qDim));
    for (const auto& s : m_segments) {
        auto& ck = s.cache->k[std::size_t(layer)];
        auto& cv = s.cache->v[std::size_t(layer)];
        std::copy_n(k.begin() + s.offset * kvDim, s.n * kvDim, ck.begin() + s.start * kvDim);
        std::copy_n(v.begin() + s.offset * kvDim, s.n * kvDim, cv.begin() + s.start * kvDim);
        const exec::AttentionShape shape = exec::decoderAttentionShape(
            m_spec.layers[std::size_t(layer)], s.n, s.start, m_heads, m_kvHeads, d, d, m_scale);
        m_ops.attention(q.data() + s.offset * qDim, ck.data(), cv.data(),
            context.data() + s.offset * qDim, shape, exec::PrecisionMode::F32);
    }
    for (std::size_t i = 0; i < gate.size(); ++i) {
        context[i] *= exec::sigmoid(gate[i]);
    }
    // Row-parallel o_proj: partial sums over the local heads (the caller reduces, adds the bias).
    return linearOp(attn + ".o_proj", context.data(), out, n, qDim, h, true);
}

Result<void> ParallelForward::mla(int layer, const float* x, float* out, std::int64_t n)
{
    const std::string attn = fmt::format("model.layers.{}.self_attn", layer);
    const auto& m = m_spec.mla;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = m_heads;
    const std::int64_t nope = m.qkNopeHeadDim;
    const std::int64_t rope = m.qkRopeHeadDim;
    const std::int64_t qk = nope + rope;
    const std::int64_t vd = m.vHeadDim;
    std::vector<float> q(std::size_t(n * heads * qk));
    if (m.qLoraRank > 0) {
        // q_a_proj and its norm are replicated; q_b_proj is column-parallel by heads.
        std::vector<float> qa(std::size_t(n * m.qLoraRank));
        DAY0_TRY(linearOp(attn + ".q_a_proj", x, qa.data(), n, h, m.qLoraRank));
        m_ops.rmsNorm(qa.data(), weight(attn + ".q_a_layernorm.weight"), qa.data(), n, m.qLoraRank,
            m.latentNormEps, exec::PrecisionMode::F32);
        DAY0_TRY(linearOp(attn + ".q_b_proj", qa.data(), q.data(), n, m.qLoraRank, heads * qk));
    } else {
        DAY0_TRY(linearOp(attn + ".q_proj", x, q.data(), n, h, heads * qk));
    }
    const std::int64_t ckvWidth = m.kvLoraRank + rope;
    std::vector<float> ckv(std::size_t(n * ckvWidth));
    DAY0_TRY(linearOp(attn + ".kv_a_proj_with_mqa", x, ckv.data(), n, h, ckvWidth));
    std::vector<float> latent(std::size_t(n * m.kvLoraRank));
    std::vector<float> kPe(std::size_t(n * rope));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(ckv.begin() + t * ckvWidth, m.kvLoraRank, latent.begin() + t * m.kvLoraRank);
        std::copy_n(ckv.begin() + t * ckvWidth + m.kvLoraRank, rope, kPe.begin() + t * rope);
    }
    m_ops.rmsNorm(latent.data(), weight(attn + ".kv_a_layernorm.weight"), latent.data(), n,
        m.kvLoraRank, m.latentNormEps, exec::PrecisionMode::F32);
    std::vector<float> kv(std::size_t(n * heads * (nope + vd)));
    DAY0_TRY(linearOp(
        attn + ".kv_b_proj", latent.data(), kv.data(), n, m.kvLoraRank, heads * (nope + vd)));
    std::vector<float> qPe(std::size_t(n * heads * rope));
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(q.begin() + i * qk + nope, rope, qPe.begin() + i * rope);
    }
    // Kimi-Linear's mla_use_nope: the rope slices are projected and cached but not rotated.
    if (!m.noRope) {
        m_ops.rope(qPe.data(), n, heads, rope, m_positions, m_rope, {}, exec::PrecisionMode::F32);
        m_ops.rope(kPe.data(), n, 1, rope, m_positions, m_rope, {}, exec::PrecisionMode::F32);
    }
    for (std::int64_t i = 0; i < n * heads; ++i) {
        std::copy_n(qPe.begin() + i * rope, rope, q.begin() + i * qk + nope);
    }
    const std::int64_t kWidth = heads * qk;
    const std::int64_t vWidth = heads * vd;
    std::vector<float> context(std::size_t(n * heads * vd));
    for (const auto& s : m_segments) {
        auto& ck = s.cache->k[std::size_t(layer)];
        auto& cv = s.cache->v[std::size_t(layer)];
        for (std::int64_t i = 0; i < s.n; ++i) {
            const std::int64_t t = s.offset + i;
            float* kRow = ck.data() + (s.start + i) * kWidth;
            float* vRow = cv.data() + (s.start + i) * vWidth;
            for (std::int64_t hd = 0; hd < heads; ++hd) {
                const float* src = kv.data() + (t * heads + hd) * (nope + vd);
                std::copy_n(src, nope, kRow + hd * qk);
                std::copy_n(kPe.begin() + t * rope, rope, kRow + hd * qk + nope);
                std::copy_n(src + nope, vd, vRow + hd * vd);
            }
        }
        const exec::AttentionShape shape = exec::decoderAttentionShape(
            m_spec.layers[std::size_t(layer)], s.n, s.start, heads, heads, qk, vd, m_scale);
        m_ops.attention(q.data() + s.offset * kWidth, ck.data(), cv.data(),
            context.data() + s.offset * vWidth, shape, exec::PrecisionMode::F32);
    }
    if (m.outputGate) {
        // mla_use_output_gate: σ(g_proj(x)) per value channel; g_proj is column-parallel by
        // heads, so the local gate rows match the local heads' context.
        std::vector<float> gate(context.size());
        DAY0_TRY(linearOp(attn + ".g_proj", x, gate.data(), n, h, heads * vd));
        for (std::size_t i = 0; i < gate.size(); ++i) {
            context[i] *= exec::sigmoid(gate[i]);
        }
    }
    return linearOp(attn + ".o_proj", context.data(), out, n, heads * vd, h, true);
}

Result<void> ParallelForward::mlpPartial(const std::string& module, const std::string& gate,
    const std::string& up, const std::string& down, const float* x, float* out, std::int64_t n,
    std::int64_t inter, std::int64_t width)
{
    const std::int64_t h = width > 0 ? width : m_spec.hiddenSize;
    std::vector<float> g(std::size_t(n * inter));
    std::vector<float> u(std::size_t(n * inter));
    DAY0_TRY(linearOp(module + "." + gate, x, g.data(), n, h, inter));
    DAY0_TRY(linearOp(module + "." + up, x, u.data(), n, h, inter));
    if (m_swigluLimit > 0.0) {
        // The clamped SwiGLU: gate clamped from above, up both ways and shifted by one.
        const auto limit = float(m_swigluLimit);
        for (std::size_t j = 0; j < g.size(); ++j) {
            g[j] = std::min(g[j], limit);
            u[j] = std::clamp(u[j], -limit, limit) + 1.0F;
        }
    }
    m_ops.gatedActivation(g.data(), u.data(), n * inter, m_activation, exec::PrecisionMode::F32);
    return linearOp(module + "." + down, g.data(), out, n, inter, h, true);
}

} // namespace day0::parallel::detail
