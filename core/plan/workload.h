#pragma once

#include "plan/parallel_plan.h"

namespace day0::plan {

/// What the cluster is asked to do: a training step or serving requests.
struct Workload {
    Mode mode = Mode::Train;
    // Training.
    int seqLength = 4096; ///< tokens per training sequence
    int globalBatch = 1024; ///< sequences per optimizer step (a plan's gbs= overrides it)
    // Inference.
    int batch = 1; ///< concurrent sequences per model replica (the KV cache holds them all)
    int context = 8192; ///< tokens per sequence held in the KV cache (prompt + output)
    int promptLength = 0; ///< prompt tokens for time-to-first-token; 0: context - outputLength
    int outputLength = 1024; ///< generated tokens per request
    int prefillChunk = 8192; ///< tokens per prefill step (chunked prefill) for the workspace
    double tpotBound = 0.050; ///< seconds per output token the planner must stay under
    bool includeMtp = true; ///< hold the model's MTP layers (training, speculative decoding)

    /// Prompt length with the default applied.
    [[nodiscard]] int prompt() const
    {
        const int p = promptLength > 0 ? promptLength : context - outputLength;
        return p > 0 ? p : context;
    }
};

/// Named, configurable allowances the estimator adds on top of the tensors it models.
struct MemoryOptions {
    double cudaContext = 0.75 * 1073741824.0; ///< CUDA context, cuBLAS/cuDNN workspaces, bytes
    double ncclPerGroup = 0.25 * 1073741824.0; ///< NCCL buffers per communicator the rank joins
    double fragmentation = 0.05; ///< allocator fragmentation headroom, fraction of allocations
    bool flashAttention = true; ///< fused attention keeps softmax statistics, not the s×s scores
    bool dropout = false; ///< dropout masks (1 byte per element) are kept; modern LLMs use none
    double expertLoadFactor = 1.0; ///< busiest rank's routed tokens over the average (≥ 1)
};

} // namespace day0::plan
