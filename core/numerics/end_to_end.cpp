#include "numerics/end_to_end.h"

#include "base/thread_pool.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::numerics {

namespace {

/// The k largest entries' indices of a row (ties: the lower index first), unordered.
void topK(std::span<const double> row, std::int64_t k, std::vector<std::int64_t>& out)
{
    // A min-heap of the best k seen so far: O(V log k), no V-sized scratch.
    out.clear();
    const auto worse = [&](std::int64_t a, std::int64_t b) {
        const double va = row[std::size_t(a)];
        const double vb = row[std::size_t(b)];
        return va > vb || (va == vb && a < b);
    };
    for (std::int64_t i = 0; i < std::int64_t(row.size()); ++i) {
        if (std::int64_t(out.size()) < k) {
            out.push_back(i);
            std::push_heap(out.begin(), out.end(), worse);
        } else if (row[std::size_t(i)] > row[std::size_t(out.front())]) {
            std::pop_heap(out.begin(), out.end(), worse);
            out.back() = i;
            std::push_heap(out.begin(), out.end(), worse);
        }
    }
}

/// Mean and standard error of the mean from the sums of x and x², as llama.cpp's
/// mean_and_uncertainty (tools/perplexity/perplexity.cpp): sqrt((E[x²] − E[x]²) / (N − 1)).
Estimate meanAndUncertainty(double sum, double sum2, std::int64_t n)
{
    if (n <= 0) {
        return {};
    }
    const double mean = sum / double(n);
    const double var = std::max(0.0, sum2 / double(n) - mean * mean);
    return { mean, n > 1 ? std::sqrt(var / double(n - 1)) : 0.0 };
}

} // namespace

PositionStats comparePosition(std::span<const double> reference, std::span<const double> target,
    std::int64_t next, std::int64_t k)
{
    PositionStats s;
    const std::size_t v = reference.size();
    if (v == 0 || target.size() != v) {
        return s;
    }
    std::size_t ar = 0;
    std::size_t at = 0;
    for (std::size_t i = 1; i < v; ++i) {
        ar = reference[i] > reference[ar] ? i : ar;
        at = target[i] > target[at] ? i : at;
    }
    const double mr = reference[ar];
    const double mt = target[at];
    // KL(p || q) = Σ p_i (log p_i − log q_i) with log p_i = r_i − log Z_r: since Σ p_i = 1 this
    // is Σ p_i (r_i − t_i) − log Z_r + log Z_t, one pass of two exponentials per entry. Shifts
    // by the maxima keep every exponential ≤ 1.
    double zr = 0.0;
    double zt = 0.0;
    double pd = 0.0;
    for (std::size_t i = 0; i < v; ++i) {
        const double er = std::exp(reference[i] - mr);
        zr += er;
        pd += er * ((reference[i] - mr) - (target[i] - mt));
        zt += std::exp(target[i] - mt);
    }
    const double logZr = std::log(zr);
    const double logZt = std::log(zt);
    // KL ≥ 0; a negative value of a few ulps is the rounding of near-equal distributions.
    s.kl = std::max(0.0, pd / zr - logZr + logZt);
    s.referenceTop = std::int64_t(ar);
    s.targetTop = std::int64_t(at);
    s.sameTop = ar == at;
    k = std::clamp<std::int64_t>(k, 1, std::int64_t(v));
    std::vector<std::int64_t> kr;
    std::vector<std::int64_t> kt;
    topK(reference, k, kr);
    topK(target, k, kt);
    std::sort(kr.begin(), kr.end());
    std::sort(kt.begin(), kt.end());
    std::vector<std::int64_t> both;
    std::set_intersection(kr.begin(), kr.end(), kt.begin(), kt.end(), std::back_inserter(both));
    s.topkOverlap = double(both.size()) / double(k);
    if (next >= 0 && std::size_t(next) < v) {
        s.referenceNll = logZr - (reference[std::size_t(next)] - mr);
        s.targetNll = logZt - (target[std::size_t(next)] - mt);
    }
    return s;
}

