#include "exec/router_precision.h"

#include <fmt/format.h>

namespace day0::exec {

std::string routerRecipe(const model::ModelSpec& spec, const PrecisionPlan& plan)
{
    if (!spec.moe || plan.base == PrecisionMode::F32 || plan.base == PrecisionMode::F64) {
        return {};
    }
    const auto& moe = *spec.moe;
    const auto override = plan.perOpKind.find(numerics::OpKind::Router);
    // DeepSeek-V4 (deepseek_v4_forward.cpp): DeepseekV4TopKRouter / DeepseekV4HashRouter on
    // the fp32 reference under every plan; an override is refused before the run.
    if (spec.family == model::Family::DeepseekV4) {
        return fmt::format(
            "router (DeepSeek-V4): gate logits an fp32 GEMM of the {} hidden states and the "
            "fp32 gate weight, sqrtsoftplus scores sqrt(softplus(logit)) and the top-{} of score "
            "+ e_score_correction_bias in fp32{}; the chosen scores renormalised in fp32, times "
            "routed_scaling_factor; under every plan (an override is refused)",
            precisionName(plan.modeFor(numerics::OpKind::Norm, 0)), moe.topK,
            moe.numHashLayers > 0
                ? fmt::format("; the first {} layers hash-routed: the token's experts read from "
                              "tid2eid, no top-k, weighted by the same fp32 scores",
                    moe.numHashLayers)
                : std::string());
    }
    if (override != plan.perOpKind.end()) {
        return fmt::format("router: gate logits in {} as the plan says; scoring and top-k in fp32 "
                           "on those logits",
            precisionName(override->second));
    }
    const PrecisionMode mode = plan.modeFor(numerics::OpKind::Router, -1);
    // Forward::linear: sigmoid routers other than Llama-4's, and Hunyuan's, are fp32 GEMMs.
    if (moe.scoring == model::RouterScoring::Sigmoid && spec.family != model::Family::Llama4) {
        return fmt::format(
            "router (DeepSeek-V3's noaux_tc): gate logits an fp32 GEMM of the {} hidden states "
            "and the gate weight, both upcast to fp32 (HF's DeepseekV3TopkRouter: "
            "F.linear(hidden_states.float(), weight.float())); sigmoid, "
            "e_score_correction_bias, the {}top-{} and the renormalised weights in fp32 on "
            "those logits",
            precisionName(plan.modeFor(numerics::OpKind::Norm, -1)),
            moe.numGroups > 1 ? "group-limited " : "", moe.topK);
    }
    if (spec.family == model::Family::Hunyuan) {
        return fmt::format("router (HunYuanTopKGate): gate logits an fp32 nn.Linear of the "
                           "hidden states cast up from {}; softmax and top-{} in fp32",
            precisionName(mode), moe.topK);
    }
    if (spec.family == model::Family::Llama4) {
        return fmt::format("router (Llama4Router): gate logits a plain linear in {}, the top-{} "
                           "taken on them, sigmoid of the chosen in fp32",
            precisionName(mode), moe.topK);
    }
    return fmt::format("router: gate logits a {0} GEMM stored in {0} (the checkpoint's dtype, "
                       "as HF's nn.Linear gate); softmax and top-{1} in fp32 on those logits",
        precisionName(mode), moe.topK);
}

} // namespace day0::exec
