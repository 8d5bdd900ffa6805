// A training run's measured buffers against the planner's memory estimate
// (actions/train_memory.h).
#include "actions/train_memory.h"

#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
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

} // namespace

std::int64_t peakRssBytes()
{
    rusage usage {};
    if (::getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return std::int64_t(usage.ru_maxrss) * 1024; // Linux reports kibibytes
}

Result<std::int64_t> measureKeptActivations(
    const std::filesystem::path& checkpoint, int length, bool fp64)
{
    auto opened = exec::openCheckpoint(checkpoint);
    if (!opened) {
        return opened.error();
    }
    Progress progress;
    auto engine = exec::Engine::create(opened->spec, *opened->weights, fp64, progress, {});
    if (!engine) {
        return engine.error().withContext(checkpoint.string());
    }
    // Any ids give the same sizes: every kept tensor is [tokens, ...] (routed experts' rows
    // sum to tokens x top-k whatever the routing).
    std::vector<std::int64_t> ids(std::size_t(std::max(length, 2)));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        ids[i] = std::int64_t((i * 7919 + 13) % std::size_t(opened->spec.vocabSize));
    }
    const auto targets = exec::nextTokenTargets(ids);
    auto pass = exec::lossAndGradients(*engine, ids, targets, false, {});
    if (!pass) {
        return pass.error().withContext(checkpoint.string());
    }
    return pass->keptBytes;
}

Result<TrainMemory> compareTrainMemory(const model::ModelSpec& spec, const train::TrainOptions& o,
    const train::TrainerBuffers& b, std::int64_t kept, std::int64_t peakRss)
{
    if (o.precision == train::TrainPrecision::MixedBf16) {
        return Error::unsupported("train memory: bf16-mixed runs are not compared with the "
                                  "planner (its master-weight and copy layout differs)");
    }
    const DType dtype = computeOf(o.precision);
    plan::ParallelPlan p;
    p.dp = o.dp;
    p.zero = o.zero;
    p.microBatch = 1; // each rank runs its sequences one after another
    p.globalBatch = o.globalBatch;
    p.weights = dtype;
    p.grads = dtype;
    p.optimizer = dtype;
    plan::Workload w;
    w.mode = plan::Mode::Train;
    w.seqLength = o.sequenceLength;
    w.globalBatch = o.globalBatch;
    w.includeMtp = false; // the backward trains no MTP layer
    // The device only sets the capacity and the runtime allowances, neither compared here.
    auto cluster = hardware::parseCluster(fmt::format("h100:1x{}", o.dp));
    if (!cluster) {
        return cluster.error();
    }
    const auto summary = plan::summarizeModel(model::buildLayerGraph(spec));
    auto report = plan::estimateMemory(summary, p, w, *cluster);
    if (!report) {
        return report.error().withContext("train memory: the planner's estimate");
    }
    if (report->perRank.empty()) {
        return Error::internal("train memory: the planner gave no rank");
    }
    const auto& r = report->perRank.front();
    const auto size = dtypeSize(dtype);
    const std::string name(dtypeName(dtype));
    TrainMemory m;
    m.plannerConfig = fmt::format(
        "{}, {} x {} tokens, micro-batch 1", plan::formatPlan(p), o.globalBatch, o.sequenceLength);
    m.peakRss = peakRss;
    const auto sameOrStored = [&](const char* what) {
        return size == 8 ? std::string()
                         : fmt::format(" The trainer stores {} as doubles (8 B, values rounded "
                                       "to {}); the planner counts {} B.",
                             what, name, size);
    };
    m.lines.push_back({ "weights", b.weights, std::int64_t(r.weights.value),
        "The model copy the rank computes on, the whole buffer under any ZeRO-1."
            + sameOrStored("it")
            + " The backward reads a further copy in the compute type, built for each step "
              "and not counted here." });
    m.lines.push_back({ "gradients", b.gradients + b.residual, std::int64_t(r.gradients.value),
        "One flat gradient buffer, all-reduced in place." + sameOrStored("it")
            + (b.residual > 0 ? " It includes compression's error-feedback residual, which the "
                                "planner does not model."
                              : "")
            + " The backward's own per-sequence gradients and their accumulator are transient "
              "and not counted here." });
    const bool planMaster = dtype != DType::F32; // plan/memory_kernel: fp32 masters unless F32
    m.lines.push_back({ "optimizer", b.master + b.moments, std::int64_t(r.optimizer.value),
        fmt::format("AdamW's two moments and the master weights ({}).{} The trainer always keeps "
                    "master weights apart from the model copy; the planner counts {}.",
            o.zero == 1 ? "the rank's ZeRO-1 shard" : "the whole buffer", sameOrStored("them"),
            planMaster ? fmt::format("fp32 master weights (4 B) beside {} moments", name)
                       : std::string("none when the weights are already fp32")) });
    m.lines.push_back({ "activations", kept, std::int64_t(r.activations.value),
        fmt::format("What the backward keeps for one sequence (a rank runs its sequences one "
                    "after another), in {} ({} B an element): every layer's saved inputs, norms, "
                    "projections and MLP intermediates, the attention probabilities [heads, n, n] "
                    "(no flash attention), the final norm and the logits. The planner's is one "
                    "micro-batch of one sequence as a GPU framework keeps it: BF16 activations "
                    "(2 B; FP32 logits) whatever the weights' dtype, flash attention's softmax "
                    "statistics instead of the probabilities, and its own choice of saved "
                    "tensors (Korthikanti et al.'s 34·s·b·h per layer).",
            name, size) });
    return m;
}

void recordTrainMemory(const TrainMemory& memory, history::RunRecord& record)
{
    for (const auto& line : memory.lines) {
        record.addMetric(fmt::format("trainer_{}_bytes", line.category), double(line.trainer), "B");
        record.addMetric(fmt::format("planner_{}_bytes", line.category), double(line.planner), "B");
        record.setProperty(fmt::format("memory_{}", line.category), line.why);
    }
    record.addMetric("peak_rss_bytes", double(memory.peakRss), "B");
    record.setProperty("memory_planner", memory.plannerConfig);
}

} // namespace day0::actions
