#pragma once

#include "base/dtype.h"
#include "base/result.h"
#include "numerics/metrics.h"
#include "numerics/tensor.h"

#include <nlohmann/json_fwd.hpp>

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

/// What the target's precision cannot resolve of a margin a − b between two of the reference's
/// scores or logits, each uncertain by `ua` and `ub` beyond their rounding: the larger of
/// ua + ub and kNearTieSpacings spacings of `dtype` at max(|a|, |b|). A margin within it is a
/// near-tie. One rule for an expert choice that flipped (findTokenFlips, logit scale) and for
/// greedy generation that diverged (`day0 eval`, the reference's top-two logits).
double pairResolution(DType dtype, double a, double b, double ua, double ub);

/// What a MoE router ranks its experts by: dump.json's "router" entry, which the engine writes.
struct RouterScale {
    /// σ(logit) + bias (DeepSeek-V3, Kimi-K2, Llama-4); else softmax, monotone in the logits.
    bool sigmoid = false;
    std::int64_t numGroups = 1; ///< group-limited top-k: n_group (1: no group stage)
    std::int64_t topkGroup = 1; ///< the groups that compete
};

/// The "router" entry of a dump's extra info ({"scoring": "sigmoid"|"softmax", "n_group",
/// "topk_group"}); nullopt when absent or malformed (older dumps, the PyTorch twin's).
std::optional<RouterScale> routerScaleFromJson(const nlohmann::json& extra);

/// The reference's router scores of one MoE layer, from which flip margins are measured.
struct ReferenceRouterScores {
    const Tensor* logits = nullptr; ///< [tokens, experts] raw router logits; may be null
    /// [tokens, experts] the score a sigmoid router ranks by, σ(logit) + bias, before its group
    /// stage (the engine's "<router>#score" capture); null: margins are taken on the logits.
    const Tensor* selection = nullptr;
    /// The router's kind and group stage; nullopt: unknown (margins on the logits, no groups).
    std::optional<RouterScale> scale;
    /// The judged run's own [tokens, experts] router logits, when captured: a score is then also
    /// uncertain by as far as the target's logit moved from the reference's (through σ' on the
    /// selection scale), so that a flip the router's measured error explains is a near-tie; the
    /// router's logits are judged on their own, so a broken router still fails there.
    const Tensor* targetLogits = nullptr;
};

/// The scale a flip's margin was measured on.
enum class MarginScale {
    Logit, ///< raw router logits (softmax routers, or dumps without "#score")
    Selection, ///< σ(logit) + bias, what sigmoid routers rank by
    Group, ///< a group's score: sum of its two best σ(logit) + bias (max logit for softmax)
};

/// "logit", "selection score σ+bias", "group score (two best σ+bias)" or "group score (best
/// logit)".
std::string marginScaleName(MarginScale scale, bool sigmoid);

/// One token whose expert set differs between the reference and the target.
struct TokenFlip {
    std::int64_t token = -1;
    std::vector<std::int64_t> dropped; ///< experts only the reference chose
    std::vector<std::int64_t> added; ///< experts only the target chose
    /// Expert stage: reference score of the weakest dropped expert still eligible in the target
    /// minus that of the strongest added expert (the k-th vs (k+1)-th decision that flipped), on
    /// `scale`; nullopt without reference scores or when only the group stage flipped.
    std::optional<double> margin;
    /// What the target's precision cannot resolve of `margin` (see routing_flips.cpp).
    double resolution = 0.0;
    MarginScale scale = MarginScale::Logit;
    /// Group stage (group-limited routers), on MarginScale::Group: when the target chose an
    /// expert of a group the reference masked, the reference's weakest kept group's score minus
    /// the strongest such group's; when instead a kept group the reference chose from lost all
    /// its experts and that is a near-tie where the expert stage alone is not, that group's
    /// score minus the strongest masked group's. The expert stage then only counts the dropped
    /// experts of groups the target chose from.
    std::optional<double> groupMargin;
    double groupResolution = 0.0;
    /// The expert-stage resolution is how far the target's router logits moved (larger than
    /// the format's spacing), not the format's.
    bool routerError = false;
    /// Every stage that flipped did so within the target's resolution.
    bool nearTie = false;
};

/// The routing flips of one MoE layer and the MoE output judged without them.
struct RoutingFlips {
    std::string selection; ///< the router selection capture ("...mlp.gate#topk")
    std::string scores; ///< the router score capture used for margins; empty if absent
    std::string basis; ///< "own" (inject dump's selection) or "accumulated"
    bool sigmoid = false; ///< the router ranks by σ(logit) + bias (names the group score)
    std::vector<TokenFlip> flips;
    std::int64_t tokens = 0;
    /// The MoE output's error over the tokens that did not flip (own or accumulated, as basis).
    std::optional<ErrorMetrics> unflipped;

    /// True when there is at least one flip and every flip is a near-tie.
    [[nodiscard]] bool allNearTies() const;
};

/// The tokens whose expert sets differ, with their margins in the reference's router scores
/// (none when `scores` has neither tensor) against the resolution of `dtype`. BadInput for
/// selections or scores of mismatched shapes.
Result<std::vector<TokenFlip>> findTokenFlips(const Tensor& referenceSelection,
    const Tensor& targetSelection, const ReferenceRouterScores& scores, DType dtype);

/// Error metrics of [tokens, ...] tensors over the token rows not listed in `excluded`. BadInput
/// if the leading dimension is not `tokens`.
Result<ErrorMetrics> compareExcludingTokens(const Tensor& reference, const Tensor& target,
    std::int64_t tokens, const std::vector<TokenFlip>& excluded, const MetricOptions& options);

} // namespace day0::numerics
