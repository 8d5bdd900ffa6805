// The gradient pass's Nemotron-H layers (gradient_pass.h), the forward of nemotron_h_block.cpp
// keeping what the backward reads, and its backward in reverse. Each layer is one block,
// hidden + mixer(norm(hidden)), its mixer one of:
// - Mamba-2: in_proj → z ‖ xBC ‖ dt; the causal depthwise conv1d over xBC with its bias, SiLU;
//   dt = softplus(dt + dt_bias) (the config reader admits only the kernels' dt_limit (0, inf),
//   which softplus never leaves: no clamp); A = −exp(A_log); the SSD scan per head with the B
//   and C of its group and the D skip (the forward chunked as the engine's prefill, the
//   backward through the recurrence, backward_mamba2.h); the gated group RMSNorm
//   rms_g(y · SiLU(z)) · w; out_proj;
// - attention without RoPE (attentionForward/attentionBackward under the mixer's name, scaled by
//   head_dim^-½);
// - the ungated MLP down(relu(up(x))²);
// - Nemotron-3's MoE: the sigmoid router (fp32 in the engine) choosing by the scores plus
//   e_score_correction_bias, weighting by the unbiased scores renormalised and times
//   routed_scaling_factor (routerLogitsBackward), relu2 experts that with moe_latent_size work
//   between fc1_latent_proj and fc2_latent_proj, and the shared relu2 expert on the block's
//   input.
// The embedding (backbone.embeddings), the final norm (backbone.norm_f) and the head are
// backward.cpp's.
#include "exec/backward_mamba2.h"
#include "exec/backward_ops.h"
#include "exec/gradient_pass.h"
#include "exec/mamba2.h"
#include "exec/ops.h"

namespace day0::exec::detail {

namespace {

std::string blockPrefix(const model::ModelSpec& spec, int l)
{
    return fmt::format("{}.layers.{}", spec.layout.textPrefix, l);
}

Mamba2Shape shapeOf(const model::MambaSpec& m)
{
    // As the engine's (nemotron_h_block.cpp); the scan's result does not depend on the chunk.
    return { m.numHeads, m.headDim, m.stateSize, m.numGroups, m.convKernel,
        m.chunkSize > 0 ? m.chunkSize : 128 };
}

} // namespace

template <typename T> Result<void> GradientPass<T>::nemotronHInit()
{
    m_scale = 1.0 / std::sqrt(double(m_spec.headDim)); // NemotronHAttention: no RoPE
    if (m_spec.moe) {
        m_router = routerConfig(*m_spec.moe);
    }
    return success();
}

template <typename T>
Result<void> GradientPass<T>::nemotronHLayerForward(int l, std::vector<T>& hidden)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = blockPrefix(m_spec, l);
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    LayerActivations<T>& a = m_layers[std::size_t(l)];
    a.in = hidden;
    a.xn1.resize(hidden.size());
    norm(a.in.data(), m_p.value(p + ".norm.weight"), a.xn1.data(), n, h);
    std::vector<T> branch(hidden.size());
    if (layer.mixer == model::MixerKind::Mamba2) {
        mamba2Forward(l, a, branch.data());
    } else if (layer.mixer == model::MixerKind::Attention) {
        attentionForward(l, a, branch.data());
    } else if (layer.moe()) {
        nemotronHMoeForward(l, a, branch.data());
    } else {
        relu2Forward(
            p + ".mixer", a.xn1.data(), n, h, m_spec.ffnWidthOf(layer), a.u, a.act, branch.data());
    }
    round(branch);
    addInPlace(hidden.data(), branch.data(), n * h);
    round(hidden);
    return success();
}

