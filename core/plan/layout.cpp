#include "plan/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::plan {

namespace {

bool divides(double d, double n) { return d > 0 && n > 0 && std::fmod(n, d) == 0.0; }

} // namespace

ParallelPlan Layout::toPlan() const
{
    const bool train = mode == Mode::Train;
    ParallelPlan p;
    p.tp = tp;
    p.pp = pp;
    p.ep = ep;
    // Keys at the value resolveLayout would derive anyway are left out of the plan string.
    const int defaultEtp = defaultExpertTp(mode, tp, ep);
    p.etp = etp != defaultEtp ? etp : 0;
    p.dp = dp;
    p.cp = cp;
    if (sp != (train && tp > 1)) {
        p.sp = sp;
    }
    p.zero = zero;
    p.recompute = recompute;
    p.vpp = vpp;
    if (train) {
        // In inference the batch comes from the workload, not from the plan.
        p.microBatch = microBatch;
        p.globalBatch = globalBatch;
    }
    std::vector<int> counts;
    for (int s = 0; s < pp; ++s) {
        counts.push_back(stageLayers(s));
    }
    const int layers = stageStart.back();
    if (counts == splitStages(layers, pp, StageSplit::Balanced)) {
        p.split = StageSplit::Balanced;
    } else if (counts == splitStages(layers, pp, StageSplit::LightEnds)) {
        p.split = StageSplit::LightEnds;
    } else {
        p.stageLayers = counts;
    }
    if (!checkpointWeights && (!train || weights != DType::BF16)) {
        p.weights = weights;
    }
    if (kv != DType::BF16) {
        p.kv = kv;
    }
    p.grads = grads;
    p.optimizer = optimizer;
    return p;
}

std::string describeRejection(const Rejection& r)
{
    switch (r.kind) {
    case RejectKind::TpHeads:
        return fmt::format("tp={} does not divide {} attention heads", r.a, r.b);
    case RejectKind::TpKvHeads:
        return fmt::format("tp={} and {} KV heads: neither divides the other", r.a, r.b);
    case RejectKind::TpWidth:
        return fmt::format("tp={} does not divide the MLP width {}", r.a, r.b);
    case RejectKind::TpDomain:
        return r.c ? fmt::format("tp={} > {} GPUs per node", r.a, r.b)
                   : fmt::format("tp={} > {} GPUs per NVLink domain", r.a, r.b);
    case RejectKind::EpDense:
        return fmt::format("ep={} on a model without experts", r.a);
    case RejectKind::EpExperts:
        return fmt::format("ep={} does not divide {} experts", r.a, r.b);
    case RejectKind::EtpWidth:
        return fmt::format("etp={} does not divide the expert MLP width {}", r.a, r.b);
    case RejectKind::ExpertGroup:
        return fmt::format("ep×etp={} does not divide tp×cp×dp={}", r.a, r.b);
    case RejectKind::MoeNeedsSp:
        return fmt::format("MoE with tp={} needs sequence parallelism (sp=on)", r.a);
    case RejectKind::PpLayers:
        return fmt::format("pp={} > {} layers", r.a, r.b);
    case RejectKind::StageLayers:
        return fmt::format(
            "layers per stage sum to {} over {} stages; the model has {} layers", r.a, r.b, r.c);
    case RejectKind::VppPipeline:
        return fmt::format("vpp={} needs pp > 1", r.a);
    case RejectKind::VppLayers:
        return fmt::format("vpp={} > {} layers on the smallest stage", r.a, r.b);
    case RejectKind::VppMicroBatches:
        return fmt::format("interleaving needs micro-batches ({}) divisible by pp={}", r.a, r.b);
    case RejectKind::WorldSize:
        return r.c ? fmt::format("tp×pp×cp={} does not divide {} GPUs", r.a, r.b)
                   : fmt::format("tp×pp×cp×dp={} > {} GPUs", r.a, r.b);
    case RejectKind::GlobalBatch:
        return fmt::format("global batch {} not divisible by dp×micro-batch={}", r.a, r.b);
    case RejectKind::CpSequence:
        return fmt::format(
            "cp={} does not split the sequence of {} into 2×cp equal chunks", r.a, r.b);
    case RejectKind::InferZero:
        return fmt::format("zero={} applies to training only", r.a);
    case RejectKind::StatesOverMemory:
        return "weights, gradients and optimizer states alone exceed device memory";
    case RejectKind::OverMemory:
        return "does not fit in device memory (activations included)";
    case RejectKind::LatencyBound:
        return "no batch size meets the time-per-output-token bound";
    case RejectKind::TpMixerHeads:
        return r.c
            ? fmt::format("tp={} and {} linear-attention key heads (or Mamba groups): "
                          "neither divides the other",
                r.a, r.b)
            : fmt::format("tp={} does not divide {} linear-attention or Mamba heads", r.a, r.b);
    }
    return "rejected";
}

