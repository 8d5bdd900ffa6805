// day0 run / compare / opcheck on a tiny generated Llama checkpoint (tests/data/exec/tiny-llama).
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using day0::test::runDay0;
using day0::test::scratchDir;
namespace fs = std::filesystem;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";
const std::string kIds = "3,17,42,99,7";

/// One reference + target + inject run, shared by the compare tests.
const std::string& precisionDumps()
{
    static const std::string dir = [] {
        const std::string d = scratchDir("precision_dumps");
        const auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "3", "--precision",
            "bf16", "--reference", "fp32", "--inject", "--dump", d, "-q" });
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return d;
    }();
    return dir;
}

void writeJson(const fs::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

} // namespace

TEST(PrecisionCli, RunWritesDumpsAndComparesAgainstTheReference)
{
    const std::string dir = scratchDir("run_json");
    const auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "3", "--precision", "bf16",
        "--reference", "fp32", "--inject", "--dump", dir, "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["target"]["generated"].size(), 3u);
    EXPECT_EQ(j["target"]["input_ids"].size(), 7u);
    EXPECT_EQ(j["reference"]["generated"], j["target"]["generated"]);
    EXPECT_EQ(j["comparison"]["status"], "pass");
    EXPECT_TRUE(j["comparison"]["first_divergence"].is_null());
    EXPECT_EQ(j["comparison"]["table"], "day0-default v5");
    EXPECT_EQ(j["fingerprint"], "llama/h64/l2/a4/kv2/v256");
    // The run says what its precision rounds where.
    const std::string recipe = j["target"]["precision_recipe"];
    EXPECT_NE(recipe.find("RoPE with cos and sin in bf16"), std::string::npos) << recipe;
    EXPECT_NE(recipe.find("softmax in fp32"), std::string::npos) << recipe;
    EXPECT_EQ(j["reference"]["precision_recipe"], "fp32 throughout (the reference)");
    for (const char* sub : { "reference", "target", "target-inject" }) {
        EXPECT_TRUE(fs::exists(fs::path(dir) / sub / "dump.json")) << sub;
        EXPECT_TRUE(fs::exists(fs::path(dir) / sub / "tensors.safetensors")) << sub;
    }
    std::ifstream in(fs::path(dir) / "target" / "dump.json");
    const auto dump = nlohmann::json::parse(in);
    EXPECT_EQ(dump["precision"], "bf16");
    bool logits = false;
    for (const auto& c : dump["captures"]) {
        logits = logits || (c["name"] == "lm_head" && c["shape"] == nlohmann::json({ 7, 256 }));
    }
    EXPECT_TRUE(logits);
}