std::vector<PositionStats> compareRows(std::span<const double> reference,
    std::span<const double> target, std::int64_t rows, std::int64_t vocab,
    std::span<const std::int64_t> next, std::int64_t k)
{
    std::vector<PositionStats> out(std::size_t(std::max<std::int64_t>(rows, 0)));
    const auto v = std::size_t(vocab);
    ThreadPool::global().parallelFor(out.size(), [&](std::size_t i) {
        out[i] = comparePosition(
            reference.subspan(i * v, v), target.subspan(i * v, v), next.empty() ? -1 : next[i], k);
    });
    return out;
}

void EndToEndAccumulator::add(const PositionStats& stats, std::int64_t position)
{
    m_kl.push_back(stats.kl);
    m_same.push_back(stats.sameTop ? 1 : 0);
    m_overlap += stats.topkOverlap;
    if (stats.referenceNll && stats.targetNll) {
        const double a = *stats.targetNll;
        const double b = *stats.referenceNll;
        m_nll += a;
        m_nll2 += a * a;
        m_nllRef += b;
        m_nllRef2 += b * b;
        m_nllCross += a * b;
        // Δp as llama.cpp: the next ("correct") token's probability under the target minus
        // under the base (kl_divergence(): p_diff = exp(-nll) - exp(-nll_base)).
        const double dp = std::exp(-a) - std::exp(-b);
        m_dp2 += dp * dp;
        m_dp4 += dp * dp * dp * dp;
        ++m_scored;
    }
    if (position >= 0) {
        const auto p = std::size_t(position);
        if (m_klAt.size() <= p) {
            m_klAt.resize(p + 1, 0.0);
            m_sameAt.resize(p + 1, 0);
            m_countAt.resize(p + 1, 0);
        }
        m_klAt[p] += stats.kl;
        m_sameAt[p] += stats.sameTop ? 1 : 0;
        ++m_countAt[p];
    }
}

double percentile(std::vector<double> values, double q)
{
    if (values.empty()) {
        return 0.0;
    }
    const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * double(values.size() - 1);
    const auto lo = std::size_t(std::floor(rank));
    const std::size_t hi = std::min(lo + 1, values.size() - 1);
    std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(lo), values.end());
    const double a = values[lo];
    double b = a;
    if (hi != lo) {
        b = *std::min_element(values.begin() + std::ptrdiff_t(lo) + 1, values.end());
    }
    return a + (rank - double(lo)) * (b - a);
}

