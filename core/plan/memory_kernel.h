#pragma once

// Internals shared by the memory estimator and the planner, so that both compute the same
// numbers. Everything is per rank, in bytes (double), for one pipeline stage.

#include "plan/layout.h"
#include "plan/memory_formula.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

namespace day0::plan::detail {

/// Parameters and weight bytes one rank of a stage holds (before ZeRO sharding).
struct StageWeights {
    double denseParams = 0; ///< TP-split and replicated parameters
    double expertParams = 0; ///< routed-expert parameters (split by EP × ETP)
    double denseBytes = 0; ///< weight bytes of the dense part at the layout's weight dtype
    double expertBytes = 0;
    double largestLayerBytes = 0; ///< one decoder layer's weight bytes (ZeRO-3 prefetch)
    int layers = 0;
    bool embedding = false;
    bool head = false;
    int mtpLayers = 0;
    bool hasMoe = false;
};

/// Model states of one rank under the layout's ZeRO stage and dtypes (training).
struct ModelStates {
    double weights = 0;
    double gradients = 0;
    double optimizer = 0; ///< FP32 master weights + two Adam moments
    double zeroPrefetch = 0; ///< ZeRO-3: two gathered layers
    double gradBucket = 0; ///< ZeRO-2/3: one reduce-scatter bucket
};

/// Buffers beyond tensors: what the "buffers" column adds up.
struct Buffers {
    double runtime = 0; ///< CUDA context + NCCL buffers per communicator
    double comm = 0; ///< pipeline send/receive, context-parallel K/V ring
    double moeDispatch = 0; ///< all-to-all send and receive buffers
};

/// How the weights of a stage were added up, block by block (recorded on request).
struct StageWeightsWhy {
    Derivation bytes; ///< weight bytes (before ZeRO-3)
    Derivation params; ///< parameters (gradients and optimizer states scale them)
    DType checkpointDtype = DType::BF16; ///< set by stageWeights: what most weights are stored in
};

/// How a rank's model states were computed (training).
struct ModelStatesWhy {
    Derivation weights;
    Derivation gradients;
    Derivation optimizer;
    Derivation zeroBuffers;
};

/// How a stage's buffers were computed.
struct BuffersWhy {
    Derivation runtime;
    Derivation comm;
    Derivation moeDispatch;
};

/// Weights on stage `stage` of one rank; `why` (when given) records the terms.
StageWeights stageWeights(const ModelSummary& model, const Layout& layout, const Workload& workload,
    int stage, StageWeightsWhy* why = nullptr);

/// Model states of a rank (training); `why` scales the terms of `weightsWhy`.
ModelStates modelStates(const StageWeights& w, const Layout& layout,
    const StageWeightsWhy* weightsWhy = nullptr, ModelStatesWhy* why = nullptr);

/// Micro-batches whose activations stage `stage` holds at its peak: min(pp - stage, m) for 1F1B;
/// for interleaved 1F1B the warm-up chunks (2·(pp - stage - 1) + (vpp - 1)·pp + 1, at most
/// m·vpp) times the 1/vpp of the stage's layers each chunk holds.
double inFlightMicroBatches(const Layout& layout, int stage);

/// Activation bytes of every stage (training) into out[0 .. pp), in-flight micro-batches
/// included; per-class layer figures are computed once.
/// `why` (when given) records the terms of stage `whyStage`.
void trainingActivationsAll(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const MemoryOptions& options, double* out, Derivation* why = nullptr,
    int whyStage = 0);

/// Activation bytes of stage `stage` (training), in-flight micro-batches included.
double trainingActivations(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const MemoryOptions& options, int stage, Derivation* why = nullptr);

/// KV-cache bytes of stage `stage` (inference).
double inferenceKvCache(const ModelSummary& model, const Layout& layout, const Workload& workload,
    int stage, Derivation* why = nullptr);

/// The same split by the layers' mixer kind (MTP layers under their own kind), for the report;
/// `why` gets one derivation per kind ("kv_cache.<kind>").
std::vector<CacheShare> inferenceKvCacheByKind(const ModelSummary& model, const Layout& layout,
    const Workload& workload, int stage, std::vector<Derivation>* why = nullptr);

/// Prefill workspace of stage `stage` (inference).
double inferenceWorkspace(const ModelSummary& model, const Layout& layout, const Workload& workload,
    const MemoryOptions& options, int stage, Derivation* why = nullptr);

/// Buffers of stage `stage`.
Buffers stageBuffers(const ModelSummary& model, const Layout& layout, const Workload& workload,
    const MemoryOptions& options, int stage, BuffersWhy* why = nullptr);

/// Process groups with more than one rank that every rank joins (for NCCL buffers); expert
/// groups only when the model has experts.
int communicatorCount(const Layout& layout, bool experts);

} // namespace day0::plan::detail
