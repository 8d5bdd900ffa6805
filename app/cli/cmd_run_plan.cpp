// `day0 run <checkpoint> --plan …`: a TP/PP/EP/DP-sharded run on in-process ranks or on the MPI
// processes of `mpirun -np N day0 run … --ranks mpi`, with its measured communication.
#include "cmd_run_plan.h"

#include "base/units.h"
#include "checkpoint/sharding.h"
#include "exec/checkpoint_weights.h"
#include "exec/parallel_run.h"
#include "extend/plugin_registry.h"
#include "pipeline/records.h"
#include "profile/chrome_exporter.h"
#include "profile/cpu_tracer.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace day0::cli {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

nlohmann::json resultJson(const exec::ParallelRunResult& r,
    const std::vector<exec::CommKindRow>& table, const std::string& plan, const std::string& ranks)
{
    nlohmann::json seqs = nlohmann::json::array();
    for (const auto& s : r.sequences) {
        seqs.push_back({ { "prompt_ids", s.prompt }, { "generated", s.generated } });
    }
    nlohmann::json rankRows = nlohmann::json::array();
    for (const auto& k : r.ranks) {
        rankRows.push_back(
            { { "rank", k.rank }, { "stage", k.coord.stage }, { "dp", k.coord.dpRank },
                { "tp", k.coord.tpRank }, { "ep", k.coord.epRank }, { "etp", k.coord.etpRank },
                { "weight_bytes", k.weightBytes }, { "seconds", k.seconds } });
    }
    nlohmann::json comm = nlohmann::json::array();
    for (const auto& row : table) {
        comm.push_back({ { "kind", row.kind }, { "calls", row.calls }, { "bytes", row.bytes },
            { "measured_seconds_per_rank", row.measuredSeconds },
            { "model_seconds_per_rank", row.predictedSeconds } });
    }
    return { { "plan", plan }, { "ranks_mode", ranks }, { "sequences", seqs },
        { "ranks", rankRows }, { "communication", comm },
        { "machine",
            { { "measured", r.machine.measured }, { "latency_seconds", r.machine.latency },
                { "bandwidth_bytes_per_second", r.machine.bandwidth },
                { "method", r.machine.method } } },
        { "seconds", r.seconds } };
}

void printResult(const exec::ParallelRunResult& r, const std::vector<exec::CommKindRow>& table,
    const std::string& plan, const std::string& ranks)
{
    fmt::print("plan {} on {} {} ranks, {:.3f} s\n", plan, r.ranks.size(), ranks, r.seconds);
    for (std::size_t s = 0; s < r.sequences.size(); ++s) {
        fmt::print("sequence {}: prompt {} -> generated {}\n", s,
            fmt::join(r.sequences[s].prompt, ","), fmt::join(r.sequences[s].generated, " "));
    }
    Table ranksTable({ "rank", "stage", "dp", "tp", "ep", "etp", "weights", "time" },
        { Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    for (const auto& k : r.ranks) {
        ranksTable.addRow({ std::to_string(k.rank), std::to_string(k.coord.stage),
            std::to_string(k.coord.dpRank), std::to_string(k.coord.tpRank),
            std::to_string(k.coord.epRank), std::to_string(k.coord.etpRank),
            formatBytes(Bytes(double(k.weightBytes))), formatDuration(Seconds(k.seconds)) });
    }
    fmt::print("\n{}", ranksTable.render());
    Table comm({ "collective", "calls", "volume", "measured/rank", "model/rank", "measured/model" },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right });
    for (const auto& row : table) {
        if (row.kind == "total") {
            comm.addSeparator();
        }
        comm.addRow({ row.kind, std::to_string(row.calls), formatBytes(Bytes(double(row.bytes))),
            formatDuration(Seconds(row.measuredSeconds)),
            r.machine.measured ? formatDuration(Seconds(row.predictedSeconds)) : "n/a",
            r.machine.measured && row.predictedSeconds > 0
                ? fmt::format("{:.2f}x", row.measuredSeconds / row.predictedSeconds)
                : "n/a" });
    }
    fmt::print("\ncommunication (all ranks; times are per rank):\n{}", comm.render());
    if (r.machine.measured) {
        fmt::print("model: core/plan alpha-beta collective formulas on this run's calls, with this "
                   "machine's measured figures α = {}, B = {}/s ({}); not a datasheet.\n",
            formatDuration(Seconds(r.machine.latency)), formatBytes(Bytes(r.machine.bandwidth)),
            r.machine.method);
    } else {
        fmt::print("model: n/a (a single rank has no link to measure)\n");
    }
}

Result<void> writeCommTrace(const std::vector<std::unique_ptr<profile::CpuTracer>>& tracers,
    int firstRank, const std::string& path)
{
    profile::TraceBuilder builder;
    for (std::size_t i = 0; i < tracers.size(); ++i) {
        tracers[i]->exportTo(builder, std::int32_t(firstRank + int(i)));
    }
    Progress progress;
    auto trace = builder.finish(progress, {});
    if (!trace) {
        return trace.error();
    }
    return profile::exportChromeJson(*trace, path, progress, {});
}

/// Rank 0's end of a run: the communication table, the recorded run and the output.
int finishRun(const PlanRunArgs& a, const GlobalOptions& global, const model::ModelSpec& spec,
    const exec::ParallelRunResult& r, int ranks, const std::string& planText,
    std::chrono::steady_clock::time_point started)
{
    const auto table = exec::commTable(r.events, ranks, r.machine);
    const auto runId = recordResult(pipeline::parallelRunRecord(
        spec, a.checkpoint, planText, a.ranks, r, table, secondsSince(started)));
    if (global.json) {
        auto j = resultJson(r, table, planText, a.ranks);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        fmt::print("{}\n", j.dump(2));
    } else {
        printResult(r, table, planText, a.ranks);
    }
    return 0;
}

} // namespace

