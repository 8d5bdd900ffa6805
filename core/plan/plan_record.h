#pragma once

#include "hardware/cluster.h"
#include "history/run_record.h"
#include "plan/memory_estimator.h"
#include "plan/model_summary.h"
#include "plan/planner.h"
#include "plan/workload.h"

namespace day0::plan {

/// The memory components a plan run records per pipeline stage, in display order:
/// "weights", "gradients", "optimizer", "activations", "kv_cache", "buffers".
const std::vector<std::string>& memoryComponentNames();

/// Adds the per-stage memory of `report` to `record`: one entry per non-zero component of every
/// stage, at the stage's first rank (the stage's other ranks hold the same amounts).
void addStageMemory(history::RunRecord& record, const MemoryReport& report);

/// A planner sweep as a run of kind plan, the same from `day0 plan` and the planner panel:
/// model, cluster, mode and workload; evaluated/feasible counts; the best layout as the run's
/// plan with its step time, tokens/s, MFU or latencies and the step-time breakdown as metrics;
/// its memory per pipeline stage (estimated again with the sweep's memory options); the fastest
/// layouts and the rejection reasons as events. Status Ok when a layout fits, else Failed.
/// Pure; thread-safe.
history::RunRecord planRunRecord(const ModelSummary& model, const hardware::Cluster& cluster,
    const PlannerOptions& options, const PlanResult& result);

/// One layout's memory estimate (`day0 memory`) as a run of kind plan: the plan, per-stage
/// memory, the most loaded rank's total against device memory. Status Ok when it fits, else
/// Failed. Pure; thread-safe.
history::RunRecord memoryRunRecord(const ModelSummary& model, const hardware::Cluster& cluster,
    const Workload& workload, const MemoryReport& report);

} // namespace day0::plan
