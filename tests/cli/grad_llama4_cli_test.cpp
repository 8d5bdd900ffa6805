// day0 run --grad and day0 train end to end on a shrunk Llama-4 checkpoint (the backward of
// exec/backward_llama4.cpp; its agreement with PyTorch autograd is
// tests/core/exec/backward_llama4_test.cpp's): the gradient dump holds the packed experts under
// the checkpoint's fused names and the forward's routing; what it refuses by name: tensor
// parallelism and the emulated bf16 backward.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

using day0::test::captureNames;
using day0::test::routingCaptures;
using day0::test::runDay0;
using day0::test::scratchDir;

TEST(CliGradLlama4, Llama4RunsGradAndTrainsAndRefusesWhatItDoesNotModel)
{
    // Attention chunks of 5 tokens, NoPE temperature from position 3, dense and MoE layers.
    const std::string config = (std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
        / "gradients" / "llama-4-chunked.json")
                                   .string();
    const std::string root = scratchDir("grad_llama4_cli");
    const std::string dir = root + "/ckpt";
    const auto shrunk = runDay0({ "shrink", config, "--out", dir, "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::string ids = "5,17,42,99,7,3,11,23,64,8,250,128";
    const auto grad = runDay0({ "run", dir, "--grad", "--precision", "fp64", "--ids", ids, "--dump",
        root + "/grad", "--json", "--no-record", "-q" });
    ASSERT_EQ(grad.exitCode, 0) << grad.err;
    const auto g = grad.json();
    EXPECT_EQ(g["counted"], 11);
    EXPECT_GT(g["loss"].get<double>(), 0.0);
    EXPECT_GT(g["grad_norm"].get<double>(), 0.0);
    const auto names = captureNames(root + "/grad");
    for (const char* fused : { "model.layers.1.feed_forward.experts.gate_up_proj#grad",
             "model.layers.3.feed_forward.experts.down_proj#grad",
             "model.layers.3.feed_forward.shared_expert.gate_proj.weight#grad",
             "model.layers.0.feed_forward.down_proj.weight#grad" }) {
        EXPECT_TRUE(names.contains(fused)) << fused;
    }
    EXPECT_FALSE(names.contains("model.layers.1.feed_forward.experts.0.gate_proj.weight#grad"));
    // Two MoE layers of a sigmoid router: logits, scores and choices each.
    EXPECT_EQ(routingCaptures(names), 6u);
    // fp32 within 1e-6 of fp64's loss.
    const auto narrow = runDay0({ "run", dir, "--grad", "--precision", "fp32", "--ids", ids,
        "--json", "--no-record", "-q" });
    ASSERT_EQ(narrow.exitCode, 0) << narrow.err;
    EXPECT_NEAR(narrow.json()["loss"].get<double>(), g["loss"].get<double>(), 1e-6);
    const auto train = runDay0({ "train", dir, "--steps", "3", "--batch", "2", "--seq", "12",
        "--json", "--no-record", "-q" });
    ASSERT_EQ(train.exitCode, 0) << train.err;
    const auto t = train.json();
    ASSERT_EQ(t["loss"].size(), 3u);
    for (const auto& loss : t["loss"]) {
        EXPECT_GT(loss.get<double>(), 0.0);
    }
    const auto tp = runDay0({ "train", dir, "--steps", "1", "--batch", "2", "--seq", "12", "--plan",
        "dp=1,tp=2", "--no-record", "-q" });
    EXPECT_EQ(tp.exitCode, 2) << tp.err;
    EXPECT_NE(tp.err.find("tensor-parallel training of"), std::string::npos) << tp.err;
    EXPECT_NE(tp.err.find("Llama-4"), std::string::npos) << tp.err;
    const auto bf16 = runDay0(
        { "run", dir, "--grad", "--precision", "bf16", "--ids", ids, "--no-record", "-q" });
    EXPECT_EQ(bf16.exitCode, 2) << bf16.err;
    EXPECT_NE(bf16.err.find("does not cover Llama-4"), std::string::npos) << bf16.err;
    const auto mixed = runDay0({ "train", dir, "--steps", "1", "--batch", "2", "--seq", "12",
        "--precision", "bf16-mixed", "--no-record", "-q" });
    EXPECT_EQ(mixed.exitCode, 2) << mixed.err;
    EXPECT_NE(mixed.err.find("Llama-4"), std::string::npos) << mixed.err;
}
