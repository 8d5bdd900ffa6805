// day0 plan <model> --cluster …: every parallel layout of a model on a cluster, ranked by
// estimated throughput, with where the time goes and why the others were rejected.

#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "hardware/cluster.h"
#include "interrupt.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/plan_json.h"
#include "plan/plan_record.h"
#include "plan/planner.h"
#include "profile/importer.h"
#include "profile/step_times.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace day0::cli {

namespace {

using namespace day0::plan;

struct PlanArgs {
    std::string model;
    std::string cluster;
    std::string mode = "train";
    int top = 10;
    int seq = 4096;
    int globalBatch = 1024;
    int context = 8192;
    int prompt = 0;
    int output = 1024;
    double tpotMs = 50.0;
    int maxBatch = ServingRuntime {}.maxBatch;
    double kvCacheFraction = ServingRuntime {}.kvCacheFraction;
    std::string scheduler { schedulerName(ServingRuntime {}.reservation) };
    double headroom = 0.0;
    double efficiency = CostOptions {}.computeEfficiency;
    double fp8Efficiency = CostOptions {}.fp8ComputeEfficiency;
    std::vector<int> tp;
    std::vector<int> pp;
    std::vector<int> ep;
    std::vector<int> cp;
    std::vector<int> microBatches;
    std::vector<int> zero;
    std::vector<int> vpp;
    std::vector<std::string> recompute;
    bool noMtp = false;
    bool tpCommOverlap = false;
    std::string weights;
    std::string kv;
    std::vector<std::string> measuredTrace;
    bool epCommOverlap = false;
    bool epNodeDedup = false;
    double reserveGiB = -1;
    double fragmentation = -1;
};

std::string gib(double bytes) { return formatBytes(Bytes(std::int64_t(bytes))); }

std::string share(double part, double whole)
{
    if (whole <= 0 || part <= 0) {
        return "-";
    }
    const double p = 100.0 * part / whole;
    return p < 0.5 ? "<1%" : fmt::format("{:.0f}%", p);
}

std::string stageSplit(const Layout& l)
{
    int lo = l.stageLayers(0);
    int hi = lo;
    for (int s = 1; s < l.pp; ++s) {
        lo = std::min(lo, l.stageLayers(s));
        hi = std::max(hi, l.stageLayers(s));
    }
    return lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
}

std::string modelLine(
    const model::ModelSpec& spec, const model::ParameterCounts& counts, const ModelSummary& m)
{
    std::string shape = fmt::format("{} layers", spec.numLayers);
    if (spec.moe) {
        shape += fmt::format(" ({} MoE: {} experts, top-{})", spec.numMoeLayers(),
            spec.moe->numExperts, spec.moe->topK);
    }
    if (m.numMtp > 0) {
        shape += fmt::format(", {} MTP", m.numMtp);
    }
    return fmt::format("{} ({}): {} parameters, {} active per token; {}, {} attention, hidden {}",
        spec.name, model::familyName(spec.family), formatCount(double(counts.total)),
        formatCount(double(counts.active)), shape, model::attentionKindName(spec.attention),
        spec.hiddenSize);
}

void printTraining(const PlanResult& r, const hardware::Cluster& cluster, bool experts)
{
    Table layouts({ "#", "tp", "pp", "layers/stage", "vpp", "ep", "etp", "dp", "cp", "mb", "zero",
                      "recompute", "memory/GPU", "step", "tokens/s", "MFU" },
        { Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Left,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right });
    Table time(
        { "#", "compute", "TP/SP", "EP a2a", "CP", "PP p2p", "bubble", "DP grads", "optimizer" },
        std::vector<Table::Align>(9, Table::Align::Right));
    for (std::size_t i = 0; i < r.layouts.size(); ++i) {
        const auto& p = r.layouts[i];
        const auto& l = p.layout;
        const auto& b = p.training.breakdown;
        const double mem = cluster.deviceMemory();
        layouts.addRow({ std::to_string(i + 1), std::to_string(l.tp), std::to_string(l.pp),
            stageSplit(l), std::to_string(l.vpp), experts ? std::to_string(l.ep) : "-",
            experts ? std::to_string(l.etp) : "-", std::to_string(l.dp), std::to_string(l.cp),
            std::to_string(l.microBatch), std::to_string(l.zero), recomputeName(l.recompute),
            fmt::format("{} ({})", gib(p.maxMemory), share(p.maxMemory, mem)),
            formatDuration(Seconds(p.stepTime)), formatCount(p.tokensPerSecond),
            fmt::format("{:.0f}%", 100.0 * p.training.mfu) });
        const double t = p.stepTime;
        time.addRow({ std::to_string(i + 1), share(b.compute, t), share(b.tp, t), share(b.ep, t),
            share(b.cp, t), share(b.pp, t), share(b.bubble, t), share(b.dp, t),
            share(b.optimizer, t) });
    }
    fmt::print("Fastest {} layouts (estimated):\n{}\n", r.layouts.size(), layouts.render());
    fmt::print("Where the step time goes (share of each layout's step):\n{}\n", time.render());
}

void explainTraining(const PlannedLayout& best, const PlanResult& r,
    const hardware::Cluster& cluster, const ModelSummary& m, const Workload& wl)
{
    const Layout& l = best.layout;
    const auto& b = best.training.breakdown;
    const double step = best.stepTime;
    fmt::print("Layout #1: {}\n", formatPlan(l.toPlan()));
    const int domain = std::min(cluster.domainSize, cluster.worldSize());
    if (l.tp > 1) {
        fmt::print("  - tensor parallel {} inside one {}-GPU NVLink domain (sequence parallel {}); "
                   "TP/SP collectives take {} of the step.\n",
            l.tp, domain, l.sp ? "on" : "off", share(b.tp, step));
    } else {
        fmt::print("  - no tensor parallelism: each GPU holds whole matrices{}.\n",
            l.cp > 1 ? fmt::format(
                "; context parallel {} splits each sequence instead ({} tokens per GPU, "
                "ring exchange {} of the step)",
                l.cp, wl.seqLength / l.cp, share(b.cp, step))
                     : "");
    }
    if (m.hasMoe()) {
        const auto& s = m.representativeShape();
        const int span = l.ep * l.etp;
        fmt::print("  - {} experts split over ep={} ({:.0f} per GPU{}); the all-to-all spans {}, "
                   "{} of the step.\n",
            s.experts, l.ep, s.experts / l.ep,
            l.etp > 1 ? fmt::format(", each cut {} ways", l.etp) : "",
            span <= domain ? "one node" : fmt::format("{} nodes", (span + domain - 1) / domain),
            share(b.ep, step));
    }
    const std::string microBatches
        = fmt::format("{} micro-batch{} of {} sequence{}", l.numMicroBatches,
            l.numMicroBatches == 1 ? "" : "es", l.microBatch, l.microBatch == 1 ? "" : "s");
    if (l.pp > 1) {
        fmt::print("  - {} pipeline stages of {} layers{}; {} per step keep the fill-and-drain "
                   "bubble at {}.\n",
            l.pp, stageSplit(l), l.vpp > 1 ? fmt::format(" in {} interleaved chunks", l.vpp) : "",
            microBatches, share(b.bubble, step));
    } else {
        fmt::print("  - no pipeline: every rank holds all {} layers; {} per step.\n", m.numLayers,
            microBatches);
    }
    fmt::print("  - {} data-parallel replicas{}; the gradient reduce-scatter overlaps the last "
               "backward, leaving {} exposed.\n",
        l.dp, l.zero > 0 ? fmt::format(" with ZeRO-{} sharding", l.zero) : "", share(b.dp, step));
    fmt::print("  - busiest rank {} (stage {}) uses {} of {} with recompute={}.\n",
        best.mostLoadedRank, best.mostLoadedStage, gib(best.maxMemory), gib(cluster.deviceMemory()),
        recomputeName(l.recompute));
    fmt::print("  - step {} for {} tokens: {} tokens/s, {:.0f}% MFU; `day0 memory {} --plan {} "
               "--cluster {}` itemises its memory.\n",
        formatDuration(Seconds(step)), formatCount(double(l.globalBatch) * wl.seqLength),
        formatCount(best.tokensPerSecond), 100.0 * best.training.mfu, m.name,
        formatPlan(l.toPlan()), cluster.name);
    (void)r;
}

void printInference(const PlanResult& r, const hardware::Cluster& cluster, bool experts)
{
    Table layouts({ "#", "tp", "pp", "ep", "dp", "batch", "memory/GPU", "TTFT", "TPOT", "tokens/s",
                      "tokens/s/GPU", "decode bound" },
        { Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Left });
    for (std::size_t i = 0; i < r.layouts.size(); ++i) {
        const auto& p = r.layouts[i];
        const auto& l = p.layout;
        const auto& b = p.inference.breakdown;
        const double comm = b.tp + b.ep + b.pp;
        const std::string bound = comm > std::max(b.decodeCompute, b.decodeMemory)
            ? "communication"
            : (b.decodeMemory > b.decodeCompute ? "memory bandwidth" : "compute");
        layouts.addRow({ std::to_string(i + 1), std::to_string(l.tp), std::to_string(l.pp),
            experts ? std::to_string(l.ep) : "-", std::to_string(l.dp),
            std::to_string(l.microBatch),
            fmt::format("{} ({})", gib(p.maxMemory), share(p.maxMemory, cluster.deviceMemory())),
            formatDuration(Seconds(p.inference.ttft)), formatDuration(Seconds(p.inference.tpot)),
            formatCount(p.tokensPerSecond), formatCount(p.tokensPerSecond / l.world), bound });
    }
    fmt::print("Highest-throughput {} layouts within the latency bound (estimated):\n{}\n",
        r.layouts.size(), layouts.render());
}

/// Why a serving layout holds the sequences it does.
std::string admissionWords(const PlannedLayout& p)
{
    const auto& a = p.admission;
    const std::string held = a.capped
        ? fmt::format("the runtime's cap of {}", a.sequences)
        : fmt::format("the {} KV pool of stage {} holds {} of {} each", gib(a.pool), a.stage,
            a.sequences, gib(a.perSequence));
    return p.layout.microBatch < a.sequences
        ? fmt::format("fewer than admitted, for the latency bound; {}", held)
        : held;
}

/// Rejections of one kind that differ only in the first number ("tp=16 > 8 GPUs per node",
/// "tp=32 > 8 ...") read as one line: "tp=16, 32, 64 > 8 GPUs per node".
std::vector<RejectedGroup> mergeSimilar(const std::vector<RejectedGroup>& groups)
{
    std::vector<RejectedGroup> merged;
    std::vector<std::vector<std::int64_t>> values;
    for (const auto& g : groups) {
        bool joined = false;
        for (std::size_t i = 0; i < merged.size() && g.example.empty(); ++i) {
            const auto& m = merged[i].rejection;
            if (merged[i].example.empty() && m.kind == g.rejection.kind && m.b == g.rejection.b
                && m.c == g.rejection.c) {
                merged[i].count += g.count;
                values[i].push_back(g.rejection.a);
                joined = true;
                break;
            }
        }
        if (!joined) {
            merged.push_back(g);
            values.push_back({ g.rejection.a });
        }
    }
    for (std::size_t i = 0; i < merged.size(); ++i) {
        if (values[i].size() < 2) {
            continue;
        }
        std::sort(values[i].begin(), values[i].end());
        std::string list;
        for (const auto v : values[i]) {
            list += (list.empty() ? "" : ", ") + std::to_string(v);
        }
        auto& reason = merged[i].reason;
        const auto at = reason.find(std::to_string(merged[i].rejection.a));
        if (at != std::string::npos) {
            reason.replace(at, std::to_string(merged[i].rejection.a).size(), list);
        }
    }
    std::stable_sort(merged.begin(), merged.end(),
        [](const RejectedGroup& x, const RejectedGroup& y) { return x.count > y.count; });
    return merged;
}

void printRejected(const PlanResult& r)
{
    if (r.rejected.empty()) {
        return;
    }
    const auto groups = mergeSimilar(r.rejected);
    Table table({ "layouts", "rejected because", "closest miss" },
        { Table::Align::Right, Table::Align::Left, Table::Align::Left });
    const std::size_t shown = std::min<std::size_t>(groups.size(), 12);
    for (std::size_t i = 0; i < shown; ++i) {
        table.addRow({ formatExact(groups[i].count), groups[i].reason, groups[i].example });
    }
    fmt::print("Rejected layouts{}:\n{}\n",
        shown < groups.size()
            ? fmt::format(" ({} most common of {} reasons; --json lists all)", shown, groups.size())
            : "",
        table.render());
}

/// The fastest layout's estimated step beside the measured one.
std::string measuredComparison(const profile::StepTimes& measured, const PlanResult& r)
{
    if (r.layouts.empty()) {
        return "no layout fits, so there is no estimate to hold against it";
    }
    const double e = r.layouts.front().stepTime;
    return fmt::format(
        "layout #1 is estimated at {:.4g} s per step ({:+.1f}%)", e, 100.0 * measured.errorOf(e));
}

nlohmann::json measuredJson(
    const profile::StepTimes& measured, const PlanResult& r, const std::vector<std::string>& files)
{
    nlohmann::json j { { "files", files }, { "step_time_s", measured.medianSeconds() },
        { "steps", measured.steps.size() }, { "text", measuredComparison(measured, r) } };
    if (!r.layouts.empty()) {
        const double e = r.layouts.front().stepTime;
        j["estimate_s"] = e;
        j["error"] = measured.errorOf(e);
    }
    return j;
}

int runPlan(const PlanArgs& a, const GlobalOptions& global)
{
    const auto mode = parseMode(a.mode);
    if (!mode) {
        return reportError(
            Error::badInput(fmt::format("--mode '{}': expected train or infer", a.mode)));
    }
    // --weights and --kv take what a plan string's weights= and kv= take.
    auto planDtype = [](const char* key, const std::string& text) -> Result<ParallelPlan> {
        if (text.empty()) {
            return ParallelPlan {};
        }
        auto plan = parsePlan(fmt::format("{}={}", key, text));
        if (!plan) {
            return Error::badInput(fmt::format("--{}: {}", key, plan.error().message));
        }
        return plan;
    };
    auto weights = planDtype("weights", a.weights);
    if (!weights) {
        return reportError(weights.error());
    }
    auto kv = planDtype("kv", a.kv);
    if (!kv) {
        return reportError(kv.error());
    }
    auto cluster = hardware::parseCluster(a.cluster);
    if (!cluster) {
        return reportError(cluster.error());
    }
    auto spec = model::loadModel(a.model, readOptions(global));
    if (!spec) {
        return reportError(spec.error());
    }
    for (const auto& warning : spec->warnings) {
        printWarning(warning);
    }
    PlannerOptions o;
    o.top = a.top;
    o.headroom = a.headroom;
    o.workload.mode = *mode;
    o.workload.seqLength = a.seq;
    o.workload.globalBatch = a.globalBatch;
    o.workload.context = a.context;
    o.workload.promptLength = a.prompt;
    o.workload.outputLength = a.output;
    o.workload.tpotBound = a.tpotMs / 1000.0;
    const auto reservation = parseScheduler(a.scheduler);
    if (!reservation) {
        return reportError(Error::badInput(fmt::format(
            "--scheduler {}: expected guaranteed_no_evict or max_utilization", a.scheduler)));
    }
    o.serving = { a.maxBatch, a.kvCacheFraction, *reservation };
    o.workload.includeMtp = !a.noMtp;
    o.cost.tpCommOverlap = a.tpCommOverlap;
    o.weights = weights->weights;
    o.kv = kv->kv;
    o.cost.epCommOverlap = a.epCommOverlap;
    o.cost.epNodeDedup = a.epNodeDedup;
    o.cost.computeEfficiency = a.efficiency;
    o.cost.fp8ComputeEfficiency = a.fp8Efficiency;
    o.tp = a.tp;
    o.pp = a.pp;
    o.ep = a.ep;
    o.cp = a.cp;
    if (!a.microBatches.empty()) {
        o.microBatches = a.microBatches;
    }
    if (!a.zero.empty()) {
        o.zero = a.zero;
    }
    if (!a.vpp.empty()) {
        o.vpp = a.vpp;
    }
    if (!a.recompute.empty()) {
        o.recompute.clear();
        for (const auto& name : a.recompute) {
            const auto rc = parseRecompute(name);
            if (!rc) {
                return reportError(Error::badInput(
                    fmt::format("--recompute '{}': expected none, selective or full", name)));
            }
            o.recompute.push_back(*rc);
        }
    }
    if (a.reserveGiB >= 0) {
        o.memory.cudaContext = a.reserveGiB * 1073741824.0;
    }
    if (a.fragmentation >= 0) {
        o.memory.fragmentation = a.fragmentation;
    }
    for (const int v : o.vpp) {
        if (v < 1) {
            return reportError(Error::badInput(
                fmt::format("--vpp {}: expected 1 or more model chunks per stage", v)));
        }
    }
    for (const int z : o.zero) {
        if (z < 0 || z > 3) {
            return reportError(Error::badInput(fmt::format("--zero {}: expected 0, 1, 2 or 3", z)));
        }
    }
    if (a.top <= 0 || a.seq <= 0 || a.globalBatch <= 0 || a.context <= 0 || a.headroom < 0
        || a.headroom >= 1) {
        return reportError(Error::badInput("--top, --seq, --global-batch and --context must be "
                                           "positive and --headroom in [0, 1)"));
    }

    // The user's own run, to hold the estimate against: its traces' ProfilerStep ranges.
    std::optional<profile::StepTimes> measured;
    if (!a.measuredTrace.empty()) {
        if (*mode != Mode::Train) {
            return reportError(Error::badInput("--measured-trace holds training step times "
                                               "against the plan; it needs --mode train"));
        }
        std::vector<std::filesystem::path> paths(a.measuredTrace.begin(), a.measuredTrace.end());
        Progress importing;
        Result<profile::Trace> trace = Error::cancelled();
        {
            ProgressBar bar(importing, "reading the trace", !global.quiet && !global.json);
            trace = profile::importTraces(paths, {}, importing, interruptToken());
        }
        if (!trace) {
            return reportError(trace.error().withContext("--measured-trace"));
        }
        measured = profile::profilerSteps(*trace);
        if (measured->steps.empty()) {
            return reportError(Error::badInput(fmt::format("--measured-trace {}: {}",
                fmt::join(a.measuredTrace, ", "), measured->describe())));
        }
    }

    const auto graph = model::buildLayerGraph(*spec);
    const auto summary = summarizeModel(graph);
    Progress progress;
    Result<PlanResult> result = Error::internal("not run");
    {
        ProgressBar bar(progress, "planning", !global.quiet && !global.json);
        result = planLayouts(summary, *cluster, o, progress);
    }
    if (!result) {
        return reportError(result.error());
    }
    const PlanResult& r = *result;
    const auto runId = recordResult(planRunRecord(summary, *cluster, o, r));
    if (global.json) {
        auto j = planResultJson(r);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        j["model"] = spec->name;
        j["cluster"] = cluster->name;
        j["world"] = cluster->worldSize();
        j["mode"] = modeName(*mode);
        j["device_memory"] = std::int64_t(cluster->deviceMemory());
        if (measured) {
            j["measured"] = measuredJson(*measured, r, a.measuredTrace);
        }
        addPartialJson(j, *spec);
        fmt::print("{}\n", dumpJson(j, 2));
        return r.feasible > 0 ? 0 : 1;
    }

    const auto counts = graph.countParameters();
    fmt::print("{}", partialBanner(*spec));
    fmt::print("Model    {}\n", modelLine(*spec, counts, summary));
    fmt::print("Cluster  {}: {}\n", cluster->name, cluster->describe());
    if (*mode == Mode::Train) {
        const bool fp8 = o.weights == DType::F8E4M3;
        fmt::print("Workload training, {} sequences × {} tokens = {} tokens per step; {}, FP32 "
                   "gradients and Adam\n\n",
            a.globalBatch, a.seq, formatCount(double(a.globalBatch) * a.seq),
            fp8 ? "FP8 weights and GEMMs"
                : fmt::format("{} weights", o.weights ? shortDtypeName(*o.weights) : "bf16"));
    } else {
        fmt::print(
            "Workload serving, prompt {} + output {} tokens ({} reserved in KV per sequence, "
            "{}), at most {} sequences, {:.0f}% of free memory for KV, time per output "
            "token ≤ {}\n\n",
            o.workload.prompt(), a.output, reservedTokens(o.workload, o.serving.reservation),
            schedulerName(o.serving.reservation), o.serving.maxBatch,
            100.0 * o.serving.kvCacheFraction, formatDuration(Seconds(o.workload.tpotBound)));
    }
    fmt::print("Evaluated {} layouts in {}: {} fit in {}{}, {} rejected.\n\n",
        formatExact(r.evaluated), formatDuration(Seconds(r.seconds)), formatExact(r.feasible),
        gib(cluster->deviceMemory()),
        a.headroom > 0 ? fmt::format(" less {:.0f}% headroom", a.headroom * 100) : "",
        formatExact(r.evaluated - r.feasible));
    if (r.layouts.empty()) {
        fmt::print("No layout fits. ");
        printRejected(r);
        fmt::print("Try more GPUs, FP8 weights, a shorter sequence or a smaller global batch.\n");
        return 1;
    }
    if (*mode == Mode::Train) {
        printTraining(r, *cluster, summary.hasMoe());
        explainTraining(r.layouts.front(), r, *cluster, summary, o.workload);
    } else {
        printInference(r, *cluster, summary.hasMoe());
        const auto& best = r.layouts.front();
        fmt::print(
            "Layout #1: {} serving {} sequences per replica ({}): TPOT {}, TTFT {} for a {}-token "
            "prompt, {} output tokens/s over {} GPUs.\n",
            formatPlan(best.layout.toPlan()), best.layout.microBatch, admissionWords(best),
            formatDuration(Seconds(best.inference.tpot)),
            formatDuration(Seconds(best.inference.ttft)), o.workload.prompt(),
            formatCount(best.tokensPerSecond), best.layout.world);
    }
    fmt::print("Time figures (step, tokens/s, MFU, TTFT, TPOT): {}\n", r.timeError.describe());
    if (!r.layouts.empty() && r.layouts.front().timeError.cases != r.timeError.cases) {
        fmt::print("  of layout #1: {}\n", r.layouts.front().timeError.describe());
    }
    if (measured) {
        fmt::print("Measured ({}): {}; {}\n", fmt::join(a.measuredTrace, ", "),
            measured->describe(), measuredComparison(*measured, r));
    }
    fmt::print("\n");
    printRejected(r);
    fmt::print("Assumptions:\n");
    for (const auto& note : r.notes) {
        fmt::print("  - {}\n", note);
    }
    return 0;
}

const bool kRegistered = registerCommand({
    "plan",
    "rank every parallel layout of a model on a cluster by estimated throughput",
    30,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<PlanArgs>();
        app.add_option("model", a->model,
               "a folder with config.json, a config.json file, or a bundled name")
            ->required();
        app.add_option(
               "--cluster", a->cluster, "device:nodesxGPUs (h200:32x8) or a cluster JSON file")
            ->required();
        app.add_option("--mode", a->mode, "train or infer")->capture_default_str();
        app.add_option("--top", a->top, "layouts to show")->capture_default_str();
        app.add_option("--seq", a->seq, "training sequence length")->capture_default_str();
        app.add_option("--global-batch", a->globalBatch, "training sequences per step")
            ->capture_default_str();
        app.add_option("--context", a->context,
               "inference: prompt + output tokens of a request (the prompt's default)")
            ->capture_default_str();
        app.add_option(
            "--prompt", a->prompt, "inference: prompt tokens (default context - output)");
        app.add_option("--output", a->output, "inference: generated tokens per request")
            ->capture_default_str();
        app.add_option("--tpot-ms", a->tpotMs, "inference: bound on time per output token, ms")
            ->capture_default_str();
        app.add_option(
               "--max-batch", a->maxBatch, "inference: the runtime's cap on sequences in flight")
            ->capture_default_str();
        app.add_option("--scheduler", a->scheduler,
               "inference: what an admitted sequence reserves in KV: guaranteed_no_evict (prompt "
               "and whole output) or max_utilization (prompt and half the output)")
            ->capture_default_str();
        app.add_option("--kv-cache-fraction", a->kvCacheFraction,
               "inference: share of the memory free after loading given to the KV cache")
            ->capture_default_str();
        app.add_option("--headroom", a->headroom, "fraction of device memory to keep free")
            ->capture_default_str();
        app.add_option(
               "--efficiency", a->efficiency, "fraction of the BF16 peak FLOP/s large GEMMs reach")
            ->capture_default_str();
        app.add_option("--fp8-efficiency", a->fp8Efficiency,
               "fraction of the FP8 peak FLOP/s large FP8 GEMMs reach (weights=fp8)")
            ->capture_default_str();
        app.add_option("--tp", a->tp, "only these TP sizes (comma-separated)")->delimiter(',');
        app.add_option("--pp", a->pp, "only these PP sizes")->delimiter(',');
        app.add_option("--ep", a->ep, "only these EP sizes")->delimiter(',');
        app.add_option("--cp", a->cp, "only these CP sizes")->delimiter(',');
        app.add_option(
               "--micro-batches", a->microBatches, "micro-batch sizes to try (default 1,2,4,8)")
            ->delimiter(',');
        app.add_option("--zero", a->zero, "ZeRO stages to try (default 0,1,2,3)")->delimiter(',');
        app.add_option("--vpp", a->vpp,
               "interleaving depths (model chunks per stage) to try when pp > 1 (default 1,2,4)")
            ->delimiter(',');
        app.add_option("--recompute", a->recompute, "recompute modes to try (none,selective,full)")
            ->delimiter(',');
        app.add_flag("--no-mtp", a->noMtp, "leave the model's MTP layers out");
        app.add_option("--weights", a->weights,
            "weight dtype of every layout: fp8 (FP8 GEMMs in training), bf16, or checkpoint");
        app.add_option("--kv", a->kv, "KV-cache dtype in serving: bf16 (default) or fp8");
        app.add_option("--measured-trace", a->measuredTrace,
            "training: the trace(s) of your own run (Kineto JSON, Nsight SQLite); its "
            "median ProfilerStep time is shown beside layout #1's estimate");
        app.add_flag("--tp-comm-overlap", a->tpCommOverlap,
            "training: TP collectives pipelined with the GEMMs (Megatron's --tp-comm-overlap)");
        app.add_flag("--ep-comm-overlap", a->epCommOverlap,
            "training: expert all-to-all overlapped with another micro-batch's compute "
            "(DualPipe, --overlap-moe-expert-parallel-comm)");
        app.add_flag("--ep-node-dedup", a->epNodeDedup,
            "expert dispatch sends a token once per node holding its experts and forwards it "
            "there over the fast link (DeepSeek-V3's node-limited dispatch, DeepEP, HybridEP)");
        app.add_option(
            "--reserve", a->reserveGiB, "CUDA context and workspaces per GPU, GiB (default 0.75)");
        app.add_option(
            "--fragmentation", a->fragmentation, "allocator headroom, fraction (default 0.05)");
        app.footer("Exit status: 0 with layouts, 1 when no layout fits, 2 on bad input.");
        return [a, &global] { return runPlan(*a, global); };
    },
});

} // namespace

} // namespace day0::cli
