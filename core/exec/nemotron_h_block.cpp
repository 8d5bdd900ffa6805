// Nemotron-H (model_type nemotron_h: Nemotron-H, Nemotron 3 Nano / Super) on the reference
// engine.
//
// Written from transformers' modeling_nemotron_h.py @ 008d9e95 (NemotronHModel, NemotronHBlock,
// NemotronHMamba2Mixer.torch_forward, NemotronHRMSNorm, NemotronHMLP, NemotronHMoE,
// NemotronHTopkRouter, NemotronHAttention) and configuration_nemotron_h.py. What it computes:
// - the layers of `hybrid_override_pattern` in order, each one block: residual + mixer(norm(h))
//   with its own RMSNorm (`backbone.layers.N.norm`); the mixer is one of
//   - M: the Mamba-2 mixer (mamba2.h): in_proj → z ‖ xBC ‖ dt; causal depthwise conv1d over
//     xBC with its bias, SiLU; dt = softplus(dt + dt_bias); A = −exp(A_log); the SSD scan with
//     the D skip, chunked (chunk_size) over a prefill and recurrent over a decode token, its
//     conv state (the last conv_kernel − 1 inputs) and SSM state carried from step to step;
//     the gated RMSNorm rms_g(y · SiLU(z)) · w over n_groups groups; out_proj;
//   - *: attention without RoPE (NemotronHAttention), GQA, scaled by head_dim^-½;
//   - -: the non-gated MLP down(relu(up(x))²);
//   - E: the MoE: an fp32 sigmoid router with e_score_correction_bias for the choice
//     (n_group / topk_group), the unbiased scores renormalised and times routed_scaling_factor;
//     relu2 experts that, with moe_latent_size, work between fc1_latent_proj (H → latent) and
//     fc2_latent_proj (latent → H), which the weighted sum of the experts passes through; one
//     shared relu2 MLP on the block's input, added;
// - the final norm_f and lm_head.
// Captures use the checkpoint's module names (backbone.embeddings, backbone.layers.N,
// backbone.layers.N.norm, backbone.layers.N.mixer, backbone.norm_f, lm_head), which the PyTorch
// twin (plugins/torch/day0_torch_nemotron_h.py) keeps.
// What it does not compute (the MTP block is not run: it predicts further tokens, not this
// one's logits) engine.cpp's unsupportedFeatures refuses by name.
#include "exec/attention.h"
#include "exec/batch_decode.h"
#include "exec/forward.h"
#include "exec/mamba2.h"
#include "exec/recurrent_state.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace day0::exec::detail {

using numerics::OpKind;

namespace {

std::string layerPrefix(const model::ModelSpec& spec, int layer)
{
    return fmt::format("{}.layers.{}", spec.layout.textPrefix, layer);
}

Mamba2Shape mambaShape(const model::MambaSpec& m)
{
    // HF's NemotronHConfig defaults chunk_size to 128; the scan's result does not depend on it.
    return { m.numHeads, m.headDim, m.stateSize, m.numGroups, m.convKernel,
        m.chunkSize > 0 ? m.chunkSize : 128 };
}

} // namespace

