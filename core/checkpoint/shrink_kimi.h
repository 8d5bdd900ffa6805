#pragma once

// Internal to core/checkpoint: the Kimi-Linear / Kimi-K3 (`linear_attn_config`) steps of
// shrinkConfig.

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace day0::checkpoint::detail {

/// Appends each layer's kind ("kda|" or "full|") to `signature` when the text config `t` lists
/// its KDA layers in linear_attn_config (1-based kda_layers / full_attn_layers,
/// configuration_kimi_k3.py is_kda_layer), so that the shrunk model keeps both kinds.
void kimiLayerSignatures(
    const nlohmann::ordered_json& t, std::int64_t layers, std::vector<std::string>& signature);

/// After the generic shrink: linear_attn_config's lists name the shrunk layers (layer j of the
/// shrunk model is original layer kept[j], the layers past kept repeat the last one, as the
/// per-layer lists do), and its KDA heads and head width shrink (2 heads of 16 lanes); Kimi-K3's
/// routed_expert_hidden_size becomes half the shrunk hidden size.
Result<void> shrinkKimiLinearAttention(nlohmann::ordered_json& t,
    const std::vector<std::int64_t>& kept, std::int64_t layers, std::int64_t layers2);

} // namespace day0::checkpoint::detail
