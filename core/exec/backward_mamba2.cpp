// The backward of the Mamba-2 operators (backward_mamba2.h), from their forward in mamba2.cpp.
#include "exec/backward_mamba2.h"

#include "exec/backward_ops.h"
#include "exec/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace day0::exec::detail {

namespace {

double silu(double v) { return v * sigmoid(v); }

/// d silu(v) / dv = σ(v)·(1 + v·(1 − σ(v))).
double siluSlope(double v)
{
    const double s = sigmoid(v);
    return s * (1.0 + v * (1.0 - s));
}

} // namespace

template <typename T>
void mamba2ConvBackward(const T* in, const T* pre, const T* w, const T* dout, T* din, T* dw,
    T* dbias, std::int64_t n, std::int64_t channels, std::int64_t kernel)
{
    const std::int64_t past = kernel - 1;
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::int64_t i = t * channels + c;
            const double dpre = double(dout[i]) * siluSlope(double(pre[i]));
            if (dbias != nullptr) {
                dbias[c] += T(dpre);
            }
            // pre[t, c] reads in[t − past + k, c]; the rows before the sequence are zeros.
            for (std::int64_t k = 0; k < kernel; ++k) {
                const std::int64_t s = t - past + k;
                if (s < 0) {
                    continue;
                }
                dw[c * kernel + k] += T(dpre * double(in[s * channels + c]));
                din[s * channels + c] += T(dpre * double(w[c * kernel + k]));
            }
        }
    }
}

template <typename T>
void mamba2DtBackward(const T* dtIn, std::int64_t stride, const T* dtBias, const T* ddt, T* ddtIn,
    T* ddtBias, std::int64_t n, std::int64_t heads)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t h = 0; h < heads; ++h) {
            const double v = double(dtIn[t * stride + h]) + double(dtBias[h]);
            // torch's softplus_backward: the gradient itself above the threshold 20, else σ(v).
            const double dv = double(ddt[t * heads + h]) * (v > 20.0 ? 1.0 : sigmoid(v));
            ddtIn[t * stride + h] += T(dv);
            ddtBias[h] += T(dv);
        }
    }
}

template <typename T>
void mamba2ScanBackward(const T* xbc, const T* dt, const T* aLog, const T* d, const T* dy, T* dxbc,
    T* ddt, T* daLog, T* dD, std::int64_t n, const Mamba2Shape& s)
{
    if (n == 0) {
        return;
    }
    const std::int64_t channels = s.convChannels();
    const std::int64_t p = s.headDim;
    const std::int64_t ns = s.state;
    const std::int64_t perGroup = s.heads / s.groups;
    const std::size_t stateSize = std::size_t(p * ns);
    // The states S_0 … S_{n−1} of one head, recomputed by the recurrence.
    std::vector<double> states(std::size_t(n) * stateSize);
    std::vector<double> dS(stateSize);
    std::vector<double> dSB(static_cast<std::size_t>(p));
    for (std::int64_t h = 0; h < s.heads; ++h) {
        const std::int64_t g = h / perGroup;
        const double a = -std::exp(double(aLog[h]));
        const double skip = double(d[h]);
        const auto xAt = [&](std::int64_t t) { return t * channels + h * p; };
        const auto bAt = [&](std::int64_t t) { return t * channels + s.inner() + g * ns; };
        const auto cAt
            = [&](std::int64_t t) { return t * channels + s.inner() + s.groups * ns + g * ns; };
        for (std::int64_t t = 0; t < n; ++t) {
            const double step = double(dt[t * s.heads + h]);
            const double decay = std::exp(step * a);
            double* st = states.data() + std::size_t(t) * stateSize;
            const double* prev = t > 0 ? st - stateSize : nullptr;
            const T* x = xbc + xAt(t);
            const T* b = xbc + bAt(t);
            for (std::int64_t q = 0; q < p; ++q) {
                for (std::int64_t k = 0; k < ns; ++k) {
                    const std::size_t i = std::size_t(q * ns + k);
                    st[i] = (prev != nullptr ? decay * prev[i] : 0.0)
                        + step * double(x[q]) * double(b[k]);
                }
            }
        }
        std::fill(dS.begin(), dS.end(), 0.0);
        double dA = 0.0;
        double dSkip = 0.0;
        for (std::int64_t t = n - 1; t >= 0; --t) {
            const double step = double(dt[t * s.heads + h]);
            const double decay = std::exp(step * a);
            const double* st = states.data() + std::size_t(t) * stateSize;
            const double* prev = t > 0 ? st - stateSize : nullptr;
            const T* x = xbc + xAt(t);
            const T* b = xbc + bAt(t);
            const T* c = xbc + cAt(t);
            const T* dyt = dy + t * s.inner() + h * p;
            T* dx = dxbc + xAt(t);
            T* dB = dxbc + bAt(t);
            T* dC = dxbc + cAt(t);
            // y_t = S_t · C_t + D · x_t.
            for (std::int64_t q = 0; q < p; ++q) {
                const double dyq = double(dyt[q]);
                dSkip += dyq * double(x[q]);
                dx[q] += T(skip * dyq);
                for (std::int64_t k = 0; k < ns; ++k) {
                    dS[std::size_t(q * ns + k)] += dyq * double(c[k]);
                }
            }
            for (std::int64_t k = 0; k < ns; ++k) {
                double acc = 0.0;
                for (std::int64_t q = 0; q < p; ++q) {
                    acc += double(dyt[q]) * st[std::size_t(q * ns + k)];
                }
                dC[k] += T(acc);
            }
            // S_t = a_t · S_{t−1} + dt_t · x_t ⊗ B_t.
            double dStep = 0.0;
            for (std::int64_t q = 0; q < p; ++q) {
                double acc = 0.0;
                for (std::int64_t k = 0; k < ns; ++k) {
                    acc += dS[std::size_t(q * ns + k)] * double(b[k]);
                }
                dSB[std::size_t(q)] = acc;
                dStep += acc * double(x[q]);
                dx[q] += T(step * acc);
            }
            for (std::int64_t k = 0; k < ns; ++k) {
                double acc = 0.0;
                for (std::int64_t q = 0; q < p; ++q) {
                    acc += dS[std::size_t(q * ns + k)] * double(x[q]);
                }
                dB[k] += T(step * acc);
            }
            double dDecay = 0.0; // ⟨dS, S_{t−1}⟩
            if (prev != nullptr) {
                for (std::size_t i = 0; i < stateSize; ++i) {
                    dDecay += dS[i] * prev[i];
                }
            }
            dStep += dDecay * decay * a;
            dA += dDecay * decay * step;
            ddt[t * s.heads + h] += T(dStep);
            for (double& v : dS) {
                v *= decay;
            }
        }
        daLog[h] += T(dA * a);
        dD[h] += T(dSkip);
    }
}

