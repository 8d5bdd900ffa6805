#pragma once

// End-to-end accuracy of a target against a reference over a corpus (`day0 eval`): per position
// the KL divergence of the next-token distributions, top-1 and top-k agreement, the change of
// the next token's probability and both negative log-likelihoods; summarised as llama.cpp's
// `perplexity --kl-divergence` reports them (tools/perplexity/perplexity.cpp,
// kl_divergence_result and its printout): mean KL with its uncertainty, percentiles, "same top
// p", RMS Δp and PPL of both with the ratio's uncertainty from the paired NLLs.
//
// Memory stays bounded whatever the corpus: logits are consumed one row at a time and only
// scalars per position are kept (the KL values for exact percentiles, a running sum per
// position in the sequence for the curve).

#include "base/result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace day0::numerics {

/// One position's comparison of two next-token distributions.
struct PositionStats {
    double kl = 0.0; ///< KL(reference || target), nats
    bool sameTop = false; ///< both argmaxes agree (first index wins a tie)
    double topkOverlap = 0.0; ///< |top-k(ref) ∩ top-k(target)| / k
    std::int64_t referenceTop = -1;
    std::int64_t targetTop = -1;
    /// The next token's negative log-likelihood under each, when the next token is known.
    std::optional<double> referenceNll;
    std::optional<double> targetNll;
};

/// Compares one row of logits (any shift: log-softmax is taken here, in double).
/// `next` < 0: the next token is unknown (no NLL). `k` ≥ 1 and ≤ the vocabulary.
PositionStats comparePosition(std::span<const double> reference, std::span<const double> target,
    std::int64_t next, std::int64_t k);

/// comparePosition over `rows` rows of [rows, vocab] logits, rows in parallel on the global
/// thread pool; `next[i]` is row i's next token (-1: unknown), or `next` is empty.
std::vector<PositionStats> compareRows(std::span<const double> reference,
    std::span<const double> target, std::int64_t rows, std::int64_t vocab,
    std::span<const std::int64_t> next, std::int64_t k);

/// A value and the standard error of its estimate.
struct Estimate {
    double value = 0.0;
    double uncertainty = 0.0;
};

/// Bins of a KL histogram on a log10 scale.
struct KlHistogram {
    double log10Low = -16.0; ///< lower edge of the first bin; smaller KL (and 0) fall in it
    double binWidth = 0.5; ///< decades per bin
    std::vector<std::int64_t> counts;
};

/// What an evaluation found over all positions.
struct EndToEndSummary {
    std::int64_t positions = 0; ///< positions with a KL
    std::int64_t scoredTokens = 0; ///< positions whose next token was known (NLL, Δp)
    std::int64_t topK = 5;
    Estimate klMean; ///< uncertainty: standard error of the mean
    double klMedian = 0.0;
    double klP99 = 0.0;
    double klP999 = 0.0;
    double klMax = 0.0;
    std::int64_t klMaxPosition = -1; ///< index of the worst position, in the order added
    Estimate sameTop; ///< share of positions whose argmaxes agree
    double topkOverlap = 0.0; ///< mean share of the top-k sets in common
    Estimate rmsDeltaP; ///< RMS of p_target(next) − p_reference(next)
    Estimate referencePpl;
    Estimate targetPpl;
    Estimate pplRatio; ///< target / reference, uncertainty from the paired NLLs
    /// Mean KL and share of agreeing argmaxes at each position of the sequence (index = position
    /// within its window), and how many positions contributed to each.
    std::vector<double> klByPosition;
    std::vector<double> sameTopByPosition;
    std::vector<std::int64_t> countByPosition;
    KlHistogram histogram;
};

/// Gathers PositionStats one at a time and summarises them.
class EndToEndAccumulator {
public:
    explicit EndToEndAccumulator(std::int64_t topK = 5)
        : m_topK(topK)
    {
    }
    /// `position`: the index within its sequence (for the curve).
    void add(const PositionStats& stats, std::int64_t position);
    [[nodiscard]] std::int64_t positions() const { return std::int64_t(m_kl.size()); }
    /// The KL of every position in the order added.
    [[nodiscard]] const std::vector<double>& klValues() const { return m_kl; }
    [[nodiscard]] const std::vector<std::uint8_t>& sameTopValues() const { return m_same; }
    [[nodiscard]] EndToEndSummary summary() const;

private:
    std::int64_t m_topK;
    std::vector<double> m_kl;
    std::vector<std::uint8_t> m_same;
    double m_overlap = 0.0;
    double m_nll = 0.0, m_nll2 = 0.0, m_nllRef = 0.0, m_nllRef2 = 0.0, m_nllCross = 0.0;
    double m_dp2 = 0.0, m_dp4 = 0.0;
    std::int64_t m_scored = 0;
    std::vector<double> m_klAt;
    std::vector<std::int64_t> m_sameAt;
    std::vector<std::int64_t> m_countAt;
};

/// The q-th percentile (0..100) of `values` by linear interpolation between the order
/// statistics (numpy.percentile's default "linear" method); 0 when empty.
double percentile(std::vector<double> values, double q);

/// The summary as JSON (the run store's record and `day0 eval --json`).
nlohmann::json toJson(const EndToEndSummary& summary);

} // namespace day0::numerics
