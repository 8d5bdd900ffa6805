#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/shrink.h"
#include "checkpoint/shrink_gemma4.h"
#include "checkpoint/shrink_kimi.h"
#include "checkpoint/shrink_nemotron_h.h"
#include "checkpoint/shrink_sparse.h"
#include "checkpoint/shrink_util.h"
#include "model/config_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;
using namespace detail; // the JSON helpers and the families' steps

/// Maps layer indices of a `depth`-deep stack onto a `depth2`-deep one, keeping them distinct.
std::vector<std::int64_t> remapIndices(const Json& list, std::int64_t depth, std::int64_t depth2)
{
    std::set<std::int64_t> out;
    for (const auto& v : list) {
        if (!v.is_number_integer()) {
            continue;
        }
        auto i = std::int64_t(std::llround(
                     double(v.get<std::int64_t>() + 1) * double(depth2) / double(depth)))
            - 1;
        i = std::clamp<std::int64_t>(i, 0, depth2 - 1);
        while (out.count(i) != 0 && i + 1 < depth2) {
            ++i;
        }
        out.insert(i);
    }
    return { out.begin(), out.end() };
}

/// Rescales M-RoPE sections so they sum to half the new rotary width (largest remainder).
Json rescaleSections(const Json& sections, std::int64_t half)
{
    std::vector<double> exact;
    double sum = 0;
    for (const auto& s : sections) {
        sum += s.get<double>();
    }
    std::vector<std::int64_t> out;
    std::int64_t used = 0;
    for (const auto& s : sections) {
        exact.push_back(s.get<double>() * double(half) / sum);
        out.push_back(std::max<std::int64_t>(1, std::int64_t(exact.back())));
        used += out.back();
    }
    for (std::size_t k = 0; used < half; k = (k + 1) % out.size()) {
        // Give the remaining units to the sections that lost most to truncation.
        std::size_t best = 0;
        double bestRem = -1;
        for (std::size_t i = 0; i < out.size(); ++i) {
            const double rem = exact[i] - double(out[i]);
            if (rem > bestRem) {
                best = i;
                bestRem = rem;
            }
        }
        ++out[best];
        ++used;
        (void)k;
    }
    return out;
}

/// The layers a shrunk model keeps (indices into the original, ascending): the first of each
/// distinct combination of per-layer list entries (layer_types, moe_layer_freq, ...), so that
/// every kind of layer survives, then the following layers up to `depth`.
Result<std::vector<std::int64_t>> keptLayers(const Json& t, std::int64_t layers, std::int64_t depth)
{
    std::vector<std::string> signature(std::size_t(std::max<std::int64_t>(layers, 0)));
    const std::int64_t firstDense = intOf(t, "first_k_dense_replace", 0);
    for (std::int64_t i = 0; i < layers; ++i) {
        signature[std::size_t(i)] = i < firstDense ? "dense|" : "|";
    }
    for (const auto& [key, value] : t.items()) {
        if (isPerLayerList(key, value, layers)) {
            for (std::int64_t i = 0; i < layers; ++i) {
                signature[std::size_t(i)] += dumpJson(value[std::size_t(i)]) + "|";
            }
        }
    }
    deepseekV4Signatures(t, layers, signature);
    detail::gemma4LayerSignatures(t, layers, signature);
    detail::kimiLayerSignatures(t, layers, signature);
    std::vector<std::int64_t> kept;
    std::set<std::string> seen;
    for (std::int64_t i = 0; i < layers; ++i) {
        if (seen.insert(signature[std::size_t(i)]).second) {
            kept.push_back(i);
        }
    }
    for (std::int64_t i = 0; i < layers && std::int64_t(kept.size()) < depth; ++i) {
        if (std::find(kept.begin(), kept.end(), i) == kept.end()) {
            kept.push_back(i);
        }
    }
    std::sort(kept.begin(), kept.end());
    return kept;
}

