// day0 run --grad and day0 train end to end on a shrunk MiniMax-M3 checkpoint (the backward of
// exec/backward_minimax_m3.cpp; its agreement with PyTorch autograd is
// tests/core/exec/backward_minimax_m3_test.cpp's), and what they refuse by name: emulated bf16
// and tensor parallelism.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

TEST(CliGradMiniMaxM3, MiniMaxM3RunsGradAndTrainsAndRefusesWhatItDoesNotModel)
{
    const std::string dir = scratchDir("grad_minimax_m3_cli") + "/ckpt";
    const auto shrunk
        = runDay0({ "shrink", "minimax-m3", "--out", dir, "--unquantized", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    // 12 tokens: the MSA layers keep 2 of up to 6 key blocks per query.
    const std::string ids = "5,17,42,99,7,3,11,23,64,8,31,77";
    const auto wide = runDay0({ "run", dir, "--grad", "--precision", "fp64", "--ids", ids, "--json",
        "--no-record", "-q" });
    ASSERT_EQ(wide.exitCode, 0) << wide.err;
    const auto g = wide.json();
    EXPECT_EQ(g["counted"], 11);
    EXPECT_GT(g["loss"].get<double>(), 0.0);
    EXPECT_GT(g["grad_norm"].get<double>(), 0.0);
    const auto fp32 = runDay0({ "run", dir, "--grad", "--precision", "fp32", "--ids", ids, "--json",
        "--no-record", "-q" });
    ASSERT_EQ(fp32.exitCode, 0) << fp32.err;
    const double l64 = g["loss"].get<double>();
    EXPECT_NEAR(fp32.json()["loss"].get<double>(), l64, 1e-5 * l64);
    const auto train = runDay0({ "train", dir, "--steps", "3", "--batch", "2", "--seq", "12",
        "--json", "--no-record", "-q" });
    ASSERT_EQ(train.exitCode, 0) << train.err;
    const auto t = train.json();
    ASSERT_EQ(t["loss"].size(), 3u);
    for (const auto& loss : t["loss"]) {
        EXPECT_GT(loss.get<double>(), 0.0);
    }
    // Emulated bf16 and tensor parallelism: refused, naming MiniMax-M3.
    const auto bf16 = runDay0({ "run", dir, "--grad", "--precision", "bf16", "--ids", ids, "--json",
        "--no-record", "-q" });
    EXPECT_NE(bf16.exitCode, 0);
    EXPECT_NE(bf16.err.find("MiniMax-M3"), std::string::npos) << bf16.err;
    const auto tp = runDay0({ "train", dir, "--steps", "1", "--batch", "2", "--seq", "12", "--plan",
        "dp=1,tp=2", "--no-record", "-q" });
    EXPECT_EQ(tp.exitCode, 2) << tp.err;
    EXPECT_NE(tp.err.find("tensor-parallel training of"), std::string::npos) << tp.err;
    EXPECT_NE(tp.err.find("MiniMax-M3"), std::string::npos) << tp.err;
}
