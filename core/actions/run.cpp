#include "actions/run.h"

#include "actions/records.h"
#include "checkpoint/tensor_file.h"
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

/// The target alone of `request`: streamed layer by layer and/or a slice of the layers; its dump
/// and record.
Result<void> targetOnlyRun(const RunRequest& request, exec::PrecisionRunOptions options,
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
    std::optional<numerics::Dump> input;
    if (!request.layers.empty()) {
        if (request.sliceInput.empty()) {
            return Error::badInput("--layers needs --slice-input DIR: the dump of a prior run "
                                   "holding the residual stream entering the first layer");
        }
        auto range = exec::parseLayerRange(request.layers, out.spec.numLayers);
        if (!range) {
            return range.error();
        }
        auto read = checkpoint::readDump(request.sliceInput);
        if (!read) {
            return read.error().withContext("--slice-input");
        }
        input = std::move(*read);
        exec::LayerSlice slice;
        slice.first = range->first;
        slice.last = range->second;
        slice.input = &*input;
        DAY0_TRY(exec::prepareLayerSlice(out.spec, run, slice));
        out.slice = slice;
        options.promptIds = run.promptIds; // the dump's tokens, for the record
        options.newTokens = run.newTokens;
    }
    const exec::LayerSlice* slice = out.slice ? &*out.slice : nullptr;
    const auto started = std::chrono::steady_clock::now();
    if (request.stream) {
        auto streamed = [&] {
            const profile::TraceScope scope("run (streamed)", profile::Category::Annotation);
            return exec::runStreamed(
                request.checkpoint, out.spec, run, request.streamOptions, progress, stop, slice);
        }();
        if (!streamed) {
            return streamed.error();
        }
        out.result.target = std::move(streamed->run);
        out.stream = streamed->stats;
    } else {
        auto weights = exec::openCheckpointWeights(request.checkpoint);
        if (!weights) {
            return weights.error().withContext("weights");
        }
        const profile::TraceScope scope("run (layer slice)", profile::Category::Annotation);
        auto ran = exec::runLayerSlice(out.spec, **weights, run, *slice, progress, stop);
        if (!ran) {
            return ran.error();
        }
        out.result.target = std::move(*ran);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    DAY0_TRY(dumpAndRecord(request, options, out));
    if (slice != nullptr) {
        out.record.setProperty("layers", fmt::format("{}-{}", slice->first, slice->last));
        out.record.setProperty("slice_input", request.sliceInput.string());
        out.record.info.message = fmt::format("layers {}-{} of {} over {} tokens", slice->first,
            slice->last, out.spec.numLayers, run.promptIds.size() + run.forcedTokens.size());
    }
    if (out.stream) {
        // After the dump: the peak the whole run reached.
        out.stream->peakRssBytes = exec::peakResidentBytes();
    }
    return success();
}

} // namespace

std::vector<std::string> notRunParts(const model::ModelSpec& spec)
{
    std::vector<std::string> out;
    if (spec.numMtpLayers > 0) {
        out.push_back(fmt::format("the {} MTP block{} (num_nextn_predict_layers = {}): "
                                  "multi-token prediction for speculative decoding, not part of "
                                  "the main forward; {} weights are not read",
            spec.numMtpLayers, spec.numMtpLayers == 1 ? "" : "s", spec.numMtpLayers,
            spec.numMtpLayers == 1 ? "its" : "their"));
    }
    if (const auto tower = exec::visionTowerNotRun(spec)) {
        out.push_back(fmt::format("the {}: the text model runs without it; its weights are not "
                                  "read",
            *tower));
    }
    return out;
}

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
    out.notRun = notRunParts(out.spec);
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
    const bool alongside = options.reference || options.inject || options.fp32Leg;
    if (!request.layers.empty() && alongside) {
        return Error::badInput("--layers runs the target alone: --reference, --inject and "
                               "--fp32-leg run the whole model (compare the slice's dump with "
                               "day0 compare)");
    }
    if (!request.layers.empty() || (request.stream && !alongside)) {
        DAY0_TRY(targetOnlyRun(request, options, out, progress, stop));
        return out;
    }
    if (request.stream) {
        // The runs on the CPU streamed; a backend's target and the fp32 leg load their engine
        // whole (the result says which streamed).
        options.streamFrom = request.checkpoint;
        options.streamOptions = request.streamOptions;
    }
    if (!request.sliceInput.empty()) {
        return Error::badInput("--slice-input feeds a slice of the layers; add --layers A-B");
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
    if (out.result.stream) {
        out.stream = out.result.stream;
        out.stream->peakRssBytes = exec::peakResidentBytes();
    }
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
