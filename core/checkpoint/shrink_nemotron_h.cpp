// Nemotron-H's steps of shrinkConfig: its layer kinds live in one pattern string
// (`hybrid_override_pattern`, configuration_nemotron_h.py: M Mamba-2, * attention, - MLP,
// E MoE), which the generic per-layer-list cut does not see, and its Mamba-2 mixer and latent
// MoE have widths of their own (mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups,
// chunk_size, moe_latent_size, moe_shared_expert_intermediate_size).
#include "checkpoint/shrink_nemotron_h.h"

#include "checkpoint/shrink_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace day0::checkpoint::detail {

bool isNemotronH(const Json& config)
{
    return config.is_object() && config.contains("model_type")
        && config["model_type"] == "nemotron_h";
}

Result<void> shrinkNemotronHPattern(Json& t, const ShrinkOptions& o)
{
    if (!has(t, "hybrid_override_pattern") || !t["hybrid_override_pattern"].is_string()) {
        return success(); // the list form (layers_block_type) is cut as a per-layer list
    }
    const std::string pattern = t["hybrid_override_pattern"].get<std::string>();
    const auto depth = std::int64_t(o.layers.value_or(4));
    std::vector<std::size_t> kept;
    std::set<char> seen;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (seen.insert(pattern[i]).second) {
            kept.push_back(i);
        }
    }
    if (o.layers && std::int64_t(kept.size()) > *o.layers) {
        return Error::badInput(fmt::format("--layers {} would drop kinds of layer: the pattern "
                                           "'{}' needs at least {} layers to keep each",
            *o.layers, pattern, kept.size()));
    }
    for (std::size_t i = 0; i < pattern.size() && std::int64_t(kept.size()) < depth; ++i) {
        if (std::find(kept.begin(), kept.end(), i) == kept.end()) {
            kept.push_back(i);
        }
    }
    std::sort(kept.begin(), kept.end());
    std::string cut;
    for (const std::size_t i : kept) {
        cut += pattern[i];
    }
    while (std::int64_t(cut.size()) < depth) {
        cut += cut.back();
    }
    t["hybrid_override_pattern"] = cut;
    t["num_hidden_layers"] = std::int64_t(cut.size());
    return success();
}

Result<void> shrinkNemotronHMixers(Json& t, const ShrinkOptions& o, std::int64_t hidden2)
{
    if (has(t, "mamba_num_heads")) {
        // 8 heads of 8 lanes, a 16-wide state, in two groups of B and C (n_groups must divide
        // the heads; two keep the grouping visible).
        const std::int64_t groups = std::clamp<std::int64_t>(intOf(t, "n_groups", 1), 1, 2);
        t["mamba_num_heads"] = 8;
        t["mamba_head_dim"] = 8;
        t["ssm_state_size"] = 16;
        t["n_groups"] = groups;
        if (has(t, "mamba_n_groups")) {
            t["mamba_n_groups"] = groups;
        }
        if (o.chunk && *o.chunk <= 0) {
            return Error::badInput("--chunk must be positive");
        }
        const std::int64_t chunk = intOf(t, "chunk_size", 256);
        t["chunk_size"] = o.chunk.value_or(std::min(chunk, kShrunkMambaChunk));
    }
    if (has(t, "moe_latent_size") && t["moe_latent_size"].is_number_integer()) {
        t["moe_latent_size"] = std::max<std::int64_t>(16, hidden2 / 2);
    }
    if (has(t, "moe_shared_expert_intermediate_size")) {
        // Twice the shrunk expert width, as in Nano and Super.
        t["moe_shared_expert_intermediate_size"] = 2 * intOf(t, "moe_intermediate_size", 16);
    }
    return success();
}

} // namespace day0::checkpoint::detail
