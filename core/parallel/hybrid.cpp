// The sharded forward of the recurrent hybrids: Gated DeltaNet layers (Qwen3-Next, Qwen3.5),
// Kimi-Linear's Kimi Delta Attention layers, and Nemotron-H's Mamba-2 / attention / relu² MLP /
// MoE layers, over this rank's heads (the MoE's relu² experts and shared MLP run through moe.cpp's
// EP dispatch).
//
// Tensor parallelism follows vLLM: Qwen3NextGatedDeltaNet (vllm/model_executor/models/
// qwen3_next.py) splits the key and value heads over the TP ranks, its input projections
// column-parallel (in_proj_qkvz grouped per key head, so a contiguous slice holds whole
// groups), the depthwise conv1d by channel with them, A_log and dt_bias by value head, and
// out_proj row-parallel; the gated RMSNorm normalises one value head, so it stays local.
// MambaMixer2 (vllm/model_executor/layers/mamba/mamba_mixer2.py) splits the heads and the groups
// of B and C: in_proj's z, x, B, C and dt parts and conv1d's x, B and C channels each by TP rank,
// A, D and dt_bias by head, the gated norm over its groups (local when every rank holds whole
// groups: core/checkpoint's slicing refuses n_groups that TP does not divide), out_proj
// row-parallel. KimiDeltaAttention (vllm/model_executor/layers/kda.py) splits its heads: q, k and
// v projections and their short convs by channel, f_b_proj, g_b_proj, b_proj, dt_bias and A_log
// by head, with f_a_proj, g_a_proj and o_norm replicated and o_proj row-parallel
// (core/checkpoint's kdaSlice). Every rank keeps the conv windows and recurrent state of its own
// heads in the sequence's ShardCache, so a decode step continues from its own prefill.
//
// The kernels are the single-rank engine's (exec/gated_delta_net.h, exec/kimi_delta.h,
// exec/mamba2.h) called with the local head counts, with the same chunked-prefill /
// recurrent-decode choice, so a sharded run sums the same terms as one rank, up to the order of
// the reductions.
#include "exec/gated_delta_net.h"
#include "exec/gated_head_norm.h"
#include "exec/kimi_delta.h"
#include "exec/mamba2.h"
#include "parallel/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::parallel::detail {

// The names are the single-rank engine's (exec::detail::requiredWeights): "model." for every
// family but Nemotron-H, whose tensors keep their checkpoint prefix ("backbone.").
std::string ParallelForward::layerPrefix(int layer) const
{
    if (m_spec.family == model::Family::DeepseekV4) {
        return fmt::format("layers.{}", layer); // DeepSeek's native names
    }
    return m_spec.family == model::Family::NemotronH
        ? fmt::format("{}.layers.{}", m_spec.layout.textPrefix, layer)
        : fmt::format("model.layers.{}", layer);
}

std::string ParallelForward::attentionModule(int layer) const
{
    return layerPrefix(layer)
        + (m_spec.family == model::Family::NemotronH ? ".mixer" : ".self_attn");
}

std::string ParallelForward::embedName() const
{
    if (m_spec.family == model::Family::DeepseekV4) {
        return "embed.weight";
    }
    return m_spec.family == model::Family::NemotronH
        ? m_spec.layout.textPrefix + ".embeddings.weight"
        : std::string("model.embed_tokens.weight");
}

std::string ParallelForward::finalNormName() const
{
    if (m_spec.family == model::Family::DeepseekV4) {
        return "norm.weight";
    }
    return m_spec.family == model::Family::NemotronH ? m_spec.layout.textPrefix + ".norm_f.weight"
                                                     : std::string("model.norm.weight");
}

