#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace day0::serve {

/// What `--plan` asks the planner's cost model for: the served model, the layout and cluster it
/// is assumed to run on, and one load level's workload.
struct PlanQuery {
    std::string model; ///< a folder, a config.json or a bundled name (as `day0 plan`)
    std::string plan; ///< plan string: "tp=1" (inference keys only)
    std::string cluster; ///< cluster string: "h100-sxm:1x1", "h200:1x8" or a JSON file
    double inputTokens = 0; ///< mean prompt length of the level's requests
    double outputTokens = 0; ///< mean output length
    int batch = 1; ///< sequences in flight per replica
};

/// The planner's figures for a query (plan::estimateInferenceCost, as `day0 plan --mode infer`
/// ranks layouts): TTFT of one prompt and TPOT at the batch, with decode attending over the
/// prompt and half the output (continuous batching of uniform requests, plan::averageContext).
struct PlanPrediction {
    double ttft = 0.0; ///< seconds
    double tpot = 0.0; ///< seconds
    int batch = 1;
    std::string layout; ///< the resolved plan, as `day0 plan` prints it
    std::string cluster; ///< the cluster's description
};

/// Resolves the query's model, plan and cluster and estimates. Errors name the flag and what is
/// wrong (an unknown model, a plan that does not fit the cluster, a training-only key).
Result<PlanPrediction> predictServing(const PlanQuery& query);

/// {"ttft_ms", "tpot_ms", "batch", "layout", "cluster", and with measured values the
/// "measured_*_ms" and relative "*_error" = (predicted − measured) / measured}.
nlohmann::json planJson(
    const PlanPrediction& prediction, double measuredTtftMs, double measuredTpotMs);

} // namespace day0::serve