/// Shrinks the text model (top level or text_config) in place; returns the new hidden size.
Result<std::int64_t> shrinkText(Json& t, const ShrinkOptions& o, const std::string& origin)
{
    const std::int64_t layers = intOf(t, "num_hidden_layers", 0);
    const std::int64_t hidden = intOf(t, "hidden_size", 0);
    const std::int64_t heads = intOf(t, "num_attention_heads", 0);
    if (layers <= 0 || hidden <= 0 || heads <= 0) {
        return Error::badInput(fmt::format(
            "{}: needs positive num_hidden_layers, hidden_size and num_attention_heads to shrink",
            origin));
    }
    const std::int64_t kvHeads = intOf(t, "num_key_value_heads", heads);
    const bool mla = has(t, "kv_lora_rank");
    const auto kept = keptLayers(t, layers, o.layers.value_or(std::min<std::int64_t>(layers, 4)));
    if (!kept) {
        return kept.error();
    }
    const std::int64_t layers2 = o.layers ? *o.layers : std::int64_t(kept->size());
    if (o.layers && std::int64_t(kept->size()) > *o.layers) {
        return Error::badInput(fmt::format("--layers {} would drop kinds of layer: the per-layer "
                                           "lists of {} need at least {} layers to keep each",
            *o.layers, origin, kept->size()));
    }
    if (layers2 <= 0) {
        return Error::badInput("--layers must be positive");
    }

    std::int64_t heads2 = 0;
    std::int64_t kv2 = 0;
    if (mla) {
        heads2 = o.heads.value_or(4);
        kv2 = heads2;
    } else if (has(t, "block_configs") && t["block_configs"].is_array()) {
        // Nemotron-NAS: each attention block groups n_heads_in_group query heads per KV head;
        // heads for two KV heads in the widest group keep every block's grouping whole.
        std::int64_t groups = 1;
        for (const auto& block : t["block_configs"]) {
            const auto* attention
                = block.is_object() && block.contains("attention") ? &block["attention"] : nullptr;
            if (attention != nullptr && attention->is_object()
                && attention->contains("n_heads_in_group")
                && (*attention)["n_heads_in_group"].is_number_integer()
                && (*attention)["n_heads_in_group"].get<std::int64_t>() > 0) {
                groups = std::lcm(groups, (*attention)["n_heads_in_group"].get<std::int64_t>());
            }
        }
        heads2 = o.heads.value_or(2 * groups);
        kv2 = heads2 / groups;
        if (heads2 % groups != 0) {
            return Error::badInput(
                fmt::format("--heads {} is not a multiple of the blocks' n_heads_in_group ({})",
                    heads2, groups));
        }
    } else {
        const std::int64_t ratio = kvHeads > 0 && heads % kvHeads == 0 ? heads / kvHeads : 1;
        kv2 = std::min<std::int64_t>(std::max<std::int64_t>(kvHeads, 1), 2);
        // DeepSeek-V4 keeps one K=V head for all its query heads: 4 heads, not 64.
        heads2 = isDeepseekV4(t) ? 4 : kv2 * ratio;
        if (o.heads) {
            heads2 = *o.heads;
            kv2 = std::max<std::int64_t>(1, heads2 / ratio);
            if (heads2 % kv2 != 0) {
                return Error::badInput(
                    fmt::format("--heads {} does not keep the GQA ratio {}:1", heads2, ratio));
            }
        }
    }
    if (heads2 <= 0) {
        return Error::badInput("--heads must be positive");
    }
    const bool explicitHeadDim = has(t, "head_dim");
    std::int64_t hidden2 = o.hidden.value_or(
        explicitHeadDim || mla ? 128 : std::max<std::int64_t>(128, heads2 * 16));
    if (!explicitHeadDim && !mla && hidden2 % heads2 != 0) {
        return Error::badInput(fmt::format(
            "--hidden {} is not a multiple of the {} attention heads", hidden2, heads2));
    }
    const std::int64_t headDim2 = explicitHeadDim ? 16 : (mla ? 16 : hidden2 / heads2);
    const std::int64_t headDimOld = explicitHeadDim ? intOf(t, "head_dim", 0)
        : heads > 0                                 ? hidden / heads
                                                    : 0;

    t["num_hidden_layers"] = layers2;
    t["hidden_size"] = hidden2;
    t["num_attention_heads"] = heads2;
    if (has(t, "num_key_value_heads")) {
        t["num_key_value_heads"] = kv2;
    }
    // Gemma-4's full layers with attention_k_eq_v have their own KV heads
    // (num_global_key_value_heads, 2 against the sliding layers' 8 in 26B-A4B): scaled as the
    // sliding layers' are, so that the shrunk full layers keep fewer (or more) than the sliding
    // ones, and dividing the query heads.
    if (has(t, "num_global_key_value_heads") && t["num_global_key_value_heads"].is_number_integer()
        && kvHeads > 0) {
        const std::int64_t global = t["num_global_key_value_heads"].get<std::int64_t>();
        std::int64_t global2 = std::clamp<std::int64_t>(global * kv2 / kvHeads, 1, heads2);
        if (global < kvHeads && global2 >= kv2 && kv2 > 1) {
            global2 = kv2 / 2; // fewer, as in the source
        }
        while (heads2 % global2 != 0) {
            --global2;
        }
        t["num_global_key_value_heads"] = global2;
    }
    if (explicitHeadDim) {
        t["head_dim"] = headDim2;
    }
    // Hunyuan repeats its head width as attention_head_dim, which must stay hidden / heads.
    if (has(t, "attention_head_dim") && t["attention_head_dim"].is_number_integer()) {
        t["attention_head_dim"] = explicitHeadDim ? headDim2 : hidden2 / heads2;
    }
    // MiniMax-M2 states its rotated lanes as rotary_dim: the same share of the new head.
    if (has(t, "rotary_dim") && t["rotary_dim"].is_number_integer() && headDimOld > 0) {
        const std::int64_t rotary = t["rotary_dim"].get<std::int64_t>() * headDim2 / headDimOld;
        t["rotary_dim"] = std::max<std::int64_t>(2, rotary - rotary % 2);
    }
    const std::int64_t intermediateOld = intOf(t, "intermediate_size", 0);
    // Gemma-4's full layers are global_head_dim wide: shrunk in the same ratio to head_dim, so
    // that a full layer's q·k (scaled by 1, not 1/sqrt(d)) stays of the sliding layers' size.
    if (has(t, "global_head_dim") && t["global_head_dim"].is_number_integer() && headDimOld > 0) {
        const std::int64_t global = t["global_head_dim"].get<std::int64_t>();
        if (global > 0 && global % headDimOld == 0) {
            t["global_head_dim"] = headDim2 * (global / headDimOld);
        }
    }
    if (has(t, "intermediate_size")) {
        t["intermediate_size"] = o.intermediate.value_or(
            scaled(intOf(t, "intermediate_size", hidden), hidden, hidden2, 16, 32));
    }
    // Hunyuan lists moe_intermediate_size per layer, equal to intermediate_size: it follows it.
    if (has(t, "moe_intermediate_size") && t["moe_intermediate_size"].is_array()) {
        for (auto& width : t["moe_intermediate_size"]) {
            if (width.is_number_integer()) {
                width = width.get<std::int64_t>() == intermediateOld && has(t, "intermediate_size")
                    ? t["intermediate_size"]
                    : Json(scaled(width.get<std::int64_t>(), hidden, hidden2, 8, 16));
            }
        }
    }
    for (const char* key :
        { "intermediate_size_mlp", "moe_intermediate_size", "shared_expert_intermediate_size" }) {
        if (has(t, key) && t[key].is_number_integer()) {
            t[key] = scaled(t[key].get<std::int64_t>(), hidden, hidden2, 8, 16);
        }
    }
    // Gated DeltaNet (Qwen3-Next, Qwen3.5): two key heads of 16 lanes, the value heads in the
    // same ratio to them (value head j reads key head j / ratio), values 16 wide.
    if (has(t, "linear_num_key_heads") && has(t, "linear_num_value_heads")) {
        const std::int64_t keyHeads = intOf(t, "linear_num_key_heads", 1);
        const std::int64_t valueHeads = intOf(t, "linear_num_value_heads", keyHeads);
        const std::int64_t ratio
            = keyHeads > 0 && valueHeads % keyHeads == 0 ? valueHeads / keyHeads : 1;
        t["linear_num_key_heads"] = 2;
        t["linear_num_value_heads"] = 2 * ratio;
        for (const char* key : { "linear_key_head_dim", "linear_value_head_dim" }) {
            if (has(t, key)) {
                t[key] = 16;
            }
        }
    }
    if (mla) {
        if (has(t, "q_lora_rank")) {
            t["q_lora_rank"] = 48;
        }
        t["kv_lora_rank"] = 32;
        t["qk_nope_head_dim"] = 16;
        t["qk_rope_head_dim"] = 8;
        t["v_head_dim"] = 16;
        if (has(t, "qk_head_dim")) { // GLM-5 states it; it must stay nope + rope
            t["qk_head_dim"] = 16 + 8;
        }
        if (has(t, "index_n_heads")) { // DeepSeek-V3.2 sparse-attention indexer
            // Enough heads that a key's score is seldom an exact 0 (the ReLU of every head
            // with a positive weight), whose ties torch's top-k orders as it likes.
            t["index_n_heads"] = 8;
            t["index_head_dim"] = 16;
            t["index_topk"] = std::min<std::int64_t>(
                intOf(t, "index_topk", kShrunkIndexTopK), kShrunkIndexTopK);
        }
    }

    // MoE: fewer experts, top-k and groups scaled so routing keeps its shape.
    for (const char* key : { "n_routed_experts", "num_experts", "num_local_experts" }) {
        if (!has(t, key) || !t[key].is_number_integer() || t[key].get<std::int64_t>() <= 0) {
            continue;
        }
        const std::int64_t experts = t[key].get<std::int64_t>();
        const std::int64_t experts2 = o.experts.value_or(std::min<std::int64_t>(experts, 16));
        if (experts2 <= 0) {
            return Error::badInput("--experts must be positive");
        }
        t[key] = experts2;
        // Kimi spells it num_experts_per_token.
        const char* topKKey
            = has(t, "num_experts_per_token") ? "num_experts_per_token" : "num_experts_per_tok";
        const std::int64_t topK = intOf(t, topKKey, 1);
        std::int64_t topK2 = std::min(topK, std::max<std::int64_t>(1, experts2 / 4));
        if (experts2 == experts) {
            topK2 = topK;
        }
        if (has(t, topKKey)) {
            t[topKKey] = topK2;
        }
        const std::int64_t groups = intOf(t, "n_group", 1);
        if (groups > 1) {
            std::int64_t groups2 = std::min<std::int64_t>(groups, 4);
            while (groups2 > 1 && experts2 % groups2 != 0) {
                groups2 /= 2;
            }
            std::int64_t topkGroup2
                = std::max<std::int64_t>(1, intOf(t, "topk_group", 1) * groups2 / groups);
            while (topkGroup2 < groups2 && topkGroup2 * (experts2 / groups2) < topK2) {
                ++topkGroup2;
            }
            t["n_group"] = groups2;
            t["topk_group"] = topkGroup2;
        }
    }
    if (has(t, "first_k_dense_replace") && intOf(t, "first_k_dense_replace", 0) > 0) {
        t["first_k_dense_replace"] = std::min(
            intOf(t, "first_k_dense_replace", 0), std::max<std::int64_t>(1, layers2 / 2));
    }
    // Per-layer lists follow the new depth: the kept layers' entries, in order.
    for (auto& [key, value] : t.items()) {
        if (isPerLayerList(key, value, layers)) {
            Json cut = Json::array();
            for (const auto i : *kept) {
                cut.push_back(value[std::size_t(i)]);
            }
            while (std::int64_t(cut.size()) < layers2) {
                cut.push_back(cut.back());
            }
            value = cut;
        }
    }
    detail::shrinkGemma4Text(t, *kept, layers, layers2);
    DAY0_TRY(detail::shrinkKimiLinearAttention(t, *kept, layers, layers2));
    if (t.contains("model_type") && t["model_type"] == "minimax_m3") {
        shrinkMiniMaxM3(t, *kept, layers, layers2, headDim2, kv2, hidden, hidden2);
    }
    if (has(t, "mlp_only_layers") && t["mlp_only_layers"].is_array()) {
        Json onlyMlp = Json::array();
        for (const auto& v : t["mlp_only_layers"]) {
            if (v.is_number_integer() && v.get<std::int64_t>() < layers2) {
                onlyMlp.push_back(v);
            }
        }
        t["mlp_only_layers"] = onlyMlp;
    }
    // A window as wide as the prompts the tests run masks nothing: the sliding layers would
    // compute as full ones and a broken window mask would pass.
    if (has(t, "sliding_window") && t["sliding_window"].is_number_integer()) {
        if (o.window && *o.window <= 0) {
            return Error::badInput("--window must be positive");
        }
        const std::int64_t window = t["sliding_window"].get<std::int64_t>();
        t["sliding_window"] = o.window.value_or(std::min(window, kShrunkWindow));
    }
    // gpt-oss's clamped SwiGLU: at the shrunk weights' scale (gate and up of RMS ~0.2) the
    // published limit of 7 would never clamp, and an engine without the clamp would pass.
    if (t.contains("model_type") && t["model_type"] == "gpt_oss") {
        t["swiglu_limit"] = kShrunkSwigluLimit;
    }
    if (isDeepseekV4(t)) {
        shrinkDeepseekV4(t, *kept, layers, heads2);
    }
    // Gemma-4's final logit soft-capping: the published cap (30) is the identity to 1e-5 at the
    // shrunk logits' scale (RMS ~0.2), and an engine without it would pass.
    if (t.contains("model_type")
        && (t["model_type"] == "gemma4_text" || t["model_type"] == "gemma4")
        && t.contains("final_logit_softcapping") && t["final_logit_softcapping"].is_number()) {
        t["final_logit_softcapping"] = kShrunkLogitSoftcap;
    }
    if (has(t, "max_window_layers")) {
        t["max_window_layers"] = std::min(intOf(t, "max_window_layers", layers2), layers2);
    }
    // RoPE: M-RoPE sections must add up to half the (new) rotary width.
    for (const char* key : { "rope_scaling", "rope_parameters" }) {
        if (has(t, key) && t[key].is_object() && t[key].contains("mrope_section")
            && headDimOld > 0) {
            const double partial = t.contains("partial_rotary_factor")
                ? t["partial_rotary_factor"].get<double>()
                : 1.0;
            t[key]["mrope_section"] = rescaleSections(
                t[key]["mrope_section"], std::int64_t(double(headDim2) * partial) / 2);
        }
    }
    if (o.fp8Block && has(t, "quantization_config")
        && t["quantization_config"].contains("weight_block_size")) {
        t["quantization_config"]["weight_block_size"] = { *o.fp8Block, *o.fp8Block };
    }
    return hidden2;
}

