// `day0 run <checkpoint> --plan …`: a TP/PP/EP/DP-sharded run on in-process ranks or on the MPI
// processes of `mpirun -np N day0 run … --ranks mpi`, with its measured communication.
#include "cmd_run_plan.h"

#include "actions/run_plan.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/sharding.h"
#include "exec/layer_stream.h"
#include "extend/plugin_registry.h"
#include "interrupt.h"
#include "parallel/run.h"
#include "profile/chrome_exporter.h"
#include "profile/cpu_tracer.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

namespace day0::cli {

namespace {

/// The communicator the ranks talk through: in-process, or --comm's under MPI.
std::string communicatorOf(const PlanRunArgs& a)
{
    return a.ranks == "in-process" ? std::string("in-process") : a.comm;
}

/// Rank 0's choice of a new id-file path for NCCL's rendezvous, in --nccl-id-dir or the temp
/// folder.
Result<std::string> freshIdFile(const std::string& dir)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path folder = dir.empty() ? fs::temp_directory_path(ec) : fs::path(dir);
    if (ec) {
        return Error::badInput(
            fmt::format("--comm nccl: no temp folder for NCCL's id file: {}", ec.message()));
    }
    if (!fs::is_directory(folder, ec)) {
        return Error::badInput(fmt::format("--nccl-id-dir {}: not a folder", folder.string()));
    }
    std::random_device random;
    return (folder / fmt::format("day0-nccl-{}-{:08x}{:08x}.id", ::getpid(), random(), random()))
        .string();
}

/// Rank 0 picks the id file and sends its path to every rank over `world`; all ranks fail
/// together when it cannot.
Result<std::string> shareIdFile(comm::Communicator& world, const std::string& dir)
{
    std::optional<Error> failure;
    std::string path;
    std::int64_t length = -1;
    if (world.rank() == 0) {
        if (auto picked = freshIdFile(dir)) {
            path = *picked;
            length = std::int64_t(path.size());
        } else {
            failure = picked.error();
        }
    }
    DAY0_TRY(world.broadcast(&length, 1, DType::I64, 0));
    if (length < 0) {
        return failure ? *failure
                       : Error::badInput("--comm nccl: rank 0 could not choose NCCL's id file");
    }
    path.resize(std::size_t(length));
    DAY0_TRY(world.broadcast(path.data(), path.size(), DType::U8, 0));
    return path;
}

/// The device of this process's ranks (compute backend and NCCL alike): --device, else (MPI) the
/// launcher's local rank, else 0.
int rankDevice(const PlanRunArgs& a, bool mpi)
{
    if (a.device >= 0) {
        return a.device;
    }
    if (mpi) {
        for (const char* name : { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK" }) {
            if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
                return std::atoi(v);
            }
        }
    }
    return 0;
}

/// `--comm nccl`: every MPI process creates its NCCL communicator (on host buffers) through the
/// plugin, bootstrapped by an id file whose path MPI shares; the ranks then agree over MPI that
/// all succeeded, so that none goes on alone or waits for a rank that failed.
Result<std::shared_ptr<comm::Communicator>> ncclWorld(
    const extend::PluginRegistry& registry, comm::Communicator& world, const PlanRunArgs& a)
{
    auto idFile = shareIdFile(world, a.ncclIdDir);
    if (!idFile) {
        return idFile.error();
    }
    // The same device as the rank's compute backend (rankDevice), so NCCL and the kernels share it.
    const auto options = nlohmann::json {
        { "rank", world.rank() }, { "size", world.size() }, { "device", rankDevice(a, true) },
        { "id_file", *idFile }, { "host_buffers", true }, { "timeout_s", a.timeoutSeconds }
    }.dump();
    auto nccl = extend::createCommunicator(registry, "nccl", options);
    // The first rank that failed, or size() when none did.
    std::int32_t firstFailed = nccl ? world.size() : world.rank();
    auto agreed = world.allReduce(&firstFailed, &firstFailed, 1, DType::I32, comm::ReduceOp::Min);
    if (world.rank() == 0) {
        // Every rank is past its rendezvous: the id file has served.
        std::error_code ec;
        std::filesystem::remove(*idFile, ec);
    }
    if (!nccl) {
        return nccl.error().withContext("--comm nccl");
    }
    if (!agreed) {
        return agreed.error();
    }
    if (firstFailed < world.size()) {
        return Error::unsupported(fmt::format(
            "--comm nccl: rank {} could not start NCCL (its error says why)", firstFailed));
    }
    return *nccl;
}

/// `--backend`: a factory making each rank its own backend object (null for the CPU).
std::function<Result<std::shared_ptr<exec::Backend>>(int)> backendFactory(
    const extend::PluginRegistry& registry, const PlanRunArgs& a, bool mpi)
{
    if (a.backend == "cpu" || a.backend == "day0-cpu") {
        return {};
    }
    const int device = rankDevice(a, mpi);
    return [&registry, name = a.backend, device](
               int) { return extend::openRunBackend(registry, name, device); };
}

nlohmann::json resultJson(const parallel::ParallelRunResult& r,
    const std::vector<parallel::CommKindRow>& table, const std::string& plan,
    const std::string& ranks, const std::string& communicator)
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
                { "weight_bytes", k.weightBytes }, { "stream_bytes_read", k.streamBytesRead },
                { "seconds", k.seconds }, { "backend_native_calls", k.nativeCalls },
                { "backend_fallback_calls", k.fallbackCalls } });
    }
    nlohmann::json comm = nlohmann::json::array();
    for (const auto& row : table) {
        comm.push_back({ { "kind", row.kind }, { "calls", row.calls }, { "bytes", row.bytes },
            { "measured_seconds_per_rank", row.measuredSeconds },
            { "model_seconds_per_rank", row.predictedSeconds } });
    }
    return { { "plan", plan }, { "ranks_mode", ranks }, { "communicator", communicator },
        { "sequences", seqs }, { "ranks", rankRows }, { "communication", comm },
        { "machine",
            { { "measured", r.machine.measured }, { "latency_seconds", r.machine.latency },
                { "bandwidth_bytes_per_second", r.machine.bandwidth },
                { "method", r.machine.method } } },
        { "seconds", r.seconds }, { "backend", exec::dispatchJson(r.dispatch) } };
}