int runPlanned(const PlanRunArgs& a, const GlobalOptions& global)
{
    const auto started = std::chrono::steady_clock::now();
    auto layout = checkpoint::parseShardLayout(a.plan);
    if (!layout) {
        return reportError(layout.error());
    }
    if (a.ranks != "in-process" && a.ranks != "mpi") {
        return reportError(Error::badInput("--ranks must be 'in-process' or 'mpi'"));
    }
    auto spec = exec::loadCheckpointModel(a.checkpoint);
    if (!spec) {
        return reportError(spec.error());
    }
    // A `day0 shard` output folder: each rank opens only its own rank file; otherwise every
    // rank slices the full checkpoint in memory.
    const bool sharded = exec::isShardFolder(a.checkpoint);
    std::unique_ptr<exec::WeightSource> full;
    if (!sharded) {
        auto weights = exec::openCheckpointWeights(a.checkpoint);
        if (!weights) {
            return reportError(weights.error().withContext("weights"));
        }
        full = std::move(*weights);
    }
    auto id = exec::checkpointFingerprint(a.checkpoint);
    if (!id) {
        return reportError(id.error());
    }
    exec::ParallelRunOptions o;
    o.layout = *layout;
    o.microBatches = a.microBatches;
    o.newTokens = a.tokens;
    o.checkpointId = *id;
    for (int s = 0; s < layout->dp * a.microBatches; ++s) {
        o.prompts.push_back(a.prompts[std::size_t(s) % a.prompts.size()]);
    }
    const std::string planText = exec::layoutString(*layout, a.microBatches);
    std::vector<std::unique_ptr<profile::CpuTracer>> tracers;
    std::vector<profile::CpuTracer*> tracerPtrs;
    if (a.ranks == "in-process") {
        for (int r = 0; r < layout->worldSize(); ++r) {
            tracers.push_back(std::make_unique<profile::CpuTracer>());
            tracers.back()->start();
            tracerPtrs.push_back(tracers.back().get());
        }
        exec::ShardFolder folder;
        if (sharded) {
            auto opened = exec::openShardFolder(a.checkpoint, *layout);
            if (!opened) {
                return reportError(opened.error());
            }
            folder = std::move(*opened);
            o.rankSource = [&folder](int rank) { return folder.ranks[std::size_t(rank)].get(); };
        }
        Progress progress;
        std::optional<ProgressBar> bar;
        bar.emplace(progress, "run", !global.quiet);
        auto r = exec::runParallelInProcess(*spec, sharded ? *folder.ranks[0] : *full, o, progress,
            {}, nullptr, tracerPtrs, { Seconds(a.timeoutSeconds) });
        bar.reset();
        if (!r) {
            return reportError(r.error());
        }
        if (!a.commTrace.empty()) {
            if (auto w = writeCommTrace(tracers, 0, a.commTrace); !w) {
                return reportError(w.error());
            }
        }
        return finishRun(a, global, *spec, *r, int(r->ranks.size()), planText, started);
    }
    extend::PluginRegistry registry;
    auto world = extend::createCommunicator(
        registry, "mpi", nlohmann::json { { "timeout_s", a.timeoutSeconds } }.dump());
    if (!world) {
        return reportError(world.error().withContext("--ranks mpi"));
    }
    comm::Communicator& c = **world;
    exec::ShardFolder folder;
    if (sharded) {
        auto opened = exec::openShardFolder(a.checkpoint, *layout, c.rank());
        if (!opened) {
            c.abort(opened.error().message);
            return reportError(opened.error());
        }
        folder = std::move(*opened);
        o.rankSource = [&folder](int rank) { return folder.ranks[std::size_t(rank)].get(); };
    }
    tracers.push_back(std::make_unique<profile::CpuTracer>());
    tracers.back()->start();
    std::vector<profile::CpuTracer*> mine(std::size_t(c.size()), nullptr);
    mine[std::size_t(c.rank())] = tracers.back().get();
    exec::CommRecorder recorder(mine);
    c.setObserver(recorder.observer());
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, fmt::format("rank {}", c.rank()), !global.quiet && c.rank() == 0);
    auto r = exec::runParallelRank(c, *spec, sharded ? *folder.ranks[std::size_t(c.rank())] : *full,
        o, recorder, progress, {});
    bar.reset();
    if (!r) {
        // Stop every other rank now instead of leaving them to their timeouts.
        c.abort(r.error().message);
        return reportError(r.error());
    }
    if (!a.commTrace.empty()) {
        const std::string path
            = c.size() > 1 ? fmt::format("{}.rank{}.json", a.commTrace, c.rank()) : a.commTrace;
        if (auto w = writeCommTrace(tracers, c.rank(), path); !w) {
            return reportError(w.error());
        }
    }
    if (c.rank() != 0) {
        return 0;
    }
    return finishRun(a, global, *spec, *r, c.size(), planText, started);
}

} // namespace day0::cli
