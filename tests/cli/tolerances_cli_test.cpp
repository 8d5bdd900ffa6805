// day0 tolerances derive / show: a table derived from healthy runs of two checkpoints (the trained
// stories260K and the random tiny Llama), read back and used by day0 run; bad input refused.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using day0::test::runDay0;
using day0::test::scratchDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(DAY0_TEST_DATA_DIR) + "/exec/";

TEST(TolerancesCli, DerivesATableThatRecordsHowAndThatRunsUse)
{
    const fs::path out = fs::path(scratchDir("tolerances_derive")) / "mine.json";
    const auto r = runDay0({ "tolerances", "derive", kData + "stories260K-hf", kData + "tiny-llama",
        "--precision", "bf16,fp16", "--runs", "2", "--tokens", "32", "--name", "mine", "--out",
        out.string(), "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("derived from 8 healthy runs (4 fp16, 4 bf16)"), std::string::npos)
        << r.out;
    std::ifstream in(out);
    const auto table = nlohmann::json::parse(in);
    EXPECT_EQ(table["name"], "mine");
    const auto& d = table["derivation"];
    EXPECT_EQ(d["runs"], 8);
    EXPECT_EQ(d["models"], nlohmann::json({ "stories260K-hf", "tiny-llama" }));
    EXPECT_EQ(d["margin"], 1.5);
    EXPECT_EQ(d["command"].get<std::string>().find(DAY0_TEST_DATA_DIR), std::string::npos)
        << "no machine path recorded: " << d["command"];
    // The recorded line holds every option that shapes the table.
    EXPECT_NE(d["command"].get<std::string>().find("--name mine --version 1"), std::string::npos)
        << d["command"];
    // Every bf16 rule it derived names its largest healthy value; the fp32 rules are kept.
    int bf16 = 0;
    bool fp32 = false;
    for (const auto& rule : table["rules"]) {
        if (rule["dtype"] == "bf16") {
            ++bf16;
            EXPECT_NE(rule["note"].get<std::string>().find("largest"), std::string::npos);
        }
        fp32 = fp32 || rule["id"] == "fp32.any";
    }
    EXPECT_GE(bf16, 6);
    EXPECT_TRUE(fp32);
    // day0 run judges with it and passes a healthy bf16 run; show prints its derivation.
    const auto run = runDay0({ "run", kData + "tiny-llama", "--ids", "3,17,42,99,7", "--precision",
        "bf16", "--reference", "fp32", "--tolerances", out.string(), "--no-record", "-q" });
    EXPECT_EQ(run.exitCode, 0) << run.out << run.err;
    EXPECT_NE(run.out.find("[mine v1, BF16]"), std::string::npos) << run.out;
    const auto show = runDay0({ "tolerances", "show", out.string() });
    EXPECT_EQ(show.exitCode, 0) << show.err;
    EXPECT_NE(show.out.find("derived from 8 healthy runs"), std::string::npos) << show.out;
}

TEST(TolerancesCli, TheDefaultTableSaysHowItWasDerived)
{
    const auto show = runDay0({ "tolerances", "show" });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_NE(show.out.find("day0-default v5"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("bf16.grad.activation.router"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("healthy gradient runs"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("fp4.logits"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("stories260K-hf"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("as 1 + depth"), std::string::npos) << show.out;
}

TEST(TolerancesCli, DerivesGradientRulesFromHealthyBackwardRunsAndKeepsTheForwardRules)
{
    const fs::path out = fs::path(scratchDir("tolerances_derive_grad")) / "grad.json";
    const auto r = runDay0({ "tolerances", "derive", kData + "stories260K-hf", "--grad",
        "--precision", "bf16,fp32", "--runs", "2", "--tokens", "16", "--base", "day0-default-v4",
        "--name", "mine", "--version", "2", "--out", out.string(), "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(
        r.out.find("derived from 4 healthy gradient runs (2 fp32, 2 bf16)"), std::string::npos)
        << r.out;
    std::ifstream in(out);
    const auto table = nlohmann::json::parse(in);
    EXPECT_EQ(table["format"], 2);
    const auto& d = table["gradient_derivation"];
    EXPECT_EQ(d["runs"], 4);
    EXPECT_EQ(d["models"], nlohmann::json({ "stories260K-hf" }));
    EXPECT_EQ(d["prompts"].size(), 2U);
    EXPECT_NE(
        d["command"].get<std::string>().find("--grad --precision bf16,fp32"), std::string::npos)
        << d["command"];
    // The forward rules, growth and end-to-end rules are v4's; the gradient rules are measured.
    std::ifstream v4in(std::string(DAY0_RESOURCE_DIR) + "/tolerances/day0-default-v4.json");
    auto v4 = nlohmann::json::parse(v4in);
    // v4 spells E4M3 "fp8_e4m3", the table writer "fp8": the same dtype (parseDType reads both).
    for (const char* section : { "rules", "end_to_end" }) {
        for (auto& rule : v4[section]) {
            if (rule["dtype"] == "fp8_e4m3") {
                rule["dtype"] = "fp8";
            }
        }
    }
    EXPECT_EQ(table["rules"], v4["rules"]);
    EXPECT_EQ(table["end_to_end"], v4["end_to_end"]);
    EXPECT_EQ(table["derivation"], v4["derivation"]);
    int bf16 = 0;
    int fp32 = 0;
    for (const auto& rule : table["gradient_rules"]) {
        (rule["dtype"] == "bf16" ? bf16 : fp32) += 1;
        EXPECT_NE(rule["note"].get<std::string>().find("largest"), std::string::npos) << rule;
    }
    EXPECT_GE(bf16, 6);
    EXPECT_GE(fp32, 6);
    // fp8 has no gradient pass to derive from.
    const auto bad = runDay0({ "tolerances", "derive", kData + "stories260K-hf", "--grad",
        "--precision", "fp8", "--out", out.string() + ".bad" });
    EXPECT_EQ(bad.exitCode, 2) << bad.err;
    EXPECT_NE(bad.err.find("--precision fp8 with --grad"), std::string::npos) << bad.err;
}

TEST(TolerancesCli, BadInputIsRefusedAndNothingIsWritten)
{
    const fs::path out = fs::path(scratchDir("tolerances_bad")) / "t.json";
    auto r = runDay0({ "tolerances", "derive", kData + "no-such-model", "--out", out.string() });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
    r = runDay0({ "tolerances", "derive", kData + "tiny-llama", "--precision", "fp32", "--out",
        out.string() });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("reference precision"), std::string::npos) << r.err;
    r = runDay0({ "tolerances", "derive", kData + "tiny-llama", "--precision", "bf17" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("bf17"), std::string::npos) << r.err;
    r = runDay0({ "tolerances", "derive", kData + "tiny-llama", "--margin", "0.5" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("margin"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    r = runDay0({ "tolerances", "show", kData + "tiny-llama/config.json" });
    EXPECT_NE(r.exitCode, 0);
}

} // namespace
