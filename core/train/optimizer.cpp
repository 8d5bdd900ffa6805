#include "train/optimizer.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <numbers>
#include <sstream>

namespace day0::train {

namespace {

/// The element loop of AdamW in arithmetic T. Each line is one torch tensor op; the scalars
/// are Python floats (doubles) that torch rounds to T when it applies them to a T tensor.
/// `add_(g, alpha=a)` is a fused multiply-add in ATen's vectorised kernel (vec::fmadd), so it
/// is std::fma here; so is addcmul_'s `self + value * t1 * t2`, which the AVX2 build contracts
/// into fma(value * t1, t2, self) (measured against torch 1.13 on 4,099 elements: every bit);
/// addcdiv_ is (value * t1) / t2 + self.
template <typename T>
void adamwLoop(std::span<double> param, std::span<const double> grad, AdamWState& s,
    std::int64_t step, double lr, const AdamWOptions& o)
{
    const T decay = T(1.0 - lr * o.weightDecay);
    const T beta1 = T(o.beta1);
    const T oneMinusBeta1 = T(1.0 - o.beta1);
    const T beta2 = T(o.beta2);
    const T oneMinusBeta2 = T(1.0 - o.beta2);
    const double biasCorrection1 = 1.0 - std::pow(o.beta1, double(step));
    const double biasCorrection2 = 1.0 - std::pow(o.beta2, double(step));
    const T negStepSize = T(-(lr / biasCorrection1));
    const T biasCorrection2Sqrt = T(std::sqrt(biasCorrection2));
    const T eps = T(o.eps);
    for (std::size_t i = 0; i < param.size(); ++i) {
        const T g = T(grad[i]);
        T p = T(param[i]) * decay;
        T m = T(s.expAvg[i]) * beta1;
        m = std::fma(g, oneMinusBeta1, m);
        T v = T(s.expAvgSq[i]) * beta2;
        v = std::fma(oneMinusBeta2 * g, g, v);
        const T denom = std::sqrt(v) / biasCorrection2Sqrt + eps;
        p = p + (negStepSize * m) / denom;
        param[i] = double(p);
        s.expAvg[i] = double(m);
        s.expAvgSq[i] = double(v);
    }
}

/// Sum of squares of `x` in double; its square root rounded to T is the tensor's norm.
double squares(std::span<const double> x)
{
    double sum = 0.0;
    for (const double v : x) {
        sum += v * v;
    }
    return sum;
}

/// The norm of the per-parameter norms T(√squares).
template <typename T> T normOf(std::span<const double> perParameter)
{
    double sum = 0.0;
    for (const double s : perParameter) {
        const auto n = double(T(std::sqrt(s)));
        sum += n * n;
    }
    return T(std::sqrt(sum));
}

template <typename T> ClipResult clipLoop(std::span<double> grad, T total, double maxNorm)
{
    // clip_coef = max_norm / (total_norm + 1e-6); torch.clamp(clip_coef, max=1.0).
    const T coef = T(maxNorm) / (total + T(1e-6));
    const T clamped = std::isnan(coef) ? coef : std::min(coef, T(1.0));
    for (double& g : grad) {
        g = double(T(g) * clamped);
    }
    return { double(total), double(clamped) };
}

Result<double> parseNumber(std::string_view text, const std::string& what)
{
    double value = 0.0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
        return Error::badInput(fmt::format("schedule: {} '{}' is not a number", what, text));
    }
    return value;
}

} // namespace

Result<void> adamwStep(std::span<double> param, std::span<const double> grad, AdamWState& state,
    std::int64_t step, double lr, const AdamWOptions& options, DType arith)
{
    if (grad.size() != param.size() || state.expAvg.size() != param.size()
        || state.expAvgSq.size() != param.size()) {
        return Error::internal(fmt::format("adamw: {} parameters but {} gradients, {} and {} "
                                           "moments",
            param.size(), grad.size(), state.expAvg.size(), state.expAvgSq.size()));
    }
    if (step < 1) {
        return Error::internal(fmt::format("adamw: step {} (counted from 1)", step));
    }
    switch (arith) {
    case DType::F64:
        adamwLoop<double>(param, grad, state, step, lr, options);
        return success();
    case DType::F32:
        adamwLoop<float>(param, grad, state, step, lr, options);
        return success();
    default:
        return Error::unsupported(fmt::format(
            "adamw: optimizer arithmetic in {} is not modelled (F32 or F64)", dtypeName(arith)));
    }
}

