// `day0 validate` on DeepSeek-V4 (a homologous shrunk deepseek-v4-flash in its released format:
// block-FP8 weights with E8M0 scales, FP4 experts, dequantised on load) with the fp16 and int8
// targets: every step passes, and the precision step measured the emulated format — int8 here is
// W8A16 (precisionRecipe: the projections' weights int8, symmetric per output channel, the
// activations and everything else bf16; the router fp32 as routerRecipe says), so its logits
// drift from fp64 further than fp16's, and neither is the reference's zero.
#include "base/resources.h"
#include "pipeline/day0_steps.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace day0::pipeline {
namespace {

const StepRecord& step(const Validation& v, const std::string& id)
{
    for (const auto& s : v.result.steps) {
        if (s.id == id) {
            return s;
        }
    }
    ADD_FAILURE() << "no step " << id;
    static const StepRecord none;
    return none;
}

TEST(DeepseekV4Validate, Fp16AndInt8RunEndToEnd)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto work = std::filesystem::temp_directory_path() / "day0_deepseek_v4_validate_test";
    std::filesystem::remove_all(work);
    std::map<std::string, double> kl;
    for (const char* precision : { "fp16", "int8" }) {
        ValidateOptions o;
        o.model = std::string(DAY0_RESOURCE_DIR) + "/configs/deepseek-v4-flash.json";
        o.precision = precision;
        o.work = work / precision;
        Progress progress;
        const auto v = runValidation(o, {}, progress, {});
        ASSERT_TRUE(v.ok()) << v.error().message;
        for (const auto& s : v->result.steps) {
            EXPECT_EQ(s.status, StepStatus::Passed)
                << precision << ": " << s.id << ": " << s.report.summary << " " << s.reason;
        }
        EXPECT_TRUE(v->result.passed()) << precision;
        // The released format: its block-FP8 weights dequantised by the conversion step.
        EXPECT_NE(step(*v, "convert").report.summary.find("block-FP8 weights dequantised"),
            std::string::npos)
            << step(*v, "convert").report.summary;
        const auto& p = step(*v, "precision");
        EXPECT_NE(
            p.report.summary.find(std::string(precision) + " against fp64"), std::string::npos)
            << p.report.summary;
        EXPECT_EQ(p.report.metrics.at("verdict_fail"), 0.0) << precision;
        EXPECT_GT(p.report.metrics.at("verdict_pass"), 0.0) << precision;
        kl[precision] = p.report.metrics.at("logits_kl_mean");
        EXPECT_GT(kl[precision], 1e-12) << precision << ": the target rounded nothing";
    }
    EXPECT_GT(kl["int8"], kl["fp16"]);
    std::filesystem::remove_all(work);
}

} // namespace
} // namespace day0::pipeline
