#pragma once

#include "base/result.h"
#include "base/units.h"
#include "hardware/cluster.h"
#include "plan/layout.h"
#include "plan/memory_formula.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <string>
#include <vector>

namespace day0::plan {

/// Memory of one rank, standing for every rank of its pipeline stage (ranks of a stage differ
/// only in which shard they hold, not in how much).
struct RankMemory {
    int rank = 0; ///< first rank of the stage
    int ppStage = 0;
    int ranks = 1; ///< ranks with these figures (the stage's tp·cp·dp ranks)
    int layers = 0; ///< decoder layers on the stage
    bool embedding = false; ///< holds the input embedding
    bool head = false; ///< holds the output head (and the loss)
    int mtpLayers = 0;
    double inFlightMicroBatches = 0; ///< training: micro-batches whose activations it keeps

    Bytes weights;
    Bytes gradients;
    Bytes optimizer; ///< FP32 master weights and Adam moments
    Bytes activations; ///< training: kept for backward; inference: prefill workspace
    Bytes kvCache;
    std::vector<CacheShare> kvByKind; ///< kvCache by layer kind (inference)
    Bytes buffers; ///< runtime + communication + dispatch + ZeRO + fragmentation, itemised below
    Bytes total;

    Bytes runtimeReserve; ///< CUDA context and NCCL buffers
    Bytes commBuffers; ///< pipeline send/receive, context-parallel ring
    Bytes moeDispatch; ///< expert all-to-all buffers
    Bytes zeroBuffers; ///< ZeRO-3 prefetch and ZeRO-2/3 reduce-scatter bucket
    Bytes fragmentation; ///< allocator headroom

    /// How every figure above was computed (formula, inputs and their sources), one entry per
    /// figure: weights, gradients, optimizer, activations, kv_cache, kv_cache.<kind>,
    /// runtime_reserve, comm_buffers, moe_dispatch, zero_buffers, fragmentation, buffers, total.
    /// Empty unless the estimate was asked for them (Derive::WithDerivations).
    std::vector<Derivation> derivations;
};

/// Per-rank memory of a layout.
struct MemoryReport {
    Layout layout;
    std::vector<RankMemory> perRank; ///< one entry per pipeline stage, most loaded first
    Bytes maxTotal;
    Bytes deviceMemory;
    bool fits = false;
    std::vector<std::string> notes; ///< assumptions, and what is modelled beyond Megatron-LM
    bool partial = false; ///< the model was read partially: `ignored` is left out
    std::vector<std::string> ignored;
};

/// Whether an estimate also records how each figure was computed. The same code computes the
/// bytes either way (it records the terms as it adds them up), so the bytes are identical; the
/// text costs about 40 times the bytes alone (plan_bench singleEstimate*), which callers that
/// only need bytes (fits checks, budgets, sweeps) should not pay.
enum class Derive {
    BytesOnly, ///< RankMemory::derivations stays empty
    WithDerivations, ///< every figure's formula, terms and inputs (--explain, --json, tooltips)
};

/// Estimates the memory of every pipeline stage of a layout. Pure; thread-safe.
MemoryReport estimateMemory(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const hardware::Cluster& cluster, const MemoryOptions& options = {},
    Derive derive = Derive::BytesOnly);

/// Resolves the plan and estimates its memory; BadInput when the plan cannot run.
Result<MemoryReport> estimateMemory(const ModelSummary& model, const ParallelPlan& plan,
    const Workload& workload, const hardware::Cluster& cluster, const MemoryOptions& options = {},
    Derive derive = Derive::BytesOnly);

} // namespace day0::plan
