// The Mamba-2 operators (see mamba2.h for the references).
#include "exec/mamba2.h"

#include "exec/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace day0::exec {

namespace {

double silu(double v) { return v * sigmoid(v); }

/// The convolution of mamba2Conv, its SiLU applied when `activate` (else the pre-activation).
template <typename T>
void convolve(T* xbc, std::int64_t n, std::int64_t channels, std::int64_t kernel, const T* w,
    const T* bias, T* state, bool activate)
{
    const std::int64_t past = kernel - 1;
    // The window: the carried inputs, then this step's.
    std::vector<T> in(std::size_t((past + n) * channels));
    std::copy_n(state, past * channels, in.begin());
    std::copy_n(xbc, n * channels, in.begin() + past * channels);
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < channels; ++c) {
            double acc = bias != nullptr ? double(bias[c]) : 0.0;
            for (std::int64_t k = 0; k < kernel; ++k) {
                acc += double(w[c * kernel + k]) * double(in[std::size_t((t + k) * channels + c)]);
            }
            xbc[t * channels + c] = T(activate ? silu(acc) : acc);
        }
    }
    std::copy_n(in.begin() + n * channels, past * channels, state);
}

} // namespace

template <typename T>
void mamba2Conv(T* xbc, std::int64_t n, std::int64_t channels, std::int64_t kernel, const T* w,
    const T* bias, T* state)
{
    convolve(xbc, n, channels, kernel, w, bias, state, true);
}

template <typename T>
void mamba2ConvPreActivation(T* xbc, std::int64_t n, std::int64_t channels, std::int64_t kernel,
    const T* w, const T* bias, T* state)
{
    convolve(xbc, n, channels, kernel, w, bias, state, false);
}

template <typename T> void mamba2Dt(T* dt, std::int64_t n, std::int64_t heads, const T* dtBias)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t h = 0; h < heads; ++h) {
            const double v = double(dt[t * heads + h]) + double(dtBias[h]);
            dt[t * heads + h] = T(softplus(v));
        }
    }
}

template <typename T>
void mamba2Scan(const T* xbc, const T* dt, const T* aLog, const T* d, T* ssm, T* y, std::int64_t n,
    const Mamba2Shape& s, bool chunked)
{
    const std::int64_t channels = s.convChannels();
    const std::int64_t p = s.headDim;
    const std::int64_t ns = s.state;
    const std::int64_t perGroup = s.heads / s.groups;
    const std::int64_t chunk = chunked && s.chunk > 0 ? s.chunk : (chunked ? n : 1);
    std::vector<double> state(std::size_t(p * ns));
    std::vector<double> cum(std::size_t(std::max<std::int64_t>(chunk, 1)));
    std::vector<double> acc(static_cast<std::size_t>(p));
    for (std::int64_t h = 0; h < s.heads; ++h) {
        const std::int64_t g = h / perGroup;
        const double a = -std::exp(double(aLog[h]));
        const double skip = double(d[h]);
        T* sh = ssm + h * p * ns;
        for (std::int64_t i = 0; i < p * ns; ++i) {
            state[std::size_t(i)] = double(sh[i]);
        }
        const auto xOf = [&](std::int64_t t) { return xbc + t * channels + h * p; };
        const auto bOf = [&](std::int64_t t) { return xbc + t * channels + s.inner() + g * ns; };
        const auto cOf = [&](std::int64_t t) {
            return xbc + t * channels + s.inner() + s.groups * ns + g * ns;
        };
        for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
            const std::int64_t len = std::min(chunk, n - c0);
            // Decay exponents: cum[i] = Σ_{j ≤ i} dt_j · A within the chunk.
            double run = 0.0;
            for (std::int64_t i = 0; i < len; ++i) {
                run += double(dt[(c0 + i) * s.heads + h]) * a;
                cum[std::size_t(i)] = run;
            }
            for (std::int64_t i = 0; i < len; ++i) {
                const std::int64_t t = c0 + i;
                const T* ct = cOf(t);
                // The state entering the chunk, decayed to t (the off-diagonal block).
                const double decay = std::exp(cum[std::size_t(i)]);
                for (std::int64_t q = 0; q < p; ++q) {
                    double dot = 0.0;
                    for (std::int64_t k = 0; k < ns; ++k) {
                        dot += double(ct[k]) * state[std::size_t(q * ns + k)];
                    }
                    acc[std::size_t(q)] = decay * dot;
                }
                // The chunk's own tokens up to t (the diagonal block).
                for (std::int64_t j = 0; j <= i; ++j) {
                    const T* bj = bOf(c0 + j);
                    double cb = 0.0;
                    for (std::int64_t k = 0; k < ns; ++k) {
                        cb += double(ct[k]) * double(bj[k]);
                    }
                    const double wgt = cb * std::exp(cum[std::size_t(i)] - cum[std::size_t(j)])
                        * double(dt[(c0 + j) * s.heads + h]);
                    const T* xj = xOf(c0 + j);
                    for (std::int64_t q = 0; q < p; ++q) {
                        acc[std::size_t(q)] += wgt * double(xj[q]);
                    }
                }
                const T* xt = xOf(t);
                T* yt = y + t * s.inner() + h * p;
                for (std::int64_t q = 0; q < p; ++q) {
                    yt[q] = T(acc[std::size_t(q)] + skip * double(xt[q]));
                }
            }
            // The state leaving the chunk.
            const double last = cum[std::size_t(len - 1)];
            const double total = std::exp(last);
            for (double& v : state) {
                v *= total;
            }
            for (std::int64_t j = 0; j < len; ++j) {
                const double wgt
                    = std::exp(last - cum[std::size_t(j)]) * double(dt[(c0 + j) * s.heads + h]);
                const T* xj = xOf(c0 + j);
                const T* bj = bOf(c0 + j);
                for (std::int64_t q = 0; q < p; ++q) {
                    const double xq = wgt * double(xj[q]);
                    for (std::int64_t k = 0; k < ns; ++k) {
                        state[std::size_t(q * ns + k)] += xq * double(bj[k]);
                    }
                }
            }
        }
        for (std::int64_t i = 0; i < p * ns; ++i) {
            sh[i] = T(state[std::size_t(i)]);
        }
    }
}