Result<void> ParallelForward::gatedDeltaNet(
    int layer, ShardCache& cache, const float* x, float* out, std::int64_t n)
{
    const auto& la = *m_spec.linearAttention;
    const std::string p = layerPrefix(layer) + ".linear_attn";
    const int tp = m_layout.tp;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t nk = la.keyHeads / tp; // local key heads
    const std::int64_t nv = la.valueHeads / tp; // local value heads
    const std::int64_t dk = la.keyHeadDim;
    const std::int64_t dv = la.valueHeadDim;
    const std::int64_t r = la.valueHeads / la.keyHeads;
    const std::int64_t keyDim = nk * dk;
    const std::int64_t valueDim = nv * dv;
    const std::int64_t convDim = 2 * keyDim + valueDim;
    // As the single-rank engine reports it: the projections run on the backend, the rest has no
    // Backend operator.
    m_ops.hostOnly("Gated DeltaNet conv1d, delta rule and gated norm");
    std::vector<float> mixed(std::size_t(n * convDim));
    std::vector<float> z(std::size_t(n * valueDim));
    std::vector<float> b(std::size_t(n * nv));
    std::vector<float> a(std::size_t(n * nv));
    if (m_spec.family == model::Family::Qwen3Next) {
        // The local rows hold whole key-head groups (q, k, the group's v, its z; then b, a).
        const std::int64_t group = 2 * dk + 2 * r * dv;
        std::vector<float> qkvz(std::size_t(n * nk * group));
        std::vector<float> ba(std::size_t(n * 2 * nv));
        DAY0_TRY(linearOp(p + ".in_proj_qkvz", x, qkvz.data(), n, h, nk * group));
        DAY0_TRY(linearOp(p + ".in_proj_ba", x, ba.data(), n, h, 2 * nv));
        for (std::int64_t t = 0; t < n; ++t) {
            float* row = mixed.data() + t * convDim;
            for (std::int64_t kh = 0; kh < nk; ++kh) {
                const float* src = qkvz.data() + (t * nk + kh) * group;
                std::copy_n(src, dk, row + kh * dk);
                std::copy_n(src + dk, dk, row + keyDim + kh * dk);
                std::copy_n(src + 2 * dk, r * dv, row + 2 * keyDim + kh * r * dv);
                std::copy_n(src + 2 * dk + r * dv, r * dv, z.data() + t * valueDim + kh * r * dv);
                const float* bsrc = ba.data() + t * 2 * nv + kh * 2 * r;
                std::copy_n(bsrc, r, b.data() + t * nv + kh * r);
                std::copy_n(bsrc + r, r, a.data() + t * nv + kh * r);
            }
        }
    } else {
        // in_proj_qkv's local rows are this rank's q | k | v parts (core/checkpoint's slice).
        DAY0_TRY(linearOp(p + ".in_proj_qkv", x, mixed.data(), n, h, convDim));
        DAY0_TRY(linearOp(p + ".in_proj_z", x, z.data(), n, h, valueDim));
        DAY0_TRY(linearOp(p + ".in_proj_b", x, b.data(), n, h, nv));
        DAY0_TRY(linearOp(p + ".in_proj_a", x, a.data(), n, h, nv));
    }
    auto& window = cache.window[std::size_t(layer)];
    auto& state = cache.state[std::size_t(layer)];
    if (std::int64_t(window.size()) != (la.convKernel - 1) * convDim
        || std::int64_t(state.size()) != nv * dk * dv) {
        return Error::internal(
            fmt::format("rank {}: layer {} holds no Gated DeltaNet state", m_coord.rank, layer));
    }
    std::vector<float> conv(std::size_t(n * convDim));
    exec::causalConv1dSilu(mixed.data(), conv.data(), n, convDim, weight(p + ".conv1d.weight"),
        la.convKernel, window.data());
    std::vector<float> qk(std::size_t(n * 2 * keyDim));
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(conv.data() + t * convDim, 2 * keyDim, qk.data() + t * 2 * keyDim);
    }
    exec::l2NormalizeRows(qk.data(), n * 2 * nk, dk, 1e-6);
    // Local value head j reads local key head j / r: both are sliced contiguously.
    std::vector<float> q(std::size_t(n * nv * dk));
    std::vector<float> k(std::size_t(n * nv * dk));
    std::vector<float> v(std::size_t(n * valueDim));
    const auto scale = float(1.0 / std::sqrt(double(dk)));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < nv; ++j) {
            const float* qs = qk.data() + t * 2 * keyDim + (j / r) * dk;
            const float* ks = qs + keyDim;
            float* qd = q.data() + (t * nv + j) * dk;
            for (std::int64_t i = 0; i < dk; ++i) {
                qd[i] = qs[i] * scale;
            }
            std::copy_n(ks, dk, k.data() + (t * nv + j) * dk);
        }
        std::copy_n(conv.data() + t * convDim + 2 * keyDim, valueDim, v.data() + t * valueDim);
    }
    const float* aLog = weight(p + ".A_log");
    const float* dtBias = weight(p + ".dt_bias");
    std::vector<float> g(std::size_t(n * nv));
    std::vector<float> beta(std::size_t(n * nv));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < nv; ++j) {
            const auto i = std::size_t(t * nv + j);
            beta[i] = exec::sigmoid(b[i]);
            g[i] = -std::exp(aLog[j]) * exec::softplus(a[i] + dtBias[j]);
        }
    }
    std::vector<float> core(std::size_t(n * valueDim));
    const exec::DeltaRuleShape shape { n, nv, dk, dv };
    // As the single-rank engine: the chunked form over a prefill, the recurrence per decode token.
    if (n == 1) {
        exec::gatedDeltaRecurrent(
            q.data(), k.data(), v.data(), g.data(), beta.data(), state.data(), core.data(), shape);
    } else {
        exec::gatedDeltaChunked(q.data(), k.data(), v.data(), g.data(), beta.data(), state.data(),
            core.data(), shape, exec::kDeltaRuleChunk);
    }
    // The gated RMSNorm over each (local) value head: norm(o) · w · silu(z).
    exec::detail::gatedHeadNorm(core.data(), z.data(), weight(p + ".norm.weight"), n * nv, dv,
        m_spec.normEps, exec::detail::HeadGate::Silu, [](float*, std::int64_t) {});
    return linearOp(p + ".out_proj", core.data(), out, n, valueDim, h, true);
}

