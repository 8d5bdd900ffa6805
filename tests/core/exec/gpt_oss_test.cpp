// gpt-oss on the engine against its PyTorch twin (plugins/torch): a shrunk gpt-oss-20b with
// every feature that distinguishes it, and each feature shown to matter.
#include "base/resources.h"
#include "checkpoint/convert.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

TEST(GptOss, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // The shrunk gpt-oss-20b: MXFP4 experts dequantised on load, a window of 4 under a 10-token
    // prompt, learned sinks, biased q/k/v/o, router and experts, the clamped SwiGLU, YaRN with
    // truncate false.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_gpt_oss";
    checkpoint::ShrinkOptions so;
    so.layers = 2;
    const auto spec = test::shrinkForTwin("gpt-oss-20b", dir, so);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->quantization && spec->quantization->scheme == model::QuantScheme::Mxfp4);
    ASSERT_EQ(spec->layers[0].slidingWindow, 4);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto a = checkpointAgainstTorch(dir, "", prompt);
    std::printf("gpt-oss logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu\n",
        a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2, a.common);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GE(a.common, 2u * 7u);
    // Each feature, switched off in the twin, breaks the agreement: the comparison above would
    // catch an engine that lacked it, at this prompt length.
    test::expectEachFeatureMatters(dir,
        { "sinks", "window", "clamp", "yarn_truncate", "expert_bias", "attention_bias",
            "router_bias", "interleave" },
        prompt);
    std::filesystem::remove_all(dir);
}

TEST(GptOss, Mxfp4ExpertsRunAsTheirConvertedCheckpointBitForBit)
{
    // The MXFP4 checkpoint read directly (dequantised on load) and its `day0 convert --dtype
    // f32` copy give the same logits bit for bit, in fp32 and in fp64.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_gpt_oss_mxfp4_load";
    std::filesystem::remove_all(dir);
    Progress p;
    checkpoint::ShrinkOptions so;
    so.layers = 2;
    ASSERT_TRUE(checkpoint::shrinkModel("gpt-oss-20b", dir / "mxfp4", so, p, {}).ok());
    checkpoint::ConvertOptions co;
    co.dtype = DType::F32;
    const auto converted = checkpoint::convertCheckpoint(dir / "mxfp4", dir / "f32", co, p, {});
    ASSERT_TRUE(converted.ok()) << converted.error().message;
    EXPECT_GT(converted->dequantized, 0u);
    for (const bool fp64 : { false, true }) {
        SCOPED_TRACE(fp64 ? "fp64" : "fp32");
        std::vector<double> logits[2];
        int i = 0;
        for (const char* name : { "mxfp4", "f32" }) {
            auto opened = exec::openCheckpoint(dir / name);
            ASSERT_TRUE(opened.ok()) << opened.error().message;
            auto engine = exec::Engine::create(opened->spec, *opened->weights, fp64, p, {});
            ASSERT_TRUE(engine.ok()) << engine.error().message;
            exec::RunOptions o;
            o.precision = *exec::parsePrecisionPlan(fp64 ? "fp64" : "fp32");
            o.promptIds = { 5, 17, 42, 99, 7, 3, 11, 23 };
            o.newTokens = 2;
            const auto r = engine->run(o, p, {});
            ASSERT_TRUE(r.ok()) << r.error().message;
            logits[i++] = r->dump.tensor("lm_head")->toDoubles();
        }
        EXPECT_EQ(logits[0], logits[1]);
    }
    std::filesystem::remove_all(dir);
}
