// The backward of the reference operators (backward_ops.h). Written from the chain rule of each
// forward in ops.cpp, attention.cpp and rope.cpp; checked against PyTorch autograd and finite
// differences by tests/core/exec/backward_test.cpp.
#include "exec/backward_ops.h"

#include "exec/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace day0::exec::detail {

template <typename T>
void gemm(bool transA, bool transB, const T* a, const T* b, T* c, std::int64_t m, std::int64_t n,
    std::int64_t k, bool accumulate)
{
    if (m == 0 || n == 0) {
        return;
    }
    if (k == 0) {
        if (!accumulate) {
            std::fill_n(c, m * n, T(0));
        }
        return;
    }
    const T beta = accumulate ? T(1) : T(0);
    const auto ta = transA ? CblasTrans : CblasNoTrans;
    const auto tb = transB ? CblasTrans : CblasNoTrans;
    const blasint lda = transA ? blasint(m) : blasint(k);
    const blasint ldb = transB ? blasint(k) : blasint(n);
    if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), 1.0f, a, lda, b, ldb,
            beta, c, blasint(n));
    } else {
        cblas_dgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), 1.0, a, lda, b, ldb,
            beta, c, blasint(n));
    }
}

template <typename T>
void linearBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::int64_t rows,
    std::int64_t in, std::int64_t out, bool accumulateDx)
{
    if (dx != nullptr) {
        gemm(false, false, dy, w, dx, rows, in, out, accumulateDx); // [rows,out]·[out,in]
    }
    gemm(true, false, dy, x, dw, out, in, rows, true); // [out,rows]·[rows,in]
    if (db != nullptr) {
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t o = 0; o < out; ++o) {
                db[o] += dy[r * out + o];
            }
        }
    }
}

template <typename T>
void rmsNormBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, std::int64_t rows,
    std::int64_t dim, double eps)
{
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* xr = x + r * dim;
        const T* dyr = dy + r * dim;
        T* dxr = dx + r * dim;
        // The forward's statistics, recomputed in the same order and type (ops.cpp rmsNorm).
        T sum = 0;
        for (std::int64_t i = 0; i < dim; ++i) {
            sum += xr[i] * xr[i];
        }
        const T inv = T(1) / std::sqrt(sum / T(dim) + T(eps));
        // y = w·x·inv, inv = (mean(x²) + eps)^(-1/2): ∂inv/∂x_i = −inv³·x_i / dim.
        T dot = 0;
        for (std::int64_t i = 0; i < dim; ++i) {
            const T g = w != nullptr ? dyr[i] * w[i] : dyr[i];
            dot += g * xr[i];
        }
        const T coef = dot * inv * inv * inv / T(dim);
        for (std::int64_t i = 0; i < dim; ++i) {
            const T g = w != nullptr ? dyr[i] * w[i] : dyr[i];
            dxr[i] += g * inv - xr[i] * coef;
            if (dw != nullptr) {
                dw[i] += dyr[i] * (xr[i] * inv);
            }
        }
    }
}

template <typename T>
void geluTanhGluBackward(const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n)
{
    const T c = T(0.79788456080286535588); // sqrt(2/pi), as ops.cpp's forward
    for (std::int64_t i = 0; i < n; ++i) {
        const T x = g[i];
        const T t = std::tanh(c * (x + T(0.044715) * x * x * x));
        const T gelu = T(0.5) * x * (T(1) + t);
        const T slope = T(0.5) * (T(1) + t)
            + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3 * 0.044715) * x * x);
        dg[i] = da[i] * u[i] * slope;
        du[i] = da[i] * gelu;
    }
}

template <typename T>
void swigluBackward(const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        const T s = sigmoid(g[i]);
        const T silu = g[i] * s;
        dg[i] = da[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
        du[i] = da[i] * silu;
    }
}

template <typename T>
void ropeBackward(T* dx, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
    std::span<const std::int64_t> positions, const Rope& rope)
{
    // The forward multiplies each pair by m·R(θ); its transpose is m·R(−θ).
    Rope inverse = rope;
    for (double& f : inverse.invFreq) {
        f = -f;
    }
    applyRope<T>(dx, tokens, heads, headDim, positions, inverse);
}

template <typename T>
void clampedSwiglu(const T* g, const T* u, T* a, std::int64_t n, double limit, double alpha)
{
    const T l = T(limit);
    for (std::int64_t i = 0; i < n; ++i) {
        const T gc = std::min(g[i], l);
        const T uc = std::clamp(u[i], -l, l) + T(1);
        a[i] = gc * sigmoid(T(alpha) * gc) * uc;
    }
}

