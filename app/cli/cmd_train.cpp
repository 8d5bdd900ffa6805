// day0 train next-token-mlp|CHECKPOINT: a short training run with AdamW, a schedule, clipping,
// data and tensor parallelism / ZeRO-1, mixed precision, checkpoints, drills and gradient
// compression; a checkpoint trains from its own weights through the LLM backward of the CPU
// reference.
#include "actions/train.h"
#include "base/json_util.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace day0::cli {

namespace {

struct TrainArgs {
    actions::TrainRequest request;
    std::string schedule = "cosine:0.02,warmup=10,floor=0.002";
    std::string precision = "f64";
    std::string compress = "none";
    std::string drill;
    std::string checkpointDir;
    double commTimeout = 60.0;
    std::string gradSteps = "last";
};

nlohmann::json curveJson(const train::TrainResult& r, double train::StepRecord::*field)
{
    nlohmann::json values = nlohmann::json::array();
    for (const auto& s : r.history) {
        values.push_back(s.*field);
    }
    return values;
}

Result<void> completeOptions(TrainArgs& args)
{
    auto& o = args.request.options;
    auto schedule = train::LrSchedule::parse(args.schedule, o.steps);
    if (!schedule) {
        return schedule.error().withContext("--lr");
    }
    o.schedule = *schedule;
    auto precision = train::parsePrecision(args.precision);
    if (!precision) {
        return precision.error().withContext("--precision");
    }
    o.precision = *precision;
    auto compression = train::CompressionOptions::parse(args.compress);
    if (!compression) {
        return compression.error().withContext("--compress");
    }
    o.compression = *compression;
    if (!args.drill.empty()) {
        auto drill = train::Drill::parse(args.drill);
        if (!drill) {
            return drill.error().withContext("--drill");
        }
        o.drill = *drill;
    }
    o.checkpointDir = args.checkpointDir;
    auto gradSteps = actions::GradDumpSteps::parse(args.gradSteps);
    if (!gradSteps) {
        return gradSteps.error();
    }
    args.request.gradSteps = *gradSteps;
    if (!(args.commTimeout > 0)) {
        return Error::badInput("--comm-timeout must be positive (seconds)");
    }
    o.commTimeout = Seconds { args.commTimeout };
    return success();
}

void printText(const actions::TrainOutcome& out)
{
    const auto& h = out.result.history;
    const std::size_t every = std::max<std::size_t>(1, h.size() / 10);
    for (std::size_t i = 0; i < h.size(); ++i) {
        if (i % every == 0 || i + 1 == h.size()) {
            fmt::print("step {:>5}: loss {:.4f}  grad norm {:.4f}  lr {:.3g}{}\n", h[i].step,
                h[i].loss, h[i].gradNorm, h[i].lr,
                out.baseline ? fmt::format("  (uncompressed {:.4f})", out.baseline->history[i].loss)
                             : std::string());
        }
    }
    for (const auto& e : out.result.events) {
        fmt::print("  {}\n", e);
    }
    fmt::print("{}\n", out.record.info.message);
    if (out.memory) {
        const auto& m = *out.memory;
        // Rank 0's with the reasons, then the other ranks' figures.
        int shown = -1;
        for (const auto& line : m.lines) {
            if (line.rank != shown) {
                shown = line.rank;
                if (line.rank == 0) {
                    fmt::print("memory of rank 0 against the planner ({}):\n", m.plannerConfig);
                } else {
                    fmt::print("memory of rank {} against the planner:\n", line.rank);
                }
            }
            fmt::print("  {:<12} trainer {:>12}  planner {:>12}\n", line.category,
                formatBytes(Bytes(line.trainer)), formatBytes(Bytes(line.planner)));
            if (line.rank == 0) {
                fmt::print("    {}\n", line.why);
            }
        }
        fmt::print("  peak resident set of the process: {}\n", formatBytes(Bytes(m.peakRss)));
    }
    if (!out.memoryNotCompared.empty()) {
        fmt::print("{}\n", out.memoryNotCompared);
    }
    const bool replicas = std::any_of(out.gradDumps.begin(), out.gradDumps.end(),
        [](const actions::GradDumpRef& d) { return d.dpRank > 0; });
    for (const auto& d : out.gradDumps) {
        fmt::print("gradient dump of step {}{}: {}\n", d.step,
            replicas ? fmt::format(" (replica {})", d.dpRank) : std::string(), d.path);
    }
    for (const auto step : out.gradStepsNotRun) {
        fmt::print("no gradient dump of step {}: this attempt started after it\n", step);
    }
}

nlohmann::json gradDumpsJson(const actions::TrainOutcome& out)
{
    nlohmann::json dumps = nlohmann::json::array();
    for (const auto& d : out.gradDumps) {
        dumps.push_back({ { "step", d.step }, { "dp_rank", d.dpRank }, { "path", d.path } });
    }
    return dumps;
}

nlohmann::json memoryJson(const actions::TrainMemory& m)
{
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& line : m.lines) {
        lines.push_back({ { "rank", line.rank }, { "category", line.category },
            { "trainer_bytes", line.trainer }, { "planner_bytes", line.planner },
            { "why", line.why } });
    }
    return { { "planner", m.plannerConfig }, { "categories", lines },
        { "peak_rss_bytes", m.peakRss } };
}

