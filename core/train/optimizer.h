#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "train/trainable_model.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace day0::train {

/// Hyper-parameters of AdamW, with torch.optim.AdamW's defaults.
struct AdamWOptions {
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weightDecay = 1e-2;
};

/// AdamW's moments for a range of the flat buffer (a whole model, or one ZeRO-1 shard).
struct AdamWState {
    std::vector<double> expAvg;
    std::vector<double> expAvgSq;
};

/// One AdamW update of `param` from `grad`, element for element as torch.optim.AdamW (1.13,
/// single-tensor path, amsgrad and maximize off): decoupled weight decay p *= 1 - lr·wd first,
/// m = β1·m + (1-β1)·g, v = β2·v + (1-β2)·g², then p -= (lr / (1-β1^t)) · m / (√v / √(1-β2^t) + ε)
/// (ε outside the root, after the bias correction). `step` is t, counted from 1. `arith` is the
/// precision of the element arithmetic: F32 rounds every operation to float as torch does on
/// float tensors (scalars computed in double and rounded to float), F64 runs it in double; the
/// values are stored in doubles either way (floats round-trip exactly). Element-wise, so a
/// shard of the buffer updates exactly as the same range of the whole.
Result<void> adamwStep(std::span<double> param, std::span<const double> grad, AdamWState& state,
    std::int64_t step, double lr, const AdamWOptions& options, DType arith);

/// Learning-rate schedules.
enum class ScheduleKind {
    Constant, ///< `peak` after the warm-up
    WarmupCosine, ///< linear warm-up to `peak`, then half a cosine down to `floor` at `totalSteps`
};

/// A learning-rate schedule over 0-based steps.
struct LrSchedule {
    ScheduleKind kind = ScheduleKind::Constant;
    double peak = 1e-3;
    double floor = 0.0; ///< the cosine's end value
    std::int64_t warmupSteps = 0; ///< step s < warm-up uses peak·(s+1)/warm-up
    std::int64_t totalSteps = 1; ///< the cosine reaches `floor` here and stays there

    /// The learning rate of 0-based step `step`.
    [[nodiscard]] double at(std::int64_t step) const;
    /// at(step) / peak: (s+1)/warm-up in the warm-up; then 1 (constant) or
    /// r + (1-r)·(1+cos(π·progress))/2 with r = floor/peak and progress from 0 to 1 at totalSteps.
    [[nodiscard]] double multiplier(std::int64_t step) const;
    /// Parses "constant:LR[,warmup=N]" or "cosine:LR,warmup=N,floor=F" (totalSteps given apart).
    static Result<LrSchedule> parse(const std::string& text, std::int64_t totalSteps);
};

/// What clipGradNorm measured.
struct ClipResult {
    double totalNorm = 0.0; ///< global L2 norm before clipping (torch's return value)
    double coefficient = 1.0; ///< the factor every gradient was multiplied by (≤ 1)
};

/// Global-norm clipping with torch.nn.utils.clip_grad_norm_ semantics (1.13, L2): the norm of
/// the per-parameter norms, coef = max_norm / (total + 1e-6) clamped to at most 1, every gradient
/// multiplied by coef (also when coef is 1). In F32 each norm and the coefficient are rounded to
/// float as torch's float tensors hold them; the norms' own summation order differs from
/// torch's vectorised reduction, so they agree to ~1 ulp rather than bit for bit. A non-finite
/// norm is returned as is (torch's error_if_nonfinite=False): the trainer refuses it.
ClipResult clipGradNorm(
    std::span<double> grad, const FlatLayout& layout, double maxNorm, DType arith);

/// The global L2 norm of `grad`, per parameter then over parameters, as clipGradNorm measures it.
double globalGradNorm(std::span<const double> grad, const FlatLayout& layout, DType arith);

/// Each parameter's sum of squares of `grad` (in double): the pieces a global norm is made of.
/// A tensor-parallel rank's sums over its slices add up over the ranks to the whole parameter's.
std::vector<double> parameterSquares(std::span<const double> grad, const FlatLayout& layout);

/// The global L2 norm of whole parameters' sums of squares, as globalGradNorm measures it (each
/// parameter's norm in `arith`, then the norm of those norms).
double normOfSquares(std::span<const double> squares, DType arith);

/// clipGradNorm with the global norm measured elsewhere (over tensor-parallel shards):
/// coef = maxNorm / (totalNorm + 1e-6) clamped to at most 1, every gradient multiplied by it.
ClipResult clipToNorm(std::span<double> grad, double totalNorm, double maxNorm, DType arith);

} // namespace day0::train