template <typename T>
void clampedSwigluBackward(
    const T* g, const T* u, const T* da, T* dg, T* du, std::int64_t n, double limit, double alpha)
{
    const T l = T(limit);
    const T al = T(alpha);
    for (std::int64_t i = 0; i < n; ++i) {
        const T gc = std::min(g[i], l);
        const T uc = std::clamp(u[i], -l, l) + T(1);
        const T s = sigmoid(al * gc);
        // d(ĝ·σ(αĝ))/dĝ = σ + αĝ·σ(1 − σ); torch.clamp's mask keeps the bound itself.
        dg[i] = g[i] <= l ? da[i] * uc * (s + al * gc * s * (T(1) - s)) : T(0);
        du[i] = u[i] >= -l && u[i] <= l ? da[i] * gc * s : T(0);
    }
}

namespace {

/// The first key query i sees under `window` and `chunk` (0: all keys ≤ i).
std::int64_t firstKey(std::int64_t i, std::int64_t window, std::int64_t chunk)
{
    const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, i + 1 - window) : 0;
    return chunk > 0 ? std::max(first, i / chunk * chunk) : first;
}

} // namespace

template <typename T>
void causalAttentionForward(const T* q, const T* k, const T* v, T* out, std::vector<T>& probs,
    std::int64_t n, std::int64_t heads, std::int64_t kvHeads, std::int64_t d, std::int64_t dv,
    double scale, const std::function<void(T*, std::int64_t)>& round, const AttentionMask<T>& mask,
    std::vector<T>* sinkProbs)
{
    const std::int64_t group = heads / kvHeads;
    probs.assign(std::size_t(heads * n * n), T(0));
    if (mask.sinks != nullptr && sinkProbs != nullptr) {
        sinkProbs->assign(std::size_t(heads * n), T(0));
    }
    std::fill_n(out, n * heads * dv, T(0));
    for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kvh = h / group;
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t first = firstKey(i, mask.window, mask.chunk);
            const std::int64_t seen = i + 1 - first;
            const T* qi = q + (i * heads + h) * d;
            T* p = probs.data() + (h * n + i) * n;
            T top = -std::numeric_limits<T>::infinity();
            for (std::int64_t j = first; j <= i; ++j) {
                const T* kj = k + (j * kvHeads + kvh) * d;
                T s = 0;
                for (std::int64_t c = 0; c < d; ++c) {
                    s += qi[c] * kj[c];
                }
                p[j] = s * T(scale);
            }
            if (!mask.selected.empty()) {
                // DSA / MSA: a key the row's selection leaves out scores −∞ (probability 0).
                std::vector<bool> kept(std::size_t(i + 1), false);
                const std::int64_t rowIndex = mask.selectedPerKvHead ? kvh * n + i : i;
                const auto row
                    = mask.selected.subspan(std::size_t(rowIndex * mask.selectedPerQuery),
                        std::size_t(mask.selectedPerQuery));
                for (const std::int64_t j : row) {
                    if (j >= 0 && j <= i) {
                        kept[std::size_t(j)] = true;
                    }
                }
                for (std::int64_t j = first; j <= i; ++j) {
                    if (!kept[std::size_t(j)]) {
                        p[j] = -std::numeric_limits<T>::infinity();
                    }
                }
            }
            if (round) {
                round(p + first, seen);
            }
            for (std::int64_t j = first; j <= i; ++j) {
                top = std::max(top, p[j]);
            }
            // A sink is one more logit in the row: in the maximum and the denominator.
            const T sink = mask.sinks != nullptr ? mask.sinks[h] : T(0);
            if (mask.sinks != nullptr) {
                top = std::max(top, sink);
            }
            T sum = mask.sinks != nullptr ? std::exp(sink - top) : T(0);
            for (std::int64_t j = first; j <= i; ++j) {
                p[j] = std::exp(p[j] - top);
                sum += p[j];
            }
            for (std::int64_t j = first; j <= i; ++j) {
                p[j] /= sum;
            }
            if (mask.sinks != nullptr && sinkProbs != nullptr) {
                (*sinkProbs)[std::size_t(h * n + i)] = std::exp(sink - top) / sum;
            }
            if (round) {
                round(p + first, seen);
            }
            T* o = out + (i * heads + h) * dv;
            for (std::int64_t j = first; j <= i; ++j) {
                const T* vj = v + (j * kvHeads + kvh) * dv;
                for (std::int64_t c = 0; c < dv; ++c) {
                    o[c] += p[j] * vj[c];
                }
            }
        }
    }
}