double LrSchedule::at(std::int64_t step) const
{
    // peak × a multiplier, as torch's LambdaLR computes base_lr * lr_lambda(step), so a
    // LambdaLR with the same multiplier gives the same bits.
    return peak * multiplier(step);
}

double LrSchedule::multiplier(std::int64_t step) const
{
    if (step < warmupSteps) {
        return double(step + 1) / double(warmupSteps);
    }
    if (kind == ScheduleKind::Constant) {
        return 1.0;
    }
    const double span = double(std::max<std::int64_t>(1, totalSteps - warmupSteps));
    const double progress = std::min(1.0, double(step - warmupSteps) / span);
    const double floorRatio = floor / peak;
    return floorRatio + (1.0 - floorRatio) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

Result<LrSchedule> LrSchedule::parse(const std::string& text, std::int64_t totalSteps)
{
    LrSchedule s;
    s.totalSteps = totalSteps;
    const auto colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    if (kind == "constant") {
        s.kind = ScheduleKind::Constant;
    } else if (kind == "cosine") {
        s.kind = ScheduleKind::WarmupCosine;
    } else {
        return Error::badInput(fmt::format(
            "schedule '{}': unknown kind '{}' (constant:LR or cosine:LR,warmup=N,floor=F)", text,
            kind));
    }
    if (colon == std::string::npos) {
        return Error::badInput(
            fmt::format("schedule '{}': no learning rate after '{}:'", text, kind));
    }
    std::stringstream rest(text.substr(colon + 1));
    std::string item;
    bool first = true;
    while (std::getline(rest, item, ',')) {
        if (first) {
            auto lr = parseNumber(item, "learning rate");
            if (!lr) {
                return lr.error();
            }
            s.peak = *lr;
            first = false;
            continue;
        }
        const auto eq = item.find('=');
        const std::string key = item.substr(0, eq);
        if (eq == std::string::npos || (key != "warmup" && key != "floor")) {
            return Error::badInput(
                fmt::format("schedule '{}': unknown option '{}' (warmup=N, floor=F)", text, item));
        }
        auto value = parseNumber(item.substr(eq + 1), key);
        if (!value) {
            return value.error();
        }
        if (key == "warmup") {
            if (*value < 0 || *value != std::floor(*value)) {
                return Error::badInput(
                    fmt::format("schedule '{}': warmup must be a whole number of steps", text));
            }
            s.warmupSteps = std::int64_t(*value);
        } else if (s.kind != ScheduleKind::WarmupCosine) {
            return Error::badInput(
                fmt::format("schedule '{}': floor applies to the cosine schedule only", text));
        } else {
            s.floor = *value;
        }
    }
    if (s.peak <= 0 || s.floor < 0 || s.floor > s.peak) {
        return Error::badInput(fmt::format(
            "schedule '{}': needs 0 < learning rate and 0 <= floor <= learning rate", text));
    }
    return s;
}

std::vector<double> parameterSquares(std::span<const double> grad, const FlatLayout& layout)
{
    std::vector<double> out(layout.parameters.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = squares(layout.slice(grad, i));
    }
    return out;
}

double normOfSquares(std::span<const double> perParameter, DType arith)
{
    return arith == DType::F32 ? double(normOf<float>(perParameter)) : normOf<double>(perParameter);
}

double globalGradNorm(std::span<const double> grad, const FlatLayout& layout, DType arith)
{
    return normOfSquares(parameterSquares(grad, layout), arith);
}

ClipResult clipToNorm(std::span<double> grad, double totalNorm, double maxNorm, DType arith)
{
    return arith == DType::F32 ? clipLoop<float>(grad, float(totalNorm), maxNorm)
                               : clipLoop<double>(grad, totalNorm, maxNorm);
}

ClipResult clipGradNorm(
    std::span<double> grad, const FlatLayout& layout, double maxNorm, DType arith)
{
    return clipToNorm(grad, globalGradNorm(grad, layout, arith), maxNorm, arith);
}

} // namespace day0::train
