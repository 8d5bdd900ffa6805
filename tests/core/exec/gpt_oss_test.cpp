// gpt-oss on the engine against its PyTorch twin (plugins/torch): a shrunk gpt-oss-20b with
// every feature that distinguishes it, and each feature shown to matter.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
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
    std::filesystem::remove_all(dir);
    Progress p;
    checkpoint::ShrinkOptions so;
    so.layers = 2;
    const auto shrunk = checkpoint::shrinkModel("gpt-oss-20b", dir / "ckpt", so, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->quantization && spec->quantization->scheme == model::QuantScheme::Mxfp4);
    ASSERT_EQ(spec->layers[0].slidingWindow, 4);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto a = checkpointAgainstTorch(dir, "", prompt);
    std::printf("gpt-oss logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu\n",
        a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2, a.common);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GE(a.common, 2u * 7u);
    // Each feature, switched off in the twin, breaks the agreement: the comparison above would
    // catch an engine that lacked it, at this prompt length.
    for (const char* feature : { "sinks", "window", "clamp", "yarn_truncate", "expert_bias",
             "attention_bias", "router_bias", "interleave" }) {
        SCOPED_TRACE(feature);
        const auto off
            = checkpointAgainstTorch(dir, fmt::format("DAY0_TWIN_WITHOUT={}", feature), prompt);
        std::printf("  without %-14s logits max rel %.2e\n", feature, off.logitsMaxRel);
        EXPECT_GT(off.logitsMaxRel, 1e-3);
    }
    std::filesystem::remove_all(dir);
}