int runTrain(TrainArgs args, const GlobalOptions& global)
{
    if (auto bad = completeOptions(args); !bad) {
        return reportError(bad.error());
    }
    Progress progress;
    Result<actions::TrainOutcome> out = Error::internal("not run");
    {
        ProgressBar bar(progress, "training", !global.quiet);
        out = actions::trainModel(args.request, progress, interruptToken());
    }
    if (!out) {
        return reportError(out.error());
    }
    const auto runId = recordResult(out->record);
    if (global.json) {
        const auto& o = out->result;
        nlohmann::json j { { "model", args.request.model },
            { "precision", out->record.info.precision }, { "plan", out->record.info.plan },
            { "steps", o.history.size() }, { "loss", curveJson(o, &train::StepRecord::loss) },
            { "grad_norm", curveJson(o, &train::StepRecord::gradNorm) },
            { "lr", curveJson(o, &train::StepRecord::lr) }, { "restarts", o.restarts },
            { "resumed_from_step", o.resumedFromStep }, { "events", o.events },
            { "run_id", runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr) } };
        if (out->memory) {
            j["memory"] = memoryJson(*out->memory);
        }
        if (!args.request.gradDump.empty()) {
            j["grad_dumps"] = gradDumpsJson(*out);
            j["grad_steps_not_run"] = out->gradStepsNotRun;
        }
        if (!out->memoryNotCompared.empty()) {
            j["memory"] = { { "not_compared", out->memoryNotCompared } };
        }
        if (out->verdict) {
            const auto& v = *out->verdict;
            j["compression"] = { { "scheme", args.compress },
                { "baseline_loss", curveJson(*out->baseline, &train::StepRecord::loss) },
                { "baseline_final", v.baselineFinal }, { "final", v.compressedFinal },
                { "gap", v.gap }, { "tolerance", v.tolerance }, { "converges", v.converges },
                { "sent_bytes_per_step", o.compression.sentBytes } };
        }
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        printText(*out);
    }
    return out->verdict && !out->verdict->converges ? 1 : 0;
}

const bool registered = registerCommand({ "train",
    "train a model for a few steps (AdamW, schedule, clipping, DP/TP/ZeRO-1, mixed precision, "
    "checkpoints, drills, gradient compression)",
    95, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<TrainArgs>();
        auto& o = args->request.options;
        app.add_option("model", args->request.model,
               fmt::format("what to train: '{}' (the built-in task) or a checkpoint folder or "
                           "file (families the backward covers; fp64 or fp32)",
                   actions::kBuiltinTrainModel))
            ->required();
        app.add_option("--data", args->request.data,
            "a checkpoint's data: a text file of token ids, one sequence per line (ids separated "
            "by spaces or commas; '#' lines skipped), read in order and cut to --seq; default: a "
            "synthetic order-2 chain over the checkpoint's vocabulary drawn from --seed");
        app.add_option("--steps", o.steps, "optimizer steps")->capture_default_str();
        app.add_option("--batch", o.globalBatch, "sequences per step over all ranks")
            ->capture_default_str();
        app.add_option("--seq", o.sequenceLength, "tokens per sequence")->capture_default_str();
        app.add_option("--seed", o.seed, "seed of the weights and the data")->capture_default_str();
        app.add_option("--lr", args->schedule,
               "schedule: constant:LR[,warmup=N] or cosine:LR,warmup=N,floor=F")
            ->capture_default_str();
        app.add_option("--clip", o.maxGradNorm, "global gradient-norm bound (0: off)")
            ->capture_default_str();
        app.add_option("--weight-decay", o.adamw.weightDecay, "AdamW's decoupled weight decay")
            ->capture_default_str();
        app.add_option("--precision", args->precision, "f64, f32 or bf16-mixed")
            ->capture_default_str();
        app.add_option("--plan", args->request.plan,
            "data and tensor parallelism: dp=N[,tp=N][,zero=1]. tp splits a checkpoint of any "
            "family the backward covers (Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE, DeepSeek-V3 "
            "and Kimi-K2 with MLA) Megatron-style: attention heads (MLA: by heads), the MLP "
            "width, each routed expert's and the shared experts' widths; embeddings, norms, "
            "router and head stay whole on every rank; a tp that does not divide the head "
            "counts or widths is refused naming the field, the built-in task refuses tp; pp, ep, "
            "cp, sp and zero>=2 are refused as not modelled");
        app.add_option("--compress", args->compress,
               "gradient compression: none, fp16, bf16, topk:RATIO[,ef=off]; compared with an "
               "uncompressed run of the same seed (exit 1 when it does not converge)")
            ->capture_default_str();
        app.add_option("--checkpoint-dir", args->checkpointDir, "folder of the checkpoints");
        app.add_option("--checkpoint-every", o.checkpointEvery, "a checkpoint every K steps");
        app.add_option("--keep", o.keepLast, "newest checkpoints kept")->capture_default_str();
        app.add_flag("--resume", o.resume, "start from the newest valid checkpoint");
        app.add_option("--max-restarts", o.maxRestarts,
            "restarts from the newest valid checkpoint after a failed attempt");
        app.add_option("--drill", args->drill,
            "inject a fault on the first attempt: kill-at=STEP, fail-at=STEP or hang-at=STEP, "
            "each [,rank=R]");
        app.add_option("--grad-dump", args->request.gradDump,
            "a checkpoint's gradient dumps go to this folder, one per chosen step (and per "
            "data-parallel replica with dp>1): step-N or step-N-dpR, in the format of day0 run "
            "--grad --dump (<parameter>#grad: the step's gradient as the optimizer got it; "
            "<anchor>#grad: the replica's sequences stacked), for day0 compare; written only when "
            "the run finishes, and recorded with it");
        app.add_option("--grad-steps", args->gradSteps,
               "with --grad-dump, the steps dumped (0-based, as printed): last, a list 0,4,9 or "
               "every=K")
            ->capture_default_str();
        app.add_option("--comm-timeout", args->commTimeout,
               "seconds a rank waits for the others before the job fails")
            ->capture_default_str();
        return [args, &global] { return runTrain(*args, global); };
    } });

} // namespace

} // namespace day0::cli
