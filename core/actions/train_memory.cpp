// A training run's measured buffers against the planner's memory estimate
// (actions/train_memory.h).
#include "actions/train_memory.h"

#include "hardware/cluster.h"
#include "model/layer_graph.h"
#include "plan/memory_estimator.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>

namespace day0::actions {

namespace {

DType computeOf(train::TrainPrecision p)
{
    return p == train::TrainPrecision::F64 ? DType::F64 : DType::F32;
}

/// The number formats the planner is asked for and the trainer's values take: the run's
/// precision throughout, or bf16-mixed's (Megatron's without the distributed optimizer, 18 B a
/// parameter: bf16 weights, fp32 main gradients, fp32 masters and Adam moments).
struct Formats {
    DType weights;
    DType grads;
    DType optimizer;
    DType activations; ///< what the backward keeps its activations in (its compute type)
};

Formats formatsOf(train::TrainPrecision p)
{
    if (p == train::TrainPrecision::MixedBf16) {
        // The emulated bf16 backward keeps fp32 values rounded to bf16.
        return { DType::BF16, DType::F32, DType::F32, DType::F32 };
    }
    const DType d = computeOf(p);
    return { d, d, d, d };
}

} // namespace

std::int64_t peakRssBytes()
{
    rusage usage {};
    if (::getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return std::int64_t(usage.ru_maxrss) * 1024; // Linux reports kibibytes
}

Result<TrainMemory> compareTrainMemory(const model::ModelSpec& spec, const train::TrainOptions& o,
    const std::vector<train::TrainerBuffers>& ranks, std::int64_t peakRss)
{
    if (ranks.size() != std::size_t(o.dp) * std::size_t(o.tp)) {
        return Error::internal(fmt::format(
            "train memory: {} ranks' buffers for dp={} x tp={}", ranks.size(), o.dp, o.tp));
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i].keptActivations <= 0) {
            return Error::unsupported(fmt::format("train memory: rank {} ran no step, so its "
                                                  "kept activations were not measured",
                i));
        }
    }
    const Formats f = formatsOf(o.precision);
    const bool mixed = o.precision == train::TrainPrecision::MixedBf16;
    plan::ParallelPlan p;
    p.tp = o.tp;
    p.etp = o.tp; // the trainer splits every expert as the MLPs are
    // Every TP rank holds the whole sequence's residual stream (no sequence parallelism); the
    // planner lays out MoE under tp > 1 only with it (Megatron), so there its activations hold
    // 1/tp of the stream and the line says so.
    const bool plannerSp = spec.moe.has_value() && o.tp > 1;
    p.sp = plannerSp;
    p.dp = o.dp;
    p.zero = o.zero;
    p.microBatch = 1; // each rank runs its sequences one after another
    p.globalBatch = o.globalBatch;
    p.weights = f.weights;
    p.grads = f.grads;
    p.optimizer = f.optimizer;
    plan::Workload w;
    w.mode = plan::Mode::Train;
    w.seqLength = o.sequenceLength;
    w.globalBatch = o.globalBatch;
    w.includeMtp = false; // the backward trains no MTP layer
    // The device only sets the capacity and the runtime allowances, neither compared here.
    auto cluster = hardware::parseCluster(fmt::format("h100:1x{}", o.dp * o.tp));
    if (!cluster) {
        return cluster.error();
    }
    const auto summary = plan::summarizeModel(model::buildLayerGraph(spec));
    auto report = plan::estimateMemory(summary, p, w, *cluster);
    if (!report) {
        return report.error().withContext("train memory: the planner's estimate");
    }
    // One pipeline stage: the planner's figures stand for every one of its tp x dp ranks.
    if (report->perRank.size() != 1) {
        return Error::internal(fmt::format(
            "train memory: the planner gave {} stages for pp=1", report->perRank.size()));
    }
    const auto& r = report->perRank.front();
    const auto size = dtypeSize(f.activations);
    const std::string name(dtypeName(f.activations));
    TrainMemory m;
    m.plannerConfig = fmt::format("{}, {} x {} tokens, micro-batch 1, weights {}, gradients {}, "
                                  "optimizer {}",
        plan::formatPlan(p, false), o.globalBatch, o.sequenceLength,
        plan::shortDtypeName(f.weights), plan::shortDtypeName(f.grads),
        plan::shortDtypeName(f.optimizer));
    m.peakRss = peakRss;
    const auto sameOrStored = [&](const char* what, DType type) {
        return dtypeSize(type) == 8
            ? std::string()
            : fmt::format(" The trainer stores {} as doubles (8 B, values rounded to {}); the "
                          "planner counts {} B.",
                what, dtypeName(type), dtypeSize(type));
    };
    const std::string share = o.tp == 1
        ? std::string()
        : fmt::format(" The rank's tp={} share: attention heads (their projections), MLP, "
                      "shared- and routed-expert widths split, the embedding and the head by "
                      "vocabulary (as the planner splits them); norms and the router whole on "
                      "every rank.",
            o.tp);
    // plan/memory_kernel: fp32 masters unless the weights are F32.
    const bool planMaster = f.weights != DType::F32;
    const std::string weightsName(dtypeName(f.weights));
    const std::string optimizerName(dtypeName(f.optimizer));
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
        const auto& b = ranks[rank];
        const int id = int(rank);
        m.lines.push_back({ id, "weights", b.weights, std::int64_t(r.weights.value),
            std::string(mixed ? "The bf16 copy of the fp32 masters" : "The model copy")
                + " the rank computes on, the whole buffer under any ZeRO-1." + share
                + sameOrStored("it", f.weights)
                + " The backward reads a further copy in the compute type, built for each step "
                  "and not counted here." });
        m.lines.push_back(
            { id, "gradients", b.gradients + b.residual, std::int64_t(r.gradients.value),
                std::string(mixed ? "One flat fp32 main-gradient buffer"
                                  : "One flat gradient "
                                    "buffer")
                    + ", all-reduced in place." + share + sameOrStored("it", f.grads)
                    + (b.residual > 0 ? " It includes compression's error-feedback residual, which "
                                        "the planner does not model."
                                      : "")
                    + " The backward's own per-sequence gradients and their accumulator are "
                      "transient and not counted here." });
        m.lines.push_back({ id, "optimizer", b.master + b.moments, std::int64_t(r.optimizer.value),
            fmt::format("AdamW's two moments and the master weights ({}).{} The trainer always "
                        "keeps master weights apart from the model copy; the planner counts {}.",
                o.zero == 1 ? "the rank's ZeRO-1 shard" : "the whole buffer",
                sameOrStored("them", f.optimizer),
                planMaster ? fmt::format("fp32 master weights (4 B) beside {} moments ({} "
                                         "weights)",
                    optimizerName, weightsName)
                           : std::string("none when the weights are already fp32")) });
        m.lines.push_back({ id, "activations", b.keptActivations, std::int64_t(r.activations.value),
            fmt::format("What the backward kept for one sequence in the run's own steps (a "
                        "rank runs its sequences one after another), in {} ({} B an "
                        "element{}): every layer's saved inputs, norms, projections and MLP "
                        "intermediates{}, the attention probabilities [heads, n, n] (no flash "
                        "attention), the final norm and the logits. The planner's is one "
                        "micro-batch of one sequence as a GPU framework keeps it: BF16 "
                        "activations (2 B; FP32 logits) whatever the weights' dtype, flash "
                        "attention's softmax statistics instead of the probabilities, and its "
                        "own choice of saved tensors (Korthikanti et al.'s 34·s·b·h per layer).",
                name, size, mixed ? ", values rounded to bf16" : "",
                o.tp == 1       ? std::string()
                    : plannerSp ? std::string(" (the rank's heads and widths; the residual "
                                              "stream whole: no sequence parallelism, where "
                                              "the planner needs it for MoE under tp > 1 and "
                                              "keeps 1/tp of the stream)")
                                : std::string(" (the rank's heads and widths; the residual "
                                              "stream whole: no sequence parallelism, as the "
                                              "planner is asked)")) });
    }
    return m;
}

void recordTrainMemory(const TrainMemory& memory, history::RunRecord& record)
{
    for (const auto& line : memory.lines) {
        const std::string prefix
            = line.rank == 0 ? std::string() : fmt::format("rank{}_", line.rank);
        record.addMetric(
            fmt::format("{}trainer_{}_bytes", prefix, line.category), double(line.trainer), "B");
        record.addMetric(
            fmt::format("{}planner_{}_bytes", prefix, line.category), double(line.planner), "B");
        if (line.rank == 0) {
            record.setProperty(fmt::format("memory_{}", line.category), line.why);
        }
        // Per rank in the run's memory table too, so that two runs compare rank by rank.
        record.memory.push_back({ line.rank, -1, "trainer_" + line.category, Bytes(line.trainer) });
        record.memory.push_back({ line.rank, -1, "planner_" + line.category, Bytes(line.planner) });
    }
    record.addMetric("peak_rss_bytes", double(memory.peakRss), "B");
    record.setProperty("memory_planner", memory.plannerConfig);
}

} // namespace day0::actions