template <typename T>
void causalAttentionBackward(const T* q, const T* k, const T* v, const std::vector<T>& probs,
    const T* dout, T* dq, T* dk, T* dv, std::int64_t n, std::int64_t heads, std::int64_t kvHeads,
    std::int64_t d, std::int64_t vd, double scale, const AttentionMask<T>& mask,
    const std::vector<T>* sinkProbs, T* dsinks)
{
    const std::int64_t group = heads / kvHeads;
    std::fill_n(dq, n * heads * d, T(0));
    std::vector<T> ds(static_cast<std::size_t>(n));
    const bool sinks = mask.sinks != nullptr && sinkProbs != nullptr && dsinks != nullptr;
    for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kvh = h / group;
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t first = firstKey(i, mask.window, mask.chunk);
            const T* p = probs.data() + (h * n + i) * n;
            const T* doi = dout + (i * heads + h) * vd;
            // dP_ij = dO_i · V_j; dS_ij = P_ij (dP_ij − Σ_j' P_ij' dP_ij') over the keys the row
            // sees (a sink adds P_sink · dP_sink = 0 to the sum: it has no value).
            T dot = 0;
            for (std::int64_t j = first; j <= i; ++j) {
                const T* vj = v + (j * kvHeads + kvh) * vd;
                T dp = 0;
                for (std::int64_t c = 0; c < vd; ++c) {
                    dp += doi[c] * vj[c];
                }
                ds[std::size_t(j)] = dp;
                dot += p[j] * dp;
                T* dvj = dv + (j * kvHeads + kvh) * vd;
                for (std::int64_t c = 0; c < vd; ++c) {
                    dvj[c] += p[j] * doi[c];
                }
            }
            if (sinks) {
                dsinks[h] -= (*sinkProbs)[std::size_t(h * n + i)] * dot;
            }
            const T* qi = q + (i * heads + h) * d;
            T* dqi = dq + (i * heads + h) * d;
            for (std::int64_t j = first; j <= i; ++j) {
                const T dsij = p[j] * (ds[std::size_t(j)] - dot) * T(scale);
                const T* kj = k + (j * kvHeads + kvh) * d;
                T* dkj = dk + (j * kvHeads + kvh) * d;
                for (std::int64_t c = 0; c < d; ++c) {
                    dqi[c] += dsij * kj[c];
                    dkj[c] += dsij * qi[c];
                }
            }
        }
    }
}

template <typename T>
double crossEntropy(const T* logits, std::span<const std::int64_t> targets, std::int64_t vocab,
    T* dlogits, std::int64_t& counted)
{
    const auto n = std::int64_t(targets.size());
    counted = std::count_if(targets.begin(), targets.end(), [](std::int64_t t) { return t >= 0; });
    std::fill_n(dlogits, n * vocab, T(0));
    double loss = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t target = targets[std::size_t(i)];
        if (target < 0) {
            continue;
        }
        const T* row = logits + i * vocab;
        double top = -std::numeric_limits<double>::infinity();
        for (std::int64_t c = 0; c < vocab; ++c) {
            top = std::max(top, double(row[c]));
        }
        double sum = 0.0;
        for (std::int64_t c = 0; c < vocab; ++c) {
            sum += std::exp(double(row[c]) - top);
        }
        const double lse = top + std::log(sum);
        loss += lse - double(row[target]);
        T* drow = dlogits + i * vocab;
        for (std::int64_t c = 0; c < vocab; ++c) {
            const double p = std::exp(double(row[c]) - lse);
            drow[c] = T((p - (c == target ? 1.0 : 0.0)) / double(counted));
        }
    }
    return counted > 0 ? loss / double(counted) : 0.0;
}

#define DAY0_BACKWARD_OPS(T)                                                                       \
    template void gemm<T>(                                                                         \
        bool, bool, const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, bool);       \
    template void linearBackward<T>(                                                               \
        const T*, const T*, const T*, T*, T*, T*, std::int64_t, std::int64_t, std::int64_t, bool); \
    template void rmsNormBackward<T>(                                                              \
        const T*, const T*, const T*, T*, T*, std::int64_t, std::int64_t, double);                 \
    template void swigluBackward<T>(const T*, const T*, const T*, T*, T*, std::int64_t);           \
    template void geluTanhGluBackward<T>(const T*, const T*, const T*, T*, T*, std::int64_t);      \
    template void ropeBackward<T>(                                                                 \
        T*, std::int64_t, std::int64_t, std::int64_t, std::span<const std::int64_t>, const Rope&); \
    template void clampedSwiglu<T>(const T*, const T*, T*, std::int64_t, double, double);          \
    template void clampedSwigluBackward<T>(                                                        \
        const T*, const T*, const T*, T*, T*, std::int64_t, double, double);                       \
    template void causalAttentionForward<T>(const T*, const T*, const T*, T*, std::vector<T>&,     \
        std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double,              \
        const std::function<void(T*, std::int64_t)>&, const AttentionMask<T>&, std::vector<T>*);   \
    template void causalAttentionBackward<T>(const T*, const T*, const T*, const std::vector<T>&,  \
        const T*, T*, T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,              \
        std::int64_t, double, const AttentionMask<T>&, const std::vector<T>*, T*);                 \
    template double crossEntropy<T>(                                                               \
        const T*, std::span<const std::int64_t>, std::int64_t, T*, std::int64_t&);

DAY0_BACKWARD_OPS(float)
DAY0_BACKWARD_OPS(double)

#undef DAY0_BACKWARD_OPS

} // namespace day0::exec::detail