template <typename T>
void gatedGroupRmsNorm(T* y, const T* z, std::int64_t zStride, const T* w, std::int64_t n,
    std::int64_t inner, std::int64_t groups, double eps)
{
    const std::int64_t width = inner / groups;
    std::vector<double> gated(static_cast<std::size_t>(inner));
    for (std::int64_t t = 0; t < n; ++t) {
        T* row = y + t * inner;
        const T* gate = z + t * zStride;
        for (std::int64_t c = 0; c < inner; ++c) {
            gated[std::size_t(c)] = double(row[c]) * silu(double(gate[c]));
        }
        for (std::int64_t g = 0; g < groups; ++g) {
            double sum = 0.0;
            for (std::int64_t c = g * width; c < (g + 1) * width; ++c) {
                sum += gated[std::size_t(c)] * gated[std::size_t(c)];
            }
            const double inv = 1.0 / std::sqrt(sum / double(width) + eps);
            for (std::int64_t c = g * width; c < (g + 1) * width; ++c) {
                row[c] = T(double(w[c]) * gated[std::size_t(c)] * inv);
            }
        }
    }
}

template void mamba2Conv<float>(
    float*, std::int64_t, std::int64_t, std::int64_t, const float*, const float*, float*);
template void mamba2Conv<double>(
    double*, std::int64_t, std::int64_t, std::int64_t, const double*, const double*, double*);
template void mamba2ConvPreActivation<float>(
    float*, std::int64_t, std::int64_t, std::int64_t, const float*, const float*, float*);
template void mamba2ConvPreActivation<double>(
    double*, std::int64_t, std::int64_t, std::int64_t, const double*, const double*, double*);
template void mamba2Dt<float>(float*, std::int64_t, std::int64_t, const float*);
template void mamba2Dt<double>(double*, std::int64_t, std::int64_t, const double*);
template void mamba2Scan<float>(const float*, const float*, const float*, const float*, float*,
    float*, std::int64_t, const Mamba2Shape&, bool);
template void mamba2Scan<double>(const double*, const double*, const double*, const double*,
    double*, double*, std::int64_t, const Mamba2Shape&, bool);
template void gatedGroupRmsNorm<float>(float*, const float*, std::int64_t, const float*,
    std::int64_t, std::int64_t, std::int64_t, double);
template void gatedGroupRmsNorm<double>(double*, const double*, std::int64_t, const double*,
    std::int64_t, std::int64_t, std::int64_t, double);

} // namespace day0::exec
