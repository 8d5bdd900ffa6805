#include "exec/router.h"

#include "numerics/metrics.h"

#include <algorithm>
#include <cmath>

namespace day0::exec {

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

Routing route(
    const double* logits, std::int64_t tokens, const RouterConfig& config, const double* bias)
{
    Routing r;
    r.tokens = tokens;
    r.k = config.topK;
    const std::int64_t e = config.numExperts;
    r.experts.reserve(std::size_t(tokens * r.k));
    r.weights.reserve(std::size_t(tokens * r.k));
    std::vector<double> scores(static_cast<std::size_t>(e));
    std::vector<double> choice(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < tokens; ++t) {
        const double* row = logits + t * e;
        if (config.scoring == model::RouterScoring::Softmax) {
            const double m = *std::max_element(row, row + e);
            double sum = 0.0;
            for (std::int64_t i = 0; i < e; ++i) {
                scores[std::size_t(i)] = std::exp(row[i] - m);
                sum += scores[std::size_t(i)];
            }
            for (auto& s : scores) {
                s /= sum;
            }
            choice = scores;
            if (config.numGroups > 1) {
                // DeepSeek-V2 "group_limited_greedy": groups ranked by their best expert.
                const std::int64_t perGroup = e / config.numGroups;
                std::vector<double> groupScore(static_cast<std::size_t>(config.numGroups));
                for (std::int64_t g = 0; g < config.numGroups; ++g) {
                    groupScore[std::size_t(g)] = *std::max_element(
                        choice.begin() + g * perGroup, choice.begin() + (g + 1) * perGroup);
                }
                const auto keep = numerics::topKIndices(groupScore, config.topkGroup);
                for (std::int64_t g = 0; g < config.numGroups; ++g) {
                    if (std::find(keep.begin(), keep.end(), g) == keep.end()) {
                        std::fill_n(choice.begin() + g * perGroup, perGroup, 0.0);
                    }
                }
            }
        } else {
            for (std::int64_t i = 0; i < e; ++i) {
                scores[std::size_t(i)] = 1.0 / (1.0 + std::exp(-row[i]));
                choice[std::size_t(i)] = scores[std::size_t(i)] + (bias != nullptr ? bias[i] : 0.0);
            }
            if (config.numGroups > 1) {
                const std::int64_t perGroup = e / config.numGroups;
                std::vector<double> groupScore(static_cast<std::size_t>(config.numGroups));
                for (std::int64_t g = 0; g < config.numGroups; ++g) {
                    const std::span<const double> members(
                        choice.data() + g * perGroup, std::size_t(perGroup));
                    const auto best = numerics::topKIndices(members, 2);
                    double sum = 0.0;
                    for (const auto b : best) {
                        sum += members[std::size_t(b)];
                    }
                    groupScore[std::size_t(g)] = sum;
                }
                const auto keep = numerics::topKIndices(groupScore, config.topkGroup);
                for (std::int64_t g = 0; g < config.numGroups; ++g) {
                    if (std::find(keep.begin(), keep.end(), g) == keep.end()) {
                        std::fill_n(choice.begin() + g * perGroup, perGroup, 0.0);
                    }
                }
            }
        }
        const auto chosen = numerics::topKIndices(choice, r.k);
        double sum = 0.0;
        for (const auto c : chosen) {
            sum += scores[std::size_t(c)];
        }
        const bool sigmoid = config.scoring == model::RouterScoring::Sigmoid;
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

} // namespace day0::exec
