#include "actions/gradients.h"

#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "profile/trace_scope.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace day0::actions {

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
    const auto started = std::chrono::steady_clock::now();
    {
        const profile::TraceScope traced("gradients", profile::Category::Annotation);
        auto result = exec::lossAndGradients(
            *engine, request.ids, out.targets, request.activations, stop, &progress);
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
    if (!request.dump.empty()) {
        DAY0_TRY(checkpoint::writeDump(
            exec::gradientDump(out.spec, out.result, request.ids, out.targets, request.fp64),
            request.dump));
    }
    auto& r = out.record;
    r.info.modelName = out.spec.name;
    r.info.modelFingerprint = exec::modelFingerprint(out.spec);
    r.info.precision = request.fp64 ? "fp64" : "fp32";
    r.info.backend = "day0-cpu";
    r.info.duration = Seconds(out.seconds);
    r.setProperty("checkpoint", request.checkpoint);
    r.setProperty("gradients", "true");
    r.setProperty("prompt_ids", fmt::format("{}", fmt::join(request.ids, ",")));
    r.addMetric("loss", out.result.loss, "nat");
    r.addMetric("counted_positions", double(out.result.counted));
    r.addMetric("parameters", double(out.result.parameters.size()));
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
