#pragma once

#include "plan/model_summary.h"
#include "plan/parallel_plan.h"

namespace day0::plan {

/// What one rank's activations for one micro-batch depend on.
struct ActivationContext {
    double tokens = 0; ///< T = micro-batch × sequence / cp: tokens of the micro-batch on the rank
    double keys = 0; ///< keys a query attends to at most (sequence / cp); capped by windows
    int tp = 1; ///< t
    bool sp = false; ///< sequence parallelism: tensors outside TP regions are split by t too
    int etp = 1; ///< expert tensor parallel size
    Recompute recompute = Recompute::None;
    bool flash = true; ///< fused attention (keeps LSE, not the s×s scores)
    bool dropout = false; ///< 1-byte dropout masks are kept
    double expertLoad = 1.0; ///< routed-token imbalance on the busiest rank
};

/// Bytes one decoder layer keeps for the backward pass for one micro-batch (BF16 activations).
/// Recompute::Full keeps only the layer input; the working set of the layer being recomputed
/// is added once per stage by the caller (fullRecomputeWorkingSet).
double layerActivationBytes(const LayerShape& shape, const ActivationContext& ctx);

/// Extra bytes while one layer is recomputed under full recompute: the layer's activations
/// without recompute (held once per stage, not per micro-batch).
double fullRecomputeWorkingSet(const LayerShape& shape, const ActivationContext& ctx);

/// Bytes the first stage keeps outside the layers per micro-batch: token ids (int64) and the
/// embedding dropout mask.
double embeddingActivationBytes(double hidden, const ActivationContext& ctx);

/// Bytes the last stage keeps for the final norm, the output head and the loss per micro-batch:
/// norm input, head input and FP32 logits for the vocabulary-parallel cross entropy.
double outputActivationBytes(double hidden, double vocab, const ActivationContext& ctx);

/// Peak live bytes while one layer processes a prefill chunk of `tokens` tokens on one rank
/// (inference, nothing kept for backward): residual + normed input + the widest of attention
/// and MLP/MoE intermediates.
double prefillWorkspaceBytes(
    const LayerShape& shape, double tokens, int tp, int etp, double expertLoad);

/// Tokens routed to one rank's experts per token entering the MoE layer on the TP group:
/// top-k × load × etp / t (after the EP all-to-all and the ETP all-gather).
double routedRowsPerToken(const LayerShape& shape, int tp, int etp, double expertLoad);

} // namespace day0::plan
