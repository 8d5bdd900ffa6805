#pragma once

#include "plan/layout.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <optional>
#include <vector>

namespace day0::plan {

/// The arguments Megatron-LM's `megatron/training/theoretical_memory_usage.py` reads, under
/// Megatron's names (0 stands for Python's None where Megatron tests for None).
struct MegatronArgs {
    double hiddenSize = 0;
    double numAttentionHeads = 0;
    double kvChannels = 0;
    bool groupQueryAttention = false;
    double numQueryGroups = 0;
    double numExperts = 0; ///< 0: dense model
    double moeFfnHiddenSize = 0;
    double moeSharedExpertIntermediateSize = 0;
    double moeRouterTopk = 0;
    std::vector<int> moeLayerPattern; ///< per layer 1 = MoE; empty: every layer (moe_layer_freq 1)
    double moeLatentSize = 0;
    bool moeSharedExpertGate = false;
    bool addBiasLinear = false;
    bool swiglu = true;
    int numLayers = 0;
    int mtpNumLayers = 0;
    bool rmsNorm = true;
    bool multiLatentAttention = false;
    double qLoraRank = 0;
    double qkHeadDim = 0; ///< MLA: the no-RoPE part
    double qkPosEmbHeadDim = 0;
    double kvLoraRank = 0;
    double vHeadDim = 0;
    double paddedVocabSize = 0;
    bool untieEmbeddingsAndOutputWeights = true;
    double ffnHiddenSize = 0;
    int tensorModelParallelSize = 1;
    int pipelineModelParallelSize = 1;
    int expertModelParallelSize = 1;
    int expertTensorParallelSize = 1;
    int worldSize = 1;
    int dataParallelSize = 1;
    bool useDistributedOptimizer = false;
    double seqLength = 0;
    double microBatchSize = 1;
    int virtualPipelineModelParallelSize = 0; ///< 0: None
    bool sequenceParallel = false;
    bool recomputeSelective = false; ///< recompute_granularity == 'selective'
    int numMicrobatches = 0; ///< 0: None
};

/// Megatron's theoretical memory of the most loaded rank, in bytes.
struct MegatronMemory {
    double weightAndOptimizer = 0;
    double activations = 0;
    double total = 0;
    double paramsOnMostLoadedShard = 0; ///< parameters (not bytes)
};

/// Re-implements Megatron-LM's theoretical memory report (NVIDIA/Megatron-LM d98e8a64,
/// theoretical_memory_usage.py as of 1bcb3b9e): weights and optimizer with TP-sharded,
/// replicated and expert (ETP·EP, EDP) buckets; activations by Korthikanti Table 2 for the first
/// stage (SP + selective), or the "without SP" variant (10 + 24/t, ×1.05) in every other case.
MegatronMemory megatronTheoreticalMemory(const MegatronArgs& args);

/// Maps a model and layout onto Megatron's arguments: vocabulary padded to a multiple of
/// 128·tp, RMSNorm, no linear biases, distributed optimizer when zero ≥ 1, vpp > 1 as
/// interleaving. What Megatron cannot express (FP8, CP, ZeRO-2/3, uneven stages) is dropped.
MegatronArgs megatronArgsFor(
    const ModelSummary& model, const Layout& layout, const Workload& workload);

} // namespace day0::plan
