#include "plan/plan_record.h"

#include "base/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace day0::plan {

namespace {

constexpr std::size_t kLayoutEvents = 10; ///< fastest layouts listed in the event log
constexpr std::size_t kRejectionEvents = 12; ///< rejection reasons listed in the event log

void addModelAndCluster(history::RunRecord& record, const ModelSummary& model,
    const hardware::Cluster& cluster, std::string_view source)
{
    record.info.modelName = model.name;
    record.setProperty("source", std::string(source));
    record.setProperty("cluster", cluster.name);
    record.setProperty("device", cluster.device.name);
    record.setProperty("world", std::to_string(cluster.worldSize()));
    record.addMetric("device_bytes", cluster.deviceMemory(), "B");
    if (model.partial) {
        // A partial reading is recorded as such: its figures leave these keys out.
        std::string ignored;
        for (const auto& i : model.ignored) {
            ignored += (ignored.empty() ? "" : "; ") + i;
        }
        record.setProperty("partial", "true");
        record.setProperty("ignored_keys", ignored);
        record.addEvent(
            LogLevel::Warning, "partial reading of the model: the figures leave out " + ignored);
    }
}

void addWorkload(history::RunRecord& record, const Workload& w)
{
    record.setProperty("mode", modeName(w.mode));
    if (w.mode == Mode::Train) {
        record.setProperty("seq_length", std::to_string(w.seqLength));
        record.setProperty("global_batch", std::to_string(w.globalBatch));
    } else {
        record.setProperty("batch", std::to_string(w.batch));
        record.setProperty("context", std::to_string(w.context));
        record.setProperty("prompt", std::to_string(w.prompt()));
        record.setProperty("output", std::to_string(w.outputLength));
    }
    if (!w.includeMtp) {
        record.setProperty("mtp", "excluded");
    }
}

void addLayout(history::RunRecord& record, const Layout& layout)
{
    record.info.plan = formatPlan(layout.toPlan());
    record.info.precision = shortDtypeName(layout.weights);
    record.setProperty("plan_full", formatPlan(layout.toPlan(), true));
    record.setProperty("layout_world", std::to_string(layout.world));
}

void addTrainingMetrics(history::RunRecord& record, const PlannedLayout& best)
{
    const TrainingCost& t = best.training;
    const TrainingBreakdown& b = t.breakdown;
    record.addMetric("mfu", t.mfu);
    record.addMetric("time_compute_s", b.compute, "s");
    record.addMetric("time_tp_s", b.tp, "s");
    record.addMetric("time_ep_s", b.ep, "s");
    record.addMetric("time_cp_s", b.cp, "s");
    record.addMetric("time_pp_s", b.pp, "s");
    record.addMetric("time_bubble_s", b.bubble, "s");
    record.addMetric("time_dp_s", b.dp, "s");
    record.addMetric("time_optimizer_s", b.optimizer, "s");
}

void addInferenceMetrics(history::RunRecord& record, const PlannedLayout& best)
{
    const InferenceCost& c = best.inference;
    const InferenceBreakdown& b = c.breakdown;
    record.addMetric("ttft_s", c.ttft, "s");
    record.addMetric("tpot_s", c.tpot, "s");
    record.addMetric(
        "tokens_per_s_per_gpu", best.tokensPerSecond / std::max(1, best.layout.world), "tok/s");
    record.addMetric("decode_compute_s", b.decodeCompute, "s");
    record.addMetric("decode_memory_s", b.decodeMemory, "s");
    record.addMetric("decode_tp_s", b.tp, "s");
    record.addMetric("decode_ep_s", b.ep, "s");
    record.addMetric("decode_pp_s", b.pp, "s");
    record.addMetric("prefill_s", b.prefill, "s");
    record.addMetric("batch", best.layout.microBatch);
    record.addMetric("admitted_sequences", best.admission.sequences);
}

std::string layoutLine(const PlannedLayout& p)
{
    return fmt::format("{}: {} tokens/s, {} per {}, {} on rank {}", formatPlan(p.layout.toPlan()),
        formatCount(p.tokensPerSecond), formatDuration(Seconds(p.stepTime)),
        p.layout.mode == Mode::Train ? "step" : "output token",
        formatBytes(Bytes(std::int64_t(p.maxMemory))), p.mostLoadedRank);
}

} // namespace

const std::vector<std::string>& memoryComponentNames()
{
    static const std::vector<std::string> names { "weights", "gradients", "optimizer",
        "activations", "kv_cache", "buffers" };
    return names;
}

