#include "actions/run_plan.h"

#include "actions/records.h"
#include "actions/run.h"
#include "exec/checkpoint_weights.h"
#include "exec/shrunk_cache.h"
#include "exec/weight_source.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

/// What every rank loads before it runs: the model, the weights (the full checkpoint, or the
/// shard folder's rank files) and the options the ranks agree on.
struct Loaded {
    model::ModelSpec spec;
    std::unique_ptr<exec::WeightSource> full; ///< null for a shard folder
    parallel::ShardFolder folder; ///< the rank files of a shard folder
    parallel::ParallelRunOptions options;
    parallel::BudgetShare budget;
    std::chrono::steady_clock::time_point started;

    [[nodiscard]] const exec::WeightSource& weightsOf(int rank) const
    {
        return full ? *full : *folder.ranks[std::size_t(rank)];
    }
};

Result<Loaded> load(const PlanRunRequest& r, int onlyRank, std::optional<int> nodeProcesses)
{
    Loaded out;
    out.started = std::chrono::steady_clock::now();
    DAY0_TRY(parallel::checkRunnable(r.layout));
    if (r.prompts.empty()) {
        return Error::badInput("a plan run needs at least one prompt");
    }
    if (r.microBatches < 1) {
        return Error::badInput(
            fmt::format("micro-batches must be at least 1, not {}", r.microBatches));
    }
    auto spec = exec::loadCheckpointModel(r.checkpoint);
    if (!spec) {
        return spec.error();
    }
    out.spec = std::move(*spec);
    if (parallel::isShardFolder(r.checkpoint)) {
        auto opened = parallel::openShardFolder(r.checkpoint, r.layout, onlyRank);
        if (!opened) {
            return opened.error();
        }
        out.folder = std::move(*opened);
    } else {
        auto weights = exec::openCheckpointWeights(r.checkpoint);
        if (!weights) {
            return weights.error().withContext("weights");
        }
        out.full = std::move(*weights);
    }
    auto id = parallel::checkpointFingerprint(r.checkpoint);
    if (!id) {
        return id.error();
    }
    auto& o = out.options;
    o.layout = r.layout;
    o.microBatches = r.microBatches;
    o.newTokens = r.newTokens;
    o.checkpointId = *id;
    for (int s = 0; s < r.layout.dp * r.microBatches; ++s) {
        o.prompts.push_back(r.prompts[std::size_t(s) % r.prompts.size()]);
    }
    o.backendFor = r.backendFor;
    if (r.stream) {
        if (out.full) {
            o.stream.file = [path = fs::path(r.checkpoint)](int) { return path; };
        } else {
            o.stream.file
                = [files = out.folder.files](int rank) { return files.at(std::size_t(rank)); };
            o.stream.presliced = true;
        }
        // In-process the ranks share this node's budget; under MPI (onlyRank >= 0) this
        // process takes its share of its node's, over the processes the communicator counts
        // there.
        if (onlyRank < 0) {
            out.budget = parallel::inProcessShareOfBudget(
                r.memoryBudget, r.layout.worldSize(), r.budgetPerRank);
        } else {
            auto share = parallel::processShareOfBudget(
                r.memoryBudget, r.layout.worldSize(), r.budgetPerRank, nodeProcesses);
            if (!share) {
                return share.error();
            }
            out.budget = std::move(*share);
        }
        o.stream.rankBudget = out.budget.perRank;
    } else if (r.memoryBudget > 0) {
        return Error::badInput("--memory-budget bounds a streamed plan run; add --stream");
    }
    return out;
}

PlanRunOutcome finish(
    const PlanRunRequest& r, Loaded& loaded, parallel::ParallelRunResult&& result, int ranks)
{
    PlanRunOutcome out;
    out.communication = parallel::commTable(result.events, ranks, result.machine);
    out.plan = parallel::layoutString(r.layout, r.microBatches);
    out.seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded.started).count();
    out.record = parallelRunRecord(loaded.spec, r.checkpoint, out.plan, r.ranksMode, r.communicator,
        result, out.communication, out.seconds);
    out.spec = std::move(loaded.spec);
    out.result = std::move(result);
    out.budget = loaded.budget;
    return out;
}

} // namespace

Result<PlanRunOutcome> runPlanInProcess(const PlanRunRequest& request, Progress& progress,
    std::stop_token stop, parallel::RankProgress* rankProgress,
    const std::vector<profile::CpuTracer*>& tracers)
{
    progress.setStage("loading");
    auto loaded = load(request, -1, std::nullopt);
    if (!loaded) {
        return loaded.error();
    }
    if (!loaded->full) {
        loaded->options.rankSource = [&folder = loaded->folder](int rank) {
            return folder.ranks[std::size_t(rank)].get();
        };
    }
    if (request.onBudget && loaded->budget.perRank > 0) {
        request.onBudget(loaded->budget);
    }
    progress.setStage("run");
    auto r = parallel::runParallelInProcess(loaded->spec, loaded->weightsOf(0), loaded->options,
        progress, stop, rankProgress, tracers, { request.timeout });
    if (!r) {
        return r.error();
    }
    const int ranks = int(r->ranks.size());
    return finish(request, *loaded, std::move(*r), ranks);
}

Result<PlanRunOutcome> runPlanRank(comm::Communicator& world, const PlanRunRequest& request,
    Progress& progress, std::stop_token stop, profile::CpuTracer* tracer)
{
    progress.setStage("loading");
    auto loaded = load(request, world.rank(), world.processesOnThisNode());
    if (!loaded) {
        return loaded.error();
    }
    if (!loaded->full) {
        loaded->options.rankSource = [&folder = loaded->folder](int rank) {
            return folder.ranks[std::size_t(rank)].get();
        };
    }
    std::vector<profile::CpuTracer*> mine(std::size_t(world.size()), nullptr);
    mine[std::size_t(world.rank())] = tracer;
    parallel::CommRecorder recorder(mine);
    world.setObserver(recorder.observer());
    if (request.onBudget && loaded->budget.perRank > 0) {
        request.onBudget(loaded->budget);
    }
    progress.setStage(fmt::format("rank {}", world.rank()));
    auto r = parallel::runParallelRank(world, loaded->spec, loaded->weightsOf(world.rank()),
        loaded->options, recorder, progress, std::move(stop));
    world.setObserver({});
    if (!r) {
        return r.error();
    }
    return finish(request, *loaded, std::move(*r), world.size());
}

Result<fs::path> checkpointForPlan(const std::string& modelSource,
    const checkpoint::ShardLayout& layout, Progress& progress, std::stop_token stop)
{
    // Only a config: the demo's shrunk checkpoint when the plan splits it, else one sized for
    // the plan.
    const bool weights = exec::holdsWeights(modelSource);
    auto demo = checkpointForSource(modelSource, progress, stop);
    if (!demo || weights) {
        return demo;
    }
    auto demoSpec = exec::loadCheckpointModel(*demo);
    if (demoSpec && parallel::checkPlanFits(*demoSpec, layout)) {
        return *demo;
    }
    progress.setStage("shrinking the model for the plan");
    return parallel::prepareParallelCheckpoint(
        modelSource, layout, exec::cacheDir(), progress, stop);
}

} // namespace day0::actions
