#pragma once

#include "exec/precision.h"
#include "model/model_spec.h"

#include <string>

namespace day0::exec {

/// The precision of a MoE model's router under `plan`, in words: what its gate logits are
/// computed and stored in, and what its scoring and top-k run in, as the engine runs it and as
/// the family's reference code does (DeepSeek-V3/V4 and Hunyuan: an fp32 gate; the others: a
/// GEMM in the activation dtype, scored in fp32). Empty for a model without experts and for the
/// fp32 / fp64 references. Thread-safe (pure).
std::string routerRecipe(const model::ModelSpec& spec, const PrecisionPlan& plan);

} // namespace day0::exec
