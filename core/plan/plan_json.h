#pragma once

#include "plan/megatron_memory.h"
#include "plan/memory_estimator.h"
#include "plan/planner.h"

#include <nlohmann/json.hpp>

namespace day0::plan {

/// The `day0 memory --json` document: {"plan", "mode", "world", "per_rank": [{"rank",
/// "pp_stage", "ranks", "layers", "weights", "gradients", "optimizer", "activations",
/// "kv_cache", "buffers", "total", "buffers_detail": {...}}], "max_total", "device_memory",
/// "fits", "notes", "megatron"?}. Byte figures are integers. `megatron` may be null.
nlohmann::json memoryReportJson(const MemoryReport& report, const MegatronMemory* megatron);

/// One planned layout: {"tp", "pp", "ep", "etp", "dp", "cp", "vpp", "zero", "recompute",
/// "micro_batch", "max_memory", "step_time_s", "tokens_per_s", "breakdown": {...}, ...}.
nlohmann::json plannedLayoutJson(const PlannedLayout& layout);

/// The `day0 plan --json` document: {"evaluated", "feasible", "seconds", "layouts": [...],
/// "rejected_summary": {"<reason>": count}, "rejected": [{"reason", "count", "example"}],
/// "notes": [...]}.
nlohmann::json planResultJson(const PlanResult& result);

} // namespace day0::plan
