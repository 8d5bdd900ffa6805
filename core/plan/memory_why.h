#pragma once

// Helpers the memory kernel uses to record how it computes each figure (memory_formula.h):
// inputs with their sources, labels of layer classes, and the KV-cache terms of one layer.

#include "plan/layout.h"
#include "plan/memory_formula.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <string>

namespace day0::plan::detail {

/// An input that multiplies the term.
FormulaInput times(std::string name, double value, std::string unit, std::string source);
/// An input that divides the term.
FormulaInput per(std::string name, double value, std::string source);

/// "decoder layers of class 1 (MLA attention, MoE)".
std::string classLabel(const ModelSummary& model, int cls);
/// "plan: layers 0-19 of stage 0 (class 1)".
std::string stageLayersSource(const Layout& layout, int stage);
/// "plan: weights=bf16" and the like, for a dtype the layout chose.
std::string dtypeSource(std::string_view what, DType dtype);

/// Appends to `why` the terms of `layers` layers of shape `shape` keeping their KV cache or
/// state for `layout.microBatch` sequences of `workload.context` tokens (split by cp), one term
/// per cache term, each: layers × sequences × elements × bytes/element × heads_on_rank ÷ heads.
void kvCacheTerms(const LayerShape& shape, int layers, const std::string& label,
    const Layout& layout, const Workload& workload, Derivation& why);

/// Appends to `why` the terms of a training stage's activations (the arithmetic of
/// trainingActivationsAll): per class layers × tokens × bytes/token × in-flight micro-batches,
/// the embedding, one layer's working set under full recompute, the head and the MTP layers.
/// `perClass`/`work`: one layer of each class, kept and while recomputed; `tokens` = mb·seq/cp.
void trainingActivationTerms(const ModelSummary& model, const Layout& layout,
    const Workload& workload, const MemoryOptions& options, double tokens, const double* perClass,
    const double* work, double embedding, double output, int stage, Derivation& why);

} // namespace day0::plan::detail