template <typename T>
Result<void> GradientPass<T>::nemotronHLayerBackward(int l, std::vector<T>& dh)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string p = blockPrefix(m_spec, l);
    const model::LayerSpec& layer = m_spec.layers[std::size_t(l)];
    const LayerActivations<T>& a = m_layers[std::size_t(l)];
    DAY0_TRY(m_acts.recordAndInject(p, dh.data(), { n, h }));
    const bool rounded = m_rounded.contains(l);
    const auto boundary = [&](std::vector<T>& g) {
        if (rounded) {
            roundTo(g);
        } else {
            round(g);
        }
    };
    // hidden = in + mixer(norm(in)): the mixer's output gradient is dh itself.
    m_acts.record(p + ".mixer", dh.data(), { n, h });
    std::vector<T> dxn1(dh.size(), T(0));
    if (layer.mixer == model::MixerKind::Mamba2) {
        mamba2Backward(l, a, dh.data(), dxn1.data());
    } else if (layer.mixer == model::MixerKind::Attention) {
        attentionBackward(l, a, dh.data(), dxn1.data());
    } else if (layer.moe()) {
        nemotronHMoeBackward(l, a, dh.data(), dxn1.data());
    } else {
        relu2Backward(p + ".mixer", a.xn1.data(), n, h, m_spec.ffnWidthOf(layer), a.u, a.act,
            dh.data(), dxn1.data());
    }
    boundary(dxn1);
    m_acts.record(p + ".norm", dxn1.data(), { n, h });
    const std::string w = p + ".norm.weight";
    rmsNormBackward<T>(
        a.in.data(), m_p.value(w), dxn1.data(), dh.data(), m_p.grad(w), n, h, m_spec.normEps);
    boundary(dh);
    return success();
}

template <typename T> void GradientPass<T>::mamba2Forward(int l, LayerActivations<T>& a, T* out)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string m = blockPrefix(m_spec, l) + ".mixer";
    const Mamba2Shape s = shapeOf(*m_spec.mamba);
    const std::int64_t channels = s.convChannels();
    const std::int64_t width = s.inner() + channels + s.heads; // z ‖ xBC ‖ dt
    a.proj.resize(std::size_t(n * width));
    project(a.xn1.data(), m_p.value(m + ".in_proj.weight"), m_p.value(m + ".in_proj.bias"),
        a.proj.data(), n, h, width);
    a.conv.resize(std::size_t(n * channels));
    a.dt.resize(std::size_t(n * s.heads));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = a.proj.data() + t * width;
        std::copy_n(row + s.inner(), channels, a.conv.begin() + t * channels);
        std::copy_n(row + s.inner() + channels, s.heads, a.dt.begin() + t * s.heads);
    }
    a.convPre = a.conv;
    // conv1d.weight [channels, 1, kernel] is [channels, kernel] row-major; the states start at
    // zero (the prompt is the whole sequence).
    const T* convW = m_p.value(m + ".conv1d.weight");
    const T* convB = m_p.value(m + ".conv1d.bias");
    std::vector<T> window(std::size_t((s.kernel - 1) * channels), T(0));
    mamba2Conv(a.conv.data(), n, channels, s.kernel, convW, convB, window.data());
    std::fill(window.begin(), window.end(), T(0));
    mamba2ConvPreActivation(a.convPre.data(), n, channels, s.kernel, convW, convB, window.data());
    round(a.conv); // emulated: the engine rounds the conv's output, the scan's and the norm's
    mamba2Dt(a.dt.data(), n, s.heads, m_p.value(m + ".dt_bias"));
    std::vector<T> ssm(std::size_t(s.heads * s.headDim * s.state), T(0));
    a.ssd.resize(std::size_t(n * s.inner()));
    // As the engine's prefill: the chunked form over more than one token.
    mamba2Scan(a.conv.data(), a.dt.data(), m_p.value(m + ".A_log"), m_p.value(m + ".D"), ssm.data(),
        a.ssd.data(), n, s, n > 1);
    round(a.ssd);
    a.gatedOut = a.ssd;
    gatedGroupRmsNorm(a.gatedOut.data(), a.proj.data(), width, m_p.value(m + ".norm.weight"), n,
        s.inner(), s.groups, m_spec.normEps);
    round(a.gatedOut);
    project(a.gatedOut.data(), m_p.value(m + ".out_proj.weight"), m_p.value(m + ".out_proj.bias"),
        out, n, s.inner(), h);
}

