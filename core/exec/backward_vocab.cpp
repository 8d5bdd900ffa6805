// The gradient pass's vocabulary ends (gradient_pass.h): the embedding lookup and its backward,
// and the cross-entropy of the logits, whole or vocab-parallel under tensor parallelism
// (Megatron's VocabParallelEmbedding and vocab_parallel_cross_entropy; GradientOptions).
#include "exec/backward_ops.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace day0::exec::detail {

template <typename T>
Result<void> GradientPass<T>::embed(std::span<const std::int64_t> ids, std::vector<T>& hidden)
{
    const std::int64_t h = m_spec.hiddenSize;
    const T* table = m_p.value(embedModule() + ".weight");
    if (m_vocabTotal == 0) {
        return embedding<T>(ids, table, m_spec.vocabSize, h, hidden.data());
    }
    // Each rank looks up the ids of its rows, zeros elsewhere; the sum over the group is the
    // whole lookup (exactly: one rank adds its row to zeros).
    std::fill(hidden.begin(), hidden.end(), T(0));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::int64_t row = ids[i] - m_vocabStart;
        if (row >= 0 && row < m_spec.vocabSize) {
            std::copy_n(table + row * h, h, hidden.begin() + std::int64_t(i) * h);
        }
    }
    return tpSum(hidden.data(), std::int64_t(hidden.size()));
}

template <typename T>
void GradientPass<T>::embedBackward(std::span<const std::int64_t> ids, const std::vector<T>& dh)
{
    const std::int64_t h = m_spec.hiddenSize;
    T* dEmbed = m_p.grad(embedModule() + ".weight");
    for (std::size_t i = 0; i < ids.size(); ++i) {
        // Vocab-parallel: only the rows this rank holds (dh is whole on every rank).
        const std::int64_t row = ids[i] - m_vocabStart;
        if (row < 0 || row >= m_spec.vocabSize) {
            continue;
        }
        const T* src = dh.data() + std::int64_t(i) * h;
        T* dst = dEmbed + row * h;
        for (std::int64_t c = 0; c < h; ++c) {
            dst[c] += src[c];
        }
    }
}

template <typename T>
Result<double> GradientPass<T>::crossEntropyOf(const std::vector<T>& logits,
    std::span<const std::int64_t> targets, std::vector<T>& dlogits, std::int64_t& counted)
{
    const std::int64_t vocab = m_spec.vocabSize;
    if (m_vocabTotal == 0) {
        return crossEntropy<T>(logits.data(), targets, vocab, dlogits.data(), counted);
    }
    // Vocab-parallel: each row's maximum over the group, then its sum of exponentials and the
    // target's logit (held by one rank, zero on the others) summed over it, in double.
    const auto n = std::int64_t(targets.size());
    std::vector<double> top(std::size_t(n), -std::numeric_limits<double>::infinity());
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t c = 0; c < vocab; ++c) {
            top[std::size_t(i)] = std::max(top[std::size_t(i)], double(logits[i * vocab + c]));
        }
    }
    DAY0_TRY(m_tpMax(top.data(), n, DType::F64));
    std::vector<double> sums(std::size_t(2 * n), 0.0); // [sum of exponentials | target logit]
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t c = 0; c < vocab; ++c) {
            sums[std::size_t(i)] += std::exp(double(logits[i * vocab + c]) - top[std::size_t(i)]);
        }
        const std::int64_t local = targets[std::size_t(i)] - m_vocabStart;
        if (targets[std::size_t(i)] >= 0 && local >= 0 && local < vocab) {
            sums[std::size_t(n + i)] = double(logits[i * vocab + local]);
        }
    }
    DAY0_TRY(tpSumWide(sums.data(), 2 * n));
    counted = std::count_if(targets.begin(), targets.end(), [](std::int64_t t) { return t >= 0; });
    std::fill(dlogits.begin(), dlogits.end(), T(0));
    double loss = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t target = targets[std::size_t(i)];
        if (target < 0) {
            continue;
        }
        const double lse = top[std::size_t(i)] + std::log(sums[std::size_t(i)]);
        loss += lse - sums[std::size_t(n + i)];
        for (std::int64_t c = 0; c < vocab; ++c) {
            const double p = std::exp(double(logits[i * vocab + c]) - lse);
            const bool hit = c + m_vocabStart == target;
            dlogits[std::size_t(i * vocab + c)] = T((p - (hit ? 1.0 : 0.0)) / double(counted));
        }
    }
    return counted > 0 ? loss / double(counted) : 0.0;
}

#define DAY0_GRADIENT_VOCAB(T)                                                                     \
    template Result<void> GradientPass<T>::embed(std::span<const std::int64_t>, std::vector<T>&);  \
    template void GradientPass<T>::embedBackward(                                                  \
        std::span<const std::int64_t>, const std::vector<T>&);                                     \
    template Result<double> GradientPass<T>::crossEntropyOf(                                       \
        const std::vector<T>&, std::span<const std::int64_t>, std::vector<T>&, std::int64_t&);

DAY0_GRADIENT_VOCAB(float)
DAY0_GRADIENT_VOCAB(double)

#undef DAY0_GRADIENT_VOCAB

} // namespace day0::exec::detail
