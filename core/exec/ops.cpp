#include "exec/ops.h"

#include "base/thread_pool.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace day0::exec {

namespace {

/// Runs fn(row) over rows, on the global pool when there is enough work to pay for it.
template <typename Fn> void forRows(std::int64_t rows, std::int64_t workPerRow, Fn fn)
{
    if (rows <= 1 || rows * workPerRow < (1 << 16)) {
        for (std::int64_t r = 0; r < rows; ++r) {
            fn(r);
        }
        return;
    }
    auto& pool = ThreadPool::global();
    const auto chunks = std::min<std::int64_t>(rows, std::int64_t(pool.size()) * 4);
    pool.parallelFor(std::size_t(chunks), [&](std::size_t c) {
        const std::int64_t begin = rows * std::int64_t(c) / chunks;
        const std::int64_t end = rows * std::int64_t(c + 1) / chunks;
        for (std::int64_t r = begin; r < end; ++r) {
            fn(r);
        }
    });
}

template <Activation A, typename T> T applyActivation(T x)
{
    if constexpr (A == Activation::Silu) {
        return x * sigmoid(x);
    } else if constexpr (A == Activation::Gelu) {
        return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    } else if constexpr (A == Activation::GeluTanh) {
        const T c = T(0.79788456080286535588); // sqrt(2/pi)
        return T(0.5) * x * (T(1) + std::tanh(c * (x + T(0.044715) * x * x * x)));
    } else if constexpr (A == Activation::QuickGelu) {
        return x * sigmoid(T(1.702) * x);
    } else {
        return x > T(0) ? x : T(0);
    }
}

/// Elements per chunk of an elementwise activation on the pool: a transcendental costs tens of
/// cycles, so a chunk is tens of microseconds, well above the pool's hand-off.
constexpr std::int64_t kActivationChunk = 4096;

/// Runs fn(begin, end) over [0, n) in chunks, on the global pool when there are several (each
/// element is computed alone, so the chunking changes no value). The activation is a template
/// argument so that the per-element switch is resolved once, outside the loop.
template <typename Fn> void forElements(std::int64_t n, Activation act, Fn fn)
{
    const auto dispatch = [&](std::int64_t begin, std::int64_t end) {
        switch (act) {
        case Activation::Silu:
            return fn.template operator()<Activation::Silu>(begin, end);
        case Activation::Gelu:
            return fn.template operator()<Activation::Gelu>(begin, end);
        case Activation::GeluTanh:
            return fn.template operator()<Activation::GeluTanh>(begin, end);
        case Activation::QuickGelu:
            return fn.template operator()<Activation::QuickGelu>(begin, end);
        case Activation::Relu:
            return fn.template operator()<Activation::Relu>(begin, end);
        }
    };
    const std::int64_t chunks = (n + kActivationChunk - 1) / kActivationChunk;
    forRows(chunks, kActivationChunk * 16, [&](std::int64_t c) {
        dispatch(c * kActivationChunk, std::min(n, (c + 1) * kActivationChunk));
    });
}

// c[m, n] (+)= a[m, k] · b, with b stored [k, n] or, transposed, [n, k] (row-major).
template <typename T>
void gemm(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k, bool transB,
    bool accumulate)
{
    if (m == 0 || n == 0) {
        return;
    }
    const T beta = accumulate ? T(1) : T(0);
    if (m == 1) {
        // One row (a decode step, a one-token prompt): a matrix-vector product. GEMM would pack
        // the whole of b first (OpenBLAS's incopy), which for one row costs more than the
        // product itself.
        const auto tv = transB ? CblasNoTrans : CblasTrans;
        const blasint rows = transB ? blasint(n) : blasint(k);
        const blasint cols = transB ? blasint(k) : blasint(n);
        if constexpr (std::is_same_v<T, float>) {
            cblas_sgemv(CblasRowMajor, tv, rows, cols, 1.0f, b, cols, a, 1, beta, c, 1);
        } else {
            cblas_dgemv(CblasRowMajor, tv, rows, cols, 1.0, b, cols, a, 1, beta, c, 1);
        }
        return;
    }
    const auto tb = transB ? CblasTrans : CblasNoTrans;
    const blasint ldb = transB ? blasint(k) : blasint(n);
    if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, blasint(m), blasint(n), blasint(k), 1.0f, a,
            blasint(k), b, ldb, beta, c, blasint(n));
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, blasint(m), blasint(n), blasint(k), 1.0, a,
            blasint(k), b, ldb, beta, c, blasint(n));
    }
}

} // namespace

template <typename T>
void matmulTransB(
    const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate)
{
    gemm(a, b, c, m, n, k, true, accumulate);
}

template <typename T>
void matmul(
    const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate)
{
    gemm(a, b, c, m, n, k, false, accumulate);
}

template <typename T>
void linear(const T* x, const T* w, const T* bias, T* y, std::int64_t rows, std::int64_t in,
    std::int64_t out)
{
    matmulTransB(x, w, y, rows, out, in);
    if (bias != nullptr) {
        for (std::int64_t r = 0; r < rows; ++r) {
            T* row = y + r * out;
            for (std::int64_t o = 0; o < out; ++o) {
                row[o] += bias[o];
            }
        }
    }
}

