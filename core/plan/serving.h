#pragma once

// How a serving runtime fills its KV cache: the sequences it admits at maximum load. One model
// serves the planner's inference sweep and the published serving measurements it is held against.

#include "plan/layout.h"
#include "plan/memory_kernel.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <optional>
#include <span>
#include <string_view>

namespace day0::plan {

/// What a runtime's capacity scheduler reserves in the KV cache for a sequence it admits.
enum class KvReservation {
    /// Its prompt and its whole output, so no admitted request is ever paused (TensorRT-LLM's
    /// default policy, GUARANTEED_NO_EVICT).
    WholeRequest,
    /// What it holds on average, its prompt and half its output; a full cache pauses requests
    /// (MAX_UTILIZATION).
    AverageContext,
};

/// The scheduler policy by its TensorRT-LLM name: "guaranteed_no_evict" or "max_utilization".
std::optional<KvReservation> parseScheduler(std::string_view name);
std::string_view schedulerName(KvReservation reservation);

/// The runtime settings that decide how many sequences are in flight.
struct ServingRuntime {
    int maxBatch = 4096; ///< cap on sequences in flight (trtllm-bench's tuning heuristic's cap)
    double kvCacheFraction = 0.90; ///< share of the memory free after loading given to KV
    KvReservation reservation = KvReservation::WholeRequest;
};

/// Tokens one admitted sequence reserves in the KV cache.
int reservedTokens(const Workload& workload, KvReservation reservation);

/// Tokens a sequence attends over on average in decode, under continuous batching of uniform
/// requests: its prompt and half its output.
int averageContext(const Workload& workload);

/// How many sequences one replica holds, and what bounds it.
struct Admission {
    int sequences = 0; ///< admitted, at most the runtime's cap; 0 when not one fits
    bool capped = false; ///< the runtime's cap, not the KV pool, bounds it
    int stage = 0; ///< the stage whose pool holds the fewest sequences
    double pool = 0; ///< that stage's KV pool, bytes per rank
    double perSequence = 0; ///< KV bytes one sequence reserves on that stage, per rank
    /// When none fits: bytes of device memory the stage lacks for one sequence.
    double shortfall = 0;
};

/// Sequences a runtime admits on `layout` at maximum load of uniform requests. On each stage,
/// the KV pool is `kvCacheFraction` of the memory left once weights, the prefill workspace and
/// communication buffers (all sized for the runtime's cap, with fragmentation headroom), the CUDA
/// context and NCCL buffers are in; each sequence reserves `reservedTokens` of KV. `capacity` is
/// the device memory the layout may use; `weights` the stages' weights when the caller has them.
Admission admitSequences(const ModelSummary& model, Layout layout, Workload workload,
    const MemoryOptions& options, double capacity, const ServingRuntime& runtime,
    std::span<const detail::StageWeights> weights = {});

} // namespace day0::plan