std::vector<int> splitStages(int layers, int pp, StageSplit split)
{
    if (pp <= 0 || layers < pp) {
        return {};
    }
    // LightEnds counts the embedding and the head/loss as one layer each (Megatron's
    // --account-for-embedding/loss-in-pipeline-split) and removes them again afterwards.
    const int extra = split == StageSplit::LightEnds && pp > 1 ? 2 : 0;
    const int slots = layers + extra;
    std::vector<int> counts(std::size_t(pp), slots / pp);
    int rest = slots % pp;
    // Leftover layers go to the middle stages first: the first stage holds the most in-flight
    // activations and the embedding, the last one the output head.
    std::vector<int> order;
    for (int s = 1; s + 1 < pp; ++s) {
        order.push_back(s);
    }
    if (pp > 1) {
        order.push_back(pp - 1);
    }
    order.push_back(0);
    for (std::size_t i = 0; rest > 0; ++i, --rest) {
        ++counts[std::size_t(order[i % order.size()])];
    }
    if (extra) {
        --counts.front();
        --counts.back();
    }
    if (std::any_of(counts.begin(), counts.end(), [](int c) { return c <= 0; })) {
        return {};
    }
    return counts;
}

std::optional<Rejection> checkTensorParallel(
    const ModelSummary& model, int tp, int domainSize, bool domainIsNode)
{
    for (const auto& c : model.classes) {
        if (c.count == 0 && &c - model.classes.data() != model.mtpClass) {
            continue;
        }
        const auto& shape = c.shape;
        if (shape.mixerHeads > 0) {
            // Linear attention and Mamba split their heads; key heads (groups) fewer than tp
            // are replicated.
            if (!divides(tp, shape.mixerHeads)) {
                return Rejection { RejectKind::TpMixerHeads, tp, std::int64_t(shape.mixerHeads) };
            }
            if (!divides(tp, shape.mixerKeyHeads) && !divides(shape.mixerKeyHeads, tp)) {
                return Rejection { RejectKind::TpMixerHeads, tp, std::int64_t(shape.mixerKeyHeads),
                    1 };
            }
        } else if (shape.mixer != model::MixerKind::None
            && shape.mixer != model::MixerKind::Linear) {
            if (!divides(tp, shape.heads)) {
                return Rejection { RejectKind::TpHeads, tp, std::int64_t(shape.heads) };
            }
            if (!divides(tp, shape.kvHeads) && !divides(shape.kvHeads, tp)) {
                return Rejection { RejectKind::TpKvHeads, tp, std::int64_t(shape.kvHeads) };
            }
        }
        if (!c.shape.moe && c.shape.ffn > 0 && !divides(tp, c.shape.ffn)) {
            return Rejection { RejectKind::TpWidth, tp, std::int64_t(c.shape.ffn) };
        }
        if (c.shape.moe && c.shape.sharedFfn > 0 && !divides(tp, c.shape.sharedFfn)) {
            return Rejection { RejectKind::TpWidth, tp, std::int64_t(c.shape.sharedFfn) };
        }
    }
    if (tp > domainSize) {
        return Rejection { RejectKind::TpDomain, tp, domainSize, domainIsNode ? 1 : 0 };
    }
    return std::nullopt;
}

std::optional<Rejection> checkExperts(
    const ModelSummary& model, int tp, int cp, int dp, int ep, int etp)
{
    if (!model.hasMoe()) {
        if (ep > 1) {
            return Rejection { RejectKind::EpDense, ep };
        }
        return std::nullopt;
    }
    const auto& shape = model.representativeShape();
    if (!divides(ep, shape.experts)) {
        return Rejection { RejectKind::EpExperts, ep, std::int64_t(shape.experts) };
    }
    if (!divides(etp, shape.expertFfn)) {
        return Rejection { RejectKind::EtpWidth, etp, std::int64_t(shape.expertFfn) };
    }
    const std::int64_t group = std::int64_t(ep) * etp;
    const std::int64_t hosts = std::int64_t(tp) * cp * dp;
    if (hosts % group != 0) {
        return Rejection { RejectKind::ExpertGroup, group, hosts };
    }
    return std::nullopt;
}