std::vector<WeightRequirement> nemotronHWeights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    const std::int64_t h = spec.hiddenSize;
    const std::string& root = spec.layout.textPrefix;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto addMlp = [&](const std::string& module, std::int64_t in, std::int64_t inter) {
        add(module + ".up_proj.weight", { inter, in });
        add(module + ".down_proj.weight", { in, inter });
        if (spec.mlpBias) {
            add(module + ".up_proj.bias", { inter });
            add(module + ".down_proj.bias", { in });
        }
    };
    add(root + ".embeddings.weight", { spec.vocabSize, h });
    for (int l = 0; l < int(spec.numLayers); ++l) {
        const model::LayerSpec& layer = spec.layers[std::size_t(l)];
        const std::string p = layerPrefix(spec, l);
        const std::string mixer = p + ".mixer";
        add(p + ".norm.weight", { h });
        if (layer.mixer == model::MixerKind::Mamba2 && spec.mamba) {
            const auto s = mambaShape(*spec.mamba);
            add(mixer + ".in_proj.weight", { s.inner() + s.convChannels() + s.heads, h });
            if (spec.mamba->projBias) {
                add(mixer + ".in_proj.bias", { s.inner() + s.convChannels() + s.heads });
                add(mixer + ".out_proj.bias", { h });
            }
            add(mixer + ".conv1d.weight", { s.convChannels(), 1, s.kernel });
            if (spec.mamba->convBias) {
                add(mixer + ".conv1d.bias", { s.convChannels() });
            }
            add(mixer + ".dt_bias", { s.heads });
            add(mixer + ".A_log", { s.heads });
            add(mixer + ".D", { s.heads });
            add(mixer + ".norm.weight", { s.inner() });
            add(mixer + ".out_proj.weight", { h, s.inner() });
        } else if (layer.mixer == model::MixerKind::Attention) {
            const std::int64_t q = spec.numHeads * spec.headDim;
            const std::int64_t kv = spec.numKvHeads * spec.headDim;
            add(mixer + ".q_proj.weight", { q, h });
            add(mixer + ".k_proj.weight", { kv, h });
            add(mixer + ".v_proj.weight", { kv, h });
            add(mixer + ".o_proj.weight", { h, q });
        } else if (layer.moe() && spec.moe) {
            const auto& moe = *spec.moe;
            const std::int64_t x = moe.latentSize > 0 ? moe.latentSize : h;
            add(mixer + ".gate.weight", { moe.numExperts, h });
            add(mixer + ".gate.e_score_correction_bias", { moe.numExperts });
            if (moe.latentSize > 0) {
                add(mixer + ".fc1_latent_proj.weight", { x, h });
                add(mixer + ".fc2_latent_proj.weight", { h, x });
                if (spec.mlpBias) {
                    add(mixer + ".fc1_latent_proj.bias", { x });
                    add(mixer + ".fc2_latent_proj.bias", { h });
                }
            }
            for (std::int64_t e = 0; e < moe.numExperts; ++e) {
                // Experts never have a bias (HF's NemotronHExperts).
                add(fmt::format("{}.experts.{}.up_proj.weight", mixer, e),
                    { moe.expertIntermediate, x });
                add(fmt::format("{}.experts.{}.down_proj.weight", mixer, e),
                    { x, moe.expertIntermediate });
            }
            addMlp(mixer + ".shared_experts", h, moe.sharedIntermediate);
        } else if (layer.ffn == model::FfnKind::Dense) {
            addMlp(mixer, h, spec.ffnWidthOf(layer));
        }
    }
    add(root + ".norm_f.weight", { h });
    w.push_back({ "lm_head.weight", { spec.vocabSize, h }, spec.tieEmbeddings });
    return w;
}

template <typename T> Result<void> Forward<T>::nemotronHInit()
{
    m_attentionScale = 1.0 / std::sqrt(double(m_spec.headDim));
    if (m_spec.moe) {
        m_router = routerConfig(*m_spec.moe);
    }
    const std::size_t layers = std::size_t(m_spec.numLayers);
    m_caches.resize(layers);
    m_convStates.assign(layers, {});
    m_ssmStates.assign(layers, {});
    for (std::size_t l = 0; l < layers; ++l) {
        const model::LayerSpec& layer = m_spec.layers[l];
        if (layer.mixer == model::MixerKind::Attention) {
            const std::int64_t kv = m_spec.numKvHeads * m_spec.headDim;
            m_caches[l].k.assign(std::size_t(m_capacity * kv), T(0));
            m_caches[l].v.assign(std::size_t(m_capacity * kv), T(0));
        } else if (layer.mixer == model::MixerKind::Mamba2) {
            // Fixed-size states, zero at the sequence start (HF's cache starts them at zero).
            const auto s = mambaShape(*m_spec.mamba);
            m_convStates[l].assign(std::size_t((s.kernel - 1) * s.convChannels()), T(0));
            m_ssmStates[l].assign(std::size_t(s.heads * s.headDim * s.state), T(0));
        }
    }
    return success();
}

