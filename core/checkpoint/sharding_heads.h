#pragma once

// Internal to core/checkpoint's sharding: the head-aware split rules of the recurrent mixers
// (Gated DeltaNet, Mamba-2, Kimi Delta Attention), where an even split of a tensor's rows is not
// enough and every rank must hold whole heads and groups.

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "model/layer_graph.h"
#include "model/model_spec.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::checkpoint::detail {

/// The row parts of the fused projections and convolutions of the recurrent mixers, each split
/// evenly over the TP ranks; empty for any other tensor. Errors name the tensor and the head
/// count TP does not divide.
Result<std::vector<std::int64_t>> recurrentParts(
    const model::ModelSpec& spec, const std::string& name, int tp);

/// The slice TP rank `r` of `tp` holds of a Kimi Delta Attention tensor where the generic rules
/// do not give it (A_log by head along dim 2); nullopt where they do. Errors name
/// linear_attn_config.num_heads when TP does not divide the heads.
Result<std::optional<TensorSlice>> kdaSlice(
    const model::ModelSpec& spec, const model::TensorSpec& t, int tp, int r);

/// Checks that TP splits a DeepSeek-V4 attention tensor into whole heads (wq_b, attn_sink:
/// num_attention_heads) and whole output groups (wo_a, wo_b: o_groups), as DeepSeek's reference
/// code splits them (n_local_heads, n_local_groups); the error names the config key. Success for
/// any other tensor.
Result<void> deepseekV4Split(const model::ModelSpec& spec, const model::TensorSpec& t, int tp);

/// The part of DeepSeek-V4's block scale `scale` (`<module>.scale`, F8_E8M0) a rank holds when
/// it holds `weightSlice` of its `weight`: the scale blocks of that slice, one per 128 × 128
/// block of an FP8 weight, one per 32 inputs (16 packed bytes) of an FP4 expert's row. A slice
/// that starts or ends inside a block is refused, naming the weight, its scale and the block.
Result<TensorSlice> deepseekV4ScaleSlice(const model::ModelSpec& spec,
    const model::TensorSpec& weight, const model::TensorSpec& scale,
    const TensorSlice& weightSlice);

} // namespace day0::checkpoint::detail
