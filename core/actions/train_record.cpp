// The run record of a training job (actions/train_record.h).
#include "actions/train_record.h"

#include <fmt/format.h>

namespace day0::actions {

history::RunRecord trainRunRecord(const std::string& modelName, const train::TrainOptions& o,
    const train::TrainResult& result, double seconds)
{
    history::RunRecord r(history::RunKind::Run);
    r.setProperty("tool", "train");
    r.info.modelName = modelName;
    r.info.precision = train::precisionName(o.precision);
    r.info.plan = o.tp > 1 ? fmt::format("dp={},tp={},zero={}", o.dp, o.tp, o.zero)
                           : fmt::format("dp={},zero={}", o.dp, o.zero);
    r.info.backend = "cpu-reference";
    r.info.duration = Seconds { seconds };
    const auto& s = o.schedule;
    r.setProperty("schedule",
        s.kind == train::ScheduleKind::Constant
            ? fmt::format("constant:{:g},warmup={}", s.peak, s.warmupSteps)
            : fmt::format("cosine:{:g},warmup={},floor={:g}", s.peak, s.warmupSteps, s.floor));
    r.setProperty("adamw",
        fmt::format("betas=({:g}, {:g}), eps={:g}, weight_decay={:g}", o.adamw.beta1, o.adamw.beta2,
            o.adamw.eps, o.adamw.weightDecay));
    r.setProperty("max_grad_norm", fmt::format("{:g}", o.maxGradNorm));
    r.setProperty("compression", o.compression.describe());
    r.setProperty("batch", fmt::format("{} x {} tokens", o.globalBatch, o.sequenceLength));
    r.setProperty("seed", std::to_string(o.seed));
    if (!o.checkpointDir.empty()) {
        r.setProperty("checkpoints",
            fmt::format("{} every {} steps, newest {} kept", o.checkpointDir.string(),
                o.checkpointEvery, o.keepLast));
    }
    if (o.drill) {
        static constexpr const char* kDrills[] = { "kill-at", "fail-at", "hang-at" };
        r.setProperty("drill",
            fmt::format(
                "{}={},rank={}", kDrills[int(o.drill->kind)], o.drill->step, o.drill->rank));
    }
    r.addMetric("steps", double(result.history.size()));
    r.addMetric("restarts", result.restarts);
    r.addMetric("resumed_from_step", double(result.resumedFromStep));
    if (!result.history.empty()) {
        r.addMetric("initial_loss", result.history.front().loss, "nat");
        r.addMetric("final_loss", result.history.back().loss, "nat");
        r.addMetric("final_grad_norm", result.history.back().gradNorm);
    }
    if (o.compression.kind != train::CompressionKind::None) {
        r.addMetric("sent_bytes_per_step", double(result.compression.sentBytes), "B");
    }
    for (const auto& step : result.history) {
        const auto anchor = fmt::format("step.{}", step.step);
        r.layers.add(anchor, int(step.step), "", "loss", step.loss);
        r.layers.add(anchor, int(step.step), "", "grad_norm", step.gradNorm);
        r.layers.add(anchor, int(step.step), "", "lr", step.lr);
    }
    for (const auto& e : result.events) {
        r.addEvent(LogLevel::Warning, e);
    }
    r.info.message = result.history.empty()
        ? std::string("no step ran")
        : fmt::format("{} steps, loss {:.4f} -> {:.4f}{}", result.history.size(),
            result.history.front().loss, result.history.back().loss,
            result.restarts > 0 ? fmt::format(", {} restart(s)", result.restarts) : "");
    return r;
}

} // namespace day0::actions
