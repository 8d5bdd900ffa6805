// day0 validate <model|checkpoint>: the Day-0 playbook headless, with JUnit XML, JSON and HTML
// reports, recorded as a run of kind validate.
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "exec/layer_stream.h"
#include "extend/plugin_registry.h"
#include "figure_renderer.h"
#include "history/run_record.h"
#include "interrupt.h"
#include "pipeline/day0_steps.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>

namespace day0::cli {

namespace {

struct ValidateArgs {
    pipeline::ValidateOptions options;
    std::string backend = "cpu";
    int device = 0;
    std::string work;
    std::string junit;
    std::string report;
    std::string jsonOut;
    std::string memoryBudget; ///< --memory-budget SIZE (with --stream)
    std::string memoryBudgetPerRank; ///< --memory-budget-per-rank SIZE (with --stream)
};

std::string statusMark(pipeline::StepStatus status)
{
    switch (status) {
    case pipeline::StepStatus::Passed:
        return "PASS";
    case pipeline::StepStatus::Failed:
        return "FAIL";
    case pipeline::StepStatus::Error:
        return "ERROR";
    case pipeline::StepStatus::Skipped:
        return "SKIP";
    default:
        return "....";
    }
}

int runValidate(ValidateArgs a, const GlobalOptions& global)
{
    if (auto refused = refusePartial("validate", a.options.model, global)) {
        return *refused;
    }
    if (!a.options.serve && !a.options.serveUrl.empty()) {
        return reportError(Error::badInput("--serve-url drives the serving step; --no-serve "
                                           "skips it: give one of them"));
    }
    a.options.work = a.work;
    const auto budget = exec::parseMemoryBudget(a.memoryBudget, a.memoryBudgetPerRank);
    if (!budget) {
        return reportError(budget.error());
    }
    a.options.streamOptions.memoryBudget = budget->bytes;
    a.options.budgetPerRank = budget->perRank;
    extend::PluginRegistry registry;
    auto backend = extend::openRunBackend(registry, a.backend, a.device);
    if (!backend) {
        return reportError(backend.error());
    }
    a.options.backend = std::move(*backend);
    // Step lines are the text output; under --json they go to stderr with the other messages.
    std::FILE* out = global.json ? stderr : stdout;
    int index = 0;
    const std::size_t total = pipeline::day0StepIds().size() + (a.options.serve ? 1 : 0);
    pipeline::PipelineObserver observer;
    observer.stepFinished = [&](const pipeline::StepRecord& step) {
        ++index;
        if (global.json && global.quiet) {
            return;
        }
        const std::string text = step.report.summary.empty() || !step.reason.empty()
            ? step.reason
            : step.report.summary;
        fmt::print(out, "[{}/{}] {:<5} {} ({}): {}\n", index, total, statusMark(step.status),
            step.title, formatDuration(step.duration), text);
        if (step.status == pipeline::StepStatus::Failed
            || step.status == pipeline::StepStatus::Error) {
            for (const auto& line : step.report.details) {
                fmt::print(out, "        {}\n", line);
            }
        }
        std::fflush(out);
    };
    Progress progress;
    Progress stepProgress;
    pipeline::ReportPaths paths { a.junit, a.report, a.jsonOut };
    Result<pipeline::ValidateOutcome> validated = Error::internal("not run");
    {
        ProgressBar bar(stepProgress, "validate", !global.quiet && !global.json);
        validated = pipeline::validate(a.options, paths, makeFigureRenderer(), progress,
            interruptToken(), observer, &stepProgress);
    }
    if (!validated) {
        return reportError(validated.error());
    }
    // The serving step's bench is a run of its own (as `day0 bench serve` records it), so that
    // `runs compare` sets it beside other benches.
    std::optional<RunId> servingRunId;
    if (validated->validation.servingBench) {
        servingRunId = recordResult(*validated->validation.servingBench);
    }
    const auto runId = recordResult(validated->record);
    if (validated->reportsError) {
        return reportError(*validated->reportsError);
    }
    const auto* validation = &validated->validation;
    const auto& result = validation->result;
    if (global.json) {
        auto j = pipeline::toJson(result, validation->header);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        j["figures"] = validation->figures.size();
        if (validation->servingBench) {
            j["serving_run_id"]
                = servingRunId ? nlohmann::json(servingRunId->value()) : nlohmann::json(nullptr);
        }
        j["work"]
            = (a.options.work.empty() ? pipeline::defaultWorkDir(a.options.model) : a.options.work)
                  .string();
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        int passed = 0;
        for (const auto& s : result.steps) {
            passed += s.status == pipeline::StepStatus::Passed;
        }
        fmt::print("{}: {} of {} steps passed in {}{}\n", result.name, passed, result.steps.size(),
            formatDuration(result.duration),
            result.cancelled ? " (cancelled)" : (result.passed() ? "" : " — FAILED"));
        for (const auto& [label, path] : { std::pair { "JUnit XML", a.junit },
                 { "HTML report", a.report }, { "JSON report", a.jsonOut } }) {
            if (!path.empty()) {
                fmt::print("{}: {}\n", label, path);
            }
        }
    }
    return result.exitCode();
}

const bool registered = registerCommand({ "validate",
    "run the Day-0 pipeline (integrity, conversion, sharding, smoke, multi-rank, precision, "
    "performance) with JUnit/JSON/HTML reports",
    90, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<ValidateArgs>();
        app.add_option("model", a->options.model,
               "checkpoint folder, or a config.json / bundled name (a homologous checkpoint is "
               "shrunk first)")
            ->required();
        app.add_option("--plan", a->options.plan, "layout to shard for and run multi-rank")
            ->capture_default_str();
        app.add_option("--precision", a->options.precision, "target precision")
            ->capture_default_str();
        app.add_option("--reference", a->options.reference, "reference precision (fp64 or fp32)")
            ->capture_default_str();
        app.add_option("--state-dtype", a->options.stateDtype,
            "store the target's recurrent state (Gated DeltaNet, Mamba-2) in fp32, bf16 or fp16 "
            "after every step (vLLM's mamba_ssm_cache_dtype; default: the compute type)");
        app.add_option("--backend", a->backend,
            "where the precision and performance steps run the target: cpu (default) or a backend "
            "plugin such as cuda (the reference stays on the CPU)");
        app.add_option("--device", a->device, "device index for a GPU backend (default 0)");
        app.add_option("--tokens", a->options.tokens, "greedy tokens to generate")
            ->capture_default_str();
        app.add_option("--tolerances", a->options.tolerances,
            "tolerance table name or file (default day0-default)");
        app.add_option("--eval-sequences", a->options.evalSequences,
               "sequences the precision step's end-to-end check samples from the reference")
            ->capture_default_str()
            ->check(CLI::Range(1, 100000));
        app.add_option("--eval-length", a->options.evalLength,
               "tokens of each sampled sequence of the end-to-end check")
            ->capture_default_str()
            ->check(CLI::Range(2, 1000000));
        app.add_flag("--stream", a->options.stream,
            "stream the weights layer by layer in every step that runs the model (smoke, "
            "multi-rank, whose ranks each stream their rank file, precision with its end-to-end "
            "check, performance): a checkpoint larger than memory, the same figures; the serving "
            "step, whose server holds the whole model, is skipped)");
        app.add_option("--memory-budget", a->memoryBudget,
            "with --stream: bound the resident weights, e.g. 512M or 8G (a layer that alone "
            "needs more is refused; the multi-rank step's W in-process ranks get budget / W "
            "each); the peak RSS is reported by the performance step");
        app.add_option("--memory-budget-per-rank", a->memoryBudgetPerRank,
            "with --stream: bound each rank's resident weights by SIZE of its own: every "
            "single-rank step's and each of the multi-rank step's ranks' (instead of sharing "
            "--memory-budget among them)");
        app.add_option("--seed", a->options.seed, "seed of a shrunk checkpoint")
            ->capture_default_str();
        app.add_option("--work", a->work,
            "working folder for shrunk/converted/sharded checkpoints (default: "
            "$XDG_CACHE_HOME/day0/validate/<model>)");
        a->options.serve = true;
        app.add_flag(
            "--no-serve", [a](std::int64_t) { a->options.serve = false; },
            "skip the serving step (day0 serve in-process under a short staged load, greedy "
            "tokens checked against the reference engine)");
        app.add_option("--serve-url", a->options.serveUrl,
            "drive this OpenAI-compatible endpoint, serving the checkpoint, in the serving step "
            "instead of day0 serve in-process");
        app.add_option("--serve-concurrency", a->options.serveConcurrency,
               "the serving step's load levels, requests in flight (default 1 4)")
            ->expected(1, 16)
            ->check(CLI::Range(1, 4096));
        app.add_option("--serve-requests", a->options.serveRequests,
               "greedy requests per load level of the serving step (default 8)")
            ->check(CLI::Range(1, 100000));
        app.add_option("--junit", a->junit, "write JUnit XML here (one test case per step)");
        app.add_option("--report", a->report, "write the self-contained HTML report here");
        app.add_option("--json-report", a->jsonOut, "write the JSON report to this file");
        return [a, &global] { return runValidate(*a, global); };
    } });

} // namespace

} // namespace day0::cli
