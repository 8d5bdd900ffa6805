#include "actions/gradients.h"

#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>

namespace day0::actions {

namespace {

/// The reference gradient dump of an inject-mode pass, refused unless it is a gradient dump of
/// the same model, ids and targets (else its gradients would be injected into another problem).
Result<numerics::Dump> readInjectReference(const std::filesystem::path& path,
    const model::ModelSpec& spec, const std::vector<std::int64_t>& ids,
    const std::vector<std::int64_t>& targets)
{
    auto dump = checkpoint::readDump(path);
    if (!dump) {
        return dump.error().withContext("inject-mode reference");
    }
    const auto& info = dump->info;
    const auto refused = [&](const std::string& why) {
        return Error::badInput(
            fmt::format("{}: cannot inject its gradients: {}", path.string(), why));
    };
    if (!info.extra.value("gradients", false)) {
        return refused("not a gradient dump (day0 run --grad --dump writes one)");
    }
    if (info.mode == "inject") {
        return refused("it is an inject-mode dump itself; give the reference's propagated dump");
    }
    if (info.fingerprint != exec::modelFingerprint(spec)) {
        return refused(fmt::format("it is of model '{}', not '{}'", info.model, spec.name));
    }
    if (info.inputIds != ids) {
        return refused("it was made from other token ids");
    }
    if (info.extra.contains("targets")
        && info.extra["targets"].get<std::vector<std::int64_t>>() != targets) {
        return refused("it was made against other targets");
    }
    return std::move(*dump);
}

} // namespace

Result<GradientOutcome> checkpointGradients(
    const GradientRequest& request, Progress& progress, std::stop_token stop)
{
    GradientOutcome out;
    {
        const profile::TraceScope traced("open checkpoint", profile::Category::Annotation);
        auto spec = exec::loadCheckpointModel(request.checkpoint);
        if (!spec) {
            return spec.error();
        }
        out.spec = std::move(*spec);
    }
    if (const auto missing = exec::backwardUnsupported(out.spec); !missing.empty()) {
        return Error::unsupported(fmt::format("{}: the backward pass does not cover {}",
            request.checkpoint, fmt::join(missing, "; ")));
    }
    auto weights = exec::openCheckpointWeights(request.checkpoint);
    if (!weights) {
        return weights.error();
    }
    auto engine = exec::Engine::create(out.spec, **weights, request.fp64, progress, stop);
    if (!engine) {
        return engine.error();
    }
    out.targets = request.targets.empty() ? exec::nextTokenTargets(request.ids) : request.targets;
    std::optional<numerics::Dump> inject;
    if (!request.inject.empty()) {
        auto read = readInjectReference(request.inject, out.spec, request.ids, out.targets);
        if (!read) {
            return read.error();
        }
        inject = std::move(*read);
    }
    exec::GradientOptions options;
    options.fp64 = request.fp64;
    options.activations = request.activations || inject.has_value();
    options.progress = &progress;
    options.inject = inject ? &*inject : nullptr;
    options.roundedLayers = request.roundedLayers;
    options.roundedTo = request.roundedTo;
    options.emulated = request.emulated;
    options.engineNorms = true; // the engine's weight table: zero-centred norms kept as 1 + w
    const std::string precision = request.emulated != exec::PrecisionMode::F32
        ? std::string(exec::precisionName(request.emulated))
        : (request.fp64 ? "fp64" : "fp32");
    const auto started = std::chrono::steady_clock::now();
    {
        const profile::TraceScope traced("gradients", profile::Category::Annotation);
        auto result = exec::lossAndGradients(
            out.spec, engine->weightTable().tensors, request.ids, out.targets, options, stop);
        if (!result) {
            return result.error();
        }
        out.result = std::move(*result);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    double sum = 0.0;
    for (const auto& [name, g] : out.result.parameters) {
        for (const double v : g.toDoubles()) {
            sum += v * v;
        }
    }
    out.gradNorm = std::sqrt(sum);
    out.checkpointParameters = exec::checkpointGradients(out.spec, out.result.parameters).size();
    if (!request.dump.empty()) {
        numerics::Dump dump
            = exec::gradientDump(out.spec, out.result, request.ids, out.targets, request.fp64);
        dump.info.precision = precision;
        if (inject) {
            dump.info.mode = "inject";
            dump.info.extra["inject_reference"] = request.inject.string();
        }
        if (!request.roundedLayers.empty()) {
            dump.info.extra["rounded_layers"] = request.roundedLayers;
            dump.info.extra["rounded_to"] = std::string(dtypeName(request.roundedTo));
        }
        DAY0_TRY(checkpoint::writeDump(dump, request.dump));
    }
    auto& r = out.record;
    r.info.modelName = out.spec.name;
    r.info.modelFingerprint = exec::modelFingerprint(out.spec);
    r.info.precision = precision;
    r.info.backend = "day0-cpu";
    r.info.duration = Seconds(out.seconds);
    r.setProperty("checkpoint", request.checkpoint);
    r.setProperty("gradients", "true");
    r.setProperty("prompt_ids", fmt::format("{}", fmt::join(request.ids, ",")));
    r.addMetric("loss", out.result.loss, "nat");
    r.addMetric("counted_positions", double(out.result.counted));
    r.addMetric("parameters", double(out.checkpointParameters));
    r.addMetric("grad_norm", out.gradNorm);
    r.addMetric("gradients_s", out.seconds, "s");
    r.info.message = fmt::format("loss {:.6g} over {} positions, gradient norm {:.6g}",
        out.result.loss, out.result.counted, out.gradNorm);
    if (!request.dump.empty()) {
        if (auto artifact = history::makeArtifact("dump", request.dump)) {
            r.addArtifact(std::move(*artifact));
        }
    }
    return out;
}

} // namespace day0::actions
