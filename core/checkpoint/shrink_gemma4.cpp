// The Gemma-4 steps of shrinkConfig: which layers a shrunk E2B/E4B keeps and how its KV sharing,
// per-layer input embeddings and audio tower shrink (the keys of Gemma4TextConfig and
// Gemma4AudioConfig, transformers' configuration_gemma4.py).
#include "checkpoint/shrink_gemma4.h"

#include <algorithm>

namespace day0::checkpoint::detail {

namespace {

using Json = nlohmann::ordered_json;

std::int64_t integerOr(const Json& j, const char* key, std::int64_t fallback)
{
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<std::int64_t>() : fallback;
}

} // namespace

void gemma4LayerSignatures(const Json& t, std::int64_t layers, std::vector<std::string>& signature)
{
    const std::int64_t shared = integerOr(t, "num_kv_shared_layers", 0);
    for (std::int64_t i = std::max<std::int64_t>(0, layers - shared); i < layers; ++i) {
        signature[std::size_t(i)] += "kv-shared|";
    }
}

void shrinkGemma4Text(
    Json& t, const std::vector<std::int64_t>& kept, std::int64_t layers, std::int64_t layers2)
{
    // The shared layers are the last of the original, so they stay the last of the kept ones.
    if (t.contains("num_kv_shared_layers") && t["num_kv_shared_layers"].is_number_integer()) {
        const std::int64_t first = layers - t["num_kv_shared_layers"].get<std::int64_t>();
        const auto shared
            = std::count_if(kept.begin(), kept.end(), [&](std::int64_t i) { return i >= first; });
        t["num_kv_shared_layers"]
            = shared > 0 ? shared + layers2 - std::int64_t(kept.size()) : std::int64_t(0);
    }
    if (integerOr(t, "hidden_size_per_layer_input", 0) > 0) {
        t["hidden_size_per_layer_input"] = 16;
    }
}

void shrinkGemma4Audio(Json& a)
{
    a["hidden_size"] = 32;
    a["num_attention_heads"] = 2;
    a["num_hidden_layers"] = std::min<std::int64_t>(integerOr(a, "num_hidden_layers", 12), 2);
    a["output_proj_dims"] = 32;
    a["subsampling_conv_channels"] = { 8, 4 };
}

} // namespace day0::checkpoint::detail
