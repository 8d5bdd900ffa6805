// Hunyuan-A13B on the engine against its PyTorch twin: a shrunk Hunyuan-A13B (RoPE with the
// dynamic NTK-alpha base, per-head q/k norms after the rotation, an FP32 softmax router, the
// shared MLP beside the experts, tied embeddings), and each of those shown to matter.
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

TEST(Hunyuan, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_hunyuan";
    const auto spec = test::shrinkForTwin("hunyuan-a13b", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->qkNorm);
    ASSERT_GT(spec->ropeScaling.alpha, 0.0);
    ASSERT_TRUE(spec->moe && spec->moe->sharedIntermediate > 0);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto a = checkpointAgainstTorch(dir, "", prompt);
    std::printf("hunyuan-a13b logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu\n",
        a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2, a.common);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GE(a.common, 4u * 8u);
    test::expectEachFeatureMatters(dir, { "ntk_alpha", "norm_after_rope" }, prompt);
    std::filesystem::remove_all(dir);
}