template <typename T>
void GradientPass<T>::mamba2Backward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::string m = blockPrefix(m_spec, l) + ".mixer";
    const Mamba2Shape s = shapeOf(*m_spec.mamba);
    const std::int64_t channels = s.convChannels();
    const std::int64_t width = s.inner() + channels + s.heads;
    std::vector<T> dnorm(a.gatedOut.size());
    linearBackward<T>(a.gatedOut.data(), m_p.value(m + ".out_proj.weight"), dout, dnorm.data(),
        m_p.grad(m + ".out_proj.weight"), m_p.grad(m + ".out_proj.bias"), n, s.inner(), h, false);
    round(dnorm);
    m_acts.record(m + ".norm", dnorm.data(), { n, s.inner() });
    // dproj gathers z's gradient (the gate), xBC's (through the conv) and dt's.
    std::vector<T> dproj(a.proj.size(), T(0));
    std::vector<T> dssd(a.ssd.size(), T(0));
    gatedGroupRmsNormBackward<T>(a.ssd.data(), a.proj.data(), width, m_p.value(m + ".norm.weight"),
        dnorm.data(), dssd.data(), dproj.data(), m_p.grad(m + ".norm.weight"), n, s.inner(),
        s.groups, m_spec.normEps);
    // Emulated: the gradients of the rounded scan output and (below) of the rounded conv output
    // and of in_proj's output, each in the model's dtype; dt stays fp32 (softplus's output is
    // not rounded in the forward).
    round(dssd);
    std::vector<T> dconv(a.conv.size(), T(0));
    std::vector<T> ddt(a.dt.size(), T(0));
    mamba2ScanBackward<T>(a.conv.data(), a.dt.data(), m_p.value(m + ".A_log"), m_p.value(m + ".D"),
        dssd.data(), dconv.data(), ddt.data(), m_p.grad(m + ".A_log"), m_p.grad(m + ".D"), n, s);
    round(dconv);
    const std::int64_t dtAt = s.inner() + channels;
    mamba2DtBackward<T>(a.proj.data() + dtAt, width, m_p.value(m + ".dt_bias"), ddt.data(),
        dproj.data() + dtAt, m_p.grad(m + ".dt_bias"), n, s.heads);
    std::vector<T> xbcIn(a.conv.size());
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(a.proj.begin() + t * width + s.inner(), channels, xbcIn.begin() + t * channels);
    }
    std::vector<T> dxbcIn(xbcIn.size(), T(0));
    mamba2ConvBackward<T>(xbcIn.data(), a.convPre.data(), m_p.value(m + ".conv1d.weight"),
        dconv.data(), dxbcIn.data(), m_p.grad(m + ".conv1d.weight"), m_p.grad(m + ".conv1d.bias"),
        n, channels, s.kernel);
    for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(dxbcIn.begin() + t * channels, channels, dproj.begin() + t * width + s.inner());
    }
    round(dproj);
    linearBackward<T>(a.xn1.data(), m_p.value(m + ".in_proj.weight"), dproj.data(), dxn1,
        m_p.grad(m + ".in_proj.weight"), m_p.grad(m + ".in_proj.bias"), n, h, width, true);
}

template <typename T>
void GradientPass<T>::relu2Forward(const std::string& module, const T* x, std::int64_t rows,
    std::int64_t in, std::int64_t inter, std::vector<T>& u, std::vector<T>& act, T* out)
{
    u.resize(std::size_t(rows * inter));
    project(x, m_p.value(module + ".up_proj.weight"), m_p.value(module + ".up_proj.bias"), u.data(),
        rows, in, inter);
    act.resize(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) {
        act[i] = u[i] > T(0) ? u[i] * u[i] : T(0); // ACT2FN["relu2"]
    }
    round(act);
    project(act.data(), m_p.value(module + ".down_proj.weight"),
        m_p.value(module + ".down_proj.bias"), out, rows, inter, in);
}

template <typename T>
void GradientPass<T>::relu2Backward(const std::string& module, const T* x, std::int64_t rows,
    std::int64_t in, std::int64_t inter, const std::vector<T>& u, const std::vector<T>& act,
    const T* dout, T* dx)
{
    std::vector<T> du(act.size());
    linearBackward<T>(act.data(), m_p.value(module + ".down_proj.weight"), dout, du.data(),
        m_p.grad(module + ".down_proj.weight"), m_p.grad(module + ".down_proj.bias"), rows, inter,
        in, false);
    round(du); // the gradient of the rounded relu(u)²
    for (std::size_t i = 0; i < du.size(); ++i) {
        du[i] = u[i] > T(0) ? du[i] * T(2) * u[i] : T(0); // d relu(u)² = 2·relu(u)
    }
    round(du);
    linearBackward<T>(x, m_p.value(module + ".up_proj.weight"), du.data(), dx,
        m_p.grad(module + ".up_proj.weight"), m_p.grad(module + ".up_proj.bias"), rows, in, inter,
        true);
}

