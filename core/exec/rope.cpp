#include "exec/rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace day0::exec {

namespace {

std::vector<double> defaultInvFreq(std::int64_t dim, double theta)
{
    std::vector<double> inv(std::size_t(dim / 2));
    for (std::int64_t i = 0; i < dim / 2; ++i) {
        inv[std::size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(dim));
    }
    return inv;
}

/// Llama-3.1 frequency smoothing (HF _compute_llama3_parameters).
void applyLlama3(std::vector<double>& inv, const model::RopeScaling& s)
{
    const double oldContext = double(s.originalMaxPositions);
    const double lowWavelen = oldContext / s.lowFreqFactor;
    const double highWavelen = oldContext / s.highFreqFactor;
    for (double& f : inv) {
        const double wavelen = 2.0 * std::numbers::pi / f;
        if (wavelen < highWavelen) {
            continue; // high frequency: unchanged
        }
        if (wavelen > lowWavelen) {
            f /= s.factor;
            continue;
        }
        const double smooth
            = (oldContext / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
}

/// YaRN (HF _compute_yarn_parameters): blend interpolated and extrapolated frequencies over a
/// linear ramp between the correction dims of beta_fast and beta_slow.
double applyYarn(
    std::vector<double>& inv, std::int64_t dim, double theta, const model::RopeScaling& s)
{
    const double factor = s.factor;
    const double original = double(s.originalMaxPositions);
    const auto correctionDim = [&](double rotations) {
        return double(dim) * std::log(original / (rotations * 2.0 * std::numbers::pi))
            / (2.0 * std::log(theta));
    };
    // gpt-oss (truncate false) keeps the correction range fractional.
    double low = correctionDim(s.betaFast);
    double high = correctionDim(s.betaSlow);
    if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(dim - 1));
    if (low == high) {
        high += 0.001; // degenerate ramp (Kimi-K2: beta_fast == beta_slow)
    }
    for (std::size_t i = 0; i < inv.size(); ++i) {
        const double extrapolated = inv[i];
        const double interpolated = extrapolated / factor;
        const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolationFactor = 1.0 - ramp;
        inv[i] = interpolated * (1.0 - extrapolationFactor) + extrapolated * extrapolationFactor;
    }
    if (s.mscale > 0.0 && s.mscaleAllDim > 0.0) {
        return yarnMscale(factor, s.mscale) / yarnMscale(factor, s.mscaleAllDim);
    }
    return yarnMscale(factor, 1.0);
}

} // namespace

void setInterleavedMrope(Rope& rope, std::vector<std::int64_t> section)
{
    if (section.size() != 3) {
        section = { 24, 20, 20 };
    }
    rope.pairComponent.assign(rope.invFreq.size(), 0);
    for (std::size_t j = 0; j < rope.pairComponent.size(); ++j) {
        if (j % 3 == 1 && std::int64_t(j) < 3 * section[1]) {
            rope.pairComponent[j] = 1;
        } else if (j % 3 == 2 && std::int64_t(j) < 3 * section[2]) {
            rope.pairComponent[j] = 2;
        }
    }
}

double yarnMscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

Result<Rope> makeRope(
    std::int64_t rotaryDim, double theta, const model::RopeScaling& scaling, RopeLayout layout)
{
    if (rotaryDim <= 0 || rotaryDim % 2 != 0) {
        return Error::badInput(
            fmt::format("rotary dimension {} must be positive and even", rotaryDim));
    }
    Rope rope;
    rope.rotaryDim = rotaryDim;
    rope.layout = layout;
    const std::string& type = scaling.type;
    if (type == "dynamic" && scaling.alpha > 0.0) {
        // Hunyuan's dynamic NTK-alpha: a larger base at every length, no attention scaling.
        theta *= std::pow(scaling.alpha, double(rotaryDim) / double(rotaryDim - 2));
    }
    rope.invFreq = defaultInvFreq(rotaryDim, theta);
    if (type == "default" || type.empty() || type == "dynamic") {
        return rope;
    }
    if (type == "linear") {
        for (double& f : rope.invFreq) {
            f /= scaling.factor;
        }
        return rope;
    }
    if (type == "llama3") {
        if (scaling.originalMaxPositions <= 0) {
            return Error::badInput("rope_scaling llama3 needs original_max_position_embeddings");
        }
        applyLlama3(rope.invFreq, scaling);
        return rope;
    }
    if (type == "yarn") {
        if (scaling.originalMaxPositions <= 0) {
            return Error::badInput("rope_scaling yarn needs original_max_position_embeddings");
        }
        rope.attentionScaling = applyYarn(rope.invFreq, rotaryDim, theta, scaling);
        return rope;
    }
    if (type == "mrope" || type == "default_mrope") {
        std::int64_t total = 0;
        for (const auto s : scaling.mropeSection) {
            total += s;
        }
        if (scaling.mropeSection.size() != 3 || total != rotaryDim / 2) {
            return Error::badInput(fmt::format(
                "mrope_section must have 3 entries summing to {} (head_dim / 2)", rotaryDim / 2));
        }
        for (int c = 0; c < 3; ++c) {
            rope.pairComponent.insert(
                rope.pairComponent.end(), std::size_t(scaling.mropeSection[std::size_t(c)]), c);
        }
        return rope;
    }
    return Error::unsupported(fmt::format(
        "rope_scaling type '{}' is not implemented (default, linear, dynamic, llama3, yarn, mrope)",
        type));
}

template <typename T>
void applyRope(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope,
    std::span<const std::int64_t> positions3)
{
    // a + (−b) is a − b exactly, so the identity store leaves the plain rotation.
    applyRopeStoring(x, tokens, heads, headDim, positions, rope, positions3, [](T v) { return v; });
}

template void applyRope<float>(float*, std::int64_t, std::int64_t, std::int64_t,
    std::span<const std::int64_t>, const Rope&, std::span<const std::int64_t>);
template void applyRope<double>(double*, std::int64_t, std::int64_t, std::int64_t,
    std::span<const std::int64_t>, const Rope&, std::span<const std::int64_t>);

} // namespace day0::exec
