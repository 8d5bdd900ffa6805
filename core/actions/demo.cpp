#include "actions/demo.h"

#include "actions/records.h"
#include "actions/verify.h"
#include "base/resources.h"
#include "checkpoint/checkpoint.h"
#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "exec/shrunk_cache.h"
#include "hardware/cluster.h"
#include "history/recording.h"
#include "history/run_store.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "numerics/tolerance.h"
#include "plan/model_summary.h"
#include "plan/plan_record.h"
#include "plan/planner.h"
#include "profile/cpu_tracer.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <system_error>

namespace day0::actions {

namespace fs = std::filesystem;

fs::path demoCheckpointPath()
{
    return exec::shrunkCheckpointPath("kimi-k2", exec::demoShrinkOptions());
}

std::vector<std::int64_t> demoPromptIds() { return { 12, 345, 678, 901, 234, 567, 89, 1011 }; }

namespace {

// The demo checkpoint's run in emulated bf16 against the fp32 reference on the demo prompt, with
// the engine's phases as trace scopes. `judged`: in inject mode with every capture kept, as the
// precision panel runs it (the demo's precision step); else statistics only (the timeline's).
struct DemoRun {
    model::ModelSpec spec;
    std::unique_ptr<numerics::ToleranceTable> table; ///< options.table points here
    exec::PrecisionRunOptions options;
    exec::PrecisionRunResult result;
};

Result<DemoRun> runDemoCheckpoint(
    const fs::path& dir, bool judged, Progress& progress, std::stop_token stop)
{
    DemoRun run;
    auto spec = [&] {
        const profile::TraceScope scope("read config", profile::Category::Annotation);
        return exec::loadCheckpointModel(dir);
    }();
    if (!spec) {
        return spec.error();
    }
    run.spec = std::move(*spec);
    auto weights = [&] {
        const profile::TraceScope scope("open checkpoint", profile::Category::Annotation);
        return exec::openCheckpointWeights(dir);
    }();
    if (!weights) {
        return weights.error().withContext("weights");
    }
    auto table = numerics::resolveToleranceTable("");
    if (!table) {
        return table.error();
    }
    run.table = std::make_unique<numerics::ToleranceTable>(std::move(*table));
    auto target = exec::parsePrecisionPlan("bf16");
    if (!target) {
        return target.error();
    }
    run.options.target = *target;
    run.options.reference = exec::PrecisionMode::F32;
    run.options.inject = judged;
    run.options.capture.statsOnly = !judged;
    run.options.promptIds = demoPromptIds();
    run.options.newTokens = 8;
    run.options.table = run.table.get();
    const profile::TraceScope scope(
        "run fp32 reference + bf16 target", profile::Category::Annotation);
    auto result = exec::runWithReference(run.spec, **weights, run.options, progress, stop);
    if (!result) {
        return result.error();
    }
    run.result = std::move(*result);
    return run;
}

} // namespace

Result<profile::Trace> demoRunTrace(Progress& progress, std::stop_token stop)
{
    profile::CpuTracer tracer;
    tracer.start();
    tracer.setThreadName("demo run");
    const profile::TraceActivation active(tracer);
    // The checkpoint the other panels' demos run too, shrunk once into the shared cache.
    std::error_code ec;
    const bool cached = fs::exists(demoCheckpointPath() / "config.json", ec);
    auto shrunk = [&] {
        if (!cached) {
            progress.setStage("shrinking Kimi-K2 into the demo checkpoint (first start only)");
        }
        const profile::TraceScope scope(
            cached ? "open the demo checkpoint" : "shrink kimi-k2", profile::Category::Annotation);
        return exec::cachedShrunkCheckpoint("kimi-k2", exec::demoShrinkOptions(), progress, stop);
    }();
    if (!shrunk) {
        return shrunk.error();
    }
    progress.setStage("running the demo checkpoint (fp32 reference, emulated bf16)");
    if (auto run = runDemoCheckpoint(*shrunk, false, progress, stop); !run) {
        return run.error();
    }
    tracer.stop();
    return tracer.toTrace(0);
}

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Records with recordRunOnce, as the workbench's demo does: a result the newest run of its kind
// already holds (the plan) is not written again; measured steps differ in their times and are
// new runs. A store that cannot be written does not stop the demo; the step's summary says so.
std::optional<std::int64_t> recordOnce(const history::RunRecord& record, DemoStep& step)
{
    auto recorded = history::recordRunOnce(record);
    if (!recorded) {
        step.summary += fmt::format(" (not recorded: {})", recorded.error().message);
        return std::nullopt;
    }
    if (!*recorded) {
        return std::nullopt;
    }
    return (*recorded)->id.value();
}

Result<DemoStep> planStep(Progress& progress, std::stop_token stop)
{
    progress.setStage("planning Kimi-K2 for training on 32 x 8 H200");
    auto spec = model::loadModel("kimi-k2");
    if (!spec) {
        return spec.error();
    }
    auto cluster = hardware::parseCluster("h200:32x8");
    if (!cluster) {
        return cluster.error();
    }
    const auto summary = plan::summarizeModel(model::buildLayerGraph(*spec));
    plan::PlannerOptions options; // `day0 plan kimi-k2 --cluster h200:32x8 --mode train`
    auto result = plan::planLayouts(summary, *cluster, options, progress, stop);
    if (!result) {
        return result.error();
    }
    DemoStep step { "plan", "", !result->layouts.empty(), std::nullopt };
    if (result->layouts.empty()) {
        step.summary
            = fmt::format("none of {} layouts of Kimi-K2 fits 32 x 8 H200", result->evaluated);
    } else {
        const auto& best = result->layouts.front();
        step.summary = fmt::format("Kimi-K2 on 32 x 8 H200: {} of {} layouts fit; the fastest, "
                                   "{}, steps in {:.2f} s at {:.0f} tokens/s",
            result->feasible, result->evaluated, plan::formatPlan(best.layout.toPlan()),
            best.stepTime, best.tokensPerSecond);
    }
    step.runId = recordOnce(plan::planRunRecord(summary, *cluster, options, *result), step);
    return step;
}

Result<DemoStep> verifyStep(const fs::path& dir, Progress& progress, std::stop_token stop)
{
    progress.setStage("verifying the demo checkpoint");
    auto verified = verifyCheckpoint(dir.string(), {}, progress, stop);
    if (!verified) {
        return verified.error();
    }
    const auto& v = *verified;
    const bool shaped = v.architecture && v.architecture->ok();
    const bool hashed = v.integrity.has_value();
    DemoStep step { "verify", "", v.exitCode() == 0 && shaped && hashed, std::nullopt };
    step.summary = fmt::format("{} files, {} tensors against config.json: {}; SHA-256 against "
                               "its manifest: {}",
        v.checkpoint->files().size(), v.architecture ? v.architecture->rows.size() : 0,
        !v.architecture ? "NO CONFIG" : (shaped ? "all present and shaped" : "MISMATCH"),
        !hashed ? "NO MANIFEST" : (v.integrity->ok() ? "all match" : "MISMATCH"));
    step.runId = recordOnce(v.record, step);
    return step;
}

// The precision panel's demo run (bf16 against fp32, inject mode, its prompt), with the CPU
// tracer on so that the same run gives the timeline.
Result<std::pair<DemoStep, DemoStep>> precisionSteps(
    const fs::path& dir, Progress& progress, std::stop_token stop)
{
    const auto started = std::chrono::steady_clock::now();
    progress.setStage("running the demo checkpoint: emulated bf16 against the fp32 reference");
    profile::CpuTracer tracer;
    tracer.start();
    tracer.setThreadName("demo run");
    const profile::TraceActivation active(tracer);
    auto run = runDemoCheckpoint(dir, true, progress, stop);
    if (!run) {
        return run.error();
    }
    tracer.stop();
    const double seconds = secondsSince(started);
    DemoStep precision { "precision", "", true, std::nullopt };
    const auto& c = *run->result.comparison;
    precision.ok = c.failCount == 0;
    precision.summary = fmt::format("bf16 against fp32 over {} captures: {} pass, {} warn, {} fail",
        c.rows.size(), c.passCount, c.warnCount, c.failCount);
    for (const auto& row : c.rows) {
        if (row.logits) {
            precision.summary += fmt::format("; logits KL {:.3g} nat, top-1 agreement {:.0f}%",
                row.logits->klMean, 100.0 * row.logits->top1Agreement);
            break;
        }
    }
    if (c.firstDivergence) {
        precision.summary
            += fmt::format("; first divergence at {}", c.rows[*c.firstDivergence].name);
    }
    precision.runId = recordOnce(
        precisionRunRecord(run->spec, dir.string(), run->options, run->result, seconds), precision);

    auto trace = tracer.toTrace(0);
    if (!trace) {
        return trace.error();
    }
    DemoStep timeline { "timeline", "", true, std::nullopt };
    const auto [t0, t1] = trace->timeRange();
    const auto counts = trace->counts();
    timeline.summary = fmt::format("the CPU timeline of that run: {} slices on {} track{} over "
                                   "{:.1f} ms",
        counts.slices, counts.tracks, counts.tracks == 1 ? "" : "s", double(t1 - t0) / 1e6);
    timeline.runId = recordOnce(
        traceRunRecord(*trace, { "demo run of " + dir.filename().string() }, "record", seconds),
        timeline);
    return std::pair { std::move(precision), std::move(timeline) };
}

DemoStep historyStep()
{
    DemoStep step { "history", "", true, std::nullopt };
    const auto options = history::recordingOptions();
    const fs::path store = history::storePath();
    if (!options.enabled) {
        step.summary = "not recorded (--no-record)";
        return step;
    }
    auto opened = history::RunStore::open(store);
    auto count = opened ? opened->count() : Result<std::int64_t>(opened.error());
    step.summary = count
        ? fmt::format("{} runs in {} (day0 runs list; the Runs panel)", *count, store.string())
        : fmt::format("the store {} cannot be read: {}", store.string(), count.error().message);
    step.ok = count.ok();
    return step;
}

} // namespace