TEST(PrecisionCli, RunTextOutputAndTargetOnlyDump)
{
    const std::string dir = scratchDir("run_text");
    auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "2", "--precision", "fp8", "--dump",
        dir, "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("target fp8"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "dump.json"));
    r = runDay0({ "run", kTiny, "--ids", kIds, "--precision", "bf16", "--reference", "fp32",
        "--tokens", "2", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("first differing greedy token"), std::string::npos);
    EXPECT_NE(r.out.find("model.layers.1"), std::string::npos);
    EXPECT_NE(r.out.find("verdicts:"), std::string::npos);
}

TEST(PrecisionCli, RunRejectsBadInput)
{
    auto r = runDay0({ "run", kTiny, "--ids", kIds, "--precision", "bf17" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("unknown precision 'bf17'"), std::string::npos) << r.err;
    r = runDay0({ "run", kTiny });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--ids"), std::string::npos);
    r = runDay0({ "run", kTiny, "--ids", "1,x" });
    EXPECT_EQ(r.exitCode, 2);
    r = runDay0({ "run", kTiny, "--ids", "1,999" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("token id 999"), std::string::npos) << r.err;
    r = runDay0({ "run", kTiny, "--prompt", "Hello" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
    r = runDay0({ "run", kTiny, "--ids", kIds, "--inject" });
    EXPECT_EQ(r.exitCode, 2);
    r = runDay0({ "run", "kimi-k2", "--ids", kIds });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("safetensors"), std::string::npos) << r.err;
}

TEST(PrecisionCli, Fp4Int4AndFp8RecipesRunAndAreJudgedByTheirOwnRules)
{
    // NVFP4 (W4A4), MXFP4 and int4 (W4A16) targets pass the default table's fp4 and int4 rules
    // and say what they round where; fp8's channel scaling names its recipe; "fp4" alone is
    // ambiguous.
    struct Recipe {
        const char* precision;
        const char* phrase;
        const char* rules;
    };
    for (const Recipe& c : { Recipe { "nvfp4", "E4M3 scale per 16", "fp4." },
             Recipe { "mxfp4", "power-of-two (E8M0) scale", "fp4." },
             Recipe { "int4", "one scale per 128 inputs", "int4." },
             Recipe { "int4-g32", "one scale per 32 inputs", "int4." } }) {
        const auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "2", "--precision",
            c.precision, "--reference", "fp32", "--inject", "--json" });
        ASSERT_EQ(r.exitCode, 0) << c.precision << ": " << r.err;
        const auto j = r.json();
        EXPECT_EQ(j["comparison"]["status"], "pass") << c.precision;
        const std::string recipe = j["target"]["precision_recipe"];
        EXPECT_NE(recipe.find(c.phrase), std::string::npos) << recipe;
        bool ownRule = false;
        for (const auto& row : j["comparison"]["captures"]) {
            ownRule = ownRule || row["verdict"]["rule"].get<std::string>().starts_with(c.rules);
        }
        EXPECT_TRUE(ownRule) << c.precision << ": judged by the " << c.rules << " rules";
    }
    auto r = runDay0({ "run", kTiny, "--ids", kIds, "--tokens", "2", "--precision", "fp8",
        "--fp8-scaling", "channel", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.json()["target"]["precision_recipe"].get<std::string>().find("FP8_DYNAMIC"),
        std::string::npos);
    r = runDay0({ "run", kTiny, "--ids", kIds, "--precision", "fp4" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("ambiguous"), std::string::npos) << r.err;
    r = runDay0({ "run", kTiny, "--ids", kIds, "--precision", "fp8", "--fp8-scaling", "row" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("channel"), std::string::npos) << r.err;
}

TEST(PrecisionCli, CompareTableJsonAndCsv)
{
    const std::string& dir = precisionDumps();
    const std::string csv = scratchDir("compare_csv") + "/cmp.csv";
    auto r = runDay0({ "compare", dir + "/reference", dir + "/target", "--local",
        dir + "/target-inject", "--csv", csv, "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("own rel_l2"), std::string::npos);
    EXPECT_NE(r.out.find("no divergence"), std::string::npos);
    std::ifstream in(csv);
    std::string header;
    std::getline(in, header);
    EXPECT_EQ(header.rfind("name,op,layer,shape,cosine", 0), 0u);
    r = runDay0({ "compare", dir + "/reference", dir + "/target", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["precision"], "BF16");
    EXPECT_GE(j["captures"].size(), 13u);
    EXPECT_TRUE(j["captures"].back().contains("logits"));
    r = runDay0({ "compare", dir + "/reference", dir + "/target", "--csv", "-" });
    EXPECT_EQ(r.out.rfind("name,op", 0), 0u);
}

TEST(PrecisionCli, CompareFailsAgainstAStrictTable)
{
    const std::string& dir = precisionDumps();
    const std::string table = scratchDir("strict") + "/strict-v1.json";
    writeJson(table,
        { { "name", "strict" }, { "version", 1 },
            { "rules",
                { { { "id", "all" }, { "dtype", "*" }, { "op", "*" },
                    { "max_rel_l2", 1e-4 } } } } });
    auto r = runDay0(
        { "compare", dir + "/reference", dir + "/target", "--tolerances", table, "--json" });
    EXPECT_EQ(r.exitCode, 1) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["status"], "fail");
    EXPECT_EQ(j["first_divergence"]["capture"], "model.layers.0.input_layernorm");
    EXPECT_NE(j["first_divergence"]["reason"].get<std::string>().find("rule all of strict v1"),
        std::string::npos);
}

TEST(PrecisionCli, CompareRejectsMismatchedAndBrokenDumps)
{
    const std::string& dir = precisionDumps();
    auto r = runDay0({ "compare", dir + "/reference", dir + "/nope" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("target dump"), std::string::npos) << r.err;
    const std::string other = scratchDir("other_model");
    fs::copy(dir + "/target", other, fs::copy_options::recursive);
    std::ifstream in(other + "/dump.json");
    auto j = nlohmann::json::parse(in);
    in.close();
    j["fingerprint"] = "qwen3/h64/l2/a4/kv2/v256";
    writeJson(other + "/dump.json", j);
    r = runDay0({ "compare", dir + "/reference", other });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("different models"), std::string::npos) << r.err;
    r = runDay0({ "compare", dir + "/reference", other, "--allow-mismatch", "-q" });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    j["captures"][0]["dtype"] = "F33";
    writeJson(other + "/dump.json", j);
    r = runDay0({ "compare", dir + "/reference", other });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("F33"), std::string::npos) << r.err;
}

TEST(PrecisionCli, OpcheckReportsEveryOperator)
{
    auto r = runDay0({ "opcheck", kTiny, "--precision", "bf16", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["backends"][0]["name"], "day0-cpu");
    std::vector<std::string> ops;
    for (const auto& o : j["ops"]) {
        ops.push_back(o["op"]);
        EXPECT_EQ(o["verdict"], "pass") << o["op"] << ": " << o["reason"];
    }
    for (const char* want : { "embedding", "rms_norm", "linear self_attn.q_proj",
             "linear mlp.down_proj", "linear lm_head", "rope (llama3, rotate-half)",
             "attention (GQA)", "gated activation (silu)" }) {
        EXPECT_NE(std::find(ops.begin(), ops.end(), want), ops.end()) << want;
    }
    r = runDay0(
        { "opcheck", "qwen3-30b-a3b", "--precision", "fp16", "--max-outputs", "256", "-q" });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("router (softmax)"), std::string::npos);
    r = runDay0({ "opcheck", kTiny, "--precision", "fp64" });
    EXPECT_EQ(r.exitCode, 2);
}

TEST(PrecisionCli, RunsARealLlamaGgufFromAPrompt)
{
    const std::string gguf = std::string(DAY0_TEST_DATA_DIR) + "/exec/llama-2-tiny-random.gguf";
    const auto r = runDay0({ "run", gguf, "--prompt", "Hello world", "--tokens", "3", "--precision",
        "bf16", "--reference", "fp64", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["fingerprint"], "llama/h8/l1/a2/kv2/v32000");
    // SentencePiece from the GGUF vocabulary: BOS, then "▁Hello" (15043) and "▁world" (3186).
    EXPECT_EQ(j["prompt_ids"], nlohmann::json({ 1, 15043, 3186 }));
    EXPECT_EQ(j["target"]["generated"].size(), 3u);
    EXPECT_EQ(j["comparison"]["status"], "pass");
}
