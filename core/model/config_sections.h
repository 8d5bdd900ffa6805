#pragma once

// Internal: readers for the sections of a Hugging Face config.json that several families share
// (RoPE scaling, quantisation, MoE, MLA, vision towers, per-layer patterns). Each takes the JSON
// object and an `origin` naming the file (and the nested object) for error messages.

#include "base/json_util.h"
#include "base/result.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <string>

namespace day0::model::detail {

/// Reads `rope_scaling` (or transformers-5 `rope_parameters`) into spec.ropeScaling and the RoPE
/// base into spec.ropeTheta.
Result<void> readRope(const nlohmann::json& text, const std::string& origin, ModelSpec& spec);

/// Reads a `quantization_config` object (block FP8 or compressed-tensors packed INT); `origin`
/// names the object. Unknown methods leave the spec unquantised with a warning.
Result<void> readQuantization(
    const nlohmann::json& quantization, const std::string& origin, ModelSpec& spec);

/// Reads the MoE fields of the family (expert counts and widths, routing, which layers are MoE)
/// and fills spec.moe and spec.layers[i].moe. Dense families leave spec.moe empty.
Result<void> readMoe(const nlohmann::json& text, const std::string& origin, ModelSpec& spec);

/// Reads the DeepSeek MLA dimensions (and the V3.2 sparse-attention indexer).
Result<void> readMla(const nlohmann::json& text, const std::string& origin, ModelSpec& spec);

/// Reads a `vision_config` object of kind `kind` ("qwen2_vl", "qwen2_5_vl", "qwen3_vl",
/// "moonvit") into spec.vision. Needs spec.hiddenSize (the width the merger projects to).
Result<void> readVision(const nlohmann::json& vision, const std::string& origin,
    const std::string& kind, ModelSpec& spec);

/// Fills the per-layer attention pattern: sliding windows, Llama-4 NoPE and chunked layers.
Result<void> readLayerPattern(
    const nlohmann::json& text, const std::string& origin, ModelSpec& spec);

/// Reads an optional array of non-negative integers; records an error on `reader` otherwise.
std::vector<std::int64_t> intArrayOr(
    const nlohmann::json& object, JsonReader& reader, const std::string& key);

} // namespace day0::model::detail
