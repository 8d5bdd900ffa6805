// Golden tests of `day0 inspect`: exit codes, the JSON document's integers, and one-line errors.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using day0::test::runDay0;

namespace {

const std::string kData = std::string(DAY0_TEST_DATA_DIR) + "/model";

bool oneLine(const std::string& text)
{
    return !text.empty() && text.find('\n') == text.size() - 1;
}

} // namespace

TEST(CliInspect, KimiK2Json)
{
    const auto r = runDay0({ "inspect", "kimi-k2", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["model_type"], "kimi_k2");
    EXPECT_EQ(j["family"], "deepseek_v3");
    EXPECT_EQ(j["num_layers"], 61);
    const auto& p = j["params"];
    EXPECT_EQ(p["total"].get<std::int64_t>(), 1'026'408'232'448);
    EXPECT_EQ(p["active"].get<std::int64_t>(), 32'861'500'928);
    EXPECT_EQ(p["embedding"].get<std::int64_t>(), 1'174'405'120);
    EXPECT_EQ(p["lm_head"].get<std::int64_t>(), 1'174'405'120);
    EXPECT_EQ(p["mtp"].get<std::int64_t>(), 0);
    EXPECT_EQ(p["vision"].get<std::int64_t>(), 0);
    EXPECT_EQ(p["active_without_embedding"].get<std::int64_t>(), 31'687'095'808);
    EXPECT_TRUE(p["total"].is_number_integer());
    EXPECT_EQ(j["tensors"].get<std::int64_t>(), 139'583);
    EXPECT_EQ(j["moe"]["experts"], 384);
    EXPECT_EQ(j["quantization"]["scheme"], "block_fp8");
}

TEST(CliInspect, DeepseekMtpAndVisionTowers)
{
    const auto v3 = runDay0({ "--json", "inspect", "deepseek-v3" });
    ASSERT_EQ(v3.exitCode, 0) << v3.err;
    EXPECT_EQ(v3.json()["params"]["mtp"].get<std::int64_t>(), 13'463'426'304);
    EXPECT_EQ(v3.json()["params"]["main_model"].get<std::int64_t>(), 671'026'419'200);

    const auto vl = runDay0({ "inspect", "qwen3-vl-30b-a3b", "--json" });
    ASSERT_EQ(vl.exitCode, 0) << vl.err;
    EXPECT_EQ(vl.json()["params"]["vision"].get<std::int64_t>(), 538'631'408);
    EXPECT_EQ(vl.json()["vision_tower"]["depth"], 27);
}

TEST(CliInspect, FolderAndConfigPath)
{
    const std::string folder = kData + "/indexes/llama3.2-3b";
    const auto byFolder = runDay0({ "inspect", folder, "--json" });
    ASSERT_EQ(byFolder.exitCode, 0) << byFolder.err;
    EXPECT_EQ(byFolder.json()["name"], "llama3.2-3b");
    EXPECT_EQ(byFolder.json()["params"]["lm_head"].get<std::int64_t>(), 0);
    EXPECT_EQ(byFolder.json()["params"]["total"].get<std::int64_t>(), 3'212'749'824);

    const auto byFile = runDay0({ "inspect", folder + "/config.json", "--json" });
    ASSERT_EQ(byFile.exitCode, 0) << byFile.err;
    EXPECT_EQ(byFile.json()["params"], byFolder.json()["params"]);
}

TEST(CliInspect, ReadableSummary)
{
    const auto r = runDay0({ "inspect", "deepseek-v3" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    for (const char* part : { "MLA: 128 heads", "256 routed (top-8", "1 MTP", "yarn ×40", "F8_E4M3",
             "active per token", "671,026,419,200", "routed_experts" }) {
        EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
    }
}

TEST(CliInspect, ErrorsExitTwoWithOneLine)
{
    const auto unknown = runDay0({ "inspect", "no-such-model", "--json" });
    EXPECT_EQ(unknown.exitCode, 2);
    EXPECT_TRUE(unknown.out.empty());
    EXPECT_TRUE(oneLine(unknown.err)) << unknown.err;
    EXPECT_NE(unknown.err.find("'no-such-model' is not a folder"), std::string::npos);

    const auto missing = runDay0({ "inspect", "/nonexistent/config.json" });
    EXPECT_EQ(missing.exitCode, 2);
    EXPECT_TRUE(oneLine(missing.err)) << missing.err;
    EXPECT_NE(missing.err.find("/nonexistent/config.json"), std::string::npos);

    const auto dir = day0::test::scratchDir("inspect");
    std::ofstream(dir + "/broken.json") << "{\"model_type\": \"llama\",";
    const auto malformed = runDay0({ "inspect", dir + "/broken.json" });
    EXPECT_EQ(malformed.exitCode, 2);
    EXPECT_TRUE(oneLine(malformed.err)) << malformed.err;
    EXPECT_NE(malformed.err.find("broken.json: malformed JSON"), std::string::npos);

    std::ofstream(dir + "/family.json") << R"({"model_type": "mamba9", "d_model": 64})";
    const auto family = runDay0({ "inspect", dir + "/family.json" });
    EXPECT_EQ(family.exitCode, 2);
    EXPECT_TRUE(oneLine(family.err)) << family.err;
    EXPECT_NE(family.err.find("unknown model_type 'mamba9'"), std::string::npos);
    EXPECT_NE(family.err.find("deepseek_v3"), std::string::npos);

    std::ofstream(dir + "/field.json") << R"({"model_type": "llama", "hidden_size": 4096,
        "num_hidden_layers": "many", "num_attention_heads": 32, "intermediate_size": 14336,
        "vocab_size": 32000})";
    const auto field = runDay0({ "inspect", dir + "/field.json" });
    EXPECT_EQ(field.exitCode, 2);
    EXPECT_NE(
        field.err.find("field.json: 'num_hidden_layers' must be an integer"), std::string::npos)
        << field.err;

    const auto usage = runDay0({ "inspect" });
    EXPECT_EQ(usage.exitCode, 2);
}

TEST(CliInspect, GenericDecoderWarnsOnStderr)
{
    const auto dir = day0::test::scratchDir("inspect_generic");
    std::ofstream(dir + "/config.json") << R"({"model_type": "brand_new", "hidden_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000})";
    const auto r = runDay0({ "inspect", dir, "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("warning"), std::string::npos);
    EXPECT_EQ(r.json()["family"], "generic_decoder");
    EXPECT_EQ(r.json()["warnings"].size(), 1u);
    // 2 × (4·256² attention + 3·256·512 MLP + 2·256 norms) + 2 · 1000·256 + 256
    EXPECT_EQ(r.json()["params"]["total"].get<std::int64_t>(),
        2 * (4 * 256 * 256 + 3 * 256 * 512 + 2 * 256) + 2 * 1000 * 256 + 256);
}