Result<void> ParallelForward::kimiDelta(
    int layer, ShardCache& cache, const float* x, float* out, std::int64_t n)
{
    const auto& la = *m_spec.linearAttention;
    const std::string p = layerPrefix(layer) + ".self_attn";
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t heads = la.valueHeads / m_layout.tp; // local heads
    const std::int64_t d = la.valueHeadDim;
    const std::int64_t width = heads * d;
    const std::int64_t windowSize = (la.convKernel - 1) * width;
    m_ops.hostOnly("KDA short convolutions, gate, delta rule and gated o_norm");
    auto& window = cache.window[std::size_t(layer)];
    auto& state = cache.state[std::size_t(layer)];
    if (std::int64_t(window.size()) != 3 * windowSize
        || std::int64_t(state.size()) != heads * d * d) {
        return Error::internal(
            fmt::format("rank {}: layer {} holds no KDA state", m_coord.rank, layer));
    }
    // q, k, v: the local heads' channels, each through its own conv window and SiLU.
    std::vector<float> qkv[3];
    std::vector<float> projected(std::size_t(n * width));
    const char* names[3] = { "q", "k", "v" };
    for (int i = 0; i < 3; ++i) {
        DAY0_TRY(
            linearOp(fmt::format("{}.{}_proj", p, names[i]), x, projected.data(), n, h, width));
        qkv[i].resize(projected.size());
        exec::causalConv1dSilu(projected.data(), qkv[i].data(), n, width,
            weight(fmt::format("{}.{}_conv1d.weight", p, names[i])), la.convKernel,
            window.data() + i * windowSize);
    }
    exec::l2NormalizeRows(qkv[0].data(), n * heads, d, 1e-6);
    exec::l2NormalizeRows(qkv[1].data(), n * heads, d, 1e-6);
    const auto scale = float(1.0 / std::sqrt(double(d)));
    for (float& value : qkv[0]) {
        value *= scale;
    }
    // The decay per channel: f_a_proj is replicated (every rank computes the whole low-rank
    // row), f_b_proj and dt_bias hold the local channels, A_log the local heads.
    std::vector<float> low(std::size_t(n * d));
    std::vector<float> g(std::size_t(n * width));
    DAY0_TRY(linearOp(p + ".f_a_proj", x, low.data(), n, h, d));
    DAY0_TRY(linearOp(p + ".f_b_proj", low.data(), g.data(), n, d, width));
    const float* aLog = weight(p + ".A_log");
    const float* dtBias = weight(p + ".dt_bias");
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < width; ++c) {
            float& gc = g[std::size_t(t * width + c)];
            const float rate = std::exp(aLog[c / d]);
            gc = la.gateLowerBound != 0.0
                ? float(la.gateLowerBound) * exec::sigmoid(rate * (gc + dtBias[c]))
                : -rate * exec::softplus(gc + dtBias[c]);
        }
    }
    std::vector<float> beta(std::size_t(n * heads));
    DAY0_TRY(linearOp(p + ".b_proj", x, beta.data(), n, h, heads));
    for (float& b : beta) {
        b = exec::sigmoid(b);
    }
    std::vector<float> core(std::size_t(n * width));
    const exec::DeltaRuleShape shape { n, heads, d, d };
    // As the single-rank engine: the chunked form over a prefill, the recurrence per decode token.
    if (n == 1) {
        exec::kimiDeltaRecurrent(qkv[0].data(), qkv[1].data(), qkv[2].data(), g.data(), beta.data(),
            state.data(), core.data(), shape);
    } else {
        exec::kimiDeltaChunked(qkv[0].data(), qkv[1].data(), qkv[2].data(), g.data(), beta.data(),
            state.data(), core.data(), shape, exec::kDeltaRuleChunk);
    }
    // o_norm over each local head, gated by σ of the output gate's local channels.
    std::vector<float> gate(std::size_t(n * width));
    if (la.fullRankGate) {
        DAY0_TRY(linearOp(p + ".g_proj", x, gate.data(), n, h, width));
    } else {
        DAY0_TRY(linearOp(p + ".g_a_proj", x, low.data(), n, h, d));
        DAY0_TRY(linearOp(p + ".g_b_proj", low.data(), gate.data(), n, d, width));
    }
    exec::detail::gatedHeadNorm(core.data(), gate.data(), weight(p + ".o_norm.weight"), n * heads,
        d, m_spec.normEps, exec::detail::HeadGate::Sigmoid, [](float*, std::int64_t) {});
    return linearOp(p + ".o_proj", core.data(), out, n, width, h, true);
}

