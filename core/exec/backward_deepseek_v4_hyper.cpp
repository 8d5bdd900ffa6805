// DeepSeek-V4's hyper-connections in the gradient pass (backward_deepseek_v4.h): the maps' forward
// as deepseekV4HyperMaps computes them with every Sinkhorn step's input kept, and the reverse of
// the maps (sigmoids, softmax, each Sinkhorn step), the collapse and the expansion.
#include "exec/backward_deepseek_v4.h"
#include "exec/backward_ops.h"
#include "exec/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::exec::detail {

namespace {

double sigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Whether Sinkhorn step `i` normalises rows (else columns): columns, then rows and columns.
bool sinkhornRows(std::int64_t i) { return i % 2 == 1; }

/// Divides each line (rows or columns) of the S×S matrix c by its sum + eps.
void normaliseLines(double* c, std::int64_t s, bool rows, double eps)
{
    for (std::int64_t a = 0; a < s; ++a) {
        double sum = 0.0;
        for (std::int64_t b = 0; b < s; ++b) {
            sum += rows ? c[a * s + b] : c[b * s + a];
        }
        for (std::int64_t b = 0; b < s; ++b) {
            (rows ? c[a * s + b] : c[b * s + a]) /= sum + eps;
        }
    }
}

/// Its backward: `dc` (the output's gradient) becomes the input's, from the input `c`.
void normaliseLinesBackward(const double* c, double* dc, std::int64_t s, bool rows, double eps)
{
    for (std::int64_t a = 0; a < s; ++a) {
        double sum = 0.0;
        double dot = 0.0;
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            sum += c[i];
        }
        const double denom = sum + eps;
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            dot += dc[i] * c[i];
        }
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            dc[i] = dc[i] / denom - dot / (denom * denom);
        }
    }
}

} // namespace

/// The maps of hyper-connection `p` (deepseekV4HyperMaps' arithmetic) with what the backward
/// needs. `head`: hc_head (pre only).
template <typename T>
HyperSaved<T> deepseekV4HyperForward(const ParameterSet<T>& params, const std::string& p,
    const T* streams, std::int64_t n, const model::ModelSpec& spec, bool head)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t s = hc.streams;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* fn = params.value(p + "_fn");
    const T* base = params.value(p + "_base");
    const T* scale = params.value(p + "_scale");
    HyperSaved<T> m;
    m.normed.resize(std::size_t(n * s * h));
    rmsNorm<T>(streams, nullptr, m.normed.data(), n, s * h, spec.normEps);
    m.mixes.resize(std::size_t(n * mix));
    linear<T>(m.normed.data(), fn, nullptr, m.mixes.data(), n, s * h, mix);
    m.maps.pre.resize(std::size_t(n * s));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            m.maps.pre[std::size_t(t * s + j)]
                = sigmoidOf(double(m.mixes[std::size_t(t * mix + j)]) * double(scale[0])
                      + double(base[j]))
                + hc.eps;
        }
    }
    if (head) {
        return m;
    }
    m.steps = 2 * std::max<std::int64_t>(hc.sinkhornIters, 1) - 1;
    m.maps.post.resize(std::size_t(n * s));
    m.maps.comb.resize(std::size_t(n * s * s));
    m.soft.resize(std::size_t(n * s * s));
    m.stages.resize(std::size_t(m.steps * n * s * s));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = m.mixes.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            m.maps.post[std::size_t(t * s + j)]
                = 2.0 * sigmoidOf(double(row[s + j]) * double(scale[1]) + double(base[s + j]));
        }
        double* soft = m.soft.data() + t * s * s;
        double* c = m.maps.comb.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double top = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                soft[j * s + k] = double(row[i]) * double(scale[2]) + double(base[i]);
                top = std::max(top, soft[j * s + k]);
            }
            double sum = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                soft[j * s + k] = std::exp(soft[j * s + k] - top);
                sum += soft[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                soft[j * s + k] /= sum;
                c[j * s + k] = soft[j * s + k] + hc.eps;
            }
        }
        for (std::int64_t i = 0; i < m.steps; ++i) {
            std::copy_n(c, s * s, m.stages.data() + (i * n + t) * s * s);
            normaliseLines(c, s, sinkhornRows(i), hc.eps);
        }
    }
    return m;
}

