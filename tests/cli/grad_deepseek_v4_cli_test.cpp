// day0 run --grad and day0 train on a shrunk DeepSeek-V4-Flash (hyper-connections, sliding, CSA
// and HCA layers, hash-routed and learned-router MoE): the gradient dump under the twin's names,
// a short fine-tune in fp64 and fp32, and what the backward lacks for it (emulated bf16, tensor
// parallelism) refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

TEST(CliGradDeepseekV4, ShrunkFlashRunsAndTrainsTheRestIsRefusedByName)
{
    const std::string dir = scratchDir("grad_cli_deepseek_v4");
    const auto shrunk = runDay0({ "shrink", "deepseek-v4-flash", "--out", dir + "/v4",
        "--unquantized", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    // 16 tokens: past the window (4), the ratio-8 compressor closes 2 entries, the ratio-4 ones
    // 4, of which the indexer keeps 2.
    auto r = runDay0({ "run", dir + "/v4", "--grad", "--precision", "fp64", "--ids",
        "5,17,42,99,7,3,11,23,64,8,120,77,31,200,9,150", "--dump", dir + "/grad", "--json",
        "--no-record", "-q" });
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
    // Shrunk Flash: sliding + hash, CSA + hash, HCA, CSA.
    for (const char* name : { "model.embed_tokens.weight#grad", "lm_head.weight#grad",
             "model.norm.weight#grad", "model.hc_head.hc_fn#grad", "model.hc_head.hc_scale#grad",
             "model.layers.0.attn_hc.fn#grad", "model.layers.0.ffn_hc.base#grad",
             "model.layers.0.self_attn.sinks#grad", "model.layers.0.self_attn.q_a_proj.weight#grad",
             "model.layers.0.mlp.gate.weight#grad",
             "model.layers.1.self_attn.compressor.position_bias#grad",
             "model.layers.1.self_attn.compressor.kv_norm.weight#grad",
             "model.layers.1.self_attn.compressor.indexer.q_b_proj.weight#grad",
             "model.layers.2.self_attn.compressor.kv_proj.weight#grad",
             "model.layers.3.mlp.experts.0.gate_proj.weight#grad",
             "model.layers.3.mlp.shared_experts.down_proj.weight#grad", "model.layers.0#grad",
             "model.layers.2.self_attn#grad", "model.layers.3.mlp#grad", "model.embed_tokens#grad",
             "model.norm#grad", "model.layers.3.mlp.gate#topk",
             "model.layers.1.self_attn.compressor.indexer#topk" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    // The selection bias only ranks the experts, tid2eid is a table: no gradient.
    EXPECT_FALSE(names.contains("model.layers.3.mlp.gate.e_score_correction_bias#grad"));
    EXPECT_FALSE(names.contains("model.layers.0.mlp.gate.tid2eid#grad"));
    {
        std::ofstream out(dir + "/ids.txt");
        out << "1 4 9 16 25 36 49 64 81 99\n2 3 5 7 11 13 17 19 23 29\n";
    }
    for (const char* precision : { "f64", "f32" }) {
        r = runDay0({ "train", dir + "/v4", "--data", dir + "/ids.txt", "--steps", "3", "--batch",
            "2", "--seq", "8", "--precision", precision, "--json", "--quiet", "--no-record" });
        ASSERT_EQ(r.exitCode, 0) << r.err;
        const auto loss = r.json()["loss"];
        ASSERT_EQ(loss.size(), 3u);
        EXPECT_LT(loss[2].get<double>(), loss[0].get<double>()) << precision;
    }
    r = runDay0({ "run", dir + "/v4", "--grad", "--precision", "bf16", "--ids", "1,2,3",
        "--no-record", "-q" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("the emulated backward does not cover DeepSeek-V4"), std::string::npos)
        << r.err;
    r = runDay0({ "train", dir + "/v4", "--data", dir + "/ids.txt", "--steps", "2", "--batch", "2",
        "--seq", "8", "--plan", "tp=2", "--quiet", "--no-record" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("tensor-parallel training of"), std::string::npos) << r.err;
}
