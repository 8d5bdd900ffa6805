// The run record of a training job (actions/train_record.h).
#include "actions/train_record.h"

#include "history/run_store.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

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

bool isTrainingRun(const history::RunRecord& record)
{
    const auto* tool = record.findProperty("tool");
    return tool != nullptr && tool->value == "train";
}

Result<TrainingCurve> trainingCurve(const history::RunRecord& record)
{
    struct Point {
        double loss = 0.0;
        double gradNorm = 0.0;
        double lr = 0.0;
        int seen = 0; ///< bits: 1 loss, 2 grad_norm, 4 lr
    };
    static constexpr std::string_view kPrefix = "step.";
    const auto runName = [&] {
        return record.info.id.value() > 0 ? fmt::format("run {}", record.info.id.value())
                                          : std::string("the training run");
    };
    std::map<std::int64_t, Point> points;
    const auto& rows = record.layers;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string& anchor = rows.anchor(i);
        if (!anchor.starts_with(kPrefix)) {
            continue;
        }
        std::int64_t step = -1;
        const char* first = anchor.data() + kPrefix.size();
        const char* last = anchor.data() + anchor.size();
        if (const auto [end, ec] = std::from_chars(first, last, step);
            ec != std::errc {} || end != last || step < 0) {
            return Error::badInput(
                fmt::format("{}: per-step row '{}' names no step", runName(), anchor));
        }
        const std::string& metric = rows.metric(i);
        const double value = rows.row(i).value;
        auto& p = points[step];
        const int bit = metric == "loss" ? 1 : metric == "grad_norm" ? 2 : metric == "lr" ? 4 : 0;
        if (bit == 0) {
            continue; // baseline_loss and any later per-step metric
        }
        if ((p.seen & bit) != 0) {
            return Error::badInput(
                fmt::format("{}: step {} has two '{}' rows", runName(), step, metric));
        }
        p.seen |= bit;
        (bit == 1 ? p.loss : bit == 2 ? p.gradNorm : p.lr) = value;
    }
    TrainingCurve curve;
    for (const auto& [step, p] : points) {
        if (p.seen != 7) {
            return Error::badInput(fmt::format("{}: step {} lacks its {}", runName(), step,
                (p.seen & 1) == 0       ? "loss"
                    : (p.seen & 2) == 0 ? "grad_norm"
                                        : "lr"));
        }
        curve.steps.push_back(step);
        curve.loss.push_back(p.loss);
        curve.gradNorm.push_back(p.gradNorm);
        curve.lr.push_back(p.lr);
    }
    return curve;
}

std::vector<RankMemory> rankMemory(const history::RunRecord& record)
{
    std::map<int, RankMemory> ranks;
    for (const auto& entry : record.memory) {
        const bool trainer = entry.component.starts_with("trainer_");
        if (!trainer && !entry.component.starts_with("planner_")) {
            continue;
        }
        auto& r = ranks[entry.rank];
        r.rank = entry.rank;
        (trainer ? r.trainer : r.planner) += entry.bytes.value;
    }
    std::vector<RankMemory> out;
    for (const auto& [rank, r] : ranks) {
        out.push_back(r);
    }
    return out;
}

Result<std::vector<StoredTrainingRun>> readTrainingRuns(
    const std::filesystem::path& file, std::int64_t scanLimit, std::stop_token stop)
{
    std::vector<StoredTrainingRun> out;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        return out;
    }
    history::RunStore::Options options;
    options.createIfMissing = false;
    auto store = history::RunStore::open(file, options);
    if (!store) {
        return store.error();
    }
    history::RunFilter filter;
    filter.kind = history::RunKind::Run;
    filter.tool = "train";
    filter.limit = scanLimit;
    auto runs = store->list(filter);
    if (!runs) {
        return runs.error();
    }
    for (const auto& info : *runs) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        auto record = store->load(info.id, true);
        if (!record) {
            return record.error();
        }
        auto curve = trainingCurve(*record);
        if (!curve) {
            return curve.error().withContext(file.string());
        }
        const auto* checkpoint = record->findProperty("checkpoint");
        out.push_back({ record->info, checkpoint ? checkpoint->value : std::string(),
            std::move(*curve), gradDumpsOf(*record), rankMemory(*record) });
    }
    return out;
}

} // namespace day0::actions