bool DemoReport::ok() const
{
    return std::all_of(steps.begin(), steps.end(), [](const DemoStep& s) { return s.ok; });
}

Result<DemoReport> runDemo(
    Progress& progress, std::stop_token stop, const std::function<void(const DemoStep&)>& onStep)
{
    DemoReport report;
    const auto add = [&](DemoStep step) {
        if (onStep) {
            onStep(step);
        }
        report.steps.push_back(std::move(step));
    };
    auto planned = planStep(progress, stop);
    if (!planned) {
        return planned.error();
    }
    add(std::move(*planned));
    std::error_code ec;
    const bool cached = fs::exists(demoCheckpointPath() / "config.json", ec);
    progress.setStage(cached ? "opening the demo checkpoint"
                             : "shrinking Kimi-K2 into the demo checkpoint (first run only)");
    auto dir = exec::cachedShrunkCheckpoint("kimi-k2", exec::demoShrinkOptions(), progress, stop);
    if (!dir) {
        return dir.error();
    }
    add({ "checkpoint",
        fmt::format("{} ({}): a random Kimi-K2-architecture checkpoint, 8 layers", dir->string(),
            cached ? "cached" : "made now"),
        true, std::nullopt });
    auto verified = verifyStep(*dir, progress, stop);
    if (!verified) {
        return verified.error();
    }
    add(std::move(*verified));
    auto ran = precisionSteps(*dir, progress, stop);
    if (!ran) {
        return ran.error();
    }
    add(std::move(ran->first));
    add(std::move(ran->second));
    add(historyStep());
    return report;
}

} // namespace day0::actions