template <typename T>
Result<void> embedding(
    std::span<const std::int64_t> ids, const T* table, std::int64_t vocab, std::int64_t dim, T* out)
{
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::int64_t id = ids[i];
        if (id < 0 || id >= vocab) {
            return Error::badInput(fmt::format(
                "token id {} at position {} is outside the vocabulary [0, {})", id, i, vocab));
        }
        std::memcpy(out + std::int64_t(i) * dim, table + id * dim, std::size_t(dim) * sizeof(T));
    }
    return success();
}

template <typename T>
void rmsNorm(const T* x, const T* w, T* y, std::int64_t rows, std::int64_t dim, double eps)
{
    forRows(rows, dim, [&](std::int64_t r) {
        const T* xr = x + r * dim;
        T* yr = y + r * dim;
        T sum = 0;
        for (std::int64_t i = 0; i < dim; ++i) {
            sum += xr[i] * xr[i];
        }
        const T inv = T(1) / std::sqrt(sum / T(dim) + T(eps));
        for (std::int64_t i = 0; i < dim; ++i) {
            yr[i] = w != nullptr ? w[i] * (xr[i] * inv) : xr[i] * inv;
        }
    });
}

template <typename T>
void layerNorm(
    const T* x, const T* w, const T* b, T* y, std::int64_t rows, std::int64_t dim, double eps)
{
    forRows(rows, dim, [&](std::int64_t r) {
        const T* xr = x + r * dim;
        T* yr = y + r * dim;
        T mean = 0;
        for (std::int64_t i = 0; i < dim; ++i) {
            mean += xr[i];
        }
        mean /= T(dim);
        T var = 0;
        for (std::int64_t i = 0; i < dim; ++i) {
            var += (xr[i] - mean) * (xr[i] - mean);
        }
        var /= T(dim);
        const T inv = T(1) / std::sqrt(var + T(eps));
        for (std::int64_t i = 0; i < dim; ++i) {
            T v = (xr[i] - mean) * inv;
            if (w != nullptr) {
                v *= w[i];
            }
            if (b != nullptr) {
                v += b[i];
            }
            yr[i] = v;
        }
    });
}

Result<Activation> parseActivation(std::string_view name)
{
    if (name == "silu" || name == "swish") {
        return Activation::Silu;
    }
    if (name == "gelu") {
        return Activation::Gelu;
    }
    if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") {
        return Activation::GeluTanh;
    }
    if (name == "quick_gelu") {
        return Activation::QuickGelu;
    }
    if (name == "relu") {
        return Activation::Relu;
    }
    return Error::unsupported(fmt::format(
        "activation '{}' is not implemented (silu, gelu, gelu_pytorch_tanh, quick_gelu, relu)",
        name));
}

template <typename T> void activate(T* x, std::int64_t n, Activation act)
{
    forElements(n, act, [&]<Activation A>(std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            x[i] = applyActivation<A>(x[i]);
        }
    });
}

template <typename T> void gatedActivate(T* gate, const T* up, std::int64_t n, Activation act)
{
    forElements(n, act, [&]<Activation A>(std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            gate[i] = applyActivation<A>(gate[i]) * up[i];
        }
    });
}

template <typename T> void softmaxRows(T* x, std::int64_t rows, std::int64_t n)
{
    forRows(rows, n, [&](std::int64_t r) {
        T* row = x + r * n;
        const T m = *std::max_element(row, row + n);
        T sum = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            row[i] = std::exp(row[i] - m);
            sum += row[i];
        }
        const T inv = T(1) / sum;
        for (std::int64_t i = 0; i < n; ++i) {
            row[i] *= inv;
        }
    });
}

template <typename T> void addInPlace(T* y, const T* x, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        y[i] += x[i];
    }
}

#define DAY0_EXEC_INSTANTIATE(T)                                                                   \
    template void matmulTransB<T>(                                                                 \
        const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, bool);                   \
    template void matmul<T>(                                                                       \
        const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, bool);                   \
    template void linear<T>(                                                                       \
        const T*, const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t);               \
    template Result<void> embedding<T>(                                                            \
        std::span<const std::int64_t>, const T*, std::int64_t, std::int64_t, T*);                  \
    template void rmsNorm<T>(const T*, const T*, T*, std::int64_t, std::int64_t, double);          \
    template void layerNorm<T>(                                                                    \
        const T*, const T*, const T*, T*, std::int64_t, std::int64_t, double);                     \
    template void activate<T>(T*, std::int64_t, Activation);                                       \
    template void gatedActivate<T>(T*, const T*, std::int64_t, Activation);                        \
    template void softmaxRows<T>(T*, std::int64_t, std::int64_t);                                  \
    template void addInPlace<T>(T*, const T*, std::int64_t);

DAY0_EXEC_INSTANTIATE(float)
DAY0_EXEC_INSTANTIATE(double)

} // namespace day0::exec
