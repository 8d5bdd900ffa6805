// day0 run <checkpoint>: forward + greedy decode on the CPU reference engine or a backend plugin
// (--backend cuda), in a reference or emulated precision, with dumps and an optional reference
// run (always on the CPU) compared in one go.
#include "actions/compare.h"
#include "actions/gradients.h"
#include "actions/run.h"
#include "base/json_util.h"
#include "base/units.h"
#include "cmd_compare.h"
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

struct RunArgs {
    std::string checkpoint;
    std::string backend = "cpu";
    int device = -1; ///< -1: 0, or the local rank of an MPI plan run
    std::string precision = "fp32";
    std::string opPrecision;
    std::string layerPrecision;
    std::string fp8Scaling = "tensor";
    std::string reference;
    std::string prompt;
    std::string ids;
    std::string image;
    std::int64_t tokens = 8;
    std::int64_t deltaChunk = exec::kDeltaRuleChunk;
    std::string dump;
    bool inject = false;
    bool fp32Leg = false;
    bool inputs = false;
    bool projections = false;
    bool state = false; ///< --capture-state
    std::string stateDtype; ///< --state-dtype; empty: the state in the compute type
    bool statsOnly = false;
    std::vector<std::string> capture;
    std::string tolerances;
    bool all = false;
    PlanRunArgs planned; ///< --plan, --ranks, --micro-batches, --comm-trace, --comm-timeout
    std::string trace; ///< CPU trace output (default: trace.json in the dump folder)
    /// Device profiler plugin whose records join the trace: "auto" (cupti for the cuda backend),
    /// "none" or a profiler plugin's name.
    std::string profiler = "auto";
    bool stream = false; ///< --stream: weights streamed layer by layer
    std::string memoryBudget; ///< --memory-budget SIZE (with --stream)
    bool grad = false; ///< --grad: the loss's gradients instead of a generation
    std::string targets; ///< --targets: one per id (-1: not counted); empty: the next token
};

/// What --stream cannot run with, named; nullopt when the options go together.
std::optional<Error> refuseWithStream(const RunArgs& a)
{
    if (!a.stream) {
        if (!a.memoryBudget.empty()) {
            return Error::badInput("--memory-budget bounds a streamed run's weights; add --stream");
        }
        return std::nullopt;
    }
    const std::vector<std::pair<bool, const char*>> refused {
        { !a.planned.plan.empty(), "--plan (a sharded run holds each rank's weights)" },
        { !a.reference.empty(), "--reference (a second engine over the whole model)" },
        { a.inject, "--inject (needs the reference run)" },
        { a.fp32Leg, "--fp32-leg (needs the reference run)" },
        { a.backend != "cpu", "--backend (streamed runs compute on the CPU reference)" },
        { !a.image.empty(), "--image (the vision tower is not streamed)" },
        { a.precision != "fp32" && a.precision != "fp64",
            "--precision other than fp32/fp64 (an emulated precision keeps a rounded copy of "
            "every weight)" },
        { !a.opPrecision.empty(), "--op-precision (streamed runs are the fp32/fp64 reference)" },
        { !a.layerPrecision.empty(),
            "--layer-precision (streamed runs are the fp32/fp64 reference)" },
    };
    for (const auto& [bad, what] : refused) {
        if (bad) {
            return Error::badInput(fmt::format("--stream does not run with {}", what));
        }
    }
    return std::nullopt;
}