EndToEndSummary EndToEndAccumulator::summary() const
{
    EndToEndSummary s;
    const auto n = std::int64_t(m_kl.size());
    s.positions = n;
    s.scoredTokens = m_scored;
    s.topK = m_topK;
    double sum = 0.0;
    double sum2 = 0.0;
    std::int64_t same = 0;
    for (std::size_t i = 0; i < m_kl.size(); ++i) {
        sum += m_kl[i];
        sum2 += m_kl[i] * m_kl[i];
        same += m_same[i];
        if (m_kl[i] > s.klMax || s.klMaxPosition < 0) {
            s.klMax = m_kl[i];
            s.klMaxPosition = std::int64_t(i);
        }
    }
    s.klMean = meanAndUncertainty(sum, sum2, n);
    s.klMedian = percentile(m_kl, 50.0);
    s.klP99 = percentile(m_kl, 99.0);
    s.klP999 = percentile(m_kl, 99.9);
    // A 0/1 variable: Σx = Σx², so the same formula gives the binomial standard error.
    s.sameTop = meanAndUncertainty(double(same), double(same), n);
    s.topkOverlap = n > 0 ? m_overlap / double(n) : 0.0;
    if (m_scored > 0) {
        // llama.cpp's PPL printout: log PPL = mean NLL with its standard error; the ratio's
        // log is the difference of the paired means, its variance the two variances less twice
        // their covariance (the NLLs of one token under both models are strongly correlated).
        const auto lt = meanAndUncertainty(m_nll, m_nll2, m_scored);
        const auto lr = meanAndUncertainty(m_nllRef, m_nllRef2, m_scored);
        const double nn = double(m_scored);
        const double cov
            = m_scored > 1 ? (m_nllCross / nn - lt.value * lr.value) / double(m_scored - 1) : 0.0;
        s.targetPpl = { std::exp(lt.value), std::exp(lt.value) * lt.uncertainty };
        s.referencePpl = { std::exp(lr.value), std::exp(lr.value) * lr.uncertainty };
        const double logRatio = lt.value - lr.value;
        const double var = std::max(
            0.0, lt.uncertainty * lt.uncertainty + lr.uncertainty * lr.uncertainty - 2.0 * cov);
        s.pplRatio = { std::exp(logRatio), std::exp(logRatio) * std::sqrt(var) };
        // RMS Δp: the root of the mean square, its uncertainty from that of the mean square
        // (Σ Δp⁴) through d sqrt(x) = dx / (2 sqrt(x)), as llama.cpp.
        const auto ms = meanAndUncertainty(m_dp2, m_dp4, m_scored);
        const double rms = std::sqrt(ms.value);
        s.rmsDeltaP = { rms, rms > 0.0 ? 0.5 * ms.uncertainty / rms : 0.0 };
    }
    s.klByPosition.resize(m_klAt.size());
    s.sameTopByPosition.resize(m_klAt.size());
    s.countByPosition = m_countAt;
    for (std::size_t p = 0; p < m_klAt.size(); ++p) {
        const double c = double(std::max<std::int64_t>(1, m_countAt[p]));
        s.klByPosition[p] = m_klAt[p] / c;
        s.sameTopByPosition[p] = double(m_sameAt[p]) / c;
    }
    // Histogram: half-decade bins from 1e-16 to 1e2 nats, the ends catching what lies beyond.
    s.histogram.counts.assign(std::size_t((2.0 - s.histogram.log10Low) / s.histogram.binWidth), 0);
    for (const double kl : m_kl) {
        const double l = kl > 0.0 ? std::log10(kl) : -std::numeric_limits<double>::infinity();
        const double bin = std::floor((l - s.histogram.log10Low) / s.histogram.binWidth);
        const auto last = std::int64_t(s.histogram.counts.size()) - 1;
        const std::int64_t b
            = std::isfinite(bin) ? std::clamp<std::int64_t>(std::int64_t(bin), 0, last) : 0;
        ++s.histogram.counts[std::size_t(b)];
    }
    return s;
}

nlohmann::json toJson(const EndToEndSummary& s)
{
    const auto est = [](const Estimate& e) {
        return nlohmann::json { { "value", e.value }, { "uncertainty", e.uncertainty } };
    };
    return {
        { "positions", s.positions },
        { "scored_tokens", s.scoredTokens },
        { "top_k", s.topK },
        { "kl_mean", s.klMean.value },
        { "kl_mean_uncertainty", s.klMean.uncertainty },
        // 95% two-sided normal interval of the mean.
        { "kl_mean_ci95",
            { s.klMean.value - 1.96 * s.klMean.uncertainty,
                s.klMean.value + 1.96 * s.klMean.uncertainty } },
        { "kl_median", s.klMedian },
        { "kl_p99", s.klP99 },
        { "kl_p999", s.klP999 },
        { "kl_max", s.klMax },
        { "kl_max_position", s.klMaxPosition },
        { "same_top", est(s.sameTop) },
        { "topk_overlap", s.topkOverlap },
        { "rms_delta_p", est(s.rmsDeltaP) },
        { "reference_ppl", est(s.referencePpl) },
        { "target_ppl", est(s.targetPpl) },
        { "ppl_ratio", est(s.pplRatio) },
        { "kl_by_position", s.klByPosition },
        { "same_top_by_position", s.sameTopByPosition },
        { "count_by_position", s.countByPosition },
        { "kl_histogram",
            { { "log10_low", s.histogram.log10Low }, { "bin_width", s.histogram.binWidth },
                { "counts", s.histogram.counts } } },
    };
}

} // namespace day0::numerics
