#include "exec/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace day0::exec {

namespace {

/// C[m,n] = A[m,k]·B[n,k]ᵀ with leading dimensions (rows of A and B are strided tokens).
template <typename T>
void gemmNT(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t ldc,
    std::int64_t m, std::int64_t n, std::int64_t k)
{
    if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k),
            1.0f, a, blasint(lda), b, blasint(ldb), 0.0f, c, blasint(ldc));
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k),
            1.0, a, blasint(lda), b, blasint(ldb), 0.0, c, blasint(ldc));
    }
}

/// C[m,n] = A[m,k]·B[k,n] with leading dimensions.
template <typename T>
void gemmNN(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t ldc,
    std::int64_t m, std::int64_t n, std::int64_t k)
{
    if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k),
            1.0f, a, blasint(lda), b, blasint(ldb), 0.0f, c, blasint(ldc));
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k),
            1.0, a, blasint(lda), b, blasint(ldb), 0.0, c, blasint(ldc));
    }
}

} // namespace

std::int64_t firstVisibleKey(
    const AttentionShape& shape, std::int64_t position, std::int64_t visible)
{
    std::int64_t first = 0;
    if (shape.window > 0) {
        first = std::max<std::int64_t>(0, visible - shape.window);
    }
    if (shape.chunk > 0) {
        first = std::max(first, position / shape.chunk * shape.chunk);
    }
    return first;
}

template <typename T>
void attention(const T* q, const T* k, const T* v, T* out, const AttentionShape& shape,
    const AttentionRounding<T>& roundScores, const AttentionRounding<T>& roundProbs)
{
    const std::int64_t nq = shape.queries;
    const std::int64_t nk = shape.keys;
    if (nq == 0 || nk == 0 || shape.heads == 0) {
        return;
    }
    const std::int64_t qStride = shape.qStride > 0 ? shape.qStride : shape.heads * shape.headDim;
    const std::int64_t kStride = shape.kStride > 0 ? shape.kStride : shape.kvHeads * shape.headDim;
    const std::int64_t vStride = shape.vStride > 0 ? shape.vStride : shape.kvHeads * shape.valueDim;
    const std::int64_t outStride = shape.heads * shape.valueDim;
    const std::int64_t group = shape.heads / std::max<std::int64_t>(shape.kvHeads, 1);
    const std::int64_t firstPosition = nk - nq;
    std::vector<T> scores(std::size_t(nq * nk));
    // DSA: which keys each query's indexer kept (the same for every head).
    const bool sparse = !shape.selectedKeys.empty();
    std::vector<char> kept(sparse ? std::size_t(nq * nk) : 0, 0);
    for (std::int64_t i = 0; sparse && i < nq; ++i) {
        for (std::int64_t s = 0; s < shape.selectedPerQuery; ++s) {
            const std::int64_t j = shape.selectedKeys[std::size_t(i * shape.selectedPerQuery + s)];
            if (j >= 0 && j < nk) {
                kept[std::size_t(i * nk + j)] = 1;
            }
        }
    }
    for (std::int64_t h = 0; h < shape.heads; ++h) {
        const std::int64_t kvh = h / group;
        gemmNT(q + h * shape.headDim, qStride, k + kvh * shape.headDim, kStride, scores.data(), nk,
            nq, nk, shape.headDim);
        for (auto& s : scores) {
            s *= T(shape.scale);
        }
        if (roundScores) {
            roundScores(scores.data(), std::int64_t(scores.size()));
        }
        for (std::int64_t i = 0; i < nq; ++i) {
            T* row = scores.data() + i * nk;
            const std::int64_t visible = shape.causal ? std::min(nk, firstPosition + i + 1) : nk;
            const std::int64_t first = firstVisibleKey(shape, firstPosition + i, visible);
            // A sink is one more logit in the row: in the max and the denominator, no value.
            const T sink = shape.sinks.empty() ? T(0) : T(shape.sinks[std::size_t(h)]);
            const char* keep = sparse ? kept.data() + i * nk : nullptr;
            T m = -std::numeric_limits<T>::infinity();
            for (std::int64_t j = first; j < visible; ++j) {
                if (keep == nullptr || keep[j] != 0) {
                    m = std::max(m, row[j]);
                }
            }
            if (!shape.sinks.empty()) {
                m = std::max(m, sink);
            }
            T sum = shape.sinks.empty() ? T(0) : std::exp(sink - m);
            for (std::int64_t j = first; j < visible; ++j) {
                // A key the indexer dropped is a −inf score: probability exactly zero.
                row[j] = keep == nullptr || keep[j] != 0 ? std::exp(row[j] - m) : T(0);
                sum += row[j];
            }
            const T inv = sum > T(0) ? T(1) / sum : T(0);
            for (std::int64_t j = first; j < visible; ++j) {
                row[j] *= inv;
            }
            std::fill(row, row + first, T(0));
            std::fill(row + visible, row + nk, T(0));
        }
        if (roundProbs) {
            roundProbs(scores.data(), std::int64_t(scores.size()));
        }
        gemmNN(scores.data(), nk, v + kvh * shape.valueDim, vStride, out + h * shape.valueDim,
            outStride, nq, shape.valueDim, nk);
    }
}

template void attention<float>(const float*, const float*, const float*, float*,
    const AttentionShape&, const AttentionRounding<float>&, const AttentionRounding<float>&);
template void attention<double>(const double*, const double*, const double*, double*,
    const AttentionShape&, const AttentionRounding<double>&, const AttentionRounding<double>&);

} // namespace day0::exec