/// The backward of deepseekV4HyperForward from the maps' gradients (dpost, dcomb empty for the
/// head): the gradients of fn, base and scale accumulated, the streams' (through the RMS) added to
/// `dstreams`.
template <typename T>
void deepseekV4HyperBackward(ParameterSet<T>& params, const std::string& p, const HyperSaved<T>& m,
    const T* streams, std::int64_t n, const model::ModelSpec& spec, const std::vector<double>& dpre,
    const std::vector<double>& dpost, std::vector<double> dcomb, T* dstreams)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t s = hc.streams;
    const std::int64_t h = spec.hiddenSize;
    const bool head = dpost.empty();
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* scale = params.value(p + "_scale");
    T* dbase = params.grad(p + "_base");
    T* dscale = params.grad(p + "_scale");
    std::vector<T> dmix(std::size_t(n * mix), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = m.mixes.data() + t * mix;
        T* drow = dmix.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            // pre = σ(z) + eps, z = mix·scale₀ + base.
            const double sg = m.maps.pre[std::size_t(t * s + j)] - hc.eps;
            const double dz = dpre[std::size_t(t * s + j)] * sg * (1.0 - sg);
            drow[j] = T(dz * double(scale[0]));
            dscale[0] += T(dz * double(row[j]));
            dbase[j] += T(dz);
        }
        if (head) {
            continue;
        }
        for (std::int64_t j = 0; j < s; ++j) {
            // post = 2σ(z).
            const double sg = m.maps.post[std::size_t(t * s + j)] / 2.0;
            const double dz = dpost[std::size_t(t * s + j)] * 2.0 * sg * (1.0 - sg);
            drow[s + j] = T(dz * double(scale[1]));
            dscale[1] += T(dz * double(row[s + j]));
            dbase[s + j] += T(dz);
        }
        double* dc = dcomb.data() + t * s * s;
        for (std::int64_t i = m.steps - 1; i >= 0; --i) {
            normaliseLinesBackward(
                m.stages.data() + (i * n + t) * s * s, dc, s, sinkhornRows(i), hc.eps);
        }
        // comb₀ = softmax over k of z + eps.
        const double* soft = m.soft.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double dot = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                dot += soft[j * s + k] * dc[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                const double dz = soft[j * s + k] * (dc[j * s + k] - dot);
                drow[i] = T(dz * double(scale[2]));
                dscale[2] += T(dz * double(row[i]));
                dbase[i] += T(dz);
            }
        }
    }
    std::vector<T> dnormed(std::size_t(n * s * h));
    linearBackward<T>(m.normed.data(), params.value(p + "_fn"), dmix.data(), dnormed.data(),
        params.grad(p + "_fn"), nullptr, n, s * h, mix, false);
    rmsNormBackward<T>(streams, nullptr, dnormed.data(), dstreams, nullptr, n, s * h, spec.normEps);
}

/// The collapse's backward (out[t] = Σ_j pre[t, j] · streams[t, j]): dpre from `dout`, and
/// pre · dout added to `dstreams`.
template <typename T>
std::vector<double> deepseekV4CollapseBackward(const HyperMaps& m, const T* streams, const T* dout,
    std::int64_t n, std::int64_t s, std::int64_t h, T* dstreams)
{
    std::vector<double> dpre(std::size_t(n * s), 0.0);
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            const T* st = streams + (t * s + j) * h;
            T* dst = dstreams + (t * s + j) * h;
            const double pre = m.pre[std::size_t(t * s + j)];
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dot += double(dout[t * h + c]) * double(st[c]);
                dst[c] += T(pre * double(dout[t * h + c]));
            }
            dpre[std::size_t(t * s + j)] = dot;
        }
    }
    return dpre;
}

/// The expansion's backward (streams'[k] = post[k] · out + Σ_j comb[j, k] · streams[j]): from
/// the new streams' gradient `dnext`, the block output's gradient, dpost, dcomb and the old
/// streams' gradient (overwriting `dprev`).
template <typename T>
std::vector<T> deepseekV4ExpandBackward(const HyperMaps& m, const T* prev, const T* out,
    const T* dnext, std::int64_t n, std::int64_t s, std::int64_t h, std::vector<double>& dpost,
    std::vector<double>& dcomb, std::vector<T>& dprev)
{
    std::vector<T> dout(std::size_t(n * h), T(0));
    dpost.assign(std::size_t(n * s), 0.0);
    dcomb.assign(std::size_t(n * s * s), 0.0);
    dprev.assign(std::size_t(n * s * h), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        const double* c = m.comb.data() + t * s * s;
        for (std::int64_t k = 0; k < s; ++k) {
            const T* dk = dnext + (t * s + k) * h;
            const double post = m.post[std::size_t(t * s + k)];
            double dp = 0.0;
            for (std::int64_t ch = 0; ch < h; ++ch) {
                dp += double(dk[ch]) * double(out[t * h + ch]);
                dout[std::size_t(t * h + ch)] += T(post * double(dk[ch]));
            }
            dpost[std::size_t(t * s + k)] = dp;
            for (std::int64_t j = 0; j < s; ++j) {
                const T* pj = prev + (t * s + j) * h;
                T* dj = dprev.data() + (t * s + j) * h;
                double dc = 0.0;
                for (std::int64_t ch = 0; ch < h; ++ch) {
                    dc += double(dk[ch]) * double(pj[ch]);
                    dj[ch] += T(c[j * s + k] * double(dk[ch]));
                }
                dcomb[std::size_t(t * s * s + j * s + k)] = dc;
            }
        }
    }
    return dout;
}

#define DAY0_GRADIENT_DEEPSEEK_V4_HYPER(T)                                                         \
    template HyperSaved<T> deepseekV4HyperForward<T>(const ParameterSet<T>&, const std::string&,   \
        const T*, std::int64_t, const model::ModelSpec&, bool);                                    \
    template void deepseekV4HyperBackward<T>(ParameterSet<T>&, const std::string&,                 \
        const HyperSaved<T>&, const T*, std::int64_t, const model::ModelSpec&,                     \
        const std::vector<double>&, const std::vector<double>&, std::vector<double>, T*);          \
    template std::vector<double> deepseekV4CollapseBackward<T>(                                    \
        const HyperMaps&, const T*, const T*, std::int64_t, std::int64_t, std::int64_t, T*);       \
    template std::vector<T> deepseekV4ExpandBackward<T>(const HyperMaps&, const T*, const T*,      \
        const T*, std::int64_t, std::int64_t, std::int64_t, std::vector<double>&,                  \
        std::vector<double>&, std::vector<T>&);

DAY0_GRADIENT_DEEPSEEK_V4_HYPER(float)
DAY0_GRADIENT_DEEPSEEK_V4_HYPER(double)

#undef DAY0_GRADIENT_DEEPSEEK_V4_HYPER

} // namespace day0::exec::detail
