// DeepSeek-V4's hyper-connections on the reference engine (exec/deepseek_v4.h): the maps that
// mix the hc_mult residual streams before and after each block, the collapse of the streams into
// a block's input and the expansion of its output back into them; written from transformers'
// modeling_deepseek_v4.py (see deepseek_v4_block.cpp for the sources). Kept in fp32/fp64 under an
// emulated plan (deepseek_v4_forward.cpp says why).
#include "exec/deepseek_v4.h"
#include "exec/forward.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace day0::exec::detail {

// From the streams [n, S, h] flattened and RMS-normalised (no weight, rms_norm_eps): mixes =
// fn · x; pre = σ(mix·scale₀ + base) + hc_eps; post = 2σ(mix·scale₁ + base); comb = softmax
// over its last axis of mix·scale₂ + base, + hc_eps, then Sinkhorn-normalised: columns once,
// then hc_sinkhorn_iters - 1 times rows and columns (each divided by its sum + hc_eps).
// `head`: the final collapse (hc_head: pre only, one scale).
template <typename T>
HyperMaps deepseekV4HyperMaps(const WeightTable& w, const std::string& p, const T* streams,
    std::int64_t n, std::int64_t s, std::int64_t h, const model::ModelSpec& spec, bool head)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* fn = w.tensors.at(p + "_fn").template data<T>();
    const T* base = w.tensors.at(p + "_base").template data<T>();
    const T* scale = w.tensors.at(p + "_scale").template data<T>();
    std::vector<T> normed(std::size_t(n * s * h));
    rmsNorm<T>(streams, nullptr, normed.data(), n, s * h, spec.normEps);
    std::vector<T> mixes(std::size_t(n * mix));
    linear<T>(normed.data(), fn, nullptr, mixes.data(), n, s * h, mix);
    HyperMaps m;
    m.pre.resize(std::size_t(n * s));
    if (!head) {
        m.post.resize(std::size_t(n * s));
        m.comb.resize(std::size_t(n * s * s));
    }
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = mixes.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            m.pre[std::size_t(t * s + j)]
                = sigmoid(double(row[j]) * double(scale[0]) + double(base[j])) + hc.eps;
        }
        if (head) {
            continue;
        }
        for (std::int64_t j = 0; j < s; ++j) {
            m.post[std::size_t(t * s + j)]
                = 2.0 * sigmoid(double(row[s + j]) * double(scale[1]) + double(base[s + j]));
        }
        double* c = m.comb.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double top = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                c[j * s + k] = double(row[i]) * double(scale[2]) + double(base[i]);
                top = std::max(top, c[j * s + k]);
            }
            double sum = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                c[j * s + k] = std::exp(c[j * s + k] - top);
                sum += c[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                c[j * s + k] = c[j * s + k] / sum + hc.eps;
            }
        }
        // Sinkhorn: each column (then each row and column again) divided by its sum + eps.
        const auto normalise = [&](bool rows) {
            const auto at = [&](std::int64_t a, std::int64_t b) -> double& {
                return rows ? c[a * s + b] : c[b * s + a];
            };
            for (std::int64_t a = 0; a < s; ++a) {
                double sum = 0.0;
                for (std::int64_t b = 0; b < s; ++b) {
                    sum += at(a, b);
                }
                for (std::int64_t b = 0; b < s; ++b) {
                    at(a, b) /= sum + hc.eps;
                }
            }
        };
        normalise(false);
        for (std::int64_t it = 0; it + 1 < hc.sinkhornIters; ++it) {
            normalise(true);
            normalise(false);
        }
    }
    return m;
}

// collapsed[t] = Σ_j pre[t, j] · streams[t, j].
template <typename T>
void deepseekV4Collapse(
    const HyperMaps& m, const T* streams, std::int64_t n, std::int64_t s, std::int64_t h, T* out)
{
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            double acc = 0.0;
            for (std::int64_t j = 0; j < s; ++j) {
                acc += m.pre[std::size_t(t * s + j)] * double(streams[(t * s + j) * h + c]);
            }
            out[t * h + c] = T(acc);
        }
    }
}

// streams[t, k] ← post[t, k] · out[t] + Σ_j comb[t, j, k] · streams[t, j] (HF: comb consumed
// transposed).
template <typename T>
void deepseekV4Expand(
    const HyperMaps& m, T* streams, const T* out, std::int64_t n, std::int64_t s, std::int64_t h)
{
    std::vector<double> next(std::size_t(s * h));
    for (std::int64_t t = 0; t < n; ++t) {
        T* st = streams + t * s * h;
        const double* c = m.comb.data() + t * s * s;
        for (std::int64_t k = 0; k < s; ++k) {
            for (std::int64_t ch = 0; ch < h; ++ch) {
                double acc = m.post[std::size_t(t * s + k)] * double(out[t * h + ch]);
                for (std::int64_t j = 0; j < s; ++j) {
                    acc += c[j * s + k] * double(st[j * h + ch]);
                }
                next[std::size_t(k * h + ch)] = acc;
            }
        }
        for (std::int64_t i = 0; i < s * h; ++i) {
            st[i] = T(next[std::size_t(i)]);
        }
    }
}

#define DAY0_DEEPSEEK_V4_HYPER_EXPORTS(T)                                                          \
    template HyperMaps deepseekV4HyperMaps<T>(const WeightTable&, const std::string&, const T*,    \
        std::int64_t, std::int64_t, std::int64_t, const model::ModelSpec&, bool);                  \
    template void deepseekV4Collapse<T>(                                                           \
        const HyperMaps&, const T*, std::int64_t, std::int64_t, std::int64_t, T*);                 \
    template void deepseekV4Expand<T>(                                                             \
        const HyperMaps&, T*, const T*, std::int64_t, std::int64_t, std::int64_t);
DAY0_DEEPSEEK_V4_HYPER_EXPORTS(float)
DAY0_DEEPSEEK_V4_HYPER_EXPORTS(double)
#undef DAY0_DEEPSEEK_V4_HYPER_EXPORTS

} // namespace day0::exec::detail
