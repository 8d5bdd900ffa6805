// day0 run --grad and day0 train on a shrunk Kimi-Linear (Kimi Delta Attention layers, MLA
// without RoPE, a dense first layer, then the sigmoid-routed MoE with shared experts): the
// gradient dump lines up with the twin's float64 autograd in day0 compare, training runs in fp64
// and fp32, and what the backward lacks for the family (emulated bf16, tensor parallelism) is
// refused by name.
#include "cli_runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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

TEST(CliGradKimiLinear, GradientsLineUpWithTorchAutogradAndTrainingRuns)
{
    const std::string dir = scratchDir("grad_cli_kimi_linear");
    const auto config = std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
        / "kimi-linear-48b-a3b.json";
    const auto shrunk
        = runDay0({ "shrink", config.string(), "--out", dir + "/ckpt", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    // 11 ids: longer than the short convs (4); layers 0-2 KDA (0 dense), layer 3 MLA.
    const std::string ids = "5,17,42,99,7,3,11,23,64,8,31";
    auto r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "fp64", "--ids", ids,
        "--dump", dir + "/fp64", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["counted"], 10);
    const auto names = captureNames(dir + "/fp64");
    for (const char* name : { "model.layers.0.self_attn#grad", "model.layers.3.self_attn#grad",
             "model.layers.0.self_attn.A_log#grad", "model.layers.0.self_attn.dt_bias#grad",
             "model.layers.0.self_attn.q_conv1d.weight#grad",
             "model.layers.1.self_attn.f_b_proj.weight#grad",
             "model.layers.1.self_attn.g_a_proj.weight#grad",
             "model.layers.2.self_attn.o_norm.weight#grad",
             "model.layers.3.self_attn.kv_b_proj.weight#grad", "model.layers.0.mlp#grad",
             "model.layers.1.block_sparse_moe.shared_experts#grad",
             "model.layers.1.block_sparse_moe.gate.weight#grad", "model.norm.weight#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    // Beside the logits and the gradients, each MoE layer's routing as a forward dump names it.
    const std::size_t routing = day0::test::routingCaptures(names);
    EXPECT_TRUE(names.contains("model.layers.1.block_sparse_moe.gate#topk"));
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
        // A sigmoid router's selection scores (#score, one per MoE layer) feed the routing-flip
        // check rather than the table of captures.
        const auto scores = std::count_if(
            names.begin(), names.end(), [](const std::string& n) { return n.ends_with("#score"); });
        EXPECT_EQ(scores, 3);
        EXPECT_EQ(cmp["captures"].size(), names.size() - std::size_t(scores));
    }
    // fp32: the same names, the loss within fp32's rounding.
    r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "fp32", "--ids", ids, "--dump",
        dir + "/fp32", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NEAR(r.json()["loss"].get<double>(), j["loss"].get<double>(), 1e-5);
    EXPECT_EQ(captureNames(dir + "/fp32"), names);
    // The emulated bf16 backward is refused by name.
    r = runDay0({ "run", dir + "/ckpt", "--grad", "--precision", "bf16", "--ids", ids,
        "--no-record", "-q" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("the emulated backward does not cover Kimi-Linear"), std::string::npos)
        << r.err;

    // Training: fp64 and fp32 run; bf16-mixed and tensor parallelism are refused by name.
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
        "1", "--seq", "8", "--precision", "bf16-mixed", "--quiet", "--no-record" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("does not cover Kimi-Linear"), std::string::npos) << r.err;
    r = runDay0({ "train", dir + "/ckpt", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--plan", "tp=2", "--quiet", "--no-record" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("tensor-parallel training of"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Kimi Delta Attention"), std::string::npos) << r.err;
}
