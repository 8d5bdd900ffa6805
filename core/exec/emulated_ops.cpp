#include "exec/emulated_ops.h"

#include "numerics/float_formats.h"

#include <span>
#include <vector>

namespace day0::exec {

bool isEmulated(PrecisionMode mode)
{
    return mode != PrecisionMode::F32 && mode != PrecisionMode::F64;
}

void emulatedLinear(const float* x, const float* w, const float* bias, float* y, std::int64_t n,
    std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling)
{
    const float* xp = x;
    std::vector<float> rounded;
    if (isEmulated(mode)) {
        rounded.assign(x, x + n * in);
        roundGemmInput(rounded, n, in, mode, scaling, false);
        xp = rounded.data();
    }
    linear<float>(xp, w, nullptr, y, n, in, out);
    if (bias != nullptr) {
        std::vector<float> b(bias, bias + out);
        roundActivations(b, mode);
        for (std::int64_t r = 0; r < n; ++r) {
            addInPlace(y + r * out, b.data(), out);
        }
    }
    roundActivations({ y, std::size_t(n * out) }, mode);
}

void emulatedRmsNorm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t dim,
    double eps, PrecisionMode mode)
{
    if (!isEmulated(mode)) {
        rmsNorm<float>(x, w, y, n, dim, eps);
        return;
    }
    rmsNorm<float>(x, nullptr, y, n, dim, eps);
    roundActivations({ y, std::size_t(n * dim) }, mode);
    std::vector<float> wr(w, w + dim);
    roundActivations(wr, mode);
    for (std::int64_t r = 0; r < n; ++r) {
        for (std::int64_t i = 0; i < dim; ++i) {
            y[r * dim + i] *= wr[std::size_t(i)];
        }
    }
    roundActivations({ y, std::size_t(n * dim) }, mode);
}

void emulatedGatedActivation(
    float* gate, const float* up, std::int64_t n, Activation act, PrecisionMode mode)
{
    if (!isEmulated(mode)) {
        gatedActivate<float>(gate, up, n, act);
        return;
    }
    activate<float>(gate, n, act);
    roundActivations({ gate, std::size_t(n) }, mode);
    for (std::int64_t i = 0; i < n; ++i) {
        gate[i] *= up[i];
    }
    roundActivations({ gate, std::size_t(n) }, mode);
}

void emulatedAttention(const float* q, const float* k, const float* v, float* out,
    const AttentionShape& shape, PrecisionMode mode)
{
    AttentionRounding<float> rounding;
    if (isEmulated(mode)) {
        rounding = [mode](float* p, std::int64_t count) {
            roundActivations({ p, std::size_t(count) }, mode);
        };
    }
    attention<float>(q, k, v, out, shape, rounding, rounding);
    roundActivations({ out, std::size_t(shape.queries * shape.heads * shape.valueDim) }, mode);
}

void emulatedRope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope,
    std::span<const std::int64_t> positions3, PrecisionMode mode)
{
    if (!isEmulated(mode)) {
        applyRope<float>(x, tokens, heads, headDim, positions, rope, positions3);
        return;
    }
    const DType dtype = activationDType(mode);
    applyRopeStoring(x, tokens, heads, headDim, positions, rope, positions3,
        [dtype](float v) { return numerics::roundToFormat(v, dtype); });
    // Lanes beyond rotaryDim pass through; they are already in the dtype.
}

} // namespace day0::exec
