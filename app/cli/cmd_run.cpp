// day0 run <checkpoint>: forward + greedy decode on the CPU reference engine or a backend plugin
// (--backend cuda), in a reference or emulated precision, with dumps and an optional reference
// run (always on the CPU) compared in one go.
#include "actions/compare.h"
#include "actions/run.h"
#include "base/json_util.h"
#include "base/units.h"
#include "cmd_compare.h"
#include "cmd_run_args.h"
#include "cmd_run_plan.h"
#include "command.h"
#include "exec/checkpoint_weights.h"
#include "exec/gated_delta_net.h"
#include "exec/precision_run.h"
#include "exec/recurrent_state.h"
#include "extend/plugin_registry.h"
#include "interrupt.h"
#include "model/config_reader.h"
#include "profile/chrome_exporter.h"
#include "profile/trace_merge.h"
#include "profile/trace_scope.h"
#include "progress_bar.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

namespace day0::cli {

namespace {

using namespace run_detail;

nlohmann::json streamJson(const exec::StreamStats& s)
{
    return { { "bytes_read", s.bytesRead }, { "read_seconds", s.readSeconds },
        { "read_bytes_per_second", s.readSeconds > 0 ? double(s.bytesRead) / s.readSeconds : 0.0 },
        { "layer_loads", s.phasesLoaded }, { "layer_loads_read_ahead", s.phasesReadAhead },
        { "read_ahead_seconds", s.readAheadSeconds }, { "largest_layer", s.largestPhase },
        { "largest_layer_bytes", s.largestPhaseBytes },
        { "largest_two_layers_bytes", s.largestPairBytes },
        { "resident_weights_peak_bytes", s.residentPeakBytes },
        { "peak_rss_bytes", s.peakRssBytes }, { "memory_budget", s.memoryBudget },
        { "expert_bytes_skipped", s.expertBytesSkipped } };
}

/// The trace of a run, as Chrome JSON: the phases timed here, every TraceScope the engine opens
/// while the tracer is active on this thread and, with a device profiler (CUPTI for a GPU
/// backend), the device work those scopes launched, on the same clock.
struct RunTrace {
    profile::CpuTracer tracer;
    std::optional<profile::TraceActivation> active;
    std::shared_ptr<extend::ProfilerCollector> device;

