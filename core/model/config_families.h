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

/// DeepSeek-V4 (family_deepseek_v4.cpp): compressed attention per compress_ratios entry,
/// hyper-connections, hash-routed first layers, FP8 with F8_E8M0 `.scale`, FP4 experts.
Result<void> readDeepseekV4(const ConfigInput& input, ModelSpec& spec);

/// GLM-5 (family_glm_moe_dsa.cpp): MLA with the DSA indexer on every layer or per
/// indexer_types, dense first layers, routed and shared experts, one MTP layer.
Result<void> readGlmMoeDsa(const ConfigInput& input, ModelSpec& spec);

/// Reads `quantization_config` of the text part or of the document, if there is one.
Result<void> readQuantizationOf(const ConfigInput& input, ModelSpec& spec);

/// Sets spec.layout: the tensor-name prefixes of the family's published checkpoints.
void setLayout(ModelSpec& spec);

/// Keys the family's HF modeling code itself ignores (beyond the global inert list).
std::vector<std::string> familyInertKeys(Family family);

} // namespace day0::model::detail
