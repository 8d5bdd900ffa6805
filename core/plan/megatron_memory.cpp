#include "plan/megatron_memory.h"

#include <algorithm>
#include <cmath>

namespace day0::plan {

namespace {

struct LayerCounts {
    double dense = 0;
    double moe = 0;
    double mtpDense = 0;
    double mtpMoe = 0;
};

LayerCounts countLayers(const MegatronArgs& a)
{
    LayerCounts c;
    if (a.numExperts <= 0) {
        c.dense = a.numLayers;
    } else if (a.moeLayerPattern.empty()) {
        c.moe = a.numLayers;
    } else {
        for (const int v : a.moeLayerPattern) {
            (v ? c.moe : c.dense) += 1;
        }
    }
    const bool lastIsMoe
        = a.numExperts > 0 && (a.moeLayerPattern.empty() || a.moeLayerPattern.back());
    (lastIsMoe ? c.mtpMoe : c.mtpDense) = a.mtpNumLayers;
    return c;
}

double weightAndOptimizer(const MegatronArgs& a, double* mostLoadedParams)
{
    const double h = a.hiddenSize;
    const double heads = a.numAttentionHeads;
    const double groups = a.groupQueryAttention ? a.numQueryGroups : heads;
    const double experts = a.numExperts > 0 ? a.numExperts : 1.0;
    const double gated = a.swiglu ? 1.5 : 1.0;
    const double normSize = a.rmsNorm ? 1.0 : 2.0;
    const LayerCounts n = countLayers(a);
    const double moeFfn = a.numExperts > 0 ? a.moeFfnHiddenSize : 0.0;

    double attention = 0;
    if (a.multiLatentAttention) {
        const double qTerm = a.qLoraRank <= 0
            ? h * heads * (a.qkHeadDim + a.qkPosEmbHeadDim)
            : a.qLoraRank * (h + heads * (a.qkHeadDim + a.qkPosEmbHeadDim) + normSize);
        attention = qTerm + a.kvLoraRank * (h + heads * (a.qkHeadDim + a.vHeadDim) + normSize)
            + h * a.qkPosEmbHeadDim + heads * a.vHeadDim * h;
    } else {
        attention = 2.0 * h * h * ((1.0 + groups / heads) * (a.kvChannels * heads / h));
    }
    const double embedding = h * a.paddedVocabSize;
    const double finalNorm = normSize * h;
    const double denseMlp = 2.0 * h * a.ffnHiddenSize * gated;
    const double shared = 2.0 * h * a.moeSharedExpertIntermediateSize * gated;
    const double routedHidden = a.moeLatentSize > 0 ? a.moeLatentSize : h;
    const double routed = 2.0 * routedHidden * moeFfn * experts * gated;
    const double latent = a.numExperts > 0 && a.moeLatentSize > 0 ? 2.0 * h * a.moeLatentSize : 0.0;
    const double norms = 2.0 * h * normSize;
    const double router = a.numExperts > 0 ? h * experts + (a.addBiasLinear ? experts : 0.0) : 0.0;
    const double sharedGate
        = a.moeSharedExpertIntermediateSize > 0 && a.moeSharedExpertGate ? h : 0.0;

    const double tpBlock = (attention + denseMlp) * n.dense + (attention + shared) * n.moe;
    const double replicatedBlock
        = norms * n.dense + (norms + latent + router + sharedGate) * n.moe + finalNorm;
    const double expertBlock = routed * n.moe;
    const double tpMtp = (attention + denseMlp) * n.mtpDense + (attention + shared) * n.mtpMoe;
    const double replicatedMtp
        = norms * n.mtpDense + (norms + latent + router + sharedGate) * n.mtpMoe;
    const double expertMtp = routed * n.mtpMoe;

    const double pp = a.pipelineModelParallelSize;
    const double tp = a.tensorModelParallelSize;
    double tpShard = (tpBlock / pp + tpMtp + embedding) / tp;
    const double replicatedShard = replicatedBlock / pp + replicatedMtp;
    const double expertShard = (expertBlock / pp + expertMtp)
        / (double(a.expertTensorParallelSize) * a.expertModelParallelSize);
    if (a.untieEmbeddingsAndOutputWeights && a.pipelineModelParallelSize == 1) {
        tpShard += embedding / tp;
    }
    *mostLoadedParams = tpShard + replicatedShard + expertShard;

    // Integer division, as Megatron's `world_size // (etp · ep · pp)`.
    const int edp = a.worldSize
        / (a.expertTensorParallelSize * a.expertModelParallelSize * a.pipelineModelParallelSize);
    auto bytesPerParam
        = [&](double d) { return a.useDistributedOptimizer ? 6.0 + 12.0 / d : 18.0; };
    return (tpShard + replicatedShard) * bytesPerParam(a.dataParallelSize)
        + expertShard * bytesPerParam(std::max(1, edp));
}

/// Common tail of both activation formulas: embedding terms, schedule factors.
double scheduleFactors(const MegatronArgs& a, double perLayerTimesLayers)
{
    const double pp = a.pipelineModelParallelSize;
    double act = perLayerTimesLayers;
    act += 8.0 * a.seqLength * a.microBatchSize * pp;
    act += a.seqLength * a.microBatchSize * a.hiddenSize * pp;
    if (a.virtualPipelineModelParallelSize > 0) {
        act *= 1.0 + (pp - 1.0) / (pp * a.virtualPipelineModelParallelSize);
    } else if (a.pipelineModelParallelSize > 1 && a.numMicrobatches > 0) {
        act *= std::min(1.0, a.numMicrobatches / pp);
    }
    return act;
}

double activationsWithSp(const MegatronArgs& a)
{
    const double sbh = a.seqLength * a.microBatchSize * a.hiddenSize;
    double act
        = scheduleFactors(a, sbh * (18.0 + 4.0 * (a.ffnHiddenSize / a.hiddenSize)) * a.numLayers);
    if (a.pipelineModelParallelSize == 1) {
        act += sbh * 4.0 * (1.0 + a.paddedVocabSize / a.hiddenSize);
    }
    return act / a.tensorModelParallelSize;
}

double activationsWithoutSp(const MegatronArgs& a)
{
    const double sbh = a.seqLength * a.microBatchSize * a.hiddenSize;
    double act = scheduleFactors(a, sbh * (10.0 + 24.0 / a.tensorModelParallelSize) * a.numLayers);
    if (a.pipelineModelParallelSize == 1) {
        const double logits
            = a.seqLength * a.microBatchSize * a.paddedVocabSize / a.tensorModelParallelSize;
        act += (logits + a.seqLength * a.microBatchSize * a.hiddenSize) * 2.0;
    }
    return act * 1.05;
}

} // namespace

MegatronMemory megatronTheoreticalMemory(const MegatronArgs& args)
{
    MegatronMemory m;
    m.weightAndOptimizer = weightAndOptimizer(args, &m.paramsOnMostLoadedShard);
    m.activations = args.sequenceParallel && args.recomputeSelective ? activationsWithSp(args)
                                                                     : activationsWithoutSp(args);
    m.total = m.weightAndOptimizer + m.activations;
    return m;
}

MegatronArgs megatronArgsFor(const ModelSummary& model, const Layout& l, const Workload& wl)
{
    MegatronArgs a;
    const LayerShape& s = model.representativeShape();
    const LayerShape& first = model.classes.front().shape;
    a.hiddenSize = model.hidden;
    a.numAttentionHeads = s.heads;
    a.multiLatentAttention = s.attention == model::AttentionKind::MLA;
    if (a.multiLatentAttention) {
        a.qLoraRank = s.qLoraRank;
        a.qkHeadDim = s.qkHeadDim - s.ropeDim;
        a.qkPosEmbHeadDim = s.ropeDim;
        a.kvLoraRank = s.kvLoraRank;
        a.vHeadDim = s.vHeadDim;
        a.kvChannels = s.qkHeadDim;
    } else {
        a.kvChannels = s.qkHeadDim;
        a.groupQueryAttention = s.kvHeads != s.heads;
        a.numQueryGroups = s.kvHeads;
    }
    a.swiglu = s.gated;
    a.numLayers = model.numLayers;
    a.ffnHiddenSize = first.ffn > 0 ? first.ffn : s.ffn;
    if (model.hasMoe()) {
        a.numExperts = s.experts;
        a.moeFfnHiddenSize = s.expertFfn;
        a.moeSharedExpertIntermediateSize = s.sharedFfn;
        a.moeRouterTopk = s.topK;
        for (const int c : model.layerClass) {
            a.moeLayerPattern.push_back(model.classes[std::size_t(c)].shape.moe ? 1 : 0);
        }
    }
    a.mtpNumLayers = wl.includeMtp ? model.numMtp : 0;
    const double multiple = 128.0 * l.tp;
    a.paddedVocabSize = std::ceil(model.vocab / multiple) * multiple;
    a.untieEmbeddingsAndOutputWeights = !model.tiedEmbeddings;
    a.tensorModelParallelSize = l.tp;
    a.pipelineModelParallelSize = l.pp;
    a.expertModelParallelSize = l.ep;
    a.expertTensorParallelSize = l.etp;
    a.worldSize = l.world;
    a.dataParallelSize = l.dp;
    a.useDistributedOptimizer = l.zero >= 1;
    a.seqLength = wl.seqLength;
    a.microBatchSize = l.microBatch;
    a.virtualPipelineModelParallelSize = l.vpp > 1 ? l.vpp : 0;
    a.sequenceParallel = l.sp;
    a.recomputeSelective = l.recompute == Recompute::Selective;
    a.numMicrobatches = l.numMicroBatches;
    return a;
}

} // namespace day0::plan