template <typename T>
void GradientPass<T>::nemotronHMoeForward(int l, LayerActivations<T>& a, T* out)
{
    const std::string m = blockPrefix(m_spec, l) + ".mixer";
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const bool latent = moe.latentSize > 0;
    const std::int64_t width = latent ? moe.latentSize : h;
    // The sigmoid router in the compute type (fp32 in the engine), routed in double as the
    // engine routes: chosen by σ(logit) + e_score_correction_bias, weighted by σ(logit).
    std::vector<T> logits(std::size_t(n * e));
    linear<T>(a.xn1.data(), m_p.value(m + ".gate.weight"), nullptr, logits.data(), n, h, e);
    const std::vector<double> wide(logits.begin(), logits.end());
    const T* b = m_p.value(m + ".gate.e_score_correction_bias");
    const std::vector<double> bias(b, b + e);
    a.routing = routeAndKeep(m + ".gate", wide, n, bias.data());
    a.scores = selectionScores(wide.data(), n, m_router, nullptr);
    const T* input = a.xn1.data();
    if (latent) {
        a.latentIn.resize(std::size_t(n * width));
        project(a.xn1.data(), m_p.value(m + ".fc1_latent_proj.weight"),
            m_p.value(m + ".fc1_latent_proj.bias"), a.latentIn.data(), n, h, width);
        input = a.latentIn.data();
    }
    a.groupByExpert(n, e);
    std::vector<T> acc(std::size_t(n * width), T(0));
    for (std::int64_t ex = 0; ex < e; ++ex) {
        auto& x = a.experts[std::size_t(ex)];
        const auto rows = std::int64_t(x.token.size());
        if (rows == 0) {
            continue;
        }
        x.x.resize(std::size_t(rows * width));
        for (std::int64_t i = 0; i < rows; ++i) {
            std::copy_n(input + x.token[std::size_t(i)] * width, width, x.x.begin() + i * width);
        }
        x.y.resize(std::size_t(rows * width));
        relu2Forward(fmt::format("{}.experts.{}", m, ex), x.x.data(), rows, width,
            moe.expertIntermediate, x.u, x.act, x.y.data());
        for (std::int64_t i = 0; i < rows; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const T w = T(a.routing.weights[std::size_t(t * a.routing.k + x.slot[std::size_t(i)])]);
            for (std::int64_t c = 0; c < width; ++c) {
                acc[std::size_t(t * width + c)] += w * x.y[std::size_t(i * width + c)];
            }
        }
    }
    round(acc);
    if (latent) {
        a.latentSum = std::move(acc);
        project(a.latentSum.data(), m_p.value(m + ".fc2_latent_proj.weight"),
            m_p.value(m + ".fc2_latent_proj.bias"), out, n, width, h);
    } else {
        std::copy(acc.begin(), acc.end(), out);
    }
    std::vector<T> shared(std::size_t(n * h));
    relu2Forward(m + ".shared_experts", a.xn1.data(), n, h, moe.sharedIntermediate, a.sharedU,
        a.sharedAct, shared.data());
    addInPlace(out, shared.data(), n * h);
}

