#pragma once

// Internal to core/checkpoint: the steps of shrinkConfig for the sparse-attention families,
// DeepSeek-V4 (compressed and sparse attention, hash-routed layers) and MiniMax-M3 (block-sparse
// attention).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace day0::checkpoint::detail {

/// Whether the text config `t` is DeepSeek-V4's.
bool isDeepseekV4(const nlohmann::ordered_json& t);

/// DeepSeek-V4's layer kinds: `compress_ratios` lists one ratio per block, the MTP blocks after
/// the main ones (so it is not a per-layer list), and the first `num_hash_layers` route by
/// token id (model.py Gate).
void deepseekV4Signatures(
    const nlohmann::ordered_json& t, std::int64_t layers, std::vector<std::string>& signature);

/// DeepSeek-V4's own sizes (family_deepseek_v4.cpp reads them): the compressed attention's
/// ranks and groups, the indexer, the kept blocks' compress ratios (a ratio other than 4 scaled
/// to kShrunkHcaRatio so that a short prompt fills its windows) and the hash-routed prefix.
void shrinkDeepseekV4(nlohmann::ordered_json& t, const std::vector<std::int64_t>& kept,
    std::int64_t layers, std::int64_t heads2);

/// MiniMax-M3: the per-layer lists of sparse_attention_config follow the kept layers, blocks and
/// top-k shrink (kShrunkSparseBlockSize, kShrunkSparseTopKBlocks), the index heads follow the KV
/// heads (one index head per KV group) and are head_dim wide; first_k_dense_replace (a summary
/// of moe_layer_freq) is recounted from the cut list, the dense and shared widths scale, and the
/// expert width copy moe_intermediate_size follows intermediate_size.
void shrinkMiniMaxM3(nlohmann::ordered_json& t, const std::vector<std::int64_t>& kept,
    std::int64_t layers, std::int64_t layers2, std::int64_t headDim2, std::int64_t kv2,
    std::int64_t hidden, std::int64_t hidden2);

} // namespace day0::checkpoint::detail
