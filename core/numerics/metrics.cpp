#include "numerics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace day0::numerics {

namespace {

constexpr std::int64_t kChunk = 1 << 15;

/// Calls fn(first, values) for consecutive chunks of the tensor's elements as doubles.
void forEachChunk(
    const Tensor& tensor, const std::function<void(std::int64_t, const std::vector<double>&)>& fn)
{
    const std::int64_t n = tensor.numel();
    if (tensor.rank() == 0 || !tensor.isContiguous()) {
        fn(0, tensor.toDoubles());
        return;
    }
    const Tensor flat = tensor.view({ n });
    for (std::int64_t start = 0; start < n; start += kChunk) {
        const std::int64_t len = std::min(kChunk, n - start);
        fn(start, flat.narrow(0, start, len).toDoubles());
    }
}

/// Pairs of chunks of two same-shaped tensors.
void forEachChunkPair(const Tensor& a, const Tensor& b,
    const std::function<void(std::int64_t, const std::vector<double>&, const std::vector<double>&)>&
        fn)
{
    const std::int64_t n = a.numel();
    if (a.rank() == 0 || !a.isContiguous() || !b.isContiguous()) {
        fn(0, a.toDoubles(), b.toDoubles());
        return;
    }
    const Tensor fa = a.view({ n });
    const Tensor fb = b.view({ n });
    for (std::int64_t start = 0; start < n; start += kChunk) {
        const std::int64_t len = std::min(kChunk, n - start);
        fn(start, fa.narrow(0, start, len).toDoubles(), fb.narrow(0, start, len).toDoubles());
    }
}

Result<void> checkSameShape(const Tensor& reference, const Tensor& target, const char* what)
{
    if (reference.shape() != target.shape()) {
        return Error::badInput(fmt::format("{}: shapes differ: reference {} vs target {}", what,
            shapeString(reference.shape()), shapeString(target.shape())));
    }
    return success();
}

/// log-softmax of one row, in place.
void logSoftmax(std::vector<double>& row)
{
    const double m = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (const double v : row) {
        sum += std::exp(v - m);
    }
    const double lse = m + std::log(sum);
    for (double& v : row) {
        v -= lse;
    }
}

} // namespace

TensorStats computeStats(const Tensor& tensor)
{
    TensorStats s;
    s.count = tensor.numel();
    double sum = 0.0;
    double sumSq = 0.0;
    std::int64_t finite = 0;
    s.min = std::numeric_limits<double>::infinity();
    s.max = -std::numeric_limits<double>::infinity();
    forEachChunk(tensor, [&](std::int64_t, const std::vector<double>& values) {
        double chunkSum = 0.0;
        double chunkSq = 0.0;
        for (const double v : values) {
            if (std::isnan(v)) {
                ++s.nanCount;
                continue;
            }
            if (std::isinf(v)) {
                ++s.infCount;
                continue;
            }
            ++finite;
            chunkSum += v;
            chunkSq += v * v;
            s.min = std::min(s.min, v);
            s.max = std::max(s.max, v);
            s.absMax = std::max(s.absMax, std::fabs(v));
        }
        sum += chunkSum;
        sumSq += chunkSq;
    });
    if (finite == 0) {
        s.min = 0.0;
        s.max = 0.0;
        return s;
    }
    s.mean = sum / double(finite);
    s.rms = std::sqrt(sumSq / double(finite));
    return s;
}

