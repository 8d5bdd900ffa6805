#include "numerics/routing_flips.h"

#include "numerics/float_formats.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <span>

namespace day0::numerics {

double formatSpacing(DType dtype, double x)
{
    const FormatInfo f = formatInfo(dtype);
    const double a = std::max(std::fabs(x), f.minNormal);
    return 2.0 * f.unitRoundoff * std::exp2(std::floor(std::log2(a)));
}

bool RoutingFlips::allNearTies() const
{
    return !flips.empty()
        && std::all_of(flips.begin(), flips.end(), [](const TokenFlip& f) { return f.nearTie; });
}

std::optional<RouterScale> routerScaleFromJson(const nlohmann::json& extra)
{
    if (!extra.is_object() || !extra.contains("router") || !extra["router"].is_object()) {
        return std::nullopt;
    }
    const auto& r = extra["router"];
    const auto scoring = r.value("scoring", std::string());
    if (scoring != "sigmoid" && scoring != "softmax") {
        return std::nullopt;
    }
    RouterScale s;
    s.sigmoid = scoring == "sigmoid";
    const auto integer = [&](const char* key) -> std::int64_t {
        return r.contains(key) && r[key].is_number_integer() ? r[key].get<std::int64_t>() : 1;
    };
    s.numGroups = std::max<std::int64_t>(integer("n_group"), 1);
    s.topkGroup = std::clamp<std::int64_t>(integer("topk_group"), 1, s.numGroups);
    return s;
}

std::string marginScaleName(MarginScale scale, bool sigmoid)
{
    switch (scale) {
    case MarginScale::Logit:
        return "logit";
    case MarginScale::Selection:
        return "selection score σ+bias";
    case MarginScale::Group:
        return sigmoid ? "group score (two best σ+bias)" : "group score (best logit)";
    }
    return "logit";
}

double pairResolution(DType dtype, double a, double b, double ua, double ub)
{
    return std::max(
        ua + ub, kNearTieSpacings * formatSpacing(dtype, std::max(std::fabs(a), std::fabs(b))));
}

namespace {

/// The reference's scores of every [token, expert] on the scale the router ranks by, and what the
/// target's precision cannot resolve of each.
///
/// Logit scale (softmax routers, or no "#score" capture): a margin a - b is resolved to
/// kNearTieSpacings × spacing(max |a|, |b|), as for any pair of rounded scores.
///
/// Selection scale (sigmoid routers, c = σ(x) + b): the target's logit x carries about
/// kNearTieSpacings / 2 spacings of error (its rounding plus its accumulation), which moves σ by
/// σ'(x) = σ(x)(1 - σ(x)) times that; a target that keeps σ(x) + b in its activation dtype
/// (vLLM's grouped top-k on bf16 gate outputs) rounds it once more, half a spacing at |c| in the
/// score dtype: the target's own, but bf16 for 8-bit targets (no kernel keeps router scores in
/// 8 bits; HF computes them in fp32). So each score is uncertain by
///     u(x, c) = (kNearTieSpacings / 2) · σ'(x) · spacing(x) + spacing_score(c) / 2,
/// a margin c_a - c_b by u_a + u_b, and a group margin (each group the sum of its two best c) by
/// the sum of the four u.
struct ScaledScores {
    MarginScale scale = MarginScale::Logit;
    std::int64_t experts = 0;
    std::vector<double> value; ///< [tokens, experts]
    std::vector<double> uncertainty; ///< [tokens, experts]; selection scale only
    /// [tokens, experts] |target − reference| logit; logit scale, when the target's are known.
    std::vector<double> moved;
};

/// |target − reference| per router logit, or nothing when either is missing or they differ in
/// shape.
std::vector<double> movedLogits(const ReferenceRouterScores& in)
{
    if (in.logits == nullptr || in.targetLogits == nullptr
        || in.logits->shape() != in.targetLogits->shape()) {
        return {};
    }
    auto r = in.logits->toDoubles();
    const auto t = in.targetLogits->toDoubles();
    for (std::size_t i = 0; i < r.size(); ++i) {
        r[i] = std::fabs(t[i] - r[i]);
    }
    return r;
}

Result<ScaledScores> scaledScores(const ReferenceRouterScores& in, std::int64_t tokens, DType dtype)
{
    ScaledScores out;
    const auto check = [&](const Tensor& t, const char* what) -> Result<void> {
        if (t.rank() != 2 || t.dim(0) != tokens) {
            return Error::badInput(fmt::format(
                "router {}: expected [{}, experts], got {}", what, tokens, shapeString(t.shape())));
        }
        return success();
    };
    if (in.logits != nullptr) {
        DAY0_TRY(check(*in.logits, "logits"));
    }
    const bool sigmoid = in.scale && in.scale->sigmoid;
    if (in.selection != nullptr && sigmoid) {
        DAY0_TRY(check(*in.selection, "selection scores"));
        if (in.logits != nullptr && in.logits->shape() != in.selection->shape()) {
            return Error::badInput(fmt::format("router selection scores {} and logits {} differ",
                shapeString(in.selection->shape()), shapeString(in.logits->shape())));
        }
        out.scale = MarginScale::Selection;
        out.experts = in.selection->dim(1);
        out.value = in.selection->toDoubles();
        const std::vector<double> x
            = in.logits != nullptr ? in.logits->toDoubles() : std::vector<double>();
        out.uncertainty.resize(out.value.size());
        const std::vector<double> moved = movedLogits(in);
        const DType scoreType
            = formatInfo(dtype).unitRoundoff > formatInfo(DType::BF16).unitRoundoff ? DType::BF16
                                                                                    : dtype;
        for (std::size_t i = 0; i < out.value.size(); ++i) {
            const double c = out.value[i];
            double logitTerm = 0.0;
            if (x.empty()) {
                // No logits to take σ' from: its largest value, 1/4, bounds the slope.
                logitTerm = 0.25 * formatSpacing(dtype, 1.0);
            } else {
                const double s = 1.0 / (1.0 + std::exp(-x[i]));
                logitTerm = s * (1.0 - s) * formatSpacing(dtype, x[i]);
            }
            out.uncertainty[i]
                = kNearTieSpacings / 2.0 * logitTerm + formatSpacing(scoreType, c) / 2.0;
            if (!moved.empty() && !x.empty()) {
                const double s = 1.0 / (1.0 + std::exp(-x[i]));
                out.uncertainty[i] = std::max(out.uncertainty[i], s * (1.0 - s) * moved[i]);
            }
        }
        return out;
    }
    if (in.logits != nullptr) {
        out.experts = in.logits->dim(1);
        out.value = in.logits->toDoubles();
        out.moved = movedLogits(in);
    }
    return out;
}

/// The group stage of a group-limited router over one token's scores.
struct GroupStage {
    std::int64_t perGroup = 0;
    std::vector<double> score; ///< per group
    std::vector<double> uncertainty; ///< per group (selection scale)
    std::vector<std::int64_t> kept; ///< the reference's kept groups
};

GroupStage groupStage(
    const double* value, const double* uncertainty, std::int64_t experts, const RouterScale& scale)
{
    GroupStage g;
    g.perGroup = experts / scale.numGroups;
    g.score.resize(std::size_t(scale.numGroups));
    g.uncertainty.resize(std::size_t(scale.numGroups));
    std::vector<std::int64_t> members;
    for (std::int64_t i = 0; i < scale.numGroups; ++i) {
        // As the router ranks groups (for softmax routers on the logits, whose order is that of
        // the probabilities).
        g.score[std::size_t(i)] = expertGroupScore(
            { value + i * g.perGroup, std::size_t(g.perGroup) }, scale.sigmoid, &members);
        if (uncertainty != nullptr) {
            for (const auto b : members) {
                g.uncertainty[std::size_t(i)] += uncertainty[i * g.perGroup + b];
            }
        }
    }
    g.kept = topKIndices(g.score, scale.topkGroup);
    return g;
}

} // namespace

Result<std::vector<TokenFlip>> findTokenFlips(const Tensor& referenceSelection,
    const Tensor& targetSelection, const ReferenceRouterScores& referenceScores, DType dtype)
{
    if (referenceSelection.rank() != 2 || referenceSelection.shape() != targetSelection.shape()) {
        return Error::badInput(
            fmt::format("expert selection: expected two [tokens, k], got {} and {}",
                shapeString(referenceSelection.shape()), shapeString(targetSelection.shape())));
    }
    const std::int64_t tokens = referenceSelection.dim(0);
    const std::int64_t k = referenceSelection.dim(1);
    auto scaled = scaledScores(referenceScores, tokens, dtype);
    if (!scaled) {
        return scaled.error();
    }
    const ScaledScores& sc = *scaled;
    const std::int64_t experts = sc.experts;
    const bool selectionScale = sc.scale == MarginScale::Selection;
    // The group stage is measurable on the scale the router ranks groups by: σ + bias for
    // sigmoid routers (only with the "#score" capture), the best logit for softmax ones.
    std::optional<RouterScale> groups;
    if (referenceScores.scale && referenceScores.scale->numGroups > 1 && experts > 0
        && experts % referenceScores.scale->numGroups == 0
        && (selectionScale || !referenceScores.scale->sigmoid)) {
        groups = referenceScores.scale;
    }
    // The resolution of a - b (two experts' or two groups' scores, uncertain by ua and ub on the
    // selection scale).
    const auto pairResolution = [&](double a, double b, double ua, double ub) {
        return selectionScale ? ua + ub : numerics::pairResolution(dtype, a, b, ua, ub);
    };
    const auto r = referenceSelection.toInts();
    const auto t = targetSelection.toInts();
    std::vector<TokenFlip> flips;
    for (std::int64_t i = 0; i < tokens; ++i) {
        const std::set<std::int64_t> sr(r.begin() + i * k, r.begin() + (i + 1) * k);
        const std::set<std::int64_t> st(t.begin() + i * k, t.begin() + (i + 1) * k);
        if (sr == st) {
            continue;
        }
        TokenFlip flip;
        flip.token = i;
        flip.scale = sc.scale;
        std::set_difference(
            sr.begin(), sr.end(), st.begin(), st.end(), std::back_inserter(flip.dropped));
        std::set_difference(
            st.begin(), st.end(), sr.begin(), sr.end(), std::back_inserter(flip.added));
        const auto inRange = [&](std::int64_t e) { return e >= 0 && e < experts; };
        if (sc.value.empty() || !std::all_of(sr.begin(), sr.end(), inRange)
            || !std::all_of(st.begin(), st.end(), inRange)) {
            flips.push_back(std::move(flip));
            continue;
        }
        const double* value = sc.value.data() + i * experts;
        const double* uncertainty = selectionScale ? sc.uncertainty.data() + i * experts
            : sc.moved.empty()                     ? nullptr
                                                   : sc.moved.data() + i * experts;
        const auto u
            = [&](std::int64_t e) { return uncertainty != nullptr ? uncertainty[e] : 0.0; };

        // Expert stage: the dropped experts that still competed in the target (after a group
        // flip, those of groups the target chose from; the others fell with their group) against
        // every added one. True when that decision was within resolution.
        std::set<std::int64_t> targetGroups;
        const std::int64_t perGroup = groups ? experts / groups->numGroups : experts;
        for (const auto e : st) {
            targetGroups.insert(e / perGroup);
        }
        const auto expertStage = [&](TokenFlip& f, bool afterGroupFlip) {
            std::vector<std::int64_t> competing;
            for (const auto e : f.dropped) {
                if (!afterGroupFlip || targetGroups.contains(e / perGroup)) {
                    competing.push_back(e);
                }
            }
            if (competing.empty() || f.added.empty()) {
                return afterGroupFlip;
            }
            const auto weakest = *std::min_element(competing.begin(), competing.end(),
                [&](std::int64_t a, std::int64_t b) { return value[a] < value[b]; });
            const auto strongest = *std::max_element(f.added.begin(), f.added.end(),
                [&](std::int64_t a, std::int64_t b) { return value[a] < value[b]; });
            f.margin = value[weakest] - value[strongest];
            f.resolution
                = pairResolution(value[weakest], value[strongest], u(weakest), u(strongest));
            f.routerError = !selectionScale
                && u(weakest) + u(strongest) > kNearTieSpacings
                        * formatSpacing(dtype,
                            std::max(std::fabs(value[weakest]), std::fabs(value[strongest])));
            // After a group flip an added expert may outrank a dropped one (it was only masked):
            // no expert-stage decision went against the reference then.
            return afterGroupFlip ? *f.margin <= f.resolution
                                  : std::fabs(*f.margin) <= f.resolution;
        };

        // Group stage. An added expert of a group the reference masked means the ranking of
        // groups flipped: the reference's weakest kept group against the strongest such group.
        // Without one, a kept group the target chose nothing from (though the reference did) may
        // still have lost its place to a masked group the target then chose nothing from: the
        // weakest such group against the strongest masked one, taken when it explains the flip
        // as a near-tie and the expert stage alone does not.
        std::optional<std::pair<std::int64_t, std::int64_t>> groupSwap; // (demoted, promoted)
        bool visible = false;
        GroupStage g;
        if (groups) {
            g = groupStage(value, uncertainty, experts, *groups);
            const auto kept = [&](std::int64_t group) {
                return std::find(g.kept.begin(), g.kept.end(), group) != g.kept.end();
            };
            const auto stronger = [&](std::int64_t a, std::int64_t b) {
                return b < 0 || g.score[std::size_t(a)] > g.score[std::size_t(b)];
            };
            std::int64_t promoted = -1;
            for (const auto group : targetGroups) {
                if (!kept(group) && stronger(group, promoted)) {
                    promoted = group;
                }
            }
            if (promoted >= 0) {
                visible = true;
                // topKIndices puts the best first, so the weakest kept group is the last.
                groupSwap = std::pair { g.kept.back(), promoted };
            } else {
                std::int64_t demoted = -1;
                for (const auto e : flip.dropped) {
                    const std::int64_t group = e / perGroup;
                    if (!targetGroups.contains(group)
                        && (demoted < 0
                            || g.score[std::size_t(group)] < g.score[std::size_t(demoted)])) {
                        demoted = group;
                    }
                }
                for (std::int64_t group = 0; group < groups->numGroups; ++group) {
                    if (!kept(group) && stronger(group, promoted)) {
                        promoted = group;
                    }
                }
                if (demoted >= 0 && promoted >= 0) {
                    groupSwap = std::pair { demoted, promoted };
                }
            }
        }
        TokenFlip plain = flip;
        const bool plainNear = !visible && expertStage(plain, false) && plain.margin.has_value();
        if (!groupSwap) {
            plain.nearTie = plainNear;
            flips.push_back(std::move(plain));
            continue;
        }
        const auto [demoted, promoted] = *groupSwap;
        const double a = g.score[std::size_t(demoted)];
        const double b = g.score[std::size_t(promoted)];
        flip.groupMargin = a - b;
        flip.groupResolution = pairResolution(
            a, b, g.uncertainty[std::size_t(demoted)], g.uncertainty[std::size_t(promoted)]);
        const bool groupNear = *flip.groupMargin <= flip.groupResolution;
        const bool grouped = expertStage(flip, true) && groupNear;
        if (!visible && (plainNear || !grouped)) {
            plain.nearTie = plainNear;
            flips.push_back(std::move(plain));
            continue;
        }
        flip.nearTie = grouped;
        flips.push_back(std::move(flip));
    }
    return flips;
}

Result<ErrorMetrics> compareExcludingTokens(const Tensor& reference, const Tensor& target,
    std::int64_t tokens, const std::vector<TokenFlip>& excluded, const MetricOptions& options)
{
    if (reference.rank() < 1 || reference.dim(0) != tokens || target.shape() != reference.shape()) {
        return Error::badInput(fmt::format("expected two [{}, ...] tensors, got {} and {}", tokens,
            shapeString(reference.shape()), shapeString(target.shape())));
    }
    std::set<std::int64_t> skip;
    for (const auto& f : excluded) {
        skip.insert(f.token);
    }
    const std::int64_t width = tokens > 0 ? reference.numel() / tokens : 0;
    const auto r = reference.toDoubles();
    const auto t = target.toDoubles();
    std::vector<double> keptR;
    std::vector<double> keptT;
    for (std::int64_t i = 0; i < tokens; ++i) {
        if (skip.contains(i)) {
            continue;
        }
        keptR.insert(keptR.end(), r.begin() + i * width, r.begin() + (i + 1) * width);
        keptT.insert(keptT.end(), t.begin() + i * width, t.begin() + (i + 1) * width);
    }
    const Shape shape { std::int64_t(tokens - std::int64_t(skip.size())), width };
    return compareTensors(
        Tensor::fromDoubles(shape, keptR), Tensor::fromDoubles(shape, keptT), options);
}

} // namespace day0::numerics
