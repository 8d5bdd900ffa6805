#include "numerics/routing_flips.h"

#include "numerics/float_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

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

std::string RoutingFlips::tokenList() const
{
    constexpr std::size_t kNamed = 8;
    std::string out;
    for (std::size_t i = 0; i < flips.size() && i < kNamed; ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(flips[i].token);
    }
    if (flips.size() > kNamed) {
        out += fmt::format(" and {} more", flips.size() - kNamed);
    }
    return out;
}

Result<std::vector<TokenFlip>> findTokenFlips(const Tensor& referenceSelection,
    const Tensor& targetSelection, const Tensor* referenceScores, DType dtype)
{
    if (referenceSelection.rank() != 2 || referenceSelection.shape() != targetSelection.shape()) {
        return Error::badInput(
            fmt::format("expert selection: expected two [tokens, k], got {} and {}",
                shapeString(referenceSelection.shape()), shapeString(targetSelection.shape())));
    }
    const std::int64_t tokens = referenceSelection.dim(0);
    const std::int64_t k = referenceSelection.dim(1);
    std::vector<double> scores;
    std::int64_t experts = 0;
    if (referenceScores != nullptr) {
        if (referenceScores->rank() != 2 || referenceScores->dim(0) != tokens) {
            return Error::badInput(fmt::format("router scores: expected [{}, experts], got {}",
                tokens, shapeString(referenceScores->shape())));
        }
        experts = referenceScores->dim(1);
        scores = referenceScores->toDoubles();
    }
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
        std::set_difference(
            sr.begin(), sr.end(), st.begin(), st.end(), std::back_inserter(flip.dropped));
        std::set_difference(
            st.begin(), st.end(), sr.begin(), sr.end(), std::back_inserter(flip.added));
        const auto inRange = [&](std::int64_t e) { return e >= 0 && e < experts; };
        if (!scores.empty() && !flip.dropped.empty() && !flip.added.empty()
            && std::all_of(flip.dropped.begin(), flip.dropped.end(), inRange)
            && std::all_of(flip.added.begin(), flip.added.end(), inRange)) {
            const double* row = scores.data() + i * experts;
            double weakestDropped = row[flip.dropped.front()];
            for (const auto e : flip.dropped) {
                weakestDropped = std::min(weakestDropped, row[e]);
            }
            double strongestAdded = row[flip.added.front()];
            for (const auto e : flip.added) {
                strongestAdded = std::max(strongestAdded, row[e]);
            }
            flip.margin = weakestDropped - strongestAdded;
            flip.resolution = kNearTieSpacings
                * formatSpacing(
                    dtype, std::max(std::fabs(weakestDropped), std::fabs(strongestAdded)));
            flip.nearTie = std::fabs(*flip.margin) <= flip.resolution;
        }
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