Result<Layout> resolveLayout(const ParallelPlan& plan, const ModelSummary& model,
    const Workload& workload, const hardware::Cluster& cluster)
{
    const std::string planText = formatPlan(plan);
    auto reject = [&](const Rejection& r) {
        return Error::badInput(fmt::format("plan '{}': {}", planText, describeRejection(r)));
    };

    Layout l;
    l.mode = workload.mode;
    l.tp = plan.tp;
    l.pp = plan.pp;
    l.ep = plan.ep;
    l.cp = plan.cp;
    l.vpp = plan.vpp;
    l.zero = plan.zero;
    l.recompute = workload.mode == Mode::Train ? plan.recompute : Recompute::None;
    const bool train = workload.mode == Mode::Train;

    const int world = cluster.worldSize();
    const std::int64_t modelRanks = std::int64_t(l.tp) * l.pp * l.cp;
    if (plan.dp > 0) {
        l.dp = plan.dp;
        if (modelRanks * l.dp > world) {
            return reject({ RejectKind::WorldSize, modelRanks * l.dp, world, 0 });
        }
    } else {
        if (world % modelRanks != 0) {
            return reject({ RejectKind::WorldSize, modelRanks, world, 1 });
        }
        l.dp = int(world / modelRanks);
    }
    l.world = int(modelRanks * l.dp);

    l.etp = plan.etp > 0 ? plan.etp : defaultExpertTp(workload.mode, l.tp, l.ep);
    l.sp = plan.sp.value_or(train && l.tp > 1);
    if (!train && plan.zero > 0) {
        return reject({ RejectKind::InferZero, plan.zero });
    }

    const bool domainIsNode = cluster.domainSize == cluster.gpusPerNode;
    if (auto r = checkTensorParallel(model, l.tp, cluster.domainSize, domainIsNode)) {
        return reject(*r);
    }
    if (auto r = checkExperts(model, l.tp, l.cp, l.dp, l.ep, l.etp)) {
        return reject(*r);
    }
    if (train && model.hasMoe() && l.tp > 1 && !l.sp) {
        return reject({ RejectKind::MoeNeedsSp, l.tp });
    }
    if (l.pp > model.numLayers) {
        return reject({ RejectKind::PpLayers, l.pp, model.numLayers });
    }
    std::vector<int> counts = plan.stageLayers;
    if (counts.empty()) {
        counts = splitStages(model.numLayers, l.pp, plan.split);
    } else {
        int sum = 0;
        for (const int c : counts) {
            sum += c;
        }
        if (sum != model.numLayers || int(counts.size()) != l.pp) {
            return reject(
                { RejectKind::StageLayers, sum, std::int64_t(counts.size()), model.numLayers });
        }
    }
    if (counts.empty()) {
        return reject({ RejectKind::PpLayers, l.pp, model.numLayers });
    }
    l.stageStart.assign(1, 0);
    for (const int c : counts) {
        l.stageStart.push_back(l.stageStart.back() + c);
    }

    if (train) {
        l.microBatch = plan.microBatch;
        if (plan.numMicroBatches > 0) {
            l.numMicroBatches = plan.numMicroBatches;
            l.globalBatch = l.numMicroBatches * l.dp * l.microBatch;
        } else {
            l.globalBatch = plan.globalBatch > 0 ? plan.globalBatch : workload.globalBatch;
            const std::int64_t perStep = std::int64_t(l.dp) * l.microBatch;
            if (l.globalBatch % perStep != 0) {
                return reject({ RejectKind::GlobalBatch, l.globalBatch, perStep });
            }
            l.numMicroBatches = int(l.globalBatch / perStep);
        }
        if (l.cp > 1 && workload.seqLength % (2 * l.cp) != 0) {
            return reject({ RejectKind::CpSequence, l.cp, workload.seqLength });
        }
    } else {
        l.microBatch = workload.batch;
        l.numMicroBatches = 1;
        l.globalBatch = workload.batch * l.dp;
    }
    if (l.vpp > 1) {
        if (l.pp == 1) {
            return reject({ RejectKind::VppPipeline, l.vpp });
        }
        const int smallest = *std::min_element(counts.begin(), counts.end());
        if (smallest < l.vpp) {
            return reject({ RejectKind::VppLayers, l.vpp, smallest });
        }
        if (train && l.numMicroBatches % l.pp != 0) {
            return reject({ RejectKind::VppMicroBatches, l.numMicroBatches, l.pp });
        }
    }

    l.checkpointWeights = !train && !plan.weights;
    l.weights = plan.weights.value_or(train ? DType::BF16 : model.checkpointDtype);
    l.kv = plan.kv.value_or(DType::BF16);
    l.grads = plan.grads;
    l.optimizer = plan.optimizer;
    return l;
}

} // namespace day0::plan