template <typename T>
void GradientPass<T>::nemotronHMoeBackward(
    int l, const LayerActivations<T>& a, const T* dout, T* dxn1)
{
    const std::string m = blockPrefix(m_spec, l) + ".mixer";
    const auto& moe = *m_spec.moe;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = a.routing.k;
    const bool latent = moe.latentSize > 0;
    const std::int64_t width = latent ? moe.latentSize : h;
    m_acts.record(m + ".shared_experts", dout, { n, h });
    relu2Backward(m + ".shared_experts", a.xn1.data(), n, h, moe.sharedIntermediate, a.sharedU,
        a.sharedAct, dout, dxn1);
    // The experts' combined output's gradient: through fc2_latent_proj, or the block's own.
    std::vector<T> dacc(dout, dout + n * h);
    if (latent) {
        dacc.assign(std::size_t(n * width), T(0));
        linearBackward<T>(a.latentSum.data(), m_p.value(m + ".fc2_latent_proj.weight"), dout,
            dacc.data(), m_p.grad(m + ".fc2_latent_proj.weight"),
            m_p.grad(m + ".fc2_latent_proj.bias"), n, width, h, false);
        round(dacc);
    }
    std::vector<T> dinput(std::size_t(n * width), T(0));
    std::vector<double> dweight(std::size_t(n * k), 0.0);
    for (std::int64_t ex = 0; ex < e; ++ex) {
        const auto& x = a.experts[std::size_t(ex)];
        const auto rows = std::int64_t(x.token.size());
        if (rows == 0) {
            continue; // its gradients stay zero
        }
        std::vector<T> dy(std::size_t(rows * width));
        for (std::int64_t i = 0; i < rows; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            const std::size_t choice = std::size_t(t * k + x.slot[std::size_t(i)]);
            const T w = T(a.routing.weights[choice]);
            double dot = 0.0;
            for (std::int64_t c = 0; c < width; ++c) {
                dy[std::size_t(i * width + c)] = w * dacc[std::size_t(t * width + c)];
                dot += double(dacc[std::size_t(t * width + c)])
                    * double(x.y[std::size_t(i * width + c)]);
            }
            dweight[choice] = dot;
        }
        round(dy);
        std::vector<T> dx(std::size_t(rows * width), T(0));
        relu2Backward(fmt::format("{}.experts.{}", m, ex), x.x.data(), rows, width,
            moe.expertIntermediate, x.u, x.act, dy.data(), dx.data());
        for (std::int64_t i = 0; i < rows; ++i) {
            const std::int64_t t = x.token[std::size_t(i)];
            for (std::int64_t c = 0; c < width; ++c) {
                dinput[std::size_t(t * width + c)] += dx[std::size_t(i * width + c)];
            }
        }
    }
    if (latent) {
        linearBackward<T>(a.xn1.data(), m_p.value(m + ".fc1_latent_proj.weight"), dinput.data(),
            dxn1, m_p.grad(m + ".fc1_latent_proj.weight"), m_p.grad(m + ".fc1_latent_proj.bias"), n,
            h, width, true);
    } else {
        addInPlace(dxn1, dinput.data(), n * h);
    }
    const std::vector<T> dlogits = routerLogitsBackward(a, dweight, n, true);
    m_acts.record(m + ".gate", dlogits.data(), { n, e });
    linearBackward<T>(a.xn1.data(), m_p.value(m + ".gate.weight"), dlogits.data(), dxn1,
        m_p.grad(m + ".gate.weight"), nullptr, n, h, e, true);
}

#define DAY0_GRADIENT_NEMOTRON_H(T)                                                                \
    template Result<void> GradientPass<T>::nemotronHInit();                                        \
    template Result<void> GradientPass<T>::nemotronHLayerForward(int, std::vector<T>&);            \
    template Result<void> GradientPass<T>::nemotronHLayerBackward(int, std::vector<T>&);           \
    template void GradientPass<T>::mamba2Forward(int, LayerActivations<T>&, T*);                   \
    template void GradientPass<T>::mamba2Backward(int, const LayerActivations<T>&, const T*, T*);  \
    template void GradientPass<T>::relu2Forward(const std::string&, const T*, std::int64_t,        \
        std::int64_t, std::int64_t, std::vector<T>&, std::vector<T>&, T*);                         \
    template void GradientPass<T>::relu2Backward(const std::string&, const T*, std::int64_t,       \
        std::int64_t, std::int64_t, const std::vector<T>&, const std::vector<T>&, const T*, T*);   \
    template void GradientPass<T>::nemotronHMoeForward(int, LayerActivations<T>&, T*);             \
    template void GradientPass<T>::nemotronHMoeBackward(                                           \
        int, const LayerActivations<T>&, const T*, T*);

DAY0_GRADIENT_NEMOTRON_H(float)
DAY0_GRADIENT_NEMOTRON_H(double)

#undef DAY0_GRADIENT_NEMOTRON_H

} // namespace day0::exec::detail