nlohmann::json streamJson(const exec::StreamStats& s)
{
    return { { "bytes_read", s.bytesRead }, { "read_seconds", s.readSeconds },
        { "read_bytes_per_second", s.readSeconds > 0 ? double(s.bytesRead) / s.readSeconds : 0.0 },
        { "layer_loads", s.phasesLoaded }, { "largest_layer", s.largestPhase },
        { "largest_layer_bytes", s.largestPhaseBytes },
        { "resident_weights_peak_bytes", s.residentPeakBytes },
        { "peak_rss_bytes", s.peakRssBytes }, { "memory_budget", s.memoryBudget } };
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

Result<std::vector<std::int64_t>> parseIds(const std::string& text)
{
    std::vector<std::int64_t> ids;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        const std::string item
            = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) {
            try {
                std::size_t used = 0;
                ids.push_back(std::stoll(item, &used));
                if (used != item.size()) {
                    throw std::invalid_argument(item);
                }
            } catch (const std::exception&) {
                return Error::badInput(fmt::format("--ids: '{}' is not an integer token id", item));
            }
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    if (ids.empty()) {
        return Error::badInput("--ids: no token ids given");
    }
    return ids;
}

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

/// `--grad`: the next-token loss of the ids and its gradients (exec/backward.h), as a dump.
int runGradients(const RunArgs& a, const GlobalOptions& global)
{
    const std::vector<std::pair<bool, const char*>> refused {
        { !a.planned.plan.empty(), "--plan" },
        { !a.reference.empty(), "--reference (compare two gradient dumps with day0 compare)" },
        { a.inject, "--inject" },
        { a.fp32Leg, "--fp32-leg" },
        { a.backend != "cpu", "--backend (gradients run on the CPU reference)" },
        { a.stream, "--stream" },
        { !a.image.empty(), "--image" },
        { !a.prompt.empty(), "--prompt (give the sequence as --ids)" },
        { a.precision != "fp32" && a.precision != "fp64",
            "--precision other than fp32/fp64 (no emulated-precision backward yet)" },
        { !a.opPrecision.empty(), "--op-precision" },
        { !a.layerPrecision.empty(), "--layer-precision" },
        { !a.stateDtype.empty() || a.state, "--state-dtype / --capture-state" },
    };
    for (const auto& [bad, what] : refused) {
        if (bad) {
            return reportError(Error::badInput(fmt::format("--grad does not run with {}", what)));
        }
    }
    if (!a.targets.empty() && a.ids.empty()) {
        return reportError(Error::badInput("--targets needs --ids"));
    }
    actions::GradientRequest request;
    request.checkpoint = a.checkpoint;
    request.fp64 = a.precision == "fp64";
    auto ids = parseIds(a.ids);
    if (!ids) {
        return reportError(ids.error());
    }
    request.ids = std::move(*ids);
    if (!a.targets.empty()) {
        auto targets = parseIds(a.targets);
        if (!targets) {
            return reportError(targets.error().withContext("--targets"));
        }
        request.targets = std::move(*targets);
    }
    request.dump = a.dump;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "gradients", !global.quiet);
    auto ran = actions::checkpointGradients(request, progress, interruptToken());
    bar.reset();
    if (!ran) {
        return reportError(ran.error());
    }
    const auto& r = ran->result;
    const auto runId = recordResult(ran->record);
    if (global.json) {
        nlohmann::json j
            = { { "model", ran->spec.name }, { "fingerprint", exec::modelFingerprint(ran->spec) },
                  { "precision", a.precision }, { "ids", request.ids }, { "targets", ran->targets },
                  { "loss", r.loss }, { "counted", r.counted },
                  { "parameters", r.parameters.size() }, { "activations", r.activations.size() },
                  { "grad_norm", ran->gradNorm }, { "seconds", ran->seconds } };
        if (!a.dump.empty()) {
            j["dump"] = a.dump;
        }
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        fmt::print("{}\n", dumpJson(j, 2));
        return 0;
    }
    fmt::print("{} ({}): loss {:.10g} over {} positions\n", ran->spec.name, a.precision, r.loss,
        r.counted);
    fmt::print("  {} parameter gradients (global norm {:.6g}), {} anchor gradients, {:.3f} s\n",
        r.parameters.size(), ran->gradNorm, r.activations.size(), ran->seconds);
    if (!a.dump.empty()) {
        fmt::print("dump: {}\n", a.dump);
    }
    return 0;
}

