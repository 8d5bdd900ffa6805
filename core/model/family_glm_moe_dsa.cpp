// GLM-5 (`glm_moe_dsa`): GLM-5, GLM-5.1, GLM-5.2, their zai-org -FP8 and nvidia -NVFP4
// releases. The reader; the graph is the DeepSeek-V3 decoder's (graph_decoder.cpp: MLA with the
// DSA indexer of DeepSeek-V3.2, dense first layers, routed + shared experts, MTP layer at
// num_hidden_layers), with the per-layer indexer of GLM-5.2 and GLM's MTP glue.
//
// Where the facts come from (research note deepseekv4_glm5.md, sources S6, S7, S9, S12):
// - transformers `configuration_glm_moe_dsa.py` (commit 008e5743) and `modular_glm_moe_dsa.py`
//   (01f8fa55): HF names (model.layers.{i}.self_attn.{q_a_proj, q_a_layernorm, q_b_proj,
//   kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj}, the DeepseekV32Indexer
//   `self_attn.indexer.{wq_b, wk, k_norm (LayerNorm with bias), weights_proj}`), per-expert
//   checkpoint tensors; qk_head_dim is recomputed as nope + rope and head_dim overwritten;
//   `indexer_types` ("full"/"shared", shared layers reuse the previous full layer's selection
//   and have no indexer tensors) defaults to "full" where
//   max(i − index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (defaults 2 and 1);
//   `mlp_layer_types` ("dense"/"sparse") defaults to the first_k_dense_replace rule; the MTP
//   layer model.layers.{L} is ignored at load (_keys_to_ignore_on_load_unexpected).
// - The published checkpoints: GLM-5's MTP layer 78 has 791 tensors and neither
//   `embed_tokens` nor `shared_head.head` (vllm-ascend's GLM-5 guide has users create both;
//   public listings, index ids 59760011131, 52131701438); the MTP layer always has its own
//   indexer (GLM-5.2-FP8's modules_to_not_convert lists model.layers.78.self_attn.indexer.k_norm).
// - zai-org -FP8: F8_E4M3 weights with F32 `weight_scale_inv` per 128×128 block;
//   modules_to_not_convert spells the indexer's weights_proj "self_attn.indexers_proj" (a
//   typo): weights_proj stays BF16 either way (public FP8 validators treat it as unquantised,
//   index id 57748663413), as in DeepSeek-V3.2.
// - nvidia GLM-5-NVFP4 (hf_quant_config.json, ModelOpt 0.42): NVFP4 dense MLPs, shared and
//   routed experts; attention, indexer, lm_head and the whole MTP layer excluded.

#include "model/config_families.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::model::detail {

namespace {

// Which layers carry their own DSA indexer (true) or share the previous one's selection.
Result<std::vector<bool>> readIndexerLayers(const Section& text, ModelSpec& spec)
{
    JsonReader r = text.reader();
    const std::int64_t freq = r.intOr("index_topk_freq", 1);
    const std::int64_t offset = r.intOr("index_skip_topk_offset", 2);
    if (r.ok() && freq <= 0) {
        r.fail("index_topk_freq", fmt::format("({}) must be a positive integer", freq));
    }
    if (r.ok() && offset < 0) {
        r.fail("index_skip_topk_offset", fmt::format("({}) must not be negative", offset));
    }
    if (r.has("index_topk_pattern")) {
        text.notModelled("index_topk_pattern",
            "an explicit indexer pattern is not modelled (Day0 reads indexer_types or "
            "index_topk_freq / index_skip_topk_offset)");
    }
    if (!r.ok()) {
        return r.error();
    }
    const auto layers = std::size_t(spec.numLayers);
    std::vector<bool> derived(layers);
    for (std::size_t i = 0; i < layers; ++i) {
        derived[i] = std::max<std::int64_t>(std::int64_t(i) - offset + 1, 0) % freq == 0;
    }
    if (!r.has("indexer_types")) {
        return derived;
    }
    const auto types = stringArrayOr(r, "indexer_types");
    if (r.ok() && types.size() != layers) {
        r.fail("indexer_types",
            fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                types.size(), layers));
    }
    std::vector<bool> full(layers);
    for (std::size_t i = 0; i < types.size() && r.ok(); ++i) {
        if (types[i] != "full" && types[i] != "shared") {
            r.fail("indexer_types",
                fmt::format("entry {} is \"{}\", which Day0 does not model (it models \"full\" "
                            "and \"shared\")",
                    i, types[i]));
        }
        full[i] = types[i] == "full";
    }
    if (r.ok() && !full.empty() && !full[0]) {
        r.fail("indexer_types", "entry 0 is \"shared\" but no earlier layer has an indexer");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (full != derived && (r.has("index_topk_freq") || r.has("index_skip_topk_offset"))) {
        spec.warnings.push_back(fmt::format("{}: 'indexer_types' differs from the pattern "
                                            "index_topk_freq / index_skip_topk_offset give; "
                                            "indexer_types is used, as transformers does",
            text.origin));
    }
    return full;
}

// `mlp_layer_types` (GLM-5.2) overrides first_k_dense_replace's dense/MoE split.
Result<void> readMlpLayerTypes(JsonReader& r, ModelSpec& spec)
{
    if (!r.has("mlp_layer_types")) {
        return success();
    }
    const auto types = stringArrayOr(r, "mlp_layer_types");
    if (r.ok() && std::int64_t(types.size()) != spec.numLayers) {
        r.fail("mlp_layer_types",
            fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                types.size(), spec.numLayers));
    }
    for (std::size_t i = 0; i < types.size() && r.ok(); ++i) {
        if (types[i] != "dense" && types[i] != "sparse") {
            r.fail("mlp_layer_types",
                fmt::format("entry {} is \"{}\", which Day0 does not model (it models \"dense\" "
                            "and \"sparse\")",
                    i, types[i]));
        } else if (types[i] == "sparse" && !spec.moe) {
            r.fail("mlp_layer_types",
                fmt::format("entry {} is \"sparse\" but the config has no n_routed_experts", i));
        } else {
            spec.layers[i].ffn = types[i] == "sparse" ? FfnKind::Moe : FfnKind::Dense;
        }
    }
    if (!r.ok()) {
        return r.error();
    }
    return success();
}

} // namespace

