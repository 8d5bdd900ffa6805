#pragma once

// Internal to core/checkpoint: the Gemma-4 steps of shrinkConfig (KV-shared layers, per-layer
// input embeddings, the audio conformer).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace day0::checkpoint::detail {

/// Marks the last num_kv_shared_layers of the text config `t` ("kv-shared|"), so that a shared
/// layer of each kind survives beside the unshared ones it reads.
void gemma4LayerSignatures(
    const nlohmann::ordered_json& t, std::int64_t layers, std::vector<std::string>& signature);

/// After the generic shrink: num_kv_shared_layers counts the kept shared layers (the layers past
/// `kept` repeat the last one, as the per-layer lists do), and the per-layer inputs are 16 lanes.
void shrinkGemma4Text(nlohmann::ordered_json& t, const std::vector<std::int64_t>& kept,
    std::int64_t layers, std::int64_t layers2);

/// Gemma-4's audio conformer (Gemma4AudioConfig): two 32-wide layers of two heads, a subsampler
/// of 8 and 4 channels; its output width is the projector's input, not the text's.
void shrinkGemma4Audio(nlohmann::ordered_json& a);

} // namespace day0::checkpoint::detail