int runRun(const RunArgs& a, const GlobalOptions& global)
{
    if (auto refused = refusePartial("run", a.checkpoint, global)) {
        return *refused;
    }
    if (a.grad) {
        return runGradients(a, global);
    }
    if (auto refused = refuseWithStream(a)) {
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
    auto ids = promptIds(a);
    if (!ids) {
        return reportError(ids.error());
    }
    o.promptIds = std::move(*ids);
    if (!a.image.empty()) {
        auto image = exec::loadImageInput(a.checkpoint, a.image);
        if (!image) {
            return reportError(image.error().withContext("--image"));
        }
        o.image = std::move(*image);
    }
    o.newTokens = a.tokens;
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
    if (global.json) {
        nlohmann::json j
            = { { "model", spec->name }, { "fingerprint", exec::modelFingerprint(*spec) },
                  { "prompt_ids", o.promptIds }, { "target", runJson(result->target) } };
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
        if (ran->stream) {
            j["stream"] = streamJson(*ran->stream);
        }
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        if (!tracePath.empty()) {
            j["trace"] = tracePath.string();
        }
        fmt::print("{}\n", dumpJson(j, 2));
        return code;
    }
    const auto& t = result->target;
    fmt::print("{} ({}), {} prompt tokens, {} new\n", spec->name, exec::modelFingerprint(*spec),
        o.promptIds.size(), t.generated.size());
    if (result->reference) {
        fmt::print("reference {}: generated {}  (prefill {}, decode {})\n",
            result->reference->dump.info.precision, fmt::join(result->reference->generated, " "),
            formatDuration(Seconds(result->reference->prefillSeconds)),
            formatDuration(Seconds(result->reference->decodeSeconds)));
    }
    fmt::print("target {}: generated {}  (prefill {}, decode {}){}\n",
        t.dump.info.extra.value("precision_plan", t.dump.info.precision),
        fmt::join(t.generated, " "), formatDuration(Seconds(t.prefillSeconds)),
        formatDuration(Seconds(t.decodeSeconds)),
        result->reference ? "  [teacher-forced on the reference's tokens]" : "");
    fmt::print("  recipe: {}\n", t.dump.info.extra.value("precision_recipe", ""));
    if (o.backend != nullptr) {
        fmt::print("{}", exec::formatDispatch(t.dispatch));
    }
    if (!a.dump.empty()) {
        fmt::print("dump{}: {}\n", result->reference ? "s" : "", a.dump);
    }
    if (const auto& s = ran->stream) {
        fmt::print("streamed: {} read in {} ({}/s), {} layer loads; weights resident at most {} "
                   "(largest layer {}: {}); peak RSS {}{}\n",
            formatBytes(Bytes(std::int64_t(s->bytesRead))), formatDuration(Seconds(s->readSeconds)),
            formatBytes(Bytes(
                std::int64_t(s->readSeconds > 0 ? double(s->bytesRead) / s->readSeconds : 0.0))),
            s->phasesLoaded, formatBytes(Bytes(std::int64_t(s->residentPeakBytes))),
            s->largestPhase, formatBytes(Bytes(std::int64_t(s->largestPhaseBytes))),
            formatBytes(Bytes(std::int64_t(s->peakRssBytes))),
            s->memoryBudget > 0
                ? fmt::format(", budget {}", formatBytes(Bytes(std::int64_t(s->memoryBudget))))
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
        app.add_option("--tokens", a->tokens, "greedy tokens to generate (default 8)");
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
            "stream the weights layer by layer from the memory-mapped shards (fp32/fp64 reference "
            "of a checkpoint larger than memory; the same logits and dumps)");
        app.add_option("--memory-budget", a->memoryBudget,
            "with --stream: bound the resident weights, e.g. 512M or 8G (a layer that alone "
            "needs more is refused); the peak RSS is reported");
        app.add_flag("--grad", a->grad,
            "instead of generating, compute the next-token cross-entropy of --ids and its "
            "gradients (fp64/fp32): --dump writes <anchor>#grad and <parameter>#grad");
        app.add_option("--targets", a->targets,
            "with --grad: one target id per input id (-1: not counted; default: the next id)");
        return [a, &global] { return runRun(*a, global); };
    } });

} // namespace

} // namespace day0::cli
