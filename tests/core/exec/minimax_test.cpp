// MiniMax-M2 on the engine against its PyTorch twin: a shrunk MiniMax-M2.5 (block-FP8 weights,
// q/k norms across heads, partial rotary, a sigmoid router choosing by score + selection bias),
// and each of those shown to matter.
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

TEST(MiniMaxM2, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_minimax_m2";
    const auto spec = test::shrinkForTwin("minimax-m2.5", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->qkNormAcrossHeads);
    ASSERT_LT(spec->partialRotaryFactor, 1.0);
    ASSERT_TRUE(spec->moe && spec->moe->expertScoreBias);
    const std::vector<std::int64_t> prompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };
    const auto a = checkpointAgainstTorch(dir, "", prompt);
    std::printf("minimax-m2.5 logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu\n",
        a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2, a.common);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GE(a.common, 4u * 6u);
    test::expectEachFeatureMatters(dir, { "qk_norm", "partial_rotary", "score_bias" }, prompt);
    std::filesystem::remove_all(dir);
}
