#include "model/model_spec.h"

#include <algorithm>
#include <array>
#include <utility>

namespace day0::model {

namespace {

constexpr std::array<std::pair<Family, const char*>, 16> kFamilyNames { {
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
    { Family::GenericDecoder, "generic_decoder" },
} };

} // namespace

std::int64_t ModelSpec::numMoeLayers() const
{
    return std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.moe; });
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

} // namespace day0::model
