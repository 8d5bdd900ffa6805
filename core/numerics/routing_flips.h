#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "numerics/metrics.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::numerics {

/// How many units of the target format's spacing a router-score margin may be and still count
/// as a near-tie: the two competing scores are each rounded (half a spacing) after an
/// accumulation that itself carries about one spacing of error, so 2 spacings is the margin
/// the target precision cannot resolve.
inline constexpr double kNearTieSpacings = 2.0;

/// The spacing of `dtype` at magnitude |x|: 2u × 2^floor(log2 |x|) (u: unit roundoff), at least
/// the spacing at the smallest normal. F64/F32 give their own (tiny) spacing.
double formatSpacing(DType dtype, double x);

/// One token whose expert set differs between the reference and the target.
struct TokenFlip {
    std::int64_t token = -1;
    std::vector<std::int64_t> dropped; ///< experts only the reference chose
    std::vector<std::int64_t> added; ///< experts only the target chose
    /// Reference router score of the weakest dropped expert minus that of the strongest added
    /// expert (the k-th vs (k+1)-th decision that flipped); nullopt without reference scores.
    std::optional<double> margin;
    /// kNearTieSpacings × formatSpacing(target dtype, the larger |score| of the two).
    double resolution = 0.0;
    bool nearTie = false; ///< |margin| <= resolution
};

/// The routing flips of one MoE layer and the MoE output judged without them.
struct RoutingFlips {
    std::string selection; ///< the router selection capture ("...mlp.gate#topk")
    std::string scores; ///< the router score capture used for margins; empty if absent
    std::string basis; ///< "own" (inject dump's selection) or "accumulated"
    std::vector<TokenFlip> flips;
    std::int64_t tokens = 0;
    /// The MoE output's error over the tokens that did not flip (own or accumulated, as basis).
    std::optional<ErrorMetrics> unflipped;

    /// True when there is at least one flip and every flip is a near-tie.
    [[nodiscard]] bool allNearTies() const;
    /// "4, 9" (at most 8 named, then "and N more").
    [[nodiscard]] std::string tokenList() const;
};

/// The tokens whose expert sets differ, with their margins in `referenceScores` ([tokens,
/// experts] router scores of the reference; may be null) against resolution of `dtype`.
Result<std::vector<TokenFlip>> findTokenFlips(const Tensor& referenceSelection,
    const Tensor& targetSelection, const Tensor* referenceScores, DType dtype);

/// Error metrics of [tokens, ...] tensors over the token rows not listed in `excluded`. BadInput
/// if the leading dimension is not `tokens`.
Result<ErrorMetrics> compareExcludingTokens(const Tensor& reference, const Tensor& target,
    std::int64_t tokens, const std::vector<TokenFlip>& excluded, const MetricOptions& options);

} // namespace day0::numerics
