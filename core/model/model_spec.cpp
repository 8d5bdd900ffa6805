#include "model/model_spec.h"

#include <algorithm>
#include <array>
#include <utility>

namespace day0::model {

namespace {

constexpr std::array<std::pair<Family, const char*>, 29> kFamilyNames { {
    { Family::Llama, "llama" },
    { Family::Mistral, "mistral" },
    { Family::Mixtral, "mixtral" },
    { Family::Qwen2, "qwen2" },
    { Family::Qwen2Moe, "qwen2_moe" },
    { Family::Qwen3, "qwen3" },
    { Family::Qwen3Moe, "qwen3_moe" },
    { Family::DeepseekV2, "deepseek_v2" },
    { Family::DeepseekV3, "deepseek_v3" },
    { Family::Llama4, "llama4" },
    { Family::Glm4Moe, "glm4_moe" },
    { Family::Qwen2Vl, "qwen2_vl" },
    { Family::Qwen25Vl, "qwen2_5_vl" },
    { Family::Qwen3Vl, "qwen3_vl" },
    { Family::Qwen3VlMoe, "qwen3_vl_moe" },
    { Family::GptOss, "gpt_oss" },
    { Family::MiniMaxM2, "minimax_m2" },
    { Family::MiniMaxM3, "minimax_m3" },
    { Family::Qwen3Next, "qwen3_next" },
    { Family::Qwen35, "qwen3_5" },
    { Family::Qwen35Moe, "qwen3_5_moe" },
    { Family::NemotronH, "nemotron_h" },
    { Family::NemotronNas, "nemotron-nas" },
    { Family::DeepseekV4, "deepseek_v4" },
    { Family::GlmMoeDsa, "glm_moe_dsa" },
    { Family::Gemma4, "gemma4" },
    { Family::Hunyuan, "hunyuan" },
    { Family::KimiLinear, "kimi_linear" },
    { Family::GenericDecoder, "generic_decoder" },
} };

} // namespace

bool LayerSpec::attends() const
{
    switch (mixer) {
    case MixerKind::Attention:
    case MixerKind::Sliding:
    case MixerKind::Chunked:
    case MixerKind::SparseMla:
    case MixerKind::Compressed:
    case MixerKind::BlockSparse:
        return true;
    case MixerKind::GatedDeltaNet:
    case MixerKind::KimiDelta:
    case MixerKind::Mamba2:
    case MixerKind::Linear:
    case MixerKind::None:
        return false;
    }
    return false;
}

std::int64_t ModelSpec::numMoeLayers() const
{
    return std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.moe(); });
}

std::int64_t ModelSpec::headsOf(const LayerSpec& layer) const
{
    return layer.numHeads > 0 ? layer.numHeads : numHeads;
}

std::int64_t ModelSpec::kvHeadsOf(const LayerSpec& layer) const
{
    return layer.numKvHeads > 0 ? layer.numKvHeads : numKvHeads;
}

std::int64_t ModelSpec::headDimOf(const LayerSpec& layer) const
{
    return layer.headDim > 0 ? layer.headDim : headDim;
}

std::int64_t ModelSpec::ffnWidthOf(const LayerSpec& layer) const
{
    return layer.ffnWidth > 0 ? layer.ffnWidth : intermediateSize;
}

std::int64_t ModelSpec::topKOf(const LayerSpec& layer) const
{
    if (!moe || !layer.moe()) {
        return 0;
    }
    return layer.topK > 0 ? layer.topK : moe->topK;
}

std::int64_t ModelSpec::expertWidthOf(const LayerSpec& layer) const
{
    if (!moe || !layer.moe()) {
        return 0;
    }
    return layer.expertWidth > 0 ? layer.expertWidth : moe->expertIntermediate;
}

std::int64_t ModelSpec::sharedWidthOf(const LayerSpec& layer) const
{
    if (!moe || !layer.moe()) {
        return 0;
    }
    return layer.sharedWidth >= 0 ? layer.sharedWidth : moe->sharedIntermediate;
}

std::int64_t ModelSpec::qHeadWidth() const { return numHeads * headDim; }

std::string familyName(Family family)
{
    for (const auto& [f, name] : kFamilyNames) {
        if (f == family) {
            return name;
        }
    }
    return "unknown";
}

std::optional<Family> parseFamily(const std::string& name)
{
    for (const auto& [f, n] : kFamilyNames) {
        if (name == n) {
            return f;
        }
    }
    return std::nullopt;
}

AttentionKind attentionKindForHeads(std::int64_t heads, std::int64_t kvHeads)
{
    return kvHeads == heads ? AttentionKind::MHA
        : kvHeads == 1      ? AttentionKind::MQA
                            : AttentionKind::GQA;
}

std::string attentionKindName(AttentionKind kind)
{
    switch (kind) {
    case AttentionKind::MHA:
        return "MHA";
    case AttentionKind::GQA:
        return "GQA";
    case AttentionKind::MQA:
        return "MQA";
    case AttentionKind::MLA:
        return "MLA";
    }
    return "?";
}

std::string mixerKindName(MixerKind kind)
{
    switch (kind) {
    case MixerKind::Attention:
        return "attention";
    case MixerKind::Sliding:
        return "sliding";
    case MixerKind::Chunked:
        return "chunked";
    case MixerKind::SparseMla:
        return "sparse_mla";
    case MixerKind::Compressed:
        return "compressed";
    case MixerKind::BlockSparse:
        return "block_sparse";
    case MixerKind::GatedDeltaNet:
        return "gated_deltanet";
    case MixerKind::KimiDelta:
        return "kimi_delta";
    case MixerKind::Mamba2:
        return "mamba2";
    case MixerKind::Linear:
        return "linear";
    case MixerKind::None:
        return "none";
    }
    return "?";
}

std::string ffnKindName(FfnKind kind)
{
    switch (kind) {
    case FfnKind::Dense:
        return "dense";
    case FfnKind::Moe:
        return "moe";
    case FfnKind::Linear:
        return "linear";
    case FfnKind::None:
        return "none";
    }
    return "?";
}

std::string keyStatusName(KeyStatus status)
{
    switch (status) {
    case KeyStatus::Understood:
        return "understood";
    case KeyStatus::Inert:
        return "inert";
    case KeyStatus::Unknown:
        return "unknown";
    }
    return "?";
}

std::string quantSchemeName(QuantScheme scheme)
{
    switch (scheme) {
    case QuantScheme::BlockFp8:
        return "block_fp8";
    case QuantScheme::PackedInt:
        return "packed_int";
    case QuantScheme::Mxfp4:
        return "mxfp4";
    case QuantScheme::PackedMxfp4:
        return "packed_mxfp4";
    case QuantScheme::Nvfp4:
        return "nvfp4";
    case QuantScheme::Fp8PerTensor:
        return "fp8_tensor";
    case QuantScheme::Fp4Block:
        return "fp4_block";
    }
    return "?";
}

} // namespace day0::model
