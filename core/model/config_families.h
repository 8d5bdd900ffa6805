#pragma once

// Internal: the family readers behind readConfig. Every family reads its keys through Sections,
// so that config_audit can account for every key of the config afterwards.

#include "model/config_sections.h"
#include "model/model_spec.h"

#include <string>
#include <vector>

namespace day0::model::detail {

/// What a family reader is given: the whole document and its text part (text_config, or the
/// document itself for text-only models).
struct ConfigInput {
    Section top;
    Section text;
};

/// The dtype the weights are published in: torch_dtype / dtype of the text part, else of the
/// document; BF16 when neither says.
Result<DType> readDtype(const ConfigInput& input);

/// The decoder fields every Llama-style family shares: widths, heads, vocabulary, norm epsilon,
/// activation, head_dim, biases and QK-norm as the family's modules declare them, MTP count;
/// fills spec.layers with numLayers default entries.
Result<void> readDecoder(const Section& text, ModelSpec& spec);

/// The 2024–25 families (Llama, Mistral, Mixtral, Qwen2/3 and their MoE and VL variants,
/// DeepSeek-V2/V3 and Kimi-K2/K2.5, Llama-4, GLM-4.5) and the generic Llama-style decoder:
/// decoder, MLA, MoE, RoPE, layer pattern and vision tower.
Result<void> readClassicFamily(const ConfigInput& input, ModelSpec& spec);

/// Kimi-Linear and the Kimi-K3 wrapper (kimi_linear text): KDA / MLA layers from
/// linear_attn_config, latent MoE, attention residuals, MoonViT-3 tower (family_kimi.cpp).
Result<void> readKimiLinear(const ConfigInput& input, ModelSpec& spec);
/// Gemma 4 (family_gemma4.cpp): the gemma4 wrapper (text, vision and audio configs) or a
/// gemma4_text config.
Result<void> readGemma4(const ConfigInput& input, ModelSpec& spec);

/// Hunyuan-A13B (family_hunyuan.cpp): HunYuanMoEV1ForCausalLM.
Result<void> readHunyuan(const ConfigInput& input, ModelSpec& spec);
/// gpt_oss (family_gpt_oss.cpp): sinks, sliding/full layer_types, fused MXFP4 or BF16 experts.
Result<void> readGptOss(const ConfigInput& input, ModelSpec& spec);
/// minimax_m2 (family_minimax.cpp): per-layer QK-norm, F32 router, declared-only MTP.
Result<void> readMiniMaxM2(const ConfigInput& input, ModelSpec& spec);
/// minimax_m3 (family_minimax.cpp): the text decoder; block-sparse indexer layers, dense first
/// layers, shared expert, swigluoai, Gemma-offset norms.
Result<void> readMiniMaxM3(const ConfigInput& input, ModelSpec& spec);
/// DeepSeek-V4 (family_deepseek_v4.cpp): compressed attention per compress_ratios entry,
/// hyper-connections, hash-routed first layers, FP8 with F8_E8M0 `.scale`, FP4 experts.
Result<void> readDeepseekV4(const ConfigInput& input, ModelSpec& spec);

/// GLM-5 (family_glm_moe_dsa.cpp): MLA with the DSA indexer on every layer or per
/// indexer_types, dense first layers, routed and shared experts, one MTP layer.
Result<void> readGlmMoeDsa(const ConfigInput& input, ModelSpec& spec);

/// Reads `quantization_config` of the text part or of the document, if there is one.
Result<void> readQuantizationOf(const ConfigInput& input, ModelSpec& spec);

/// Nemotron-H (`nemotron_h`): the Mamba-2 / attention / MLP / MoE layer pattern, latent MoE,
/// the MTP block (family_nemotron_h.cpp).
Result<void> readNemotronH(const ConfigInput& input, ModelSpec& spec);

/// Nemotron-NAS (`nemotron-nas`, DeciLM): per-layer block_configs (family_nemotron_nas.cpp).
Result<void> readNemotronNas(const ConfigInput& input, ModelSpec& spec);

/// Sets spec.layout: the tensor-name prefixes of the family's published checkpoints.
void setLayout(ModelSpec& spec);

/// Qwen3-Next, Qwen3.5 / 3.6 dense and MoE (family_qwen_next.cpp): Gated DeltaNet / gated
/// attention layers, experts, MTP block, the Qwen3.5 vision tower.
Result<void> readQwenNext(const ConfigInput& input, ModelSpec& spec);

/// The checkpoint layout of those families (prefixes; fused or per-expert experts, which the
/// quantisation read after the family reader decides).
void setQwenNextLayout(ModelSpec& spec);

/// Keys the family's HF modeling code itself ignores (beyond the global inert list).
std::vector<std::string> familyInertKeys(Family family);

} // namespace day0::model::detail