Result<void> readGlmMoeDsa(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    DAY0_TRY(readDecoder(text, spec));
    DAY0_TRY(readMla(text, spec));
    DAY0_TRY(readMoe(text, spec));
    DAY0_TRY(readRope(text, spec));
    JsonReader r = text.reader();
    if (spec.mla.indexerHeads <= 0) {
        r.fail("index_n_heads", "must be positive: GLM-5 attention has a DSA indexer");
        return r.error();
    }
    const std::int64_t qkHead = spec.mla.qkNopeHeadDim + spec.mla.qkRopeHeadDim;
    if (r.has("qk_head_dim")) {
        const std::int64_t qkHeadDim = r.requirePositive("qk_head_dim");
        if (r.ok() && qkHeadDim != qkHead) {
            r.fail("qk_head_dim",
                fmt::format(
                    "is {} but qk_nope_head_dim + qk_rope_head_dim is {}", qkHeadDim, qkHead));
        }
    }
    // nvidia's NVFP4 5.1/5.2 configs: HF's backward-compatible alias of n_routed_experts.
    if (r.has("num_experts")) {
        const std::int64_t experts = r.requirePositive("num_experts");
        const std::int64_t routed = spec.moe ? spec.moe->numExperts : 0;
        if (r.ok() && experts != routed) {
            r.fail("num_experts", fmt::format("is {} but n_routed_experts is {}", experts, routed));
        }
    }
    if (r.has("layer_types")) {
        const auto types = stringArrayOr(r, "layer_types");
        if (r.ok() && std::int64_t(types.size()) != spec.numLayers) {
            r.fail("layer_types",
                fmt::format("has {} entries but the model has {} layers (num_hidden_layers)",
                    types.size(), spec.numLayers));
        }
        for (std::size_t i = 0; i < types.size() && r.ok(); ++i) {
            if (types[i] != "deepseek_sparse_attention") {
                r.fail("layer_types",
                    fmt::format("entry {} is \"{}\", which Day0 does not model (it models "
                                "\"deepseek_sparse_attention\")",
                        i, types[i]));
            }
        }
    }
    DAY0_TRY(readMlpLayerTypes(r, spec));
    if (!r.ok()) {
        return r.error();
    }
    auto indexed = readIndexerLayers(text, spec);
    if (!indexed) {
        return indexed.error();
    }
    // readMla made every layer SparseMla; a "shared" layer attends with MLA over the previous
    // indexer's selection and keeps no indexer keys. The MTP layer always has its own.
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        spec.layers[i].mixer = (*indexed)[i] ? MixerKind::SparseMla : MixerKind::Attention;
    }
    return readQuantizationOf(input, spec);
}

} // namespace day0::model::detail