void printResult(const parallel::ParallelRunResult& r,
    const std::vector<parallel::CommKindRow>& table, const std::string& plan,
    const std::string& ranks, const std::string& communicator)
{
    fmt::print("plan {} on {} {} ranks{}, {:.3f} s\n", plan, r.ranks.size(), ranks,
        communicator == ranks ? "" : fmt::format(" ({} communicator)", communicator), r.seconds);
    for (std::size_t s = 0; s < r.sequences.size(); ++s) {
        fmt::print("sequence {}: prompt {} -> generated {}\n", s,
            fmt::join(r.sequences[s].prompt, ","), fmt::join(r.sequences[s].generated, " "));
    }
    // A streamed run's weights are what its largest phase held at once, beside what it read.
    const bool streamed = std::any_of(r.ranks.begin(), r.ranks.end(),
        [](const parallel::RankSummary& k) { return k.streamBytesRead > 0; });
    std::vector<std::string> header { "rank", "stage", "dp", "tp", "ep", "etp",
        streamed ? "weights held" : "weights" };
    if (streamed) {
        header.emplace_back("read");
    }
    header.emplace_back("time");
    Table ranksTable(header, std::vector<Table::Align>(header.size(), Table::Align::Right));
    for (const auto& k : r.ranks) {
        std::vector<std::string> row { std::to_string(k.rank), std::to_string(k.coord.stage),
            std::to_string(k.coord.dpRank), std::to_string(k.coord.tpRank),
            std::to_string(k.coord.epRank), std::to_string(k.coord.etpRank),
            formatBytes(Bytes(double(k.weightBytes))) };
        if (streamed) {
            row.push_back(formatBytes(Bytes(double(k.streamBytesRead))));
        }
        row.push_back(formatDuration(Seconds(k.seconds)));
        ranksTable.addRow(row);
    }
    fmt::print("\n{}", ranksTable.render());
    if (streamed) {
        fmt::print("streamed: each rank read its weights a layer at a time\n");
    }
    if (!r.dispatch.ops.empty()) {
        fmt::print("\nrank 0 {}(all ranks: {} operator calls fell back to day0-cpu)\n",
            exec::formatDispatch(r.dispatch), r.fallbackCalls());
    }
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
    auto trace = builder.finish(progress, interruptToken());
    if (!trace) {
        return trace.error();
    }
    return profile::exportChromeJson(*trace, path, progress, interruptToken());
}

/// Rank 0's end of a run: the communication table, the recorded run and the output.
int finishRun(const PlanRunArgs& a, const GlobalOptions& global, const actions::PlanRunOutcome& o)
{
    const auto communicator = communicatorOf(a);
    const auto runId = recordResult(o.record);
    if (global.json) {
        auto j = resultJson(o.result, o.communication, o.plan, a.ranks, communicator);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        if (o.budget.perRank > 0) {
            j["rank_memory_budget"] = o.budget.perRank;
            j["memory_budget_basis"] = o.budget.basis;
        }
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        printResult(o.result, o.communication, o.plan, a.ranks, communicator);
        if (o.budget.perRank > 0) {
            fmt::print("budget: each rank within {} ({})\n",
                formatBytes(Bytes(double(o.budget.perRank))), o.budget.basis);
        }
    }
    return 0;
}

} // namespace

