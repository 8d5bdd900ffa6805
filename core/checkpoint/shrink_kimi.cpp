// Kimi-Linear's and Kimi-K3's steps of shrinkConfig: which layers are KDA lives in
// linear_attn_config's two 1-based layer lists (full_attn_layers, kda_layers;
// configuration_kimi_k3.py is_kda_layer: (i + 1) in kda_layers), which the generic per-layer-list
// cut does not see, so that the shrunk config named layers the shrunk model does not have.
#include "checkpoint/shrink_kimi.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace day0::checkpoint::detail {

namespace {

using Json = nlohmann::ordered_json;

// The 1-based KDA layers of `t`, or none when it has no linear_attn_config lists.
std::set<std::int64_t> kdaLayers(const Json& t)
{
    std::set<std::int64_t> kda;
    if (!t.contains("linear_attn_config") || !t["linear_attn_config"].is_object()) {
        return kda;
    }
    const Json& la = t["linear_attn_config"];
    if (!la.contains("kda_layers") || !la["kda_layers"].is_array()) {
        return kda;
    }
    for (const auto& v : la["kda_layers"]) {
        if (v.is_number_integer()) {
            kda.insert(v.get<std::int64_t>());
        }
    }
    return kda;
}

} // namespace

void kimiLayerSignatures(const Json& t, std::int64_t layers, std::vector<std::string>& signature)
{
    const auto kda = kdaLayers(t);
    if (kda.empty()) {
        return;
    }
    for (std::int64_t i = 0; i < layers && i < std::int64_t(signature.size()); ++i) {
        signature[std::size_t(i)] += kda.contains(i + 1) ? "kda|" : "full|";
    }
}

Result<void> shrinkKimiLinearAttention(
    Json& t, const std::vector<std::int64_t>& kept, std::int64_t layers, std::int64_t layers2)
{
    // Kimi-K3's latent experts: half the shrunk hidden size (K3: 3584 of 7168).
    if (t.contains("routed_expert_hidden_size")
        && t["routed_expert_hidden_size"].is_number_integer() && t.contains("hidden_size")
        && t["hidden_size"].is_number_integer()) {
        t["routed_expert_hidden_size"]
            = std::max<std::int64_t>(16, t["hidden_size"].get<std::int64_t>() / 2);
    }
    // Kimi-K3's Block Attention Residuals: blocks of half the shrunk depth (K3: 12 of 93), so
    // that the shrunk model seals more than one block (the embedding and each block's layers)
    // and its last layers mix over them.
    if (t.contains("attn_res_block_size") && t["attn_res_block_size"].is_number_integer()) {
        t["attn_res_block_size"] = std::clamp<std::int64_t>(layers2 / 2, 1,
            std::max<std::int64_t>(1, t["attn_res_block_size"].get<std::int64_t>()));
    }
    if (!t.contains("linear_attn_config") || !t["linear_attn_config"].is_object()) {
        return success();
    }
    Json& la = t["linear_attn_config"];
    const auto kda = kdaLayers(t);
    if (la.contains("kda_layers") || la.contains("full_attn_layers")) {
        // The reader checks the lists in full; here they only need to be lists of layers.
        for (const char* key : { "kda_layers", "full_attn_layers" }) {
            if (!la.contains(key) || !la[key].is_array()) {
                return Error::badInput(fmt::format(
                    "config.json: linear_attn_config.{} must be a list of 1-based layers", key));
            }
            for (const auto& v : la[key]) {
                if (!v.is_number_integer() || v.get<std::int64_t>() < 1
                    || v.get<std::int64_t>() > layers) {
                    return Error::badInput(
                        fmt::format("config.json: linear_attn_config.{} holds {}, not a layer "
                                    "1..{}",
                            key, v.dump(), layers));
                }
            }
        }
        Json kdaCut = Json::array();
        Json fullCut = Json::array();
        for (std::int64_t j = 0; j < layers2 && !kept.empty(); ++j) {
            const std::int64_t original
                = kept[std::size_t(std::min<std::int64_t>(j, std::int64_t(kept.size()) - 1))];
            (kda.contains(original + 1) ? kdaCut : fullCut).push_back(j + 1);
        }
        la["kda_layers"] = kdaCut;
        la["full_attn_layers"] = fullCut;
    }
    if (la.contains("num_heads")) {
        la["num_heads"] = 2;
    }
    if (la.contains("head_dim")) {
        la["head_dim"] = 16;
    }
    return success();
}

} // namespace day0::checkpoint::detail
