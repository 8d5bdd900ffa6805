#pragma once

#include "base/result.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/tensor_report.h"
#include "model/layer_graph.h"

#include <optional>

namespace day0::checkpoint {

/// Compares the tensors of a checkpoint with what the architecture expects, tensor by tensor:
/// Ok, Missing (expected, absent; tensors the graph marks optional are not required),
/// Unexpected (present, unknown to the graph), WrongShape, WrongDtype. Rows are in natural name
/// order; every non-Ok row carries a one-line message naming the tensor. Pure; thread-safe.
TensorReport checkTensors(const Checkpoint& checkpoint, const model::LayerGraph& graph);

/// Reads config.json from the checkpoint folder and runs checkTensors against its graph.
/// nullopt when there is no config.json, for GGUF files (whose names are llama.cpp's) and for
/// per-rank splits (a folder with plan.json holds slices).
Result<std::optional<TensorReport>> checkAgainstConfig(const Checkpoint& checkpoint);

} // namespace day0::checkpoint
