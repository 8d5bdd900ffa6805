// day0 run --capture-state and --state-dtype on a shrunk Qwen3.5: the state anchors in the
// dump and the comparison, the state dtype in the plan, and bad values refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

} // namespace

TEST(CliState, CaptureStateAndStateDtypeOnQwen35)
{
    const std::string dir = scratchDir("state_cli");
    const auto qwen = runDay0({ "shrink", "qwen3.5-27b", "--out", dir + "/qwen", "-q" });
    ASSERT_EQ(qwen.exitCode, 0) << qwen.err;
    const std::string ids = "5,17,42,99,7,3,11,23,64,8,31";
    // fp32 with a bf16 state against fp64, by the fp32 rules: the first Gated DeltaNet layer's
    // state is where it diverges first.
    const auto r = runDay0({ "run", dir + "/qwen", "--ids", ids, "--tokens", "6", "--reference",
        "fp64", "--state-dtype", "bf16", "--capture-state", "--dump", dir + "/dump", "--json",
        "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 1) << r.out << r.err; // the state fails the fp32 rules
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["target"]["precision_plan"], "fp32 (state=bf16)");
    EXPECT_TRUE(contains(j["target"]["precision_recipe"].get<std::string>(), "recurrent state"));
    EXPECT_EQ(j["comparison"]["first_divergence"]["capture"], "model.layers.0.linear_attn#state");
    bool conv = false;
    for (const auto& row : j["comparison"]["captures"]) {
        if (row["name"] == "model.layers.0.linear_attn#state") {
            EXPECT_EQ(row["shape"], nlohmann::json::array({ 6, 6, 16, 16 })) << row.dump();
        }
        conv = conv || row["name"] == "model.layers.0.linear_attn#conv_state";
    }
    EXPECT_TRUE(conv);
    // Without --capture-state no state anchors; --state-dtype fp32 leaves the dump's logits as
    // the default run's.
    const auto plain = runDay0({ "run", dir + "/qwen", "--ids", ids, "--tokens", "6", "--dump",
        dir + "/plain", "--json", "--no-record", "-q" });
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    std::ifstream info(dir + "/plain/dump.json");
    const auto dumped = nlohmann::json::parse(info);
    ASSERT_FALSE(dumped["captures"].empty());
    for (const auto& c : dumped["captures"]) {
        EXPECT_FALSE(contains(c["name"].get<std::string>(), "state")) << c["name"];
    }
    const auto fp32 = runDay0({ "run", dir + "/qwen", "--ids", ids, "--tokens", "6",
        "--state-dtype", "fp32", "--dump", dir + "/fp32", "--no-record", "-q" });
    ASSERT_EQ(fp32.exitCode, 0) << fp32.err;
    const auto same = runDay0({ "compare", dir + "/plain", dir + "/fp32", "--json" });
    ASSERT_EQ(same.exitCode, 0) << same.out << same.err;
    for (const auto& row : nlohmann::json::parse(same.out)["captures"]) {
        if (row["name"] == "lm_head") {
            EXPECT_EQ(row["metrics"]["max_abs"], 0.0) << row.dump();
        }
    }

    const auto fp8
        = runDay0({ "run", dir + "/qwen", "--ids", "5,17", "--state-dtype", "fp8", "--no-record" });
    EXPECT_EQ(fp8.exitCode, 2);
    EXPECT_TRUE(contains(fp8.err, "--state-dtype 'fp8'")) << fp8.err;
    const auto ref = runDay0({ "run", dir + "/qwen", "--ids", "5,17", "--precision", "fp64",
        "--state-dtype", "bf16", "--no-record" });
    EXPECT_EQ(ref.exitCode, 2);
    EXPECT_TRUE(contains(ref.err, "fp64 reference keeps its recurrent state")) << ref.err;
    const auto llama = runDay0({ "run", std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama",
        "--ids", "1,2", "--capture-state", "--no-record" });
    EXPECT_EQ(llama.exitCode, 2) << llama.out << llama.err;
    EXPECT_TRUE(contains(llama.err, "no recurrent layers")) << llama.err;
}