/// Moves every "*token_id(s)" at or above the new vocabulary size to distinct ids at its top.
void clampTokenIds(Json& j, std::int64_t vocab, std::int64_t& next)
{
    for (auto& [key, value] : j.items()) {
        if (value.is_object() && key != "quantization_config") {
            clampTokenIds(value, vocab, next);
            continue;
        }
        if (!(key.ends_with("token_id") || key.ends_with("token_ids"))) {
            continue;
        }
        const auto fix = [&](Json& v) {
            if (v.is_number_integer() && v.get<std::int64_t>() >= vocab) {
                v = std::max<std::int64_t>(0, next--);
            }
        };
        if (value.is_array()) {
            for (auto& v : value) {
                fix(v);
            }
        } else {
            fix(value);
        }
    }
}

void shrinkVision(Json& v, std::int64_t textHidden)
{
    if (v.contains("vt_hidden_size")) { // Kimi-K2.5 MoonViT
        v["vt_hidden_size"] = 32;
        v["vt_intermediate_size"] = 64;
        v["vt_num_attention_heads"] = 2;
        v["vt_num_hidden_layers"] = 2;
        if (v.contains("mm_hidden_size")) {
            v["mm_hidden_size"] = 32;
        }
        if (v.contains("text_hidden_size")) {
            v["text_hidden_size"] = textHidden;
        }
        return;
    }
    if (v.contains("model_type") && v["model_type"] == "gemma4_vision") {
        // Gemma4VisionConfig: two layers of 2 heads of 16 (the 2-D rotary needs head_dim / 4
        // lanes per axis), a position table for 64 patches per side, patch and pooling kernel
        // kept (a 96 x 144 image is then 6 x 9 patches, 2 x 3 soft tokens).
        v["hidden_size"] = 32;
        v["intermediate_size"] = 64;
        v["num_hidden_layers"] = std::min<std::int64_t>(intOf(v, "num_hidden_layers", 16), 2);
        v["num_attention_heads"] = 2;
        v["num_key_value_heads"] = 2;
        v["head_dim"] = 16;
        if (v.contains("global_head_dim")) {
            v["global_head_dim"] = 16;
        }
        v["position_embedding_size"] = 64;
        return;
    }
    const std::int64_t depth = intOf(v, "depth", 0);
    const std::int64_t depth2 = std::min<std::int64_t>(std::max<std::int64_t>(depth, 1), 4);
    if (depth > 0) {
        v["depth"] = depth2;
    }
    if (v.contains("embed_dim")) { // Qwen2-VL: embed_dim is the tower, hidden_size the text width
        v["embed_dim"] = 32;
        v["hidden_size"] = textHidden;
    } else if (v.contains("hidden_size")) {
        v["hidden_size"] = 32;
    }
    if (v.contains("intermediate_size")) {
        v["intermediate_size"] = 64;
    }
    if (v.contains("num_heads")) {
        v["num_heads"] = 2;
    }
    if (v.contains("out_hidden_size")) {
        v["out_hidden_size"] = textHidden;
    }
    for (const char* key : { "deepstack_visual_indexes", "fullatt_block_indexes" }) {
        if (has(v, key) && v[key].is_array() && depth > 0) {
            v[key] = remapIndices(v[key], depth, depth2);
        }
    }
}

} // namespace

