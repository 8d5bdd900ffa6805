#pragma once

// The capture names of a gradient pass (exec/backward.h, DESIGN.md §3): "<anchor>#grad" is the
// loss's gradient with respect to a module's output, "<parameter>#grad" (a name ending in
// ".weight" or ".bias", or one of gpt-oss's other parameters) with respect to a weight.

#include <string>
#include <string_view>

namespace day0::numerics {

/// Suffix of a gradient capture.
inline constexpr std::string_view kGradientSuffix = "#grad";

/// Whether `capture` is the gradient of a parameter ("...q_proj.weight#grad"; gpt-oss's
/// "...self_attn.sinks#grad" and fused "...experts.gate_up_proj#grad", "...experts.down_proj_bias
/// #grad", Gemma-4's "...router.scale#grad" and "...router.per_expert_scale#grad", the Gated
/// DeltaNet's "...linear_attn.A_log#grad" and "...linear_attn.dt_bias#grad", Mamba-2's
/// "...mixer.A_log#grad", "...mixer.D#grad" and "...mixer.dt_bias#grad", which no anchor's
/// name ends with: a dense MLP's "mlp.down_proj" anchor has no ".experts" before it).
inline bool isParameterGradient(std::string_view capture)
{
    if (!capture.ends_with(kGradientSuffix)) {
        return false;
    }
    const auto name = capture.substr(0, capture.size() - kGradientSuffix.size());
    return name.ends_with(".weight") || name.ends_with(".bias") || name.ends_with(".sinks")
        || name.ends_with(".experts.gate_up_proj") || name.ends_with(".experts.gate_up_proj_bias")
        || name.ends_with(".experts.down_proj") || name.ends_with(".experts.down_proj_bias")
        || name.ends_with(".router.scale") || name.ends_with(".router.per_expert_scale")
        || name.ends_with(".A_log") || name.ends_with(".D")
        || name.ends_with(".dt_bias")
        // DeepSeek-V4's hyper-connections and compressors.
        || name.ends_with("_hc.fn") || name.ends_with("_hc.base") || name.ends_with("_hc.scale")
        || name.ends_with(".hc_fn") || name.ends_with(".hc_base") || name.ends_with(".hc_scale")
        || name.ends_with(".position_bias");
}

/// Whether `capture` is the gradient of a module's output ("model.layers.3.self_attn#grad").
inline bool isActivationGradient(std::string_view capture)
{
    return capture.ends_with(kGradientSuffix) && !isParameterGradient(capture);
}

/// The anchor of an activation gradient ("model.layers.3#grad" → "model.layers.3").
inline std::string gradientAnchor(std::string_view capture)
{
    return std::string(capture.substr(0, capture.size() - kGradientSuffix.size()));
}

} // namespace day0::numerics
