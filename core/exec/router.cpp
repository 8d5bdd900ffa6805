#include "exec/router.h"

#include "numerics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec {

namespace {

/// Float router logits and bias widened to double, as the engine routes in fp64.
struct Widened {
    Widened(const float* l, std::int64_t tokens, const RouterConfig& config, const float* b)
        : logits(l, l + tokens * config.numExperts)
    {
        if (b != nullptr) {
            bias.assign(b, b + config.numExperts);
        }
    }
    [[nodiscard]] const double* biasOrNull() const { return bias.empty() ? nullptr : bias.data(); }
    std::vector<double> logits;
    std::vector<double> bias;
};

} // namespace

RouterConfig routerConfig(const model::MoeSpec& moe)
{
    RouterConfig c;
    c.scoring = moe.scoring;
    c.numExperts = moe.numExperts;
    c.topK = moe.topK;
    c.normTopkProb = moe.normTopkProb;
    c.routedScalingFactor = moe.routedScalingFactor;
    c.numGroups = std::max<std::int64_t>(moe.numGroups, 1);
    c.topkGroup = std::max<std::int64_t>(moe.topkGroup, 1);
    return c;
}

std::vector<double> selectionScores(
    const double* logits, std::int64_t tokens, const RouterConfig& config, const double* bias)
{
    const std::int64_t e = config.numExperts;
    std::vector<double> out(std::size_t(tokens * e));
    for (std::int64_t t = 0; t < tokens; ++t) {
        const double* row = logits + t * e;
        double* score = out.data() + t * e;
        if (config.scoring == model::RouterScoring::Softmax) {
            const double m = *std::max_element(row, row + e);
            double sum = 0.0;
            for (std::int64_t i = 0; i < e; ++i) {
                score[i] = std::exp(row[i] - m);
                sum += score[i];
            }
            for (std::int64_t i = 0; i < e; ++i) {
                score[i] /= sum;
            }
        } else {
            for (std::int64_t i = 0; i < e; ++i) {
                score[i] = 1.0 / (1.0 + std::exp(-row[i])) + (bias != nullptr ? bias[i] : 0.0);
            }
        }
    }
    return out;
}

std::vector<double> selectionScoresFloat(
    const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias)
{
    const Widened w(logits, tokens, config, bias);
    return selectionScores(w.logits.data(), tokens, config, w.biasOrNull());
}

Routing route(
    const double* logits, std::int64_t tokens, const RouterConfig& config, const double* bias)
{
    Routing r;
    r.tokens = tokens;
    r.k = config.topK;
    const std::int64_t e = config.numExperts;
    r.experts.reserve(std::size_t(tokens * r.k));
    r.weights.reserve(std::size_t(tokens * r.k));
    const bool sigmoid = config.scoring == model::RouterScoring::Sigmoid;
    const std::vector<double> selection = selectionScores(logits, tokens, config, bias);
    std::vector<double> scores(static_cast<std::size_t>(e));
    std::vector<double> choice(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < tokens; ++t) {
        const double* row = logits + t * e;
        choice.assign(selection.begin() + t * e, selection.begin() + (t + 1) * e);
        for (std::int64_t i = 0; i < e; ++i) {
            // The combine weights: the probabilities, or the unbiased sigmoid scores.
            scores[std::size_t(i)]
                = sigmoid ? 1.0 / (1.0 + std::exp(-row[i])) : choice[std::size_t(i)];
        }
        if (config.numGroups > 1) {
            // Only the topkGroup best groups compete, the rest masked with 0 (as HF does).
            // Sigmoid (DeepSeek-V3 noaux_tc): a group's score is the sum of its two best biased
            // scores; Softmax (DeepSeek-V2 group_limited_greedy): its best probability.
            const std::int64_t perGroup = e / config.numGroups;
            std::vector<double> groupScore(static_cast<std::size_t>(config.numGroups));
            for (std::int64_t g = 0; g < config.numGroups; ++g) {
                groupScore[std::size_t(g)] = numerics::expertGroupScore(
                    { choice.data() + g * perGroup, std::size_t(perGroup) }, sigmoid);
            }
            const auto keep = numerics::topKIndices(groupScore, config.topkGroup);
            for (std::int64_t g = 0; g < config.numGroups; ++g) {
                if (std::find(keep.begin(), keep.end(), g) == keep.end()) {
                    std::fill_n(choice.begin() + g * perGroup, perGroup, 0.0);
                }
            }
        }
        const auto chosen = numerics::topKIndices(choice, r.k);
        double sum = 0.0;
        for (const auto c : chosen) {
            sum += scores[std::size_t(c)];
        }
        const double denominator = sigmoid ? sum + 1e-20 : sum;
        for (const auto c : chosen) {
            double w = scores[std::size_t(c)];
            if (config.normTopkProb) {
                w /= denominator;
            }
            r.experts.push_back(c);
            r.weights.push_back(w * config.routedScalingFactor);
        }
    }
    return r;
}

Routing routeFloat(
    const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias)
{
    const Widened w(logits, tokens, config, bias);
    return route(w.logits.data(), tokens, config, w.biasOrNull());
}

template <typename T>
Result<void> permuteRows(const T* x, std::int64_t tokens, std::int64_t dim, const Routing& routing,
    std::int64_t numExperts, T* permuted, std::vector<std::int64_t>& offsets,
    std::vector<std::int64_t>& sourceRow)
{
    offsets.assign(std::size_t(numExperts + 1), 0);
    for (const auto e : routing.experts) {
        if (e < 0 || e >= numExperts) {
            return Error::badInput(
                fmt::format("permuteTokens: expert {} is outside [0, {})", e, numExperts));
        }
        ++offsets[std::size_t(e + 1)];
    }
    for (std::size_t e = 0; e < std::size_t(numExperts); ++e) {
        offsets[e + 1] += offsets[e];
    }
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    sourceRow.assign(routing.experts.size(), 0);
    // A stable counting sort: token order inside each expert.
    for (std::int64_t t = 0; t < tokens; ++t) {
        for (std::int64_t j = 0; j < routing.k; ++j) {
            const auto e = routing.experts[std::size_t(t * routing.k + j)];
            const auto row = next[std::size_t(e)]++;
            sourceRow[std::size_t(row)] = t;
            std::copy(x + t * dim, x + (t + 1) * dim, permuted + row * dim);
        }
    }
    return success();
}

template Result<void> permuteRows<float>(const float*, std::int64_t, std::int64_t, const Routing&,
    std::int64_t, float*, std::vector<std::int64_t>&, std::vector<std::int64_t>&);
template Result<void> permuteRows<double>(const double*, std::int64_t, std::int64_t, const Routing&,
    std::int64_t, double*, std::vector<std::int64_t>&, std::vector<std::int64_t>&);

} // namespace day0::exec
