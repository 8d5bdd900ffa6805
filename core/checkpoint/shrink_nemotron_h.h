#pragma once

// Internal to core/checkpoint: the Nemotron-H (`nemotron_h`) steps of shrinkConfig.

#include "base/result.h"
#include "checkpoint/shrink.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace day0::checkpoint::detail {

/// True for a config shrinkNemotronH* must see (model_type nemotron_h).
bool isNemotronH(const nlohmann::ordered_json& config);

/// Before the generic shrink: cuts `hybrid_override_pattern` to the first layer of each kind
/// (M, *, -, E) and the following layers up to the depth (options.layers, default 4), keeping
/// their order, and sets num_hidden_layers to its length.
Result<void> shrinkNemotronHPattern(nlohmann::ordered_json& config, const ShrinkOptions& options);

/// After the generic shrink (hidden size `hidden2`): the Mamba-2 mixer's heads, head width,
/// state, groups and chunk, and the latent and shared-expert widths of the MoE.
Result<void> shrinkNemotronHMixers(
    nlohmann::ordered_json& config, const ShrinkOptions& options, std::int64_t hidden2);

} // namespace day0::checkpoint::detail
