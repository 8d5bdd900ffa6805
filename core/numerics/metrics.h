#pragma once

#include "base/result.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace day0::numerics {

/// Summary statistics of one tensor, over its finite elements (what a statistics-only capture
/// keeps and what dump.json records for every capture).
struct TensorStats {
    std::int64_t count = 0; ///< all elements
    std::int64_t nanCount = 0;
    std::int64_t infCount = 0;
    double min = 0.0;
    double max = 0.0;
    double mean = 0.0;
    double rms = 0.0; ///< sqrt(mean(x^2))
    double absMax = 0.0;
};

/// Statistics of a tensor of any dtype and layout, accumulated in double.
TensorStats computeStats(const Tensor& tensor);

/// Policy knobs of compareTensors.
struct MetricOptions {
    /// Relative errors divide by max(|r|, smallValue) with smallValue = this × rms(r): elements
    /// near zero are judged against the tensor's scale instead of exploding (precision-anchors
    /// §5, "small values"). 0 divides by |r| alone (and then skips r == 0).
    double smallValueFraction = 1e-3;
};

/// How a target tensor t differs from a reference r (precision-anchors §5), all computed in
/// double over the positions where both are finite. d = t - r.
struct ErrorMetrics {
    std::int64_t count = 0; ///< elements compared (both finite)
    double cosine = 1.0; ///< r·t / (|r||t|); 1 when both are zero, 0 when one is
    double maxAbs = 0.0; ///< max |d|
    std::int64_t maxAbsIndex = -1; ///< flat index of max |d|
    double meanAbs = 0.0;
    double maxRel = 0.0; ///< max |d| / max(|r|, smallValue)
    double meanRel = 0.0;
    double rmse = 0.0; ///< sqrt(mean d^2)
    double relL2 = 0.0; ///< |d| / |r| (0 when both are zero, inf when only r is)
    double snrDb = std::numeric_limits<double>::infinity(); ///< 10 log10(sum r^2 / sum d^2)
    double within1e3 = 1.0; ///< share of elements with relative error <= 1e-3
    double within5e3 = 1.0; ///< share of elements with relative error <= 5e-3
    double errorBalance = 0.0; ///< (#(d>0) - #(d<0)) / count: +-1 is a one-sided bias
    double smallValue = 0.0; ///< the denominator floor that was used
    std::int64_t nanReference = 0;
    std::int64_t nanTarget = 0;
    std::int64_t infReference = 0;
    std::int64_t infTarget = 0;
    /// Positions where the two sides are not both finite and not the same non-finite value.
    std::int64_t nonFiniteMismatch = 0;
};

/// Compares two tensors of the same shape (any dtypes and layouts). Error (BadInput) on a shape
/// mismatch, naming both shapes.
Result<ErrorMetrics> compareTensors(
    const Tensor& reference, const Tensor& target, const MetricOptions& options = {});

/// Agreement of two logit tensors [..., vocab]; every leading index is one token position.
struct LogitMetrics {
    std::int64_t positions = 0;
    double klMean = 0.0; ///< mean over positions of KL(softmax(r) || softmax(t)), in nats
    double klMax = 0.0;
    double top1Agreement = 1.0; ///< share of positions with the same argmax
    double top5Overlap = 1.0; ///< mean |top5(r) ∩ top5(t)| / 5
    std::int64_t firstDifferingPosition = -1; ///< first position whose argmax differs; -1: none
    std::int64_t referenceToken = -1; ///< argmax of r at that position
    std::int64_t targetToken = -1; ///< argmax of t at that position
};

/// Compares logits position by position. Ties in argmax/top-k go to the lower token id.
Result<LogitMetrics> compareLogits(const Tensor& reference, const Tensor& target);

/// Agreement of MoE expert selections: index tensors [tokens, k].
struct ExpertAgreement {
    std::int64_t tokens = 0;
    std::int64_t k = 0;
    double exactSetShare = 1.0; ///< share of tokens that chose the same set of experts
    double overlap = 1.0; ///< mean |A ∩ B| / k
    std::int64_t firstFlipToken = -1; ///< first token whose set differs; -1: none
};

/// Compares two expert selections (order within a token's k choices does not matter).
Result<ExpertAgreement> compareExpertSelection(const Tensor& reference, const Tensor& target);

/// Indices of the k largest values, largest first; ties go to the lower index.
std::vector<std::int64_t> topKIndices(std::span<const double> values, std::int64_t k);

/// The score by which a group-limited router ranks an expert group: the sum of its two best
/// selection scores for sigmoid routers (DeepSeek-V3 noaux_tc), its best one for softmax routers
/// (DeepSeek-V2 group_limited_greedy). `members` receives the indices within the group that were
/// summed, best first, when given.
double expertGroupScore(
    std::span<const double> group, bool sigmoid, std::vector<std::int64_t>* members = nullptr);

} // namespace day0::numerics