Result<nlohmann::ordered_json> shrinkConfig(
    const nlohmann::ordered_json& config, const ShrinkOptions& options)
{
    if (!config.is_object()) {
        return Error::badInput("config.json must be an object");
    }
    Json out = config;
    const bool nested = has(out, "text_config") && out["text_config"].is_object();
    Json& text = nested ? out["text_config"] : out;
    const bool nemotronH = detail::isNemotronH(text);
    if (nemotronH) {
        DAY0_TRY(detail::shrinkNemotronHPattern(text, options));
    }
    auto hidden2 = shrinkText(text, options, nested ? "config.json (text_config)" : "config.json");
    if (!hidden2) {
        return hidden2.error();
    }
    if (nemotronH) {
        DAY0_TRY(detail::shrinkNemotronHMixers(text, options, *hidden2));
    }
    const std::int64_t vocab = intOf(text, "vocab_size", intOf(out, "vocab_size", 0));
    const std::int64_t vocab2 = options.vocab.value_or(std::min<std::int64_t>(vocab, 2048));
    if (vocab2 <= 0) {
        return Error::badInput("--vocab must be positive");
    }
    for (Json* j : { &out, &text }) {
        if (has(*j, "vocab_size")) {
            (*j)["vocab_size"] = vocab2;
        }
        // Gemma-4's per-layer embeddings look up the same token ids.
        if (has(*j, "vocab_size_per_layer_input")) {
            (*j)["vocab_size_per_layer_input"] = vocab2;
        }
    }
    std::int64_t next = vocab2 - 1;
    clampTokenIds(out, vocab2, next);
    if (has(out, "vision_config") && out["vision_config"].is_object()) {
        shrinkVision(out["vision_config"], *hidden2);
    }
    if (has(out, "audio_config") && out["audio_config"].is_object()) {
        detail::shrinkGemma4Audio(out["audio_config"]);
    }
    return out;
}

Result<fs::path> resolveConfigPath(const std::string& modelArg)
{
    std::error_code ec;
    const fs::path path(modelArg);
    if (fs::is_directory(path, ec)) {
        if (!fs::exists(path / "config.json", ec)) {
            return Error::badInput(
                fmt::format("{}: no config.json in this folder", displayPath(path)));
        }
        return path / "config.json";
    }
    if (fs::exists(path, ec)) {
        return path;
    }
    for (const auto& m : model::bundledModels()) {
        if (m.name == modelArg) {
            return m.configPath;
        }
    }
    return Error::badInput(
        fmt::format("'{}' is not a folder, a config.json file or a bundled model name", modelArg));
}

} // namespace day0::checkpoint