template <typename T>
void Forward<T>::mamba2Mixer(
    int layer, const std::string& module, const T* x, T* out, std::int64_t n, Taps<T>& taps)
{
    const auto s = mambaShape(*m_spec.mamba);
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t channels = s.convChannels();
    const std::int64_t width = s.inner() + channels + s.heads; // z ‖ xBC ‖ dt
    std::vector<T> proj(std::size_t(n * width));
    linear(module + ".in_proj", x, proj.data(), n, h, width, OpKind::Linear, layer, taps, true);
    std::vector<T> xbc(std::size_t(n * channels));
    std::vector<T> dt(std::size_t(n * s.heads));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = proj.data() + t * width;
        std::copy_n(row + s.inner(), channels, xbc.begin() + t * channels);
        std::copy_n(row + s.inner() + channels, s.heads, dt.begin() + t * s.heads);
    }
    // The scan's operators run on the CPU in the compute type (double accumulation); their
    // results are rounded as the attention's are under an emulated precision.
    const PrecisionMode mode = m_plan.modeFor(OpKind::Attention, layer);
    if constexpr (std::is_same_v<T, float>) {
        m_ops.hostOnly("Mamba-2 conv1d, SSD scan and gated norm");
    }
    // The conv window and the SSM state run per sequence: in a batched step (batch_decode.h)
    // each sequence's rows over its own Forward's states, as that sequence alone would; the
    // projections and the gated norm take every row at once.
    const std::vector<SequenceRows<T>> rows = stepSequenceRows(this, n);
    std::vector<T> conv = [&] {
        // conv1d.weight [channels, 1, kernel] is [channels, kernel] row-major.
        for (const SequenceRows<T>& r : rows) {
            mamba2Conv(xbc.data() + r.offset * channels, r.count, channels, s.kernel,
                weight(module + ".conv1d.weight"), weight(module + ".conv1d.bias"),
                r.seq->m_convStates[std::size_t(layer)].data());
        }
        return xbc;
    }();
    roundAct(conv.data(), n * channels, mode);
    mamba2Dt(dt.data(), n, s.heads, weight(module + ".dt_bias"));
    std::vector<T> y(std::size_t(n * s.inner()));
    for (const SequenceRows<T>& r : rows) {
        // A prefill runs the chunked SSD form, a decode token the recurrence.
        std::vector<T>& ssm = r.seq->m_ssmStates[std::size_t(layer)];
        mamba2Scan(conv.data() + r.offset * channels, dt.data() + r.offset * s.heads,
            weight(module + ".A_log"), weight(module + ".D"), ssm.data(),
            y.data() + r.offset * s.inner(), r.count, s, r.count > 1);
        storeRecurrentState(ssm.data(), std::int64_t(ssm.size()), m_plan);
    }
    if (rows.size() == 1) {
        recordRecurrentState(taps, module, rows.front().seq->m_ssmStates[std::size_t(layer)].data(),
            { s.heads, s.headDim, s.state },
            rows.front().seq->m_convStates[std::size_t(layer)].data(), { s.kernel - 1, channels });
    }
    roundAct(y.data(), n * s.inner(), mode);
    gatedGroupRmsNorm(y.data(), proj.data(), width, weight(module + ".norm.weight"), n, s.inner(),
        s.groups, m_spec.normEps);
    roundAct(y.data(), n * s.inner(), m_plan.modeFor(OpKind::Norm, layer));
    taps.record(module + ".norm", y.data(), { n, s.inner() });
    linear(module + ".out_proj", y.data(), out, n, s.inner(), h, OpKind::Linear, layer, taps, true);
}

template <typename T>
void Forward<T>::nemotronHAttention(int layer, const std::string& module, const T* x, T* out,
    std::int64_t n, std::int64_t start, Taps<T>& taps)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t d = m_spec.headDim;
    const std::int64_t qDim = m_spec.numHeads * d;
    const std::int64_t kvDim = m_spec.numKvHeads * d;
    std::vector<T> q(std::size_t(n * qDim));
    std::vector<T> k(std::size_t(n * kvDim));
    std::vector<T> v(std::size_t(n * kvDim));
    linear(module + ".q_proj", x, q.data(), n, h, qDim, OpKind::Linear, layer, taps, true);
    linear(module + ".k_proj", x, k.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    linear(module + ".v_proj", x, v.data(), n, h, kvDim, OpKind::Linear, layer, taps, true);
    // No rotary embedding: the keys go to the cache as projected. In a batched step each
    // sequence's rows go to its own cache and attend over it.
    std::vector<T> context(std::size_t(n * qDim));
    const DecodeBatch<T>* batch = currentDecodeBatch<T>();
    const std::size_t sequences = batch != nullptr ? batch->seqs.size() : 1;
    std::int64_t row = 0;
    for (std::size_t i = 0; i < sequences; ++i) {
        Forward<T>& seq = batch != nullptr ? *batch->seqs[i] : *this;
        const std::int64_t at = batch != nullptr ? batch->starts[i] : start;
        const std::int64_t rows = batch != nullptr ? batch->count(i) : n;
        Cache& cache = seq.m_caches[std::size_t(layer)];
        std::copy_n(k.begin() + row * kvDim, rows * kvDim, cache.k.begin() + at * kvDim);
        std::copy_n(v.begin() + row * kvDim, rows * kvDim, cache.v.begin() + at * kvDim);
        seq.causalAttention(layer, q.data() + row * qDim, rows, at, m_spec.numHeads,
            m_spec.numKvHeads, d, d, m_attentionScale, context.data() + row * qDim);
        row += rows;
    }
    linear(module + ".o_proj", context.data(), out, n, qDim, h, OpKind::Linear, layer, taps, true);
}

