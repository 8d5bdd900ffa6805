// day0 run --grad and day0 train on a shrunk Qwen3-Next (Gated DeltaNet and gated full-attention
// layers, the gated shared expert): the gradient dump lines up with the twin's float64 autograd
// in day0 compare, the gradients and training run in fp64, fp32 and emulated bf16, and what the
// backward lacks for the family (tensor parallelism) is refused by name.
#include "cli_runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using day0::test::captureNames;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

} // namespace

TEST(CliGradQwen3Next, GradientsLineUpWithTorchAutogradAndTrainingRuns)
{
    const std::string dir = scratchDir("grad_cli_qwen3next");
    const auto shrunk
        = runDay0({ "shrink", "qwen3-next-80b-a3b", "--out", dir + "/ckpt", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    // 11 ids: longer than the conv kernel (4); layers 0-2 linear attention, layer 3 full.
    const std::string ids = "5,17,42,99,7,3,11,23,64,8,31";
    auto r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "fp64", "--ids", ids,
        "--dump", dir + "/fp64", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["counted"], 10);
    const auto names = captureNames(dir + "/fp64");
    for (const char* name : { "model.layers.0.linear_attn#grad", "model.layers.3.self_attn#grad",
             "model.layers.0.linear_attn.A_log#grad", "model.layers.0.linear_attn.dt_bias#grad",
             "model.layers.0.linear_attn.conv1d.weight#grad",
             "model.layers.0.linear_attn.in_proj_qkvz.weight#grad",
             "model.layers.3.self_attn.q_proj.weight#grad",
             "model.layers.0.mlp.shared_expert_gate.weight#grad",
             "model.layers.0.mlp.shared_expert#grad", "model.norm.weight#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    // Beside the logits and the gradients, each MoE layer's routing as a forward dump names it.
    const std::size_t routing = day0::test::routingCaptures(names);
    EXPECT_TRUE(names.contains("model.layers.0.mlp.gate#topk"));
    EXPECT_EQ(names.size(),
        std::size_t(1 + j["activations"].get<int>() + j["parameters"].get<int>()) + routing);
    // The twin's float64 autograd compares by name: no capture diverges.
    if (std::system(fmt::format("{} -c 'import torch, numpy' >/dev/null 2>&1", kPython).c_str())
        == 0) {
        const auto script = std::filesystem::path(DAY0_TEST_DATA_DIR) / ".." / ".." / "plugins"
            / "torch" / "day0_dump.py";
        ASSERT_EQ(std::system(fmt::format("{} {} {}/ckpt --grad --ids {} --dtype float64 --out "
                                          "{}/torch > {}/torch.log 2>&1",
                      kPython, script.string(), dir, ids, dir, dir)
                                  .c_str()),
            0);
        const auto c = runDay0({ "compare", dir + "/torch", dir + "/fp64", "--json", "-q" });
        ASSERT_EQ(c.exitCode, 0) << c.out << c.err;
        const auto cmp = c.json();
        EXPECT_TRUE(cmp["first_divergence"].is_null()) << cmp["first_divergence"].dump();
        EXPECT_TRUE(cmp["only_in_reference"].empty()) << cmp["only_in_reference"].dump();
        EXPECT_TRUE(cmp["only_in_target"].empty()) << cmp["only_in_target"].dump();
        EXPECT_EQ(cmp["captures"].size(), names.size());
    }
    // fp32: the same names, the loss within fp32's rounding.
    r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "fp32", "--ids", ids, "--dump",
        dir + "/fp32", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NEAR(r.json()["loss"].get<double>(), j["loss"].get<double>(), 1e-5);
    EXPECT_EQ(captureNames(dir + "/fp32"), names);
    // The emulated bf16 backward runs (core/exec backward_bf16_frontier_test judges it).
    r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "bf16", "--ids", ids, "--json",
        "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NEAR(r.json()["loss"].get<double>(), j["loss"].get<double>(), 1e-2);

    // Training: fp64, fp32 and bf16-mixed run; tensor parallelism is refused by name.
    {
        std::ofstream out(dir + "/ids.txt");
        out << "1 4 9 16 25 36 49 64 81 99 121\n2 3 5 7 11 13 17 19 23 29 31\n";
    }
    for (const char* precision : { "f64", "f32" }) {
        r = runDay0({ "train", dir + "/ckpt", "--data", dir + "/ids.txt", "--steps", "3", "--batch",
            "2", "--seq", "11", "--precision", precision, "--json", "--quiet", "--no-record" });
        ASSERT_EQ(r.exitCode, 0) << precision << ": " << r.err;
        EXPECT_EQ(r.json()["loss"].size(), 3u) << precision;
    }
    r = runDay0({ "train", dir + "/ckpt", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--precision", "bf16-mixed", "--json", "--quiet", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["loss"].size(), 2u);
    r = runDay0({ "train", dir + "/ckpt", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--plan", "tp=2", "--quiet", "--no-record" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("tensor-parallel training of"), std::string::npos) << r.err;
}