Result<void> ParallelForward::mamba2(
    int layer, ShardCache& cache, const float* x, float* out, std::int64_t n)
{
    const auto& m = *m_spec.mamba;
    const int tp = m_layout.tp;
    const std::string module = attentionModule(layer);
    // This rank's heads and groups; HF's NemotronHConfig defaults chunk_size to 128.
    const exec::Mamba2Shape s { m.numHeads / tp, m.headDim, m.stateSize, m.numGroups / tp,
        m.convKernel, m.chunkSize > 0 ? m.chunkSize : 128 };
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t channels = s.convChannels();
    const std::int64_t width = s.inner() + channels + s.heads; // local z ‖ xBC ‖ dt
    m_ops.hostOnly("Mamba-2 conv1d, SSD scan and gated norm");
    auto& window = cache.window[std::size_t(layer)];
    auto& state = cache.state[std::size_t(layer)];
    if (std::int64_t(window.size()) != (s.kernel - 1) * channels
        || std::int64_t(state.size()) != s.heads * s.headDim * s.state) {
        return Error::internal(
            fmt::format("rank {}: layer {} holds no Mamba-2 state", m_coord.rank, layer));
    }
    std::vector<float> proj(std::size_t(n * width));
    DAY0_TRY(linearOp(module + ".in_proj", x, proj.data(), n, h, width));
    std::vector<float> xbc(std::size_t(n * channels));
    std::vector<float> dt(std::size_t(n * s.heads));
    for (std::int64_t t = 0; t < n; ++t) {
        const float* row = proj.data() + t * width;
        std::copy_n(row + s.inner(), channels, xbc.begin() + t * channels);
        std::copy_n(row + s.inner() + channels, s.heads, dt.begin() + t * s.heads);
    }
    exec::mamba2Conv(xbc.data(), n, channels, s.kernel, weight(module + ".conv1d.weight"),
        weight(module + ".conv1d.bias"), window.data());
    exec::mamba2Dt(dt.data(), n, s.heads, weight(module + ".dt_bias"));
    std::vector<float> y(std::size_t(n * s.inner()));
    exec::mamba2Scan(xbc.data(), dt.data(), weight(module + ".A_log"), weight(module + ".D"),
        state.data(), y.data(), n, s, n > 1);
    exec::gatedGroupRmsNorm(y.data(), proj.data(), width, weight(module + ".norm.weight"), n,
        s.inner(), s.groups, m_spec.normEps);
    return linearOp(module + ".out_proj", y.data(), out, n, s.inner(), h, true);
}