template <typename T>
void Forward<T>::relu2Mlp(const std::string& module, const T* x, T* out, std::int64_t n,
    std::int64_t in, std::int64_t inter, int layer, Taps<T>& taps)
{
    const bool capture = module.find(".experts.") == std::string::npos;
    std::vector<T> u(std::size_t(n * inter));
    linear(module + ".up_proj", x, u.data(), n, in, inter, OpKind::Linear, layer, taps, capture);
    // ACT2FN["relu2"]: relu(x)².
    if constexpr (std::is_same_v<T, float>) {
        m_ops.hostOnly("relu2 activation");
    }
    for (T& v : u) {
        v = v > T(0) ? v * v : T(0);
    }
    roundAct(u.data(), n * inter, m_plan.modeFor(OpKind::Mlp, layer));
    linear(
        module + ".down_proj", u.data(), out, n, inter, in, OpKind::Linear, layer, taps, capture);
}

template <typename T>
void Forward<T>::nemotronHMoe(
    int layer, const std::string& module, const T* x, T* out, std::int64_t n, Taps<T>& taps)
{
    const auto& moe = *m_spec.moe;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t width = moe.latentSize > 0 ? moe.latentSize : h;
    const std::string router = module + ".gate";
    std::vector<T> logits(std::size_t(n * e));
    linear(router, x, logits.data(), n, h, e, OpKind::Router, layer, taps, false);
    taps.record(router, logits.data(), { n, e }, "router");
    const Routing routing = routeAndRecord(
        router, logits.data(), n, e, weight(router + ".e_score_correction_bias"), taps);
    // The experts' input: the latent projection of the block's input (Super), or the input.
    std::vector<T> latent;
    const T* input = x;
    if (moe.latentSize > 0) {
        latent.resize(std::size_t(n * width));
        linear(module + ".fc1_latent_proj", x, latent.data(), n, h, width, OpKind::Linear, layer,
            taps, true);
        input = latent.data();
    }
    std::vector<T> acc(std::size_t(n * width), T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        std::vector<std::int64_t> tokens;
        std::vector<double> weights;
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t j = 0; j < routing.k; ++j) {
                if (routing.experts[std::size_t(t * routing.k + j)] == ex) {
                    tokens.push_back(t);
                    weights.push_back(routing.weights[std::size_t(t * routing.k + j)]);
                }
            }
        }
        if (tokens.empty()) {
            continue;
        }
        const auto m = std::int64_t(tokens.size());
        std::vector<T> rows(std::size_t(m * width));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(input + tokens[std::size_t(i)] * width, width, rows.begin() + i * width);
        }
        std::vector<T> result(std::size_t(m * width));
        relu2Mlp(fmt::format("{}.experts.{}", module, ex), rows.data(), result.data(), m, width,
            moe.expertIntermediate, layer, taps);
        for (std::int64_t i = 0; i < m; ++i) {
            T* dst = acc.data() + tokens[std::size_t(i)] * width;
            const T w = T(weights[std::size_t(i)]);
            for (std::int64_t c = 0; c < width; ++c) {
                dst[c] += w * result[std::size_t(i * width + c)];
            }
        }
    }
    roundAct(acc.data(), n * width, m_plan.modeFor(OpKind::Moe, layer));
    if (moe.latentSize > 0) {
        linear(module + ".fc2_latent_proj", acc.data(), out, n, width, h, OpKind::Linear, layer,
            taps, true);
    } else {
        std::copy(acc.begin(), acc.end(), out);
    }
    std::vector<T> shared(std::size_t(n * h));
    relu2Mlp(
        module + ".shared_experts", x, shared.data(), n, h, moe.sharedIntermediate, layer, taps);
    taps.record(module + ".shared_experts", shared.data(), { n, h });
    addInPlace(out, shared.data(), n * h);
    roundAct(out, n * h, m_plan.modeFor(OpKind::Moe, layer));
}

