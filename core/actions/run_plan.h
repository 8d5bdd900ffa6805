#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "base/units.h"
#include "checkpoint/sharding.h"
#include "comm/communicator.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "parallel/run.h"
#include "profile/cpu_tracer.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// A sharded run of a checkpoint under one layout (`day0 run CKPT --plan …`, the topology
/// panel's "Run with this plan").
struct PlanRunRequest {
    /// A checkpoint folder or file, or a `day0 shard` output folder (each rank then reads only
    /// its own rank file; otherwise every rank slices the full checkpoint in memory).
    std::string checkpoint;
    checkpoint::ShardLayout layout; ///< from plan::shardLayoutFromPlan or parseShardLayout
    int microBatches = 1; ///< sequences per replica, pipelined through the stages
    std::int64_t newTokens = 1; ///< greedy tokens per sequence
    /// Cycled over the dp × microBatches sequences; at least one.
    std::vector<std::vector<std::int64_t>> prompts;
    /// Rank r's compute backend (a plugin on its device); null: the CPU reference.
    std::function<Result<std::shared_ptr<exec::Backend>>(int rank)> backendFor;
    /// In-process ranks: a rank that waits longer than this for the others fails the run.
    Seconds timeout { 60.0 };
    std::string ranksMode = "in-process"; ///< how the ranks run: "in-process" or "mpi"
    std::string communicator = "in-process"; ///< what they talk over: in-process, mpi, nccl
    /// Every rank streams its weights a layer at a time from its rank file (a shard folder) or
    /// the full checkpoint (parallel::RankStreamOptions), on the CPU reference.
    bool stream = false;
    /// With `stream`: the resident weights of all the ranks on a node together (0: unbounded).
    /// In-process each of the W ranks may hold memoryBudget / W; under MPI each process
    /// memoryBudget / (processes on its node), as its launcher counts them
    /// (parallel::processShareOfBudget).
    std::uint64_t memoryBudget = 0;
    /// memoryBudget is each rank's own, not the node's (--memory-budget-per-rank).
    bool budgetPerRank = false;
    /// Called once a streamed run's budget is split, before the ranks run (not without a
    /// budget): what each rank may hold and how that was worked out, for the progress output.
    std::function<void(const parallel::BudgetShare&)> onBudget;
};

/// What the run gave: the model, the result (gathered on rank 0), the communication per
/// collective kind next to the alpha-beta model, the plan string every rank agreed on and the
/// run record (parallelRunRecord; meaningful on rank 0).
struct PlanRunOutcome {
    model::ModelSpec spec;
    parallel::ParallelRunResult result;
    std::vector<parallel::CommKindRow> communication;
    std::string plan; ///< parallel::layoutString of the layout and micro-batches
    double seconds = 0.0; ///< loading and running, as the record keeps it
    history::RunRecord record;
    parallel::BudgetShare budget; ///< a streamed run's budget per rank, and how it was split
};

/// Runs the plan with every rank a thread of this process. `rankProgress` (may be null) gets
/// one Progress per rank; `tracers` (empty, or one per rank) receive each rank's scopes and
/// collectives. A layout field the executor cannot run (cp > 1) is refused before any rank
/// starts. Cancellable.
Result<PlanRunOutcome> runPlanInProcess(const PlanRunRequest& request, Progress& progress,
    std::stop_token stop, parallel::RankProgress* rankProgress = nullptr,
    const std::vector<profile::CpuTracer*>& tracers = {});

/// Runs this process's rank of the plan over `world` (one MPI process per rank); `tracer`
/// (may be null) receives this rank's scopes and collectives. On error the caller must stop the
/// other ranks (world.abort). The outcome's result and record are whole on rank 0 only.
Result<PlanRunOutcome> runPlanRank(comm::Communicator& world, const PlanRunRequest& request,
    Progress& progress, std::stop_token stop, profile::CpuTracer* tracer = nullptr);

/// The checkpoint a plan runs on when the model source is only a config (a bundled name, a
/// config.json, a folder without weights): the demo's shrunk checkpoint of it when the plan
/// splits that, else a shrunk one sized for the plan, both in the shared cache. A source that
/// holds weights is returned as it is.
Result<std::filesystem::path> checkpointForPlan(const std::string& modelSource,
    const checkpoint::ShardLayout& layout, Progress& progress, std::stop_token stop);

} // namespace day0::actions