    RunTrace()
    {
        tracer.start();
        tracer.setThreadName("day0 run");
        active.emplace(tracer);
    }
    /// Starts the device profiler `name`; warns and records the host only when it cannot.
    void profile(const extend::PluginRegistry& registry, const std::string& name)
    {
        auto made = extend::createProfiler(registry, name);
        auto started = made ? (*made)->start() : Result<void>(made.error());
        if (!started) {
            printWarning(fmt::format("--profiler {}: the trace has the host side only: {}", name,
                started.error().message));
            return;
        }
        device = std::move(*made);
    }
    /// Writes the trace to `path` (atomically); warns and carries on when it cannot.
    void write(const std::filesystem::path& path)
    {
        active.reset();
        tracer.stop();
        Progress progress;
        profile::TraceBuilder builder;
        tracer.exportTo(builder, 0);
        if (device) {
            auto recorded = device->stop(progress, {});
            if (recorded) {
                profile::appendTrace(builder, *recorded);
            } else {
                printWarning(fmt::format(
                    "{}: device records not added: {}", path.string(), recorded.error().message));
            }
        }
        auto trace = builder.finish(progress, interruptToken());
        auto written = trace ? profile::exportChromeJson(*trace, path, progress, interruptToken())
                             : Result<void>(trace.error());
        if (!written) {
            printWarning(
                fmt::format("{}: trace not written: {}", path.string(), written.error().message));
        }
    }
};

Result<std::vector<std::int64_t>> promptIds(const RunArgs& a)
{
    if (!a.ids.empty() && !a.prompt.empty()) {
        return Error::badInput("give either --ids or --prompt, not both");
    }
    if (!a.ids.empty()) {
        return parseIds(a.ids);
    }
    if (a.prompt.empty()) {
        return Error::badInput("no input: give --prompt \"text\" or --ids 1,2,3");
    }
    auto tokenizer = tokenizer::loadTokenizer(a.checkpoint);
    if (!tokenizer) {
        return tokenizer.error();
    }
    auto ids = (*tokenizer)->encode(a.prompt, true);
    if (!ids) {
        return ids.error();
    }
    if (ids->empty()) {
        return Error::badInput("--prompt encodes to no tokens");
    }
    return ids;
}

nlohmann::json runJson(const exec::RunResult& r)
{
    const double decodeTokens = double(r.generated.size() > 1 ? r.generated.size() - 1 : 0);
    return { { "precision", r.dump.info.precision },
        { "precision_plan", r.dump.info.extra.value("precision_plan", "") },
        { "precision_recipe", r.dump.info.extra.value("precision_recipe", "") },
        { "generated", r.generated }, { "input_ids", r.dump.info.inputIds },
        { "prefill_seconds", r.prefillSeconds }, { "decode_seconds", r.decodeSeconds },
        { "decode_tokens_per_second", r.decodeSeconds > 0 ? decodeTokens / r.decodeSeconds : 0.0 },
        { "captures", r.dump.captures().size() }, { "backend", exec::dispatchJson(r.dispatch) } };
}

/// `--plan`: the sharded run; several prompts may be given as --ids "1,2,3;4,5".
int runRunPlanned(const RunArgs& a, const GlobalOptions& global)
{
    if (a.precision != "fp32" || !a.reference.empty() || !a.dump.empty() || a.inject
        || !a.stateDtype.empty() || a.state) {
        return reportError(Error::badInput(
            "--plan runs fp32 without --reference, --dump, --inject, --state-dtype or "
            "--capture-state (compare the single-rank run for those)"));
    }
    // The sharded executor's Gated DeltaNet prefill runs the chunk of exec::kDeltaRuleChunk.
    if (a.deltaChunk != exec::kDeltaRuleChunk) {
        return reportError(Error::badInput(fmt::format(
            "--delta-chunk {}: --plan runs the Gated DeltaNet prefill in chunks of {} (the "
            "option applies to single-rank runs)",
            a.deltaChunk, exec::kDeltaRuleChunk)));
    }
    PlanRunArgs p = a.planned;
    p.checkpoint = a.checkpoint;
    p.tokens = a.tokens;
    p.backend = a.backend;
    p.device = a.device;
    p.stream = a.stream;
    p.memoryBudget = a.memoryBudget;
    p.memoryBudgetPerRank = a.memoryBudgetPerRank;
    std::size_t start = 0;
    while (!a.ids.empty() && start <= a.ids.size()) {
        const auto semi = a.ids.find(';', start);
        auto ids = parseIds(a.ids.substr(start, semi == std::string::npos ? semi : semi - start));
        if (!ids) {
            return reportError(ids.error());
        }
        p.prompts.push_back(std::move(*ids));
        if (semi == std::string::npos) {
            break;
        }
        start = semi + 1;
    }
    if (p.prompts.empty()) {
        auto ids = promptIds(a);
        if (!ids) {
            return reportError(ids.error());
        }
        p.prompts.push_back(std::move(*ids));
    }
    return runPlanned(p, global);
}

int runRun(const RunArgs& a, const GlobalOptions& global)
{
    if (auto refused = refusePartial("run", a.checkpoint, global)) {
        return *refused;
    }
    if (a.grad) {
        return runGradients(a, global);
    }
    if (!a.injectFrom.empty()) {
        return reportError(Error::badInput("--inject-from injects a reference's gradients; add "
                                           "--grad (a forward's inject mode is --inject)"));
    }
    if (auto refused = refuseWithStream(a)) {
        return reportError(*refused);
    }
    if (auto refused = refuseWithSlice(a)) {
        return reportError(*refused);
    }
    if (!a.planned.plan.empty()) {
        return runRunPlanned(a, global);
    }
    auto plan = exec::parsePrecisionPlan(a.precision, a.opPrecision, a.layerPrecision);
    if (!plan) {
        return reportError(plan.error());
    }
    const auto scaling = exec::parseFp8Scaling(a.fp8Scaling);
    if (!scaling) {
        return reportError(scaling.error());
    }
    plan->fp8Scaling = *scaling;
    if (!a.stateDtype.empty()) {
        auto state = exec::parseStateDtype(a.stateDtype);
        if (!state) {
            return reportError(state.error());
        }
        plan->stateMode = *state;
    }
    exec::PrecisionRunOptions o;
    o.target = *plan;
    if (!a.reference.empty()) {
        auto r = exec::parsePrecision(a.reference);
        if (!r) {
            return reportError(r.error().withContext("--reference"));
        }
        o.reference = *r;
    }
    o.inject = a.inject;
    o.fp32Leg = a.fp32Leg;
    if (a.layers.empty() || !a.ids.empty()) {
        auto ids = promptIds(a);
        if (!ids) {
            return reportError(ids.error());
        }
        o.promptIds = std::move(*ids);
    }
    if (!a.image.empty()) {
        auto image = exec::loadImageInput(a.checkpoint, a.image);
        if (!image) {
            return reportError(image.error().withContext("--image"));
        }
        o.image = std::move(*image);
    }
    // A slice runs its input dump's steps; --tokens, when given, must agree with them.
    o.newTokens = !a.layers.empty() && !a.tokensGiven ? 0 : a.tokens;
    o.linearAttentionChunk = a.deltaChunk;
    o.capture.inputs = a.inputs;
    o.capture.projections = a.projections;
    o.capture.state = a.state;
    o.capture.statsOnly = a.statsOnly;
    o.capture.filters = a.capture;
    extend::PluginRegistry registry;
    auto backend = extend::openRunBackend(registry, a.backend, std::max(0, a.device));
    if (!backend) {
        return reportError(backend.error());
    }
    if (*backend != nullptr) {
        if (plan->isF64()) {
            return reportError(Error::badInput(fmt::format(
                "--backend {}: the fp64 reference runs on day0-cpu only; run fp32 or a lower "
                "precision on {} and compare with --reference fp64",
                (*backend)->name(), (*backend)->name())));
        }
        o.backend = backend->get(); // the target; the reference stays on the CPU
    }
    RunTrace cpuTrace;
    const std::filesystem::path tracePath = !a.trace.empty() ? std::filesystem::path(a.trace)
        : !a.dump.empty() ? std::filesystem::path(a.dump) / "trace.json"
                          : std::filesystem::path();
    if (!tracePath.empty() && *backend != nullptr) {
        const std::string profiler = a.profiler != "auto" ? a.profiler
            : (*backend)->name() == "cuda"                ? std::string("cupti")
                                                          : std::string("none");
        if (profiler != "none") {
            cpuTrace.profile(registry, profiler);
        }
    }
    actions::RunRequest request;
    request.checkpoint = a.checkpoint;
    request.options = o;
    request.tolerances = a.tolerances;
    request.dump = a.dump;
    request.stream = a.stream;
    request.layers = a.layers;
    request.sliceInput = a.sliceInput;
    if (!a.memoryBudget.empty()) {
        auto budget = exec::parseMemorySize(a.memoryBudget);
        if (!budget) {
            return reportError(budget.error());
        }
        request.streamOptions.memoryBudget = *budget;
    }
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "run", !global.quiet);
    auto ran = actions::runCheckpoint(request, progress, interruptToken());
    bar.reset();
    if (!ran) {
        return reportError(ran.error());
    }
    const auto* spec = &ran->spec;
    const auto* result = &ran->result;
    // What the reader found worth saying about the model (a reference that departs from one
    // framework's, declared parts that are not shipped) goes to stderr, as inspect says it.
    for (const auto& warning : spec->warnings) {
        printWarning(warning);
    }
    for (const auto& part : ran->notRun) {
        printWarning("not run: " + part);
    }
    if (!tracePath.empty()) {
        cpuTrace.write(tracePath); // after the dump: its folder exists by now
    }
    const int code = exec::precisionRunPassed(*result) ? 0 : 1;
    auto& record = ran->record;
    if (!tracePath.empty() && std::filesystem::exists(tracePath)) {
        if (auto artifact = history::makeArtifact("trace", tracePath)) {
            record.addArtifact(std::move(*artifact));
        }
    }
    const auto runId = recordResult(record);
    const auto& ranSlice = ran->slice;
    if (global.json) {
        nlohmann::json j
            = { { "model", spec->name }, { "fingerprint", exec::modelFingerprint(*spec) },
                  { "prompt_ids",
                      result->target.dump.info.inputIds.empty()
                          ? o.promptIds
                          : std::vector<std::int64_t>(result->target.dump.info.inputIds.begin(),
                              result->target.dump.info.inputIds.begin()
                                  + result->target.dump.info.promptLength) },
                  { "target", runJson(result->target) } };
        if (ranSlice) {
            j["layers"] = { { "first", ranSlice->first }, { "last", ranSlice->last },
                { "of", spec->numLayers }, { "input_capture", ranSlice->inputCapture },
                { "input_dump", a.sliceInput } };
        }
        if (result->reference) {
            j["reference"] = runJson(*result->reference);
        }
        if (result->injected) {
            j["inject"] = runJson(*result->injected);
        }
        if (result->comparison) {
            j["comparison"] = numerics::comparisonToJson(*result->comparison);
        }
        if (result->fp32LegComparison) {
            j["fp32_leg"] = runJson(*result->fp32Leg);
            j["fp32_leg"]["comparison"] = numerics::comparisonToJson(*result->fp32LegComparison);
        }
        if (!a.dump.empty()) {
            j["dump"] = a.dump;
        }
        j["not_run"] = ran->notRun;
        if (ran->stream) {
            j["stream"] = streamJson(*ran->stream);
            if (result->reference) {
                j["stream"]["reference_streamed"] = result->referenceStreamed;
                j["stream"]["target_streamed"] = result->targetStreamed;
            }
        }
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        if (!tracePath.empty()) {
            j["trace"] = tracePath.string();
        }
        fmt::print("{}\n", dumpJson(j, 2));
        return code;
    }
    const auto& t = result->target;
    if (ranSlice) {
        fmt::print("{} ({}): layers {}-{} of {} ran over {} tokens ({} prompt, {} decode steps), "
                   "fed '{}' from {}  (prefill {}, decode {})\n",
            spec->name, exec::modelFingerprint(*spec), ranSlice->first, ranSlice->last,
            spec->numLayers, t.dump.info.inputIds.size(), t.dump.info.promptLength,
            t.dump.info.inputIds.size() - std::size_t(t.dump.info.promptLength),
            ranSlice->inputCapture, a.sliceInput, formatDuration(Seconds(t.prefillSeconds)),
            formatDuration(Seconds(t.decodeSeconds)));
    } else {
        fmt::print("{} ({}), {} prompt tokens, {} new\n", spec->name, exec::modelFingerprint(*spec),
            o.promptIds.size(), t.generated.size());
    }
    if (result->reference) {
        fmt::print("reference {}: generated {}  (prefill {}, decode {})\n",
            result->reference->dump.info.precision, fmt::join(result->reference->generated, " "),
            formatDuration(Seconds(result->reference->prefillSeconds)),
            formatDuration(Seconds(result->reference->decodeSeconds)));
    }
    if (!ranSlice) {
        fmt::print("target {}: generated {}  (prefill {}, decode {}){}\n",
            t.dump.info.extra.value("precision_plan", t.dump.info.precision),
            fmt::join(t.generated, " "), formatDuration(Seconds(t.prefillSeconds)),
            formatDuration(Seconds(t.decodeSeconds)),
            result->reference ? "  [teacher-forced on the reference's tokens]" : "");
    }
    fmt::print("  recipe: {}\n", t.dump.info.extra.value("precision_recipe", ""));
    if (o.backend != nullptr) {
        fmt::print("{}", exec::formatDispatch(t.dispatch));
    }
    if (!a.dump.empty()) {
        fmt::print("dump{}: {}\n", result->reference ? "s" : "", a.dump);
    }
    if (ran->stream && result->reference) {
        fmt::print("streamed: the reference{}; {}\n",
            result->targetStreamed ? " and the target" : "",
            result->targetStreamed ? std::string("every run's weights layer by layer")
                                   : fmt::format("the {} target{} loaded the weights whole",
                                       t.dump.info.extra.value("precision_plan", ""),
                                       result->injected ? " and its inject-mode run" : ""));
    }
    if (const auto& s = ran->stream) {
        fmt::print("streamed: {} read, the run {} in loads ({}/s), {} layer loads ({} read ahead "
                   "while the layer before computed); weights resident at most {} "
                   "(largest layer {}: {}); peak RSS {}{}{}\n",
            formatBytes(Bytes(std::int64_t(s->bytesRead))), formatDuration(Seconds(s->readSeconds)),
            formatBytes(Bytes(
                std::int64_t(s->readSeconds > 0 ? double(s->bytesRead) / s->readSeconds : 0.0))),
            s->phasesLoaded, s->phasesReadAhead,
            formatBytes(Bytes(std::int64_t(s->residentPeakBytes))), s->largestPhase,
            formatBytes(Bytes(std::int64_t(s->largestPhaseBytes))),
            formatBytes(Bytes(std::int64_t(s->peakRssBytes))),
            s->memoryBudget > 0
                ? fmt::format(", budget {}", formatBytes(Bytes(std::int64_t(s->memoryBudget))))
                : std::string(),
            s->expertBytesSkipped > 0
                ? fmt::format("; {} of routed experts no token chose were not read",
                    formatBytes(Bytes(std::int64_t(s->expertBytesSkipped))))
                : std::string());
    }
    if (result->comparison) {
        fmt::print("\n{}", renderComparison(*result->comparison, a.all));
    }
    if (result->fp32LegComparison) {
        fmt::print("\nfp32 leg ({} in fp32 against the reference): {}\n", (*backend)->name(),
            exec::fp32LegSummary(*result->fp32LegComparison));
    }
    return code;
}

const bool registered = registerCommand({ "run",
    "forward + greedy decode on the CPU reference engine or a backend plugin (fp64/fp32 or "
    "emulated bf16/fp16/fp8/int8/nvfp4/mxfp4/int4) with dumps",
    50, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<RunArgs>();
        app.add_option(
               "checkpoint", a->checkpoint, "checkpoint folder (config.json + *.safetensors)")
            ->required();
        app.add_option("--precision", a->precision,
            "fp64, fp32, bf16, fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, int4, int4-g32 (default "
            "fp32)");
        app.add_option(
            "--op-precision", a->opPrecision, "per op kind, e.g. attention=fp32,router=fp32");
        app.add_option(
            "--layer-precision", a->layerPrecision, "per decoder layer, e.g. 12=fp32,20-23=fp32");
        app.add_option("--fp8-scaling", a->fp8Scaling,
            "fp8 scales: tensor (default), block (128x128 / 1x128) or channel (per channel / "
            "per token)");
        app.add_option("--reference", a->reference,
            "also run fp32 or fp64 and compare (dumps in DIR/reference, DIR/target)");
        app.add_flag("--fp32-leg", a->fp32Leg,
            "also run the --backend target in fp32 and judge it by the fp32 rules (structural "
            "faults below the target precision's noise)");
        app.add_flag("--inject", a->inject,
            "also run the target with each layer fed the reference's inputs (own errors)");
        app.add_option(
            "--prompt", a->prompt, "prompt text (needs tokenizer.json in the checkpoint)");
        app.add_option("--ids", a->ids, "prompt token ids, comma-separated");
        app.add_option("--image", a->image,
            "image for a vision-language model: a binary PPM or synthetic:HxW (its image-pad "
            "token in the prompt is expanded)");
        app.add_option("--backend", a->backend,
            "where the target runs: cpu (default) or a backend plugin such as cuda");
        app.add_option("--device", a->device,
            "device index for a GPU backend (default 0; MPI ranks of --plan: their local rank)");
        auto* tokens
            = app.add_option("--tokens", a->tokens, "greedy tokens to generate (default 8)");
        app.add_option("--delta-chunk", a->deltaChunk,
               "tokens per chunk of the Gated DeltaNet delta rule in a prefill (Qwen3-Next, "
               "Qwen3.5; default 64, transformers' chunk_size): chunk boundaries move, the "
               "logits must not")
            ->check(CLI::Range(1, 1048576));
        app.add_option("--dump", a->dump, "write the dump(s) to this folder");
        app.add_option("--trace", a->trace,
            "write the run's trace (Chrome JSON) here (default: trace.json in the --dump folder)");
        app.add_option("--profiler", a->profiler,
            "device profiler plugin whose records join the trace of a run on a backend: auto "
            "(cupti for cuda), none, or a plugin name");
        app.add_flag(
            "--capture-inputs", a->inputs, "also capture every layer's input (<anchor>#in0)");
        app.add_flag("--capture-projections", a->projections,
            "also capture q/k/v/o, MLP and MLA projections");
        app.add_flag("--capture-state", a->state,
            "also capture each recurrent layer's state after the prefill and every decode step "
            "(<mixer>#state, <mixer>#conv_state; Gated DeltaNet, Mamba-2)");
        app.add_option("--state-dtype", a->stateDtype,
            "store the target's recurrent state (Gated DeltaNet, Mamba-2 SSM) in fp32, bf16 or "
            "fp16 after every step, as vLLM's mamba_ssm_cache_dtype (default: the compute "
            "type); conv windows stay in the activation dtype");
        app.add_flag("--stats-only", a->statsOnly, "keep statistics only (logits are always kept)");
        app.add_option("--capture", a->capture, "capture only anchors with these prefixes");
        app.add_option("--tolerances", a->tolerances,
            "tolerance table for --reference (default day0-default)");
        app.add_flag("--all", a->all, "show every capture in the comparison");
        app.add_option("--plan", a->planned.plan,
            "sharded fp32 run with this plan, e.g. tp=2,pp=2,ep=2 (ranks = pp x dp x tp); "
            "sp=on adds sequence parallelism");
        app.add_option("--ranks", a->planned.ranks,
            "with --plan: in-process (threads, default) or mpi (under mpirun -np N)");
        app.add_option("--comm", a->planned.comm,
            "with --ranks mpi: the communicator, mpi (default) or nccl (one GPU per process)");
        app.add_option("--nccl-id-dir", a->planned.ncclIdDir,
            "with --comm nccl: folder all nodes share for NCCL's id file (default: temp folder)");
        app.add_option("--micro-batches", a->planned.microBatches,
            "with --plan: sequences per data-parallel replica, pipelined (default 1)");
        app.add_option("--comm-trace", a->planned.commTrace,
            "with --plan: write every rank's collectives as Chrome JSON (mpi: FILE.rankN.json)");
        app.add_option("--comm-timeout", a->planned.timeoutSeconds,
            "with --plan: seconds a rank waits for the others before the job fails (default 60)");
        app.add_flag("--stream", a->stream,
            "stream the weights layer by layer from the memory-mapped shards (a checkpoint larger "
            "than memory, on the CPU in any precision; the same logits and dumps; with --plan each "
            "rank streams its own slice)");
        app.add_option("--memory-budget", a->memoryBudget,
            "with --stream: bound the resident weights, e.g. 512M or 8G (a layer that alone "
            "needs more is refused); the peak RSS is reported; with --plan, all the ranks on a "
            "node together (each holds its share: under mpirun, the node's budget / its "
            "processes on the node, as MPI's shared-memory split counts them)");
        app.add_option("--memory-budget-per-rank", a->memoryBudgetPerRank,
            "with --stream --plan: bound each rank's resident weights by SIZE of its own, "
            "instead of sharing --memory-budget among a node's ranks");
        app.add_flag("--grad", a->grad,
            "instead of generating, compute the next-token cross-entropy of --ids and its "
            "gradients (fp64/fp32, or bf16/fp16 emulated: Megatron's bf16 recipe, refused by "
            "name for the families it does not round): --dump writes <anchor>#grad, "
            "<parameter>#grad and the forward's router choices");
        app.add_option("--inject-from", a->injectFrom,
            "with --grad: inject mode, own versus inherited error of each layer's backward: this "
            "reference gradient dump (same model, ids, targets) replaces the gradient at every "
            "module boundary; compare REFERENCE TARGET --local <this --dump>");
        app.add_option("--targets", a->targets,
            "with --grad: one target id per input id (-1: not counted; default: the next id)");
        app.add_option("--layers", a->layers,
            "run decoder layers A-B only (fp32/fp64 reference, streamed or not), fed the residual "
            "stream entering A from --slice-input; its dumps are the whole run's for those "
            "layers");
        app.add_option("--slice-input", a->sliceInput,
            "with --layers: a prior run's --dump folder holding model.layers.<A-1> (or "
            "model.embed_tokens, or model.layers.<A>#in0); its tokens are run");
        return [a, tokens, &global] {
            a->tokensGiven = tokens->count() > 0;
            return runRun(*a, global);
        };
    } });

} // namespace

} // namespace day0::cli
