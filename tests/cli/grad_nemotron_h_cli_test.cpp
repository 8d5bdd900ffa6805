// day0 run --grad and day0 train on a shrunk Nemotron 3 Nano (Mamba-2, MoE and attention
// layers): the gradient dump under the checkpoint's names, a short fine-tune in fp64, fp32 and
// bf16-mixed, the emulated bf16 gradients, and what the backward lacks for it (tensor
// parallelism) refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

TEST(CliGradNemotronH, ShrunkNanoRunsAndTrainsTheRestIsRefusedByName)
{
    const std::string dir = scratchDir("grad_cli_nemotron_h");
    const auto shrunk = runDay0({ "shrink", "nemotron-3-nano-30b", "--out", dir + "/nano",
        "--layers", "4", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    // 8 tokens: longer than the conv kernel (4) and than the shrunk SSD chunk (4).
    auto r = runDay0({ "run", dir + "/nano", "--grad", "--precision", "fp64", "--ids",
        "5,17,42,99,7,3,11,23", "--dump", dir + "/grad", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_GT(r.json()["loss"].get<double>(), 0.0);
    std::set<std::string> names;
    {
        std::ifstream in(dir + "/grad/dump.json");
        const auto dump = nlohmann::json::parse(in);
        for (const auto& c : dump["captures"]) {
            names.insert(c["name"].get<std::string>());
        }
    }
    // Shrunk Nano's pattern is MEM*: Mamba-2, MoE, Mamba-2, attention.
    for (const char* name :
        { "backbone.layers.0.mixer.A_log#grad", "backbone.layers.0.mixer.D#grad",
            "backbone.layers.0.mixer.dt_bias#grad", "backbone.layers.0.mixer.conv1d.weight#grad",
            "backbone.layers.0.mixer.norm.weight#grad", "backbone.layers.1.mixer.gate.weight#grad",
            "backbone.layers.1.mixer.experts.0.up_proj.weight#grad",
            "backbone.layers.1.mixer.shared_experts.down_proj.weight#grad",
            "backbone.layers.3.mixer.q_proj.weight#grad", "backbone.embeddings.weight#grad",
            "backbone.norm_f.weight#grad", "lm_head.weight#grad", "backbone.layers.0.mixer#grad",
            "backbone.layers.0.mixer.norm#grad", "backbone.layers.1.mixer.gate#grad",
            "backbone.embeddings#grad", "backbone.norm_f#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    // e_score_correction_bias only ranks the experts: no gradient.
    EXPECT_FALSE(names.contains("backbone.layers.1.mixer.gate.e_score_correction_bias#grad"));
    {
        std::ofstream out(dir + "/ids.txt");
        out << "1 4 9 16 25 36 49 64 81 99\n2 3 5 7 11 13 17 19 23 29\n";
    }
    for (const char* precision : { "f64", "f32" }) {
        r = runDay0({ "train", dir + "/nano", "--data", dir + "/ids.txt", "--steps", "3", "--batch",
            "2", "--seq", "8", "--precision", precision, "--json", "--quiet", "--no-record" });
        ASSERT_EQ(r.exitCode, 0) << r.err;
        const auto loss = r.json()["loss"];
        ASSERT_EQ(loss.size(), 3u);
        EXPECT_LT(loss[2].get<double>(), loss[0].get<double>()) << precision;
    }
    // The emulated bf16 backward runs (core/exec backward_bf16_frontier_test judges it).
    r = runDay0({ "run", dir + "/nano", "--grad", "--precision", "bf16", "--ids", "1,2,3", "--json",
        "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_GT(r.json()["loss"].get<double>(), 0.0);
    r = runDay0({ "train", dir + "/nano", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--precision", "bf16-mixed", "--json", "--quiet", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["loss"].size(), 2u);
    r = runDay0({ "train", dir + "/nano", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "2", "--seq", "8", "--plan", "tp=2", "--quiet", "--no-record" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("tensor-parallel training of"), std::string::npos) << r.err;
}
