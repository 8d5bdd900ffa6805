// day0 run --grad and day0 train end to end on a shrunk Hunyuan-A13B checkpoint (the standard
// layer's backward with its q/k norms after RoPE; its agreement with PyTorch autograd is
// tests/core/exec/backward_hunyuan_test.cpp's), its tensor-parallel training (tp=2 and dp=2,tp=2
// follow one rank's fp64 loss curve: q/k norms' gradients summed over the group, the router and
// its shared mixed MLP cut as the other families'), and what it refuses by name: the emulated
// bf16 backward.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using day0::test::captureNames;
using day0::test::routingCaptures;
using day0::test::runDay0;
using day0::test::scratchDir;

TEST(CliGradHunyuan, HunyuanRunsGradAndTrainsAndRefusesWhatItDoesNotModel)
{
    const std::string root = scratchDir("grad_hunyuan_cli");
    const std::string dir = root + "/ckpt";
    const auto shrunk = runDay0({ "shrink", "hunyuan-a13b", "--out", dir, "-q", "--no-record" });
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
    EXPECT_TRUE(names.contains("model.layers.0.self_attn.query_layernorm.weight#grad"));
    EXPECT_TRUE(names.contains("model.layers.0.mlp.shared_mlp.up_proj.weight#grad"));
    EXPECT_TRUE(names.contains("model.layers.0.mlp.gate.wg.weight#grad"));
    EXPECT_GT(routingCaptures(names), 0u);
    const auto train = runDay0({ "train", dir, "--steps", "3", "--batch", "2", "--seq", "12",
        "--json", "--no-record", "-q" });
    ASSERT_EQ(train.exitCode, 0) << train.err;
    const auto t = train.json();
    ASSERT_EQ(t["loss"].size(), 3u);
    for (const auto& loss : t["loss"]) {
        EXPECT_GT(loss.get<double>(), 0.0);
    }
    for (const std::string plan : { "dp=1,tp=2", "dp=2,tp=2" }) {
        SCOPED_TRACE(plan);
        const auto split = runDay0({ "train", dir, "--steps", "3", "--batch", "2", "--seq", "12",
            "--plan", plan, "--json", "--no-record", "-q" });
        ASSERT_EQ(split.exitCode, 0) << split.err;
        const auto l = split.json()["loss"];
        ASSERT_EQ(l.size(), 3u);
        for (std::size_t i = 0; i < 3; ++i) {
            const double one = t["loss"][i].get<double>();
            EXPECT_NEAR(l[i].get<double>(), one, 1e-9 * one) << "step " << i + 1;
        }
    }
    const auto bf16 = runDay0(
        { "run", dir, "--grad", "--precision", "bf16", "--ids", ids, "--no-record", "-q" });
    EXPECT_EQ(bf16.exitCode, 2) << bf16.err;
    EXPECT_NE(bf16.err.find("does not cover Hunyuan"), std::string::npos) << bf16.err;
}
