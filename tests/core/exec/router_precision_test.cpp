// The router's line of the precision recipe (exec/router_precision.cpp), per family: DeepSeek-V3
// and V4 gate in fp32 on the activation-dtype hidden states; the softmax routers' gate is a GEMM
// in the activation dtype.
#include "exec/router_precision.h"
#include "model/config_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace day0::exec {
namespace {

model::ModelSpec bundled(const std::string& name)
{
    auto spec
        = model::readConfigFile(std::string(DAY0_RESOURCE_DIR) + "/configs/" + name + ".json");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    return *spec;
}

std::string recipe(
    const std::string& model, const std::string& precision, const std::string& ops = {})
{
    return routerRecipe(bundled(model), *parsePrecisionPlan(precision, ops));
}

TEST(RouterRecipe, DeepseekV3GatesInFp32OnTheActivationDtype)
{
    EXPECT_EQ(recipe("deepseek-v3", "bf16"),
        "router (DeepSeek-V3's noaux_tc): gate logits an fp32 GEMM of the bf16 hidden states and "
        "the gate weight, both upcast to fp32 (HF's DeepseekV3TopkRouter: "
        "F.linear(hidden_states.float(), weight.float())); sigmoid, e_score_correction_bias, the "
        "group-limited top-8 and the renormalised weights in fp32 on those logits");
    // Under a quantised plan the hidden states are bf16 and the gate is still fp32, not fp8.
    EXPECT_EQ(recipe("deepseek-v3", "fp8"), recipe("deepseek-v3", "bf16"));
    EXPECT_NE(recipe("deepseek-v3", "fp16").find("of the fp16 hidden states"), std::string::npos);
}

TEST(RouterRecipe, DeepseekV4GatesInFp32WithSqrtSoftplusAndHashLayers)
{
    EXPECT_EQ(recipe("deepseek-v4-flash", "nvfp4"),
        "router (DeepSeek-V4): gate logits an fp32 GEMM of the bf16 hidden states and the fp32 "
        "gate weight, sqrtsoftplus scores sqrt(softplus(logit)) and the top-6 of score + "
        "e_score_correction_bias in fp32; the first 3 layers hash-routed: the token's experts "
        "read from tid2eid, no top-k, weighted by the same fp32 scores; the chosen scores "
        "renormalised in fp32, times routed_scaling_factor; under every plan (an override is "
        "refused)");
    EXPECT_NE(
        recipe("deepseek-v4-flash", "fp16").find("of the fp16 hidden states"), std::string::npos);
}

TEST(RouterRecipe, SoftmaxRoutersGemmInTheActivationDtypeAndTheReferencesSayNothing)
{
    EXPECT_EQ(recipe("qwen3-30b-a3b", "nvfp4"),
        "router: gate logits a bf16 GEMM stored in bf16 (the checkpoint's dtype, as HF's "
        "nn.Linear gate); softmax and top-8 in fp32 on those logits");
    EXPECT_EQ(recipe("qwen3-30b-a3b", "fp32"), "");
    EXPECT_EQ(recipe("deepseek-v3", "fp64"), "");
    EXPECT_EQ(recipe("qwen3-8b", "bf16"), ""); // no experts
    EXPECT_NE(recipe("qwen3-30b-a3b", "bf16", "router=fp32").find("fp32 as the plan says"),
        std::string::npos);
}

} // namespace
} // namespace day0::exec
