// The sparse-attention families' steps of shrinkConfig: DeepSeek-V4 and MiniMax-M3
// (checkpoint/shrink_sparse.h).
#include "checkpoint/shrink_sparse.h"

#include "base/json_util.h"
#include "checkpoint/shrink.h"
#include "checkpoint/shrink_util.h"

#include <algorithm>

namespace day0::checkpoint::detail {

bool isDeepseekV4(const Json& t)
{
    return t.contains("model_type") && t["model_type"] == "deepseek_v4";
}

void deepseekV4Signatures(const Json& t, std::int64_t layers, std::vector<std::string>& signature)
{
    if (!isDeepseekV4(t)) {
        return;
    }
    const std::int64_t hashLayers = intOf(t, "num_hash_layers", 0);
    const bool ratios = has(t, "compress_ratios") && t["compress_ratios"].is_array()
        && std::int64_t(t["compress_ratios"].size()) >= layers;
    for (std::int64_t i = 0; i < layers; ++i) {
        if (ratios) {
            signature[std::size_t(i)] += dumpJson(t["compress_ratios"][std::size_t(i)]) + "|";
        }
        signature[std::size_t(i)] += i < hashLayers ? "hash|" : "|";
    }
}

void shrinkDeepseekV4(
    Json& t, const std::vector<std::int64_t>& kept, std::int64_t layers, std::int64_t heads2)
{
    t["q_lora_rank"] = 32;
    t["qk_rope_head_dim"] = 8;
    t["o_groups"] = 2;
    t["o_lora_rank"] = 16;
    if (heads2 % 2 != 0) {
        t["o_groups"] = 1;
    }
    // Enough heads that an entry's score is seldom an exact 0 (every head's ReLU at zero), whose
    // ties torch's top-k orders as it likes.
    t["index_n_heads"] = 16;
    t["index_head_dim"] = 16;
    t["index_topk"] = std::min<std::int64_t>(intOf(t, "index_topk", 2), 2);
    const std::int64_t hashLayers = intOf(t, "num_hash_layers", 0);
    if (has(t, "num_hash_layers")) {
        t["num_hash_layers"] = std::count_if(
            kept.begin(), kept.end(), [&](std::int64_t i) { return i < hashLayers; });
    }
    if (has(t, "compress_ratios") && t["compress_ratios"].is_array()
        && std::int64_t(t["compress_ratios"].size()) >= layers) {
        const Json& all = t["compress_ratios"];
        const auto scaledRatio = [](const Json& r) {
            return r.is_number_integer() && r.get<std::int64_t>() > kShrunkHcaRatio
                    && r.get<std::int64_t>() != 4
                ? Json(kShrunkHcaRatio)
                : r;
        };
        Json cut = Json::array();
        for (const auto i : kept) {
            cut.push_back(scaledRatio(all[std::size_t(i)]));
        }
        for (std::size_t j = std::size_t(layers); j < all.size(); ++j) { // the MTP blocks
            cut.push_back(scaledRatio(all[j]));
        }
        t["compress_ratios"] = cut;
    }
    // The clamp of the experts' SwiGLU must bite at the shrunk activations' scale.
    if (has(t, "swiglu_limit")) {
        t["swiglu_limit"] = kShrunkSwigluLimit;
    }
}

void shrinkMiniMaxM3(Json& t, const std::vector<std::int64_t>& kept, std::int64_t layers,
    std::int64_t layers2, std::int64_t headDim2, std::int64_t kv2, std::int64_t hidden,
    std::int64_t hidden2)
{
    if (has(t, "sparse_attention_config") && t["sparse_attention_config"].is_object()) {
        Json& sparse = t["sparse_attention_config"];
        for (auto& [key, value] : sparse.items()) {
            if (isPerLayerList(key, value, layers)) {
                Json cut = Json::array();
                for (const auto i : kept) {
                    cut.push_back(value[std::size_t(i)]);
                }
                while (std::int64_t(cut.size()) < layers2) {
                    cut.push_back(cut.back());
                }
                value = cut;
            }
        }
        sparse["sparse_block_size"] = std::min(
            intOf(sparse, "sparse_block_size", kShrunkSparseBlockSize), kShrunkSparseBlockSize);
        sparse["sparse_topk_blocks"] = std::min(
            intOf(sparse, "sparse_topk_blocks", kShrunkSparseTopKBlocks), kShrunkSparseTopKBlocks);
        sparse["sparse_index_dim"] = headDim2;
        sparse["sparse_num_index_heads"] = kv2;
    }
    if (has(t, "moe_layer_freq") && t["moe_layer_freq"].is_array()
        && has(t, "first_k_dense_replace")) {
        std::int64_t dense = 0;
        while (dense < std::int64_t(t["moe_layer_freq"].size())
            && t["moe_layer_freq"][std::size_t(dense)] == 0) {
            ++dense;
        }
        t["first_k_dense_replace"] = dense;
    }
    for (const char* key : { "dense_intermediate_size", "shared_intermediate_size" }) {
        if (has(t, key) && t[key].is_number_integer() && t[key].get<std::int64_t>() > 0) {
            t[key] = scaled(t[key].get<std::int64_t>(), hidden, hidden2, 16, 32);
        }
    }
    if (has(t, "moe_intermediate_size") && has(t, "intermediate_size")) {
        t["moe_intermediate_size"] = t["intermediate_size"];
    }
    // swigluoai's clamp: as gpt-oss's, the published 7 never bites at the shrunk scale.
    if (has(t, "swiglu_limit")) {
        t["swiglu_limit"] = kShrunkSwigluLimit;
    }
}

} // namespace day0::checkpoint::detail
