#include "serve/bench_plan.h"

#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/cost_model.h"
#include "plan/layout.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"
#include "plan/serving.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::serve {

Result<PlanPrediction> predictServing(const PlanQuery& q)
{
    if (q.batch < 1 || !(q.inputTokens >= 1) || !(q.outputTokens >= 1)) {
        return Error::badInput("--plan: the level completed no request to take a workload from");
    }
    auto spec = model::loadModel(q.model);
    if (!spec) {
        return spec.error().withContext("--plan-model");
    }
    auto plan = plan::parsePlan(q.plan);
    if (!plan) {
        return plan.error().withContext("--plan");
    }
    if (plan->recompute != plan::Recompute::None || plan->vpp > 1 || plan->globalBatch > 0
        || plan->numMicroBatches > 0 || plan->microBatch > 1 || plan->zero > 0) {
        return Error::badInput(fmt::format("--plan '{}': recompute, vpp, zero, mb, gbs and m are "
                                           "training keys; serving takes tp, pp, ep, etp, dp, cp",
            q.plan));
    }
    if (plan->dp == 0) {
        plan->dp = 1;
    }
    auto cluster = hardware::parseCluster(q.cluster);
    if (!cluster) {
        return cluster.error().withContext("--cluster");
    }
    plan::Workload wl;
    wl.mode = plan::Mode::Infer;
    wl.batch = q.batch;
    wl.promptLength = std::max(1, int(std::lround(q.inputTokens)));
    wl.outputLength = std::max(1, int(std::lround(q.outputTokens)));
    wl.context = wl.promptLength + wl.outputLength;
    wl.prefillChunk = std::min(wl.prefillChunk, wl.promptLength);
    wl.includeMtp = false; // a served request decodes without speculative MTP layers
    wl.context = plan::averageContext(wl);
    const auto graph = model::buildLayerGraph(*spec);
    const auto summary = plan::summarizeModel(graph);
    auto layout = plan::resolveLayout(*plan, summary, wl, *cluster);
    if (!layout) {
        return layout.error().withContext("--plan");
    }
    const auto cost = plan::estimateInferenceCost(summary, *layout, wl, *cluster);
    PlanPrediction out;
    out.ttft = cost.ttft;
    out.tpot = cost.tpot;
    out.batch = q.batch;
    out.layout = plan::formatPlan(layout->toPlan());
    out.cluster = cluster->describe();
    return out;
}

nlohmann::json planJson(const PlanPrediction& p, double measuredTtftMs, double measuredTpotMs)
{
    const auto error = [](double predicted, double measured) {
        return measured > 0 ? nlohmann::json((predicted - measured) / measured)
                            : nlohmann::json(nullptr);
    };
    return { { "ttft_ms", 1000 * p.ttft }, { "tpot_ms", 1000 * p.tpot }, { "batch", p.batch },
        { "layout", p.layout }, { "cluster", p.cluster }, { "measured_ttft_ms", measuredTtftMs },
        { "measured_tpot_ms", measuredTpotMs },
        { "ttft_error", error(1000 * p.ttft, measuredTtftMs) },
        { "tpot_error", error(1000 * p.tpot, measuredTpotMs) } };
}

} // namespace day0::serve
