#pragma once

#include "hardware/cluster.h"
#include "plan/layout.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <vector>

namespace day0::plan {

/// Knobs of the step-time model.
struct CostOptions {
    // The defaults reproduce the iteration times Korthikanti et al. 2022 measured (Table 5,
    // 22B-1T GPT on A100) within 10% (the "fit" cases of
    // resources/plan/published_measurements.json, tests/core/plan/measurements_test.cpp).
    double computeEfficiency = 0.75; ///< fraction of the dense BF16 peak that large GEMMs reach
    /// Fraction of the dense FP8 peak that large FP8 GEMMs reach (weights=fp8: Transformer
    /// Engine's FP8 training, FP8 serving), the casts and scaling-factor updates around them
    /// included. Chosen on the FP8 "fit" cases of the published-measurements table
    /// (calibrateOnFitCases).
    double fp8ComputeEfficiency = 0.52;
    double elementwisePasses = 3.0; ///< HBM traffic of memory-bound kernels (norms, activation
                                    ///< functions, residuals, softmax, dropout) per forward pass,
                                    ///< in multiples of the activation bytes a layer keeps
    bool flashAttention = true; ///< fused attention (scores never written to HBM)
    bool dropout = false; ///< dropout kernels run
    double gemmHalfRows = 64.0; ///< GEMM rows at which efficiency halves (small expert GEMMs)
    double memoryEfficiency = 0.8; ///< fraction of HBM bandwidth streaming kernels reach
    bool overlapGradReduce = true; ///< DP gradient reduce-scatter overlaps the last backward
    bool overlapParamGather = true; ///< DP parameter all-gather overlaps the first forward
    double expertLoadFactor = 1.0; ///< busiest rank's routed tokens over the average
    /// Expert all-to-all of one micro-batch overlapped with another's computation of the same
    /// layer (DeepSeek's DualPipe, Megatron's --overlap-moe-expert-parallel-comm).
    bool epCommOverlap = false;
    /// Expert dispatch and combine send each token once to every node holding one of its
    /// experts and forward it to the experts' GPUs over the fast link there (DeepSeek-V3's
    /// node-limited dispatch, §3.2.2; DeepEP's and HybridEP's internode kernels), instead of one
    /// copy per routed expert over whichever link reaches it.
    bool epNodeDedup = false;
    /// TP all-gathers / reduce-scatters split into chunks pipelined with the GEMMs next to them
    /// (Transformer Engine's userbuffers, Megatron's --tp-comm-overlap).
    bool tpCommOverlap = false;
    /// Serving: share of the shorter of a pass's FLOP time (at the full GEMM rate) and HBM time
    /// that does not hide behind the longer (0: a perfect roofline). This and the two runtime
    /// costs below are chosen on the serving "fit" cases (calibrateOnFitCases).
    double rooflineOverlapLoss = 0.10;
    /// Serving: seconds each decode step costs the runtime beyond the GPU work (scheduling,
    /// sampling, launches), per step and per sequence in the batch.
    double decodeStepOverhead = 0.0;
    double decodeSequenceOverhead = 6e-6;
    /// Training: seconds each MoE layer's forward pass of one micro-batch costs beyond its
    /// kernels' arithmetic and memory traffic, once per layer and once per local expert (the
    /// router and its load-balancing loss, the token counts the all-to-all dispatcher copies to
    /// the host before it can size the exchange, the per-expert casts and launches around the
    /// grouped GEMMs). Backward and recompute scale it as they scale the forward's compute.
    /// Chosen on the MoE training "fit" cases (calibrateOnFitCases).
    double moeLayerOverhead = 0.4e-3;
    double moeExpertOverhead = 75e-6;
};

/// Seconds each part adds to one training step on the critical path.
struct TrainingBreakdown {
    double compute = 0; ///< GEMMs and attention of the slowest stage, all micro-batches
    double tp = 0; ///< TP all-reduce, or SP all-gather + reduce-scatter (incl. ETP)
    double ep = 0; ///< expert all-to-all (dispatch and combine, forward and backward)
    double cp = 0; ///< context-parallel K/V ring, the part not hidden behind attention
    double pp = 0; ///< pipeline send/receive between stages
    double dp = 0; ///< gradient reduce-scatter / all-reduce and parameter all-gather, exposed
                   ///< (ZeRO-2/3: also the per-micro-batch traffic)
    double bubble = 0; ///< pipeline fill and drain
    double optimizer = 0; ///< optimizer step (memory-bound)
};

/// Estimated time of one training step.
struct TrainingCost {
    TrainingBreakdown breakdown;
    double stepTime = 0; ///< seconds
    double tokensPerSecond = 0; ///< global batch × sequence / step time
    double modelFlops = 0; ///< Megatron's model FLOPs per step
    double mfu = 0; ///< model FLOPs / (step time × GPUs × dense BF16 peak)
    int slowestStage = 0;
};

/// Seconds of one decode step and of a prefill, per replica.
struct InferenceBreakdown {
    double decodeCompute = 0; ///< GEMM + attention FLOPs time per decode step
    double decodeMemory = 0; ///< weight and KV reads per decode step
    double tp = 0; ///< TP all-reduces per decode step
    double ep = 0; ///< expert all-to-all per decode step
    double pp = 0; ///< pipeline hand-offs per decode step
    double prefill = 0; ///< prefill of the batch's prompts
    double runtime = 0; ///< runtime overhead per decode step (scheduling, sampling)
};

/// Estimated latency and throughput when serving.
struct InferenceCost {
    InferenceBreakdown breakdown;
    double ttft = 0; ///< time to first token of one request of the workload's prompt length
    double tpot = 0; ///< time per output token at the layout's batch
    double tokensPerSecond = 0; ///< output tokens per second over the whole layout (all replicas)
};

/// Megatron-LM's `num_floating_point_operations` for one step of `sequences` sequences of
/// `seqLength` tokens: 3 × 2 × (token-linear GEMMs + causal attention + logits, MTP included).
double megatronModelFlops(
    const ModelSummary& model, double seqLength, double sequences, bool includeMtp = true);

/// Forward FLOPs per token of one decoder layer of a class, attention over `keys` causal keys
/// included (what a forward pass executes; the router GEMM is counted).
double layerForwardFlopsPerToken(const LayerShape& shape, double keys);

/// Time of one training step of a layout. Pure; thread-safe.
TrainingCost estimateTrainingCost(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const hardware::Cluster& cluster, const CostOptions& options = {});

/// Decode and prefill times of a layout serving `layout.microBatch` sequences per replica.
InferenceCost estimateInferenceCost(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const hardware::Cluster& cluster, const CostOptions& options = {});

} // namespace day0::plan
