#include "plan/plan_json.h"

#include <cmath>

namespace day0::plan {

namespace {

std::int64_t integer(double v) { return std::int64_t(std::llround(v)); }

/// The parallel sizes and schedule every layout object carries: memory reports and planned
/// layouts alike (a JSON object's keys are sorted, so merging keeps the output as it was).
nlohmann::json layoutSizesJson(const Layout& l)
{
    return { { "tp", l.tp }, { "pp", l.pp }, { "ep", l.ep }, { "etp", l.etp }, { "dp", l.dp },
        { "cp", l.cp }, { "zero", l.zero }, { "recompute", recomputeName(l.recompute) },
        { "micro_batch", l.microBatch } };
}

} // namespace

nlohmann::json memoryReportJson(const MemoryReport& report, const MegatronMemory* megatron)
{
    const Layout& l = report.layout;
    nlohmann::json perRank = nlohmann::json::array();
    for (const auto& r : report.perRank) {
        nlohmann::json byKind = nlohmann::json::object();
        for (const auto& k : r.kvByKind) {
            byKind[model::mixerKindName(k.kind)]
                = { { "layers", k.layers }, { "bytes", k.bytes.value } };
        }
        perRank.push_back({
            { "rank", r.rank },
            { "pp_stage", r.ppStage },
            { "ranks", r.ranks },
            { "layers", r.layers },
            { "embedding", r.embedding },
            { "head", r.head },
            { "mtp_layers", r.mtpLayers },
            { "in_flight_micro_batches", r.inFlightMicroBatches },
            { "weights", r.weights.value },
            { "gradients", r.gradients.value },
            { "optimizer", r.optimizer.value },
            { "activations", r.activations.value },
            { "kv_cache", r.kvCache.value },
            { "kv_cache_by_layer_kind", byKind },
            { "buffers", r.buffers.value },
            { "total", r.total.value },
            { "buffers_detail",
                { { "runtime_reserve", r.runtimeReserve.value }, { "comm", r.commBuffers.value },
                    { "moe_dispatch", r.moeDispatch.value }, { "zero", r.zeroBuffers.value },
                    { "fragmentation", r.fragmentation.value } } },
        });
    }
    nlohmann::json j = layoutSizesJson(l);
    j.update({
        { "plan", formatPlan(l.toPlan(), true) },
        { "mode", modeName(l.mode) },
        { "world", l.world },
        { "edp", l.expertDp() },
        { "num_micro_batches", l.numMicroBatches },
        { "per_rank", perRank },
        { "max_total", report.maxTotal.value },
        { "device_memory", report.deviceMemory.value },
        { "fits", report.fits },
        { "notes", report.notes },
        { "partial", report.partial },
        { "ignored_keys", report.ignored },
    });
    if (megatron) {
        j["megatron"] = { { "weight_and_optimizer", integer(megatron->weightAndOptimizer) },
            { "activations", integer(megatron->activations) },
            { "total", integer(megatron->total) } };
    }
    return j;
}

nlohmann::json plannedLayoutJson(const PlannedLayout& p)
{
    const Layout& l = p.layout;
    std::vector<int> stages;
    for (int s = 0; s < l.pp; ++s) {
        stages.push_back(l.stageLayers(s));
    }
    nlohmann::json j = layoutSizesJson(l);
    j.update({
        { "plan", formatPlan(l.toPlan()) },
        { "vpp", l.vpp },
        { "sp", l.sp },
        { "stage_layers", stages },
        { "max_memory", integer(p.maxMemory) },
        { "most_loaded_rank", p.mostLoadedRank },
        { "step_time_s", p.stepTime },
        { "tokens_per_s", p.tokensPerSecond },
    });
    if (l.mode == Mode::Train) {
        const auto& b = p.training.breakdown;
        j["num_micro_batches"] = l.numMicroBatches;
        j["mfu"] = p.training.mfu;
        j["breakdown"] = { { "compute_s", b.compute }, { "tp_s", b.tp }, { "ep_s", b.ep },
            { "cp_s", b.cp }, { "pp_s", b.pp }, { "dp_s", b.dp }, { "bubble_s", b.bubble },
            { "optimizer_s", b.optimizer }, { "memory", integer(p.maxMemory) } };
    } else {
        const auto& b = p.inference.breakdown;
        j["batch"] = l.microBatch;
        // What the runtime admits; the batch is smaller when the latency bound caps it.
        j["admitted"] = p.admission.sequences;
        j["admitted_bound"] = p.admission.capped ? "max_batch" : "kv_pool";
        j["kv_pool_per_rank"] = integer(p.admission.pool);
        j["kv_per_sequence_per_rank"] = integer(p.admission.perSequence);
        j["ttft_s"] = p.inference.ttft;
        j["tpot_s"] = p.inference.tpot;
        j["breakdown"] = { { "decode_compute_s", b.decodeCompute },
            { "decode_memory_s", b.decodeMemory }, { "tp_s", b.tp }, { "ep_s", b.ep },
            { "pp_s", b.pp }, { "prefill_s", b.prefill }, { "ttft_s", p.inference.ttft },
            { "tpot_s", p.inference.tpot }, { "memory", integer(p.maxMemory) } };
    }
    return j;
}

nlohmann::json planResultJson(const PlanResult& r)
{
    nlohmann::json layouts = nlohmann::json::array();
    const auto timeError = r.timeError.toJson();
    for (const auto& p : r.layouts) {
        auto j = plannedLayoutJson(p);
        j["time_error"] = p.timeError.toJson(); // narrowed to the layout's parallel dimensions
        layouts.push_back(std::move(j));
    }
    nlohmann::json summary = nlohmann::json::object();
    nlohmann::json rejected = nlohmann::json::array();
    for (const auto& g : r.rejected) {
        summary[g.reason] = g.count;
        rejected.push_back(
            { { "reason", g.reason }, { "count", g.count }, { "example", g.example } });
    }
    return {
        { "evaluated", r.evaluated },
        { "feasible", r.feasible },
        { "seconds", r.seconds },
        { "layouts", layouts },
        { "pareto_front", paretoFront(r.layouts) },
        { "rejected_summary", summary },
        { "rejected", rejected },
        { "notes", r.notes },
        { "time_error", timeError },
        { "partial", r.partial },
        { "ignored_keys", r.ignored },
    };
}

} // namespace day0::plan