Result<ErrorMetrics> compareTensors(
    const Tensor& reference, const Tensor& target, const MetricOptions& options)
{
    DAY0_TRY(checkSameShape(reference, target, "compare"));
    ErrorMetrics m;
    double sumR2 = 0.0;
    double sumT2 = 0.0;
    double sumRT = 0.0;
    double sumD2 = 0.0;
    double sumAbs = 0.0;
    std::int64_t positive = 0;
    std::int64_t negative = 0;
    forEachChunkPair(reference, target,
        [&](std::int64_t first, const std::vector<double>& r, const std::vector<double>& t) {
            double cR2 = 0.0;
            double cT2 = 0.0;
            double cRT = 0.0;
            double cD2 = 0.0;
            double cAbs = 0.0;
            for (std::size_t i = 0; i < r.size(); ++i) {
                const double rv = r[i];
                const double tv = t[i];
                const bool rFinite = std::isfinite(rv);
                const bool tFinite = std::isfinite(tv);
                m.nanReference += std::isnan(rv) ? 1 : 0;
                m.nanTarget += std::isnan(tv) ? 1 : 0;
                m.infReference += std::isinf(rv) ? 1 : 0;
                m.infTarget += std::isinf(tv) ? 1 : 0;
                if (!rFinite || !tFinite) {
                    const bool same = (std::isnan(rv) && std::isnan(tv)) || (rv == tv);
                    m.nonFiniteMismatch += same ? 0 : 1;
                    continue;
                }
                const double d = tv - rv;
                ++m.count;
                cR2 += rv * rv;
                cT2 += tv * tv;
                cRT += rv * tv;
                cD2 += d * d;
                cAbs += std::fabs(d);
                positive += d > 0.0 ? 1 : 0;
                negative += d < 0.0 ? 1 : 0;
                if (std::fabs(d) > m.maxAbs) {
                    m.maxAbs = std::fabs(d);
                    m.maxAbsIndex = first + std::int64_t(i);
                }
            }
            sumR2 += cR2;
            sumT2 += cT2;
            sumRT += cRT;
            sumD2 += cD2;
            sumAbs += cAbs;
        });
    if (m.count == 0) {
        return m;
    }
    const double n = double(m.count);
    const double normR = std::sqrt(sumR2);
    const double normT = std::sqrt(sumT2);
    if (normR == 0.0 && normT == 0.0) {
        m.cosine = 1.0;
    } else if (normR == 0.0 || normT == 0.0) {
        m.cosine = 0.0;
    } else {
        m.cosine = std::clamp(sumRT / (normR * normT), -1.0, 1.0);
    }
    m.meanAbs = sumAbs / n;
    m.rmse = std::sqrt(sumD2 / n);
    if (sumD2 == 0.0) {
        m.relL2 = 0.0;
    } else {
        m.relL2 = normR > 0.0 ? std::sqrt(sumD2) / normR : std::numeric_limits<double>::infinity();
        m.snrDb = normR > 0.0 ? 10.0 * std::log10(sumR2 / sumD2)
                              : -std::numeric_limits<double>::infinity();
    }
    m.errorBalance = double(positive - negative) / n;
    m.smallValue = options.smallValueFraction * std::sqrt(sumR2 / n);

    // Second pass: relative errors need the reference's scale for the small-value floor.
    double sumRel = 0.0;
    std::int64_t relCount = 0;
    std::int64_t within3 = 0;
    std::int64_t within5 = 0;
    forEachChunkPair(reference, target,
        [&](std::int64_t, const std::vector<double>& r, const std::vector<double>& t) {
            double chunkRel = 0.0;
            for (std::size_t i = 0; i < r.size(); ++i) {
                if (!std::isfinite(r[i]) || !std::isfinite(t[i])) {
                    continue;
                }
                const double denominator = std::max(std::fabs(r[i]), m.smallValue);
                const double d = std::fabs(t[i] - r[i]);
                double rel = 0.0;
                if (denominator > 0.0) {
                    rel = d / denominator;
                } else if (d > 0.0) {
                    rel = std::numeric_limits<double>::infinity();
                } else {
                    rel = 0.0;
                }
                if (std::isfinite(rel)) {
                    chunkRel += rel;
                }
                m.maxRel = std::max(m.maxRel, rel);
                ++relCount;
                within3 += rel <= 1e-3 ? 1 : 0;
                within5 += rel <= 5e-3 ? 1 : 0;
            }
            sumRel += chunkRel;
        });
    if (relCount > 0) {
        m.meanRel = sumRel / double(relCount);
        m.within1e3 = double(within3) / double(relCount);
        m.within5e3 = double(within5) / double(relCount);
    }
    return m;
}

std::vector<std::int64_t> topKIndices(std::span<const double> values, std::int64_t k)
{
    std::vector<std::int64_t> idx(values.size());
    std::iota(idx.begin(), idx.end(), 0);
    k = std::min<std::int64_t>(k, std::int64_t(values.size()));
    const auto better = [&](std::int64_t a, std::int64_t b) {
        const double va = values[std::size_t(a)];
        const double vb = values[std::size_t(b)];
        // NaN ranks last so that a NaN logit never wins.
        if (std::isnan(va) != std::isnan(vb)) {
            return std::isnan(vb);
        }
        return va > vb || (va == vb && a < b);
    };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
    idx.resize(std::size_t(k));
    return idx;
}