Result<void> ParallelForward::relu2Partial(const std::string& module, const float* x, float* out,
    std::int64_t n, std::int64_t inter, std::int64_t width)
{
    const std::int64_t h = width > 0 ? width : m_spec.hiddenSize;
    std::vector<float> u(std::size_t(n * inter));
    DAY0_TRY(linearOp(module + ".up_proj", x, u.data(), n, h, inter));
    m_ops.hostOnly("relu2 activation");
    for (float& v : u) {
        v = v > 0.0F ? v * v : 0.0F; // ACT2FN["relu2"]
    }
    return linearOp(module + ".down_proj", u.data(), out, n, inter, h, true);
}

Result<void> ParallelForward::nemotronHLayer(
    int layer, ShardCache& cache, std::vector<float>& hidden, std::int64_t n)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t rows = localRows(n);
    const std::string prefix = layerPrefix(layer);
    const std::string mixer = prefix + ".mixer";
    const model::LayerSpec& spec = m_spec.layers[std::size_t(layer)];
    std::vector<float> x(hidden.size());
    m_ops.rmsNorm(hidden.data(), weight(prefix + ".norm.weight"), x.data(), rows, h, m_spec.normEps,
        exec::PrecisionMode::F32);
    std::vector<float> gathered;
    auto in = allTokens(x, n, gathered);
    if (!in) {
        return in.error();
    }
    std::vector<float> partial(std::size_t(n * h));
    std::string biasModule;
    if (spec.mixer == model::MixerKind::Mamba2) {
        DAY0_TRY(mamba2(layer, cache, *in, partial.data(), n));
        biasModule = mixer + ".out_proj";
    } else if (spec.mixer == model::MixerKind::Attention) {
        DAY0_TRY(attention(layer, *in, partial.data(), n));
        biasModule = mixer + ".o_proj";
    } else if (spec.mixer == model::MixerKind::None && spec.ffn == model::FfnKind::Dense) {
        const std::int64_t inter = m_spec.ffnWidthOf(spec);
        if (inter % m_layout.tp != 0) {
            return Error::badInput(
                fmt::format("--plan: tp={} does not divide the {} MLP lanes of layer {}",
                    m_layout.tp, inter, layer));
        }
        DAY0_TRY(relu2Partial(mixer, *in, partial.data(), n, inter / m_layout.tp));
        biasModule = mixer + ".down_proj";
    } else if (spec.moe() && m_spec.moe) {
        // NemotronHMoE: routed relu² experts over the EP group (in the latent space when
        // moe_latent_size is set), the shared MLP TP-sliced (moe.cpp); the routed output lives
        // on each token's owning TP rank until the reduction.
        DAY0_TRY(moe(layer, *in, partial.data(), n));
    } else {
        return Error::unsupported(fmt::format(
            "sharded runs of layer {} of {} (no mixer and no MLP)", layer, m_spec.modelType));
    }
    std::vector<float> branch;
    DAY0_TRY(finishRowParallel(partial, n, biasModule, branch));
    exec::addInPlace(hidden.data(), branch.data(), rows * h);
    return backendStatus();
}

} // namespace day0::parallel::detail