template <typename T>
void gatedGroupRmsNormBackward(const T* y, const T* z, std::int64_t zStride, const T* w,
    const T* dout, T* dy, T* dz, T* dw, std::int64_t n, std::int64_t inner, std::int64_t groups,
    double eps)
{
    const std::int64_t width = inner / groups;
    // Each group's gated rows, gathered so that the plain RMSNorm backward takes them.
    std::vector<T> gated(std::size_t(n * width));
    std::vector<T> dgroup(std::size_t(n * width));
    std::vector<T> dgated(std::size_t(n * width));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t c = 0; c < width; ++c) {
                const std::int64_t col = g * width + c;
                gated[std::size_t(t * width + c)]
                    = T(double(y[t * inner + col]) * silu(double(z[t * zStride + col])));
                dgroup[std::size_t(t * width + c)] = dout[t * inner + col];
            }
        }
        std::fill(dgated.begin(), dgated.end(), T(0));
        rmsNormBackward<T>(gated.data(), w + g * width, dgroup.data(), dgated.data(),
            dw + g * width, n, width, eps);
        // gated = y · SiLU(z).
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t c = 0; c < width; ++c) {
                const std::int64_t col = g * width + c;
                const double gz = double(z[t * zStride + col]);
                const double dg = double(dgated[std::size_t(t * width + c)]);
                dy[t * inner + col] += T(dg * silu(gz));
                dz[t * zStride + col] += T(dg * double(y[t * inner + col]) * siluSlope(gz));
            }
        }
    }
}

#define DAY0_MAMBA2_BACKWARD(T)                                                                    \
    template void mamba2ConvBackward<T>(const T*, const T*, const T*, const T*, T*, T*, T*,        \
        std::int64_t, std::int64_t, std::int64_t);                                                 \
    template void mamba2DtBackward<T>(                                                             \
        const T*, std::int64_t, const T*, const T*, T*, T*, std::int64_t, std::int64_t);           \
    template void mamba2ScanBackward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*,  \
        T*, T*, std::int64_t, const Mamba2Shape&);                                                 \
    template void gatedGroupRmsNormBackward<T>(const T*, const T*, std::int64_t, const T*,         \
        const T*, T*, T*, T*, std::int64_t, std::int64_t, std::int64_t, double);

DAY0_MAMBA2_BACKWARD(float)
DAY0_MAMBA2_BACKWARD(double)

#undef DAY0_MAMBA2_BACKWARD

} // namespace day0::exec::detail