int runPlanned(const PlanRunArgs& a, const GlobalOptions& global)
{
    auto layout = checkpoint::parseShardLayout(a.plan);
    if (!layout) {
        return reportError(layout.error());
    }
    if (auto runnable = parallel::checkRunnable(*layout); !runnable) { // before any rank starts
        return reportError(runnable.error());
    }
    if (a.ranks != "in-process" && a.ranks != "mpi") {
        return reportError(Error::badInput("--ranks must be 'in-process' or 'mpi'"));
    }
    if (a.comm != "mpi" && a.comm != "nccl") {
        return reportError(
            Error::badInput(fmt::format("--comm must be 'mpi' or 'nccl', not '{}'", a.comm)));
    }
    if (a.comm == "nccl" && a.ranks != "mpi") {
        return reportError(Error::badInput("--comm nccl needs one process per GPU: run under "
                                           "mpirun -np N with --ranks mpi"));
    }
    actions::PlanRunRequest request;
    request.checkpoint = a.checkpoint;
    request.layout = *layout;
    request.microBatches = a.microBatches;
    request.newTokens = a.tokens;
    request.prompts = a.prompts;
    request.timeout = Seconds(a.timeoutSeconds);
    request.ranksMode = a.ranks;
    request.communicator = communicatorOf(a);
    request.stream = a.stream;
    const auto budget = exec::parseMemoryBudget(a.memoryBudget, a.memoryBudgetPerRank);
    if (!budget) {
        return reportError(budget.error());
    }
    request.memoryBudget = budget->bytes;
    request.budgetPerRank = budget->perRank;
    // Said before the progress bar starts: what each rank may hold, and why (rank 0 only under
    // mpirun; every process works its own share out).
    bool sayBudget = !global.quiet;
    request.onBudget = [&sayBudget](const parallel::BudgetShare& share) {
        if (sayBudget) {
            fmt::print(stderr, "streaming: each rank within {} ({})\n",
                formatBytes(Bytes(double(share.perRank))), share.basis);
        }
    };
    extend::PluginRegistry registry;
    request.backendFor = backendFactory(registry, a, a.ranks == "mpi");
    if (a.ranks == "in-process") {
        if (request.backendFor) {
            // One check before the ranks start, so a missing plugin or device is one clear line.
            if (auto probe = extend::openRunBackend(registry, a.backend, rankDevice(a, false));
                !probe) {
                return reportError(probe.error());
            }
        }
        std::vector<std::unique_ptr<profile::CpuTracer>> tracers;
        std::vector<profile::CpuTracer*> tracerPtrs;
        for (int r = 0; r < layout->worldSize(); ++r) {
            tracers.push_back(std::make_unique<profile::CpuTracer>());
            tracers.back()->start();
            tracerPtrs.push_back(tracers.back().get());
        }
        Progress progress;
        std::optional<ProgressBar> bar;
        bar.emplace(progress, "run", !global.quiet);
        auto r
            = actions::runPlanInProcess(request, progress, interruptToken(), nullptr, tracerPtrs);
        bar.reset();
        if (!r) {
            return reportError(r.error());
        }
        if (!a.commTrace.empty()) {
            if (auto w = writeCommTrace(tracers, 0, a.commTrace); !w) {
                return reportError(w.error());
            }
        }
        return finishRun(a, global, *r);
    }
    auto world = extend::createCommunicator(
        registry, "mpi", nlohmann::json { { "timeout_s", a.timeoutSeconds } }.dump());
    if (!world) {
        return reportError(world.error().withContext("--ranks mpi"));
    }
    // With --comm nccl, MPI only bootstraps NCCL and stops the job if a rank fails; the run's
    // collectives go through NCCL.
    std::shared_ptr<comm::Communicator> runComm = *world;
    if (a.comm == "nccl") {
        auto nccl = ncclWorld(registry, **world, a);
        if (!nccl) {
            return reportError(nccl.error());
        }
        runComm = *nccl;
    }
    comm::Communicator& c = *runComm;
    sayBudget = sayBudget && c.rank() == 0;
    std::vector<std::unique_ptr<profile::CpuTracer>> tracers;
    tracers.push_back(std::make_unique<profile::CpuTracer>());
    tracers.back()->start();
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, fmt::format("rank {}", c.rank()), !global.quiet && c.rank() == 0);
    // No stop token: one rank stopping alone would leave the others waiting; SIGTERM ends the
    // job through the launcher.
    auto r = actions::runPlanRank(c, request, progress, {}, tracers.back().get());
    bar.reset();
    if (!r) {
        // Stops every other rank now instead of leaving them to their timeouts (NCCL's abort is
        // local to this process; MPI's ends the job).
        if (runComm != *world) {
            c.abort(r.error().message);
        }
        (*world)->abort(r.error().message);
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
    return finishRun(a, global, *r);
}

} // namespace day0::cli