template <typename T>
Result<std::vector<T>> Forward<T>::nemotronHStep(
    std::span<const std::int64_t> ids, std::int64_t start, Taps<T>& taps, std::stop_token stop)
{
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string& root = m_spec.layout.textPrefix;
    // In a batched step (batch_decode.h) the mixers take each sequence's rows on its own states
    // and cache; no layer reads positions (no rotary embedding).
    const DecodeBatch<T>* batch = currentDecodeBatch<T>();
    if (auto fits = checkStepCapacity(
            batch, start, n, m_capacity, [](const Forward<T>* f) { return f->m_capacity; });
        !fits) {
        return fits.error();
    }
    m_positions.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) {
        m_positions[std::size_t(i)] = start + i;
    }
    std::vector<T> hidden(std::size_t(n * h));
    {
        const profile::TraceScope traced(root + ".embeddings");
        const PrecisionMode mode = m_plan.modeFor(OpKind::Embedding, -1);
        const T* table = weight(root + ".embeddings.weight");
        if constexpr (std::is_same_v<T, float>) {
            DAY0_TRY(m_ops.embedding(ids, table, m_spec.vocabSize, h, hidden.data(), mode));
        } else {
            DAY0_TRY(embedding<T>(ids, table, m_spec.vocabSize, h, hidden.data()));
        }
    }
    taps.record(root + ".embeddings", hidden.data(), { n, h });
    std::vector<T> x(std::size_t(n * h));
    std::vector<T> branch(std::size_t(n * h));
    for (int l = 0; l < int(m_spec.numLayers); ++l) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        const std::string p = layerPrefix(m_spec, l);
        const std::string mixer = p + ".mixer";
        const profile::TraceScope tracedLayer(p, profile::Category::Annotation);
        taps.record(p + "#in0", hidden.data(), { n, h });
        const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
        rmsNormOp(p + ".norm", hidden.data(), x.data(), n, h, l);
        taps.record(p + ".norm", x.data(), { n, h });
        std::string_view op = "mlp";
        {
            const profile::TraceScope traced(mixer);
            if (layer.mixer == model::MixerKind::Mamba2) {
                mamba2Mixer(l, mixer, x.data(), branch.data(), n, taps);
                op = "mamba2";
            } else if (layer.mixer == model::MixerKind::Attention) {
                nemotronHAttention(l, mixer, x.data(), branch.data(), n, start, taps);
                op = "attention";
            } else if (layer.moe()) {
                nemotronHMoe(l, mixer, x.data(), branch.data(), n, taps);
                op = "moe";
            } else {
                relu2Mlp(mixer, x.data(), branch.data(), n, h, m_spec.ffnWidthOf(layer), l, taps);
            }
        }
        taps.record(mixer, branch.data(), { n, h }, op);
        addInPlace(hidden.data(), branch.data(), n * h);
        roundAct(hidden.data(), n * h, m_plan.modeFor(OpKind::DecoderLayer, l));
        taps.record(p, hidden.data(), { n, h });
        if (m_ops.error()) {
            return *m_ops.error();
        }
    }
    rmsNormOp(root + ".norm_f", hidden.data(), x.data(), n, h, -1);
    taps.record(root + ".norm_f", x.data(), { n, h });
    std::vector<T> logits(std::size_t(n * m_spec.vocabSize));
    const profile::TraceScope tracedHead("lm_head");
    linear("lm_head", x.data(), logits.data(), n, h, m_spec.vocabSize, OpKind::Logits, -1, taps,
        false);
    taps.record("lm_head", logits.data(), { n, m_spec.vocabSize });
    if (m_ops.error()) {
        return *m_ops.error();
    }
    return logits;
}

template Result<void> Forward<float>::nemotronHInit();
template Result<void> Forward<double>::nemotronHInit();
template Result<std::vector<float>> Forward<float>::nemotronHStep(
    std::span<const std::int64_t>, std::int64_t, Taps<float>&, std::stop_token);
template Result<std::vector<double>> Forward<double>::nemotronHStep(
    std::span<const std::int64_t>, std::int64_t, Taps<double>&, std::stop_token);

} // namespace day0::exec::detail
