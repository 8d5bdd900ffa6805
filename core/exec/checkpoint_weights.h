#pragma once

#include "base/result.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"

#include <filesystem>
#include <memory>

namespace day0::exec {

/// The weights of a checkpoint opened by core/checkpoint (memory-mapped, validated): a
/// safetensors file, a folder of shards with or without index, or a llama GGUF whose tensors are
/// renamed to their Hugging Face names with q/k rows un-permuted (plain F32/F16/BF16 tensors;
/// block-quantised GGUF types are refused by name). A checkpoint with structural errors is
/// refused with the first one.
Result<std::unique_ptr<WeightSource>> openCheckpointWeights(const std::filesystem::path& path);

/// True when `path` holds weights: a .safetensors or .gguf file, or a folder with one beside its
/// config. The one rule every front end applies to decide whether a model source runs as it is
/// or through its shrunk checkpoint (a bundled name, a config.json, a folder without weights).
bool holdsWeights(const std::filesystem::path& path);

/// The model of a checkpoint: config.json for safetensors checkpoints (as model::loadModel), the
/// GGUF metadata for a .gguf file or a folder holding one.
Result<model::ModelSpec> loadCheckpointModel(const std::filesystem::path& path);

/// A checkpoint's model and weights, opened together.
struct OpenedCheckpoint {
    model::ModelSpec spec;
    std::unique_ptr<WeightSource> weights;
};

/// loadCheckpointModel and openCheckpointWeights of one checkpoint; errors name it.
Result<OpenedCheckpoint> openCheckpoint(const std::filesystem::path& path);

} // namespace day0::exec