double expertGroupScore(
    std::span<const double> group, bool sigmoid, std::vector<std::int64_t>* members)
{
    const auto best = topKIndices(group, sigmoid ? 2 : 1);
    double sum = 0.0;
    for (const auto b : best) {
        sum += group[std::size_t(b)];
    }
    if (members != nullptr) {
        *members = best;
    }
    return sum;
}

Result<LogitMetrics> compareLogits(const Tensor& reference, const Tensor& target)
{
    DAY0_TRY(checkSameShape(reference, target, "logits"));
    if (reference.rank() < 1 || reference.dim(-1) == 0) {
        return Error::badInput("logits: need a tensor [..., vocab] with a non-empty vocabulary");
    }
    LogitMetrics m;
    const std::int64_t vocab = reference.dim(-1);
    m.positions = reference.numel() / vocab;
    const Tensor r = reference.contiguous().view({ m.positions, vocab });
    const Tensor t = target.contiguous().view({ m.positions, vocab });
    double klSum = 0.0;
    std::int64_t agree = 0;
    double overlapSum = 0.0;
    const std::int64_t k = std::min<std::int64_t>(5, vocab);
    for (std::int64_t p = 0; p < m.positions; ++p) {
        std::vector<double> lr = r.select(0, p).toDoubles();
        std::vector<double> lt = t.select(0, p).toDoubles();
        const auto topR = topKIndices(lr, k);
        const auto topT = topKIndices(lt, k);
        if (topR[0] == topT[0]) {
            ++agree;
        } else if (m.firstDifferingPosition < 0) {
            m.firstDifferingPosition = p;
            m.referenceToken = topR[0];
            m.targetToken = topT[0];
        }
        std::int64_t common = 0;
        for (const auto a : topR) {
            common += std::count(topT.begin(), topT.end(), a) > 0 ? 1 : 0;
        }
        overlapSum += double(common) / double(k);
        logSoftmax(lr);
        logSoftmax(lt);
        double kl = 0.0;
        for (std::int64_t v = 0; v < vocab; ++v) {
            const double pr = std::exp(lr[std::size_t(v)]);
            if (pr > 0.0) {
                kl += pr * (lr[std::size_t(v)] - lt[std::size_t(v)]);
            }
        }
        kl = std::max(kl, 0.0);
        klSum += kl;
        m.klMax = std::max(m.klMax, kl);
    }
    if (m.positions > 0) {
        m.klMean = klSum / double(m.positions);
        m.top1Agreement = double(agree) / double(m.positions);
        m.top5Overlap = overlapSum / double(m.positions);
    }
    return m;
}

Result<ExpertAgreement> compareExpertSelection(const Tensor& reference, const Tensor& target)
{
    DAY0_TRY(checkSameShape(reference, target, "expert selection"));
    if (reference.rank() != 2) {
        return Error::badInput(fmt::format(
            "expert selection: expected [tokens, k], got {}", shapeString(reference.shape())));
    }
    ExpertAgreement a;
    a.tokens = reference.dim(0);
    a.k = reference.dim(1);
    const auto r = reference.toInts();
    const auto t = target.toInts();
    std::int64_t exact = 0;
    double overlapSum = 0.0;
    for (std::int64_t i = 0; i < a.tokens; ++i) {
        std::vector<std::int64_t> sr(r.begin() + i * a.k, r.begin() + (i + 1) * a.k);
        std::vector<std::int64_t> st(t.begin() + i * a.k, t.begin() + (i + 1) * a.k);
        std::sort(sr.begin(), sr.end());
        std::sort(st.begin(), st.end());
        std::vector<std::int64_t> common;
        std::set_intersection(
            sr.begin(), sr.end(), st.begin(), st.end(), std::back_inserter(common));
        overlapSum += a.k > 0 ? double(common.size()) / double(a.k) : 1.0;
        if (sr == st) {
            ++exact;
        } else if (a.firstFlipToken < 0) {
            a.firstFlipToken = i;
        }
    }
    if (a.tokens > 0) {
        a.exactSetShare = double(exact) / double(a.tokens);
        a.overlap = overlapSum / double(a.tokens);
    }
    return a;
}

} // namespace day0::numerics
