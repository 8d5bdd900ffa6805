#include "panels/timeline/demo_trace.h"

#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "numerics/tolerance.h"
#include "profile/trace_scope.h"

#include <cstdlib>
#include <system_error>

namespace day0::ui {

namespace fs = std::filesystem;

fs::path demoCheckpointPath()
{
    const char* cache = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    const fs::path root = cache != nullptr && *cache != '\0' ? fs::path(cache)
        : home != nullptr                                    ? fs::path(home) / ".cache"
                                                             : fs::temp_directory_path();
    return root / "day0" / "demo" / "kimi-k2-small";
}

Result<profile::Trace> demoRunTrace(Progress& progress, std::stop_token stop)
{
    profile::CpuTracer tracer;
    tracer.start();
    tracer.setThreadName("demo run");
    const profile::TraceActivation active(tracer);
    const fs::path dir = demoCheckpointPath();
    std::error_code ec;
    if (!fs::exists(dir / "config.json", ec)) {
        progress.setStage("shrinking Kimi-K2 into the demo checkpoint (first start only)");
        const profile::TraceScope scope("shrink kimi-k2", profile::Category::Annotation);
        checkpoint::ShrinkOptions options;
        options.replace = true;
        auto shrunk = checkpoint::shrinkModel("kimi-k2", dir, options, progress, stop);
        if (!shrunk) {
            return shrunk.error().withContext("demo checkpoint " + dir.string());
        }
    }
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