void addStageMemory(history::RunRecord& record, const MemoryReport& report)
{
    for (const RankMemory& r : report.perRank) {
        const Bytes parts[]
            = { r.weights, r.gradients, r.optimizer, r.activations, r.kvCache, r.buffers };
        for (std::size_t i = 0; i < std::size(parts); ++i) {
            if (parts[i].value != 0) {
                record.addMemory(r.rank, r.ppStage, memoryComponentNames()[i], parts[i]);
            }
        }
    }
}

history::RunRecord planRunRecord(const ModelSummary& model, const hardware::Cluster& cluster,
    const PlannerOptions& options, const PlanResult& result)
{
    history::RunRecord record(history::RunKind::Plan);
    addModelAndCluster(record, model, cluster, "planner");
    addWorkload(record, options.workload);
    if (options.workload.mode == Mode::Infer) {
        record.setProperty("max_batch", std::to_string(options.serving.maxBatch));
        record.setProperty("scheduler", std::string(schedulerName(options.serving.reservation)));
        record.setProperty("kv_cache_fraction", fmt::format("{}", options.serving.kvCacheFraction));
    }
    record.setProperty("top", std::to_string(options.top));
    if (options.headroom > 0) {
        record.setProperty("headroom", fmt::format("{:g}", options.headroom));
    }
    record.info.duration = Seconds(result.seconds);
    record.setProperty("time_error", result.timeError.describe());
    record.addMetric("evaluated", double(result.evaluated));
    record.addMetric("feasible", double(result.feasible));
    record.addMetric("rejected", double(result.evaluated - result.feasible));

    if (result.layouts.empty()) {
        record.info.status = history::RunStatus::Failed;
        record.info.message = fmt::format("none of {} layouts fits", result.evaluated);
        if (!result.rejected.empty()) {
            record.info.message += "; most common reason: " + result.rejected.front().reason;
        }
    } else {
        const PlannedLayout& best = result.layouts.front();
        addLayout(record, best.layout);
        record.info.message
            = fmt::format("best of {} feasible: {}", result.feasible, layoutLine(best));
        record.addMetric("step_time_s", best.stepTime, "s");
        record.addMetric("tokens_per_s", best.tokensPerSecond, "tok/s");
        record.addMetric("peak_bytes", best.maxMemory, "B");
        record.addMetric("most_loaded_rank", best.mostLoadedRank);
        if (best.layout.mode == Mode::Train) {
            addTrainingMetrics(record, best);
        } else {
            addInferenceMetrics(record, best);
        }
        addStageMemory(
            record, estimateMemory(model, best.layout, options.workload, cluster, options.memory));
    }
    const std::size_t layouts = std::min(result.layouts.size(), kLayoutEvents);
    for (std::size_t i = 0; i < layouts; ++i) {
        record.addEvent(
            LogLevel::Info, fmt::format("#{} {}", i + 1, layoutLine(result.layouts[i])));
    }
    const std::size_t rejections = std::min(result.rejected.size(), kRejectionEvents);
    for (std::size_t i = 0; i < rejections; ++i) {
        const RejectedGroup& g = result.rejected[i];
        record.addEvent(LogLevel::Info,
            fmt::format("{} rejected: {}{}", g.count, g.reason,
                g.example.empty() ? std::string() : " (closest: " + g.example + ")"));
    }
    return record;
}

history::RunRecord memoryRunRecord(const ModelSummary& model, const hardware::Cluster& cluster,
    const Workload& workload, const MemoryReport& report)
{
    history::RunRecord record(history::RunKind::Plan);
    addModelAndCluster(record, model, cluster, "memory");
    addWorkload(record, workload);
    addLayout(record, report.layout);
    const Bytes free = report.deviceMemory - report.maxTotal;
    record.info.status = report.fits ? history::RunStatus::Ok : history::RunStatus::Failed;
    const int rank = report.perRank.empty() ? 0 : report.perRank.front().rank;
    record.info.message
        = fmt::format("{}: rank {} needs {} of {} ({} {})", report.fits ? "fits" : "does not fit",
            rank, formatBytes(report.maxTotal), formatBytes(report.deviceMemory),
            formatBytes(Bytes(std::abs(free.value))), report.fits ? "free" : "short");
    record.addMetric("peak_bytes", double(report.maxTotal.value), "B");
    record.addMetric("free_bytes", double(free.value), "B");
    record.addMetric("fits", report.fits ? 1.0 : 0.0);
    record.addMetric("most_loaded_rank", rank);
    addStageMemory(record, report);
    return record;
}

} // namespace day0::plan
