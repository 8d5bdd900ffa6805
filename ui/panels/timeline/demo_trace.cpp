#include "panels/timeline/demo_trace.h"

#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "exec/shrunk_cache.h"
#include "numerics/tolerance.h"
#include "profile/trace_scope.h"

#include <system_error>

namespace day0::ui {

namespace fs = std::filesystem;

fs::path demoCheckpointPath()
{
    return exec::shrunkCheckpointPath("kimi-k2", exec::demoShrinkOptions());
}

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
    const fs::path dir = *shrunk;
    progress.setStage("running the demo checkpoint (fp32 reference, emulated bf16)");
    auto spec = [&] {
        const profile::TraceScope scope("read config", profile::Category::Annotation);
        return exec::loadCheckpointModel(dir);
    }();
    if (!spec) {
        return spec.error();
    }
    auto weights = [&] {
        const profile::TraceScope scope("open checkpoint", profile::Category::Annotation);
        return exec::openCheckpointWeights(dir);
    }();
    if (!weights) {
        return weights.error().withContext("weights");
    }
    exec::PrecisionRunOptions options;
    auto plan = exec::parsePrecisionPlan("bf16");
    if (!plan) {
        return plan.error();
    }
    options.target = *plan;
    options.reference = exec::PrecisionMode::F32;
    options.promptIds = { 1, 7, 42, 99, 123, 5, 64, 300 };
    options.newTokens = 8;
    options.capture.statsOnly = true;
    auto table = numerics::resolveToleranceTable("");
    if (!table) {
        return table.error();
    }
    options.table = &*table;
    {
        const profile::TraceScope scope(
            "run fp32 reference + bf16 target", profile::Category::Annotation);
        auto run = exec::runWithReference(*spec, **weights, options, progress, stop);
        if (!run) {
            return run.error();
        }
    }
    tracer.stop();
    return tracer.toTrace(0);
}

} // namespace day0::ui
