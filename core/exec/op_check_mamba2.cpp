// opcheck's rows for Nemotron-H's own operators: the Mamba-2 mixer's (mamba2.h) and relu2. Each
// runs in the target precision (inputs and outputs rounded to its mode, the engine's float
// operator in between) against the fp64 operator; the scan's forms are both checked against
// the fp64 recurrence, so that a chunked form that drifted from it would show.
#include "exec/emulated_ops.h"
#include "exec/mamba2.h"
#include "exec/op_check_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec::detail {

namespace {

// The Backend interface has none of these operators: the host computes them.
std::string hostImplementation(const OpCheckOptions& options)
{
    return options.backend != nullptr ? "host CPU (not a backend operator)" : "native";
}

} // namespace

void OpChecker::mamba2Ops()
{
    if (!m_spec.mamba) {
        return;
    }
    const auto& m = *m_spec.mamba;
    const std::int64_t t = m_options.tokens;
    // The check's chunk: a quarter of the rows (as the chunked attention's), so that several
    // chunk boundaries and a partial last chunk fall inside it.
    const std::int64_t chunk
        = std::max<std::int64_t>(1, std::min(m.chunkSize > 0 ? m.chunkSize : t, t / 4));
    const Mamba2Shape s { m.numHeads, m.headDim, m.stateSize, m.numGroups, m.convKernel, chunk };
    const std::int64_t channels = s.convChannels();
    const PrecisionMode mode = this->mode(OpKind::Attention);
    const std::string impl = hostImplementation(m_options);
    const auto rounded = [&](const std::vector<double>& v, PrecisionMode md) {
        auto f = toFloat(v);
        roundActivations(f, md);
        return f;
    };

    // conv1d + SiLU, from a non-zero carried state (a decode continues a prefill).
    const auto xbc = random(t * channels);
    const auto w = random(channels * s.kernel, 0.5);
    const auto bias = random(channels, 0.2);
    const auto state = random((s.kernel - 1) * channels);
    {
        auto ref = xbc;
        auto refState = state;
        mamba2Conv<double>(
            ref.data(), t, channels, s.kernel, w.data(), bias.data(), refState.data());
        auto tgt = rounded(xbc, mode);
        auto tgtState = rounded(state, mode);
        const auto wf = toFloat(w);
        const auto bf = toFloat(bias);
        mamba2Conv<float>(tgt.data(), t, channels, s.kernel, wf.data(), bf.data(), tgtState.data());
        roundActivations(tgt, mode);
        add(fmt::format("mamba2 conv1d + silu (depthwise, kernel {}, carried state)", s.kernel),
            fmt::format("[{}, {}]", t, channels), OpKind::Attention, mode, impl, ref, tgt);
    }
    // dt = softplus(dt + dt_bias), over both branches of torch's softplus.
    const auto dtRaw = random(t * s.heads, 2.0);
    const auto dtBias = random(s.heads, 0.5);
    auto dt = dtRaw;
    mamba2Dt<double>(dt.data(), t, s.heads, dtBias.data());
    {
        auto tgt = rounded(dtRaw, mode);
        const auto bf = toFloat(dtBias);
        mamba2Dt<float>(tgt.data(), t, s.heads, bf.data());
        add("mamba2 dt softplus(dt + dt_bias)", fmt::format("[{}, {}]", t, s.heads),
            OpKind::Attention, mode, impl, dt, tgt);
    }
    // The SSD scan: the fp64 recurrence against the target's chunked and recurrent forms, from
    // a non-zero state. xBC of order one after the SiLU, decays exp(dt·A) of order exp(-0.5).
    auto x = random(t * channels, 0.7);
    const auto aLog = random(s.heads, 0.5);
    const auto d = random(s.heads, 0.2, 1.0);
    const auto ssm = random(s.heads * s.headDim * s.state, 0.5);
    std::vector<double> ref(static_cast<std::size_t>(t * s.inner()));
    {
        auto refSsm = ssm;
        mamba2Scan<double>(
            x.data(), dt.data(), aLog.data(), d.data(), refSsm.data(), ref.data(), t, s, false);
    }
    for (const bool chunked : { true, false }) {
        auto xf = rounded(x, mode);
        auto dtf = rounded(dt, mode);
        const auto af = toFloat(aLog);
        const auto df = toFloat(d);
        auto ssmf = toFloat(ssm);
        std::vector<float> tgt(ref.size());
        mamba2Scan<float>(
            xf.data(), dtf.data(), af.data(), df.data(), ssmf.data(), tgt.data(), t, s, chunked);
        roundActivations(tgt, mode);
        add(chunked ? fmt::format(
                "mamba2 ssd scan (chunked, chunk {}; config {}), D skip", chunk, m.chunkSize)
                    : std::string("mamba2 ssd scan (recurrent, token by token), D skip"),
            fmt::format(
                "[{}, {}, {}] state {} in {} groups", t, s.heads, s.headDim, s.state, s.groups),
            OpKind::Attention, mode, impl, ref, tgt);
    }
    // The gated norm: rms over each group of y · SiLU(z), times its weight.
    {
        const PrecisionMode normMode = this->mode(OpKind::Norm);
        const auto y = random(t * s.inner());
        const auto z = random(t * s.inner());
        const auto wn = random(s.inner(), 0.2, 1.0);
        auto refY = y;
        gatedGroupRmsNorm<double>(
            refY.data(), z.data(), s.inner(), wn.data(), t, s.inner(), s.groups, m_spec.normEps);
        auto tgt = rounded(y, normMode);
        const auto zf = rounded(z, normMode);
        const auto wf = toFloat(wn);
        gatedGroupRmsNorm<float>(
            tgt.data(), zf.data(), s.inner(), wf.data(), t, s.inner(), s.groups, m_spec.normEps);
        roundActivations(tgt, normMode);
        add(fmt::format("mamba2 gated rms_norm (y·silu(z), {} groups)", s.groups),
            fmt::format("[{}, {}]", t, s.inner()), OpKind::Norm, normMode, impl, refY, tgt);
    }
}

void OpChecker::relu2Op(std::int64_t width, const std::string& name)
{
    const std::int64_t n = m_options.tokens * width;
    const auto in = random(n);
    const PrecisionMode m = mode(OpKind::Mlp);
    std::vector<double> ref(in);
    for (double& v : ref) {
        v = v > 0.0 ? v * v : 0.0;
    }
    auto tgt = toFloat(in);
    roundActivations(tgt, m);
    for (float& v : tgt) {
        v = v > 0.0f ? v * v : 0.0f;
    }
    roundActivations(tgt, m);
    add(name, fmt::format("[{}, {}]", m_options.tokens, width), OpKind::Mlp, m,
        hostImplementation(m_options), ref, tgt);
}

} // namespace day0::exec::detail
