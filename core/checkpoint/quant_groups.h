#pragma once

// The quantised weights of a checkpoint as its config's layer graph lays them out: which stored
// tensors (codes, scales, metadata) form each quantised weight, and which dequantised tensor of
// the converted (unquantised) config replaces them. `convert` dequantises from this, so that a
// tensor group is found by the architecture's knowledge, never guessed from names.

#include "base/result.h"
#include "checkpoint/checkpoint.h"
#include "model/layer_graph.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace day0::checkpoint {

/// One quantised weight: its stored tensors in the source graph and the tensor that replaces
/// them in the converted graph. Points into both graphs, which must outlive it.
struct QuantGroup {
    model::QuantScheme scheme = model::QuantScheme::BlockFp8;
    std::string module; ///< the Linear module, or the fused gpt-oss expert parameter
    const model::TensorSpec* codes = nullptr; ///< the quantised values
    const model::TensorSpec* scale = nullptr; ///< per-block, per-group or per-tensor scale
    const model::TensorSpec* globalScale = nullptr; ///< NVFP4 `weight_scale_2`
    const model::TensorSpec* shape = nullptr; ///< compressed-tensors `weight_shape`
    /// Stored with the weight but meaningless once it is dequantised (ModelOpt `input_scale`).
    std::vector<const model::TensorSpec*> unused;
    const model::TensorSpec* output = nullptr; ///< the dequantised tensor of the converted graph
    std::int64_t experts = 0; ///< gpt-oss fused experts: matrices in the tensor; 0: one matrix
    std::int64_t rows = 0; ///< logical output width of one matrix
    std::int64_t cols = 0; ///< logical input width of one matrix
    std::int64_t blockRows = 1; ///< rows per scale (block FP8; 1 for row-wise groups)
    std::int64_t group = 1; ///< input columns per scale
    /// Stored as [experts, rows, cols] but written transposed, [experts, cols, rows] (gpt-oss).
    bool transposed = false;
};

/// Every quantised weight of `source` and the tensors to drop with them.
struct QuantLayout {
    std::vector<QuantGroup> groups; ///< in graph order
    /// Scales of the source graph that belong to no weight and that the converted graph does
    /// not have (ModelOpt's FP8 KV-cache `k_proj.k_scale` / `v_proj.v_scale`).
    std::vector<const model::TensorSpec*> dropped;
};

/// Finds the quantised weights of `source` (a graph with spec.quantization) and their
/// dequantised tensors in `converted` (the graph of the same config without it). Fails, naming
/// the tensor, when the two graphs do not correspond (a bug in the model module).
Result<QuantLayout> findQuantGroups(
    const model::LayerGraph& source, const model::LayerGraph& converted);

/// The checkpoint tensors of one group.
struct GroupTensors {
    const CheckpointTensor* codes = nullptr;
    const CheckpointTensor* scale = nullptr;
    const CheckpointTensor* globalScale = nullptr;
    const CheckpointTensor* shape = nullptr;
    std::vector<const CheckpointTensor*> unused; ///< those present
};

/// Finds the tensors of `group` in `checkpoint` and checks them against the layout: names,
/// shapes, dtypes, and a compressed-tensors `weight_shape` against the logical shape. nullopt
/// when none of them is there (an incomplete checkpoint is verify's to report); an error
/// naming the file, the tensor and the problem when some are and they do not fit.
Result<std::optional<GroupTensors>> matchGroup(
    const Checkpoint& checkpoint, const QuantGroup& group, const std::string& configName);

/// Name → tensor of every tensor of a graph (the graph must outlive it).
std::unordered_map<std::string_view, const model::TensorSpec*> tensorsByName(
    const model::LayerGraph& graph);

} // namespace day0::checkpoint
