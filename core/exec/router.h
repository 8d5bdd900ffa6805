#pragma once

#include "base/result.h"
#include "model/model_spec.h"

#include <cstdint>
#include <vector>

namespace day0::exec {

/// The experts chosen for each token and their combine weights.
struct Routing {
    std::int64_t tokens = 0;
    std::int64_t k = 0;
    std::vector<std::int64_t> experts; ///< [tokens, k], best first
    std::vector<double> weights; ///< [tokens, k], already renormalised and scaled
};

/// Router settings, read from a MoeSpec.
struct RouterConfig {
    model::RouterScoring scoring = model::RouterScoring::Softmax;
    std::int64_t numExperts = 0;
    std::int64_t topK = 0;
    bool normTopkProb = false;
    double routedScalingFactor = 1.0;
    std::int64_t numGroups = 1;
    std::int64_t topkGroup = 1;
};

/// The router settings of a MoE spec.
RouterConfig routerConfig(const model::MoeSpec& moe);

/// Turns router logits [tokens, numExperts] into a routing, in double:
/// - Softmax (Mixtral, Qwen-MoE): p = softmax(logits) over all experts, top-k of p,
///   renormalised to sum 1 if normTopkProb, times routedScalingFactor; with numGroups > 1
///   (DeepSeek-V2) only the topkGroup groups with the best single expert compete.
/// - Sigmoid (DeepSeek-V3, Kimi-K2): s = σ(logits); selection uses s + bias (`bias` may be null);
///   with numGroups > 1 only the topkGroup groups with the largest sum of their two best
///   biased scores compete (others masked with 0, as HF does); the weights are the unbiased s
///   of the chosen experts, renormalised (sum + 1e-20) if normTopkProb, times
///   routedScalingFactor.
/// Ties go to the lower expert index.
Routing route(
    const double* logits, std::int64_t tokens, const RouterConfig& config, const double* bias);

/// The score each expert is ranked by before any group stage, [tokens, numExperts]: for Sigmoid
/// routers σ(logit) + bias (`bias` may be null), for Softmax routers the softmax probability.
/// route() selects on these; the engine records them as "<router>#score" so that a precision
/// comparison can measure a flipped choice's margin on the scale the router decided on.
std::vector<double> selectionScores(
    const double* logits, std::int64_t tokens, const RouterConfig& config, const double* bias);

/// selectionScores() of float router logits and bias, widened to double first.
std::vector<double> selectionScoresFloat(
    const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias);

/// route() of float router logits and bias, widened to double first (as the engine routes).
Routing routeFloat(
    const float* logits, std::int64_t tokens, const RouterConfig& config, const float* bias);

/// Groups the rows of x[tokens, dim] by the experts of `routing`: `permuted` (tokens × k rows)
/// gets them expert by expert with tokens in order inside, `offsets` the numExperts + 1 row
/// offsets, `sourceRow` the token of each permuted row. Errors for an expert outside
/// [0, numExperts).
template <typename T>
Result<void> permuteRows(const T* x, std::int64_t tokens, std::int64_t dim, const Routing& routing,
    std::int64_t numExperts, T* permuted, std::vector<std::int64_t>& offsets,
    std::vector<std::int64_t>& sourceRow);

} // namespace day0::exec
