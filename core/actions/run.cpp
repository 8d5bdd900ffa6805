#include "actions/run.h"

#include "actions/records.h"
#include "exec/checkpoint_weights.h"
#include "exec/shrunk_cache.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

/// A finished run's dump (when asked) and its record, with the dump as an artifact: the same for
/// a normal and a streamed run.
Result<void> dumpAndRecord(
    const RunRequest& request, const exec::PrecisionRunOptions& options, RunOutcome& out)
{
    if (!request.dump.empty()) {
        DAY0_TRY(exec::writeRunDumps(out.result, request.dump));
    }
    out.record = precisionRunRecord(out.spec, request.checkpoint, options, out.result, out.seconds);
    if (!request.dump.empty()) {
        if (auto artifact = history::makeArtifact("dump", request.dump)) {
            out.record.addArtifact(std::move(*artifact));
        }
    }
    return success();
}

/// The target run of `request` over weights streamed layer by layer, its dump and record.
Result<void> streamRun(const RunRequest& request, const exec::PrecisionRunOptions& options,
    RunOutcome& out, Progress& progress, std::stop_token stop)
{
    exec::RunOptions run;
    run.precision = options.target;
    run.promptIds = options.promptIds;
    run.newTokens = options.newTokens;
    run.capture = options.capture;
    run.image = options.image;
    run.linearAttentionChunk = options.linearAttentionChunk;
    run.backend = options.backend;
    const auto started = std::chrono::steady_clock::now();
    auto streamed = [&] {
        const profile::TraceScope scope("run (streamed)", profile::Category::Annotation);
        return exec::runStreamed(
            request.checkpoint, out.spec, run, request.streamOptions, progress, stop);
    }();
    if (!streamed) {
        return streamed.error();
    }
    out.result.target = std::move(streamed->run);
    out.stream = streamed->stats;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    DAY0_TRY(dumpAndRecord(request, options, out));
    // After the dump: the peak the whole run reached.
    out.stream->peakRssBytes = exec::peakResidentBytes();
    return success();
}

} // namespace

Result<RunOutcome> runCheckpoint(
    const RunRequest& request, Progress& progress, std::stop_token stop)
{
    RunOutcome out;
    progress.setStage("loading");
    auto spec = exec::loadCheckpointModel(request.checkpoint);
    if (!spec) {
        return spec.error();
    }
    out.spec = std::move(*spec);
    exec::PrecisionRunOptions options = request.options;
    if (options.reference) {
        auto table = numerics::resolveToleranceTable(request.tolerances);
        if (!table) {
            return table.error();
        }
        out.table = std::make_shared<const numerics::ToleranceTable>(std::move(*table));
        options.table = out.table.get();
    }
    std::error_code ec;
    if (!fs::exists(request.checkpoint, ec)) {
        return Error::badInput(fmt::format("'{}' is a bundled configuration without weights; run a "
                                           "checkpoint folder with *.safetensors "
                                           "(day0 shrink makes a small one of the same "
                                           "architecture)",
            request.checkpoint));
    }
    if (request.stream) {
        if (options.reference || options.inject || options.fp32Leg) {
            return Error::badInput("--stream runs the target alone: --reference, --inject and "
                                   "--fp32-leg need a second engine over the whole model");
        }
        DAY0_TRY(streamRun(request, options, out, progress, stop));
        return out;
    }
    auto weights = [&] {
        const profile::TraceScope scope("open checkpoint", profile::Category::Annotation);
        return exec::openCheckpointWeights(request.checkpoint);
    }();
    if (!weights) {
        return weights.error().withContext("weights");
    }
    const auto started = std::chrono::steady_clock::now();
    auto result = [&] {
        const profile::TraceScope scope(
            options.reference ? "run (reference + target)" : "run", profile::Category::Annotation);
        return exec::runWithReference(out.spec, **weights, options, progress, stop);
    }();
    if (!result) {
        return result.error();
    }
    out.result = std::move(*result);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    DAY0_TRY(dumpAndRecord(request, options, out));
    return out;
}

Result<fs::path> checkpointForSource(
    const std::string& modelSource, Progress& progress, std::stop_token stop)
{
    if (exec::holdsWeights(modelSource)) {
        return fs::path(modelSource);
    }
    progress.setStage("preparing the demo checkpoint");
    return exec::cachedShrunkCheckpoint(modelSource, exec::demoShrinkOptions(), progress, stop);
}

} // namespace day0::actions
