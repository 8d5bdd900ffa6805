// The 2026 models through the day0 binary: exact readings in --json, exit 2 with one line naming
// the file, key and value for what Day0 does not model, --partial outputs that say what they
// leave out, and the verbs that compute from or write a model refusing a partial reading.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

const std::string kFrontier = std::string(DAY0_TEST_DATA_DIR) + "/model/configs/frontier";

bool oneLine(const std::string& text)
{
    return !text.empty() && text.find('\n') == text.size() - 1;
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

nlohmann::json readJson(const std::string& path)
{
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

std::string writeConfig(const std::string& dir, const nlohmann::json& config)
{
    const std::string path = dir + "/config.json";
    std::ofstream(path) << config.dump(2);
    return path;
}

} // namespace

TEST(CliFrontier, InspectReadsThePublishedCounts)
{
    // gpt-oss-120b (model card arXiv:2508.10925): 116.83B total, 5.13B active counting the
    // unembedding but not the embedding.
    const auto oss = runDay0({ "inspect", "gpt-oss-120b", "--json" });
    ASSERT_EQ(oss.exitCode, 0) << oss.err;
    const auto j = oss.json();
    EXPECT_EQ(j["family"], "gpt_oss");
    EXPECT_EQ(j["params"]["total"].get<std::int64_t>(), 116'829'156'672);
    EXPECT_EQ(j["params"]["active_without_embedding"].get<std::int64_t>(), 5'132'849'472);
    EXPECT_EQ(j["moe"]["experts"], 128);
    EXPECT_EQ(j["quantization"]["scheme"], "mxfp4");
    EXPECT_EQ(j["partial"], false);
    EXPECT_TRUE(j["ignored_keys"].empty());
    EXPECT_EQ(j["layer_kinds"]["sliding"], 18);
    EXPECT_EQ(j["layer_kinds"]["attention"], 18);
    EXPECT_EQ(j["layers"][0]["window"], 128);

    // Nemotron-3 Super FP8 with its hf_quant_config.json beside the config (ModelOpt FP8), and
    // time_step_limit [0.0, Infinity] as Python's json wrote it.
    const auto nemotron = runDay0({ "inspect", "nemotron-3-super-120b-fp8", "--json" });
    ASSERT_EQ(nemotron.exitCode, 0) << nemotron.err;
    const auto n = nemotron.json();
    EXPECT_EQ(n["family"], "nemotron_h");
    EXPECT_EQ(n["quantization"]["scheme"], "fp8_tensor");
    EXPECT_EQ(n["layer_kinds"]["mamba2"], 40);
    EXPECT_EQ(n["params"]["main_model"].get<std::int64_t>(), 120'668'707'840);
    bool infinity = false;
    for (const auto& note : n["notes"]) {
        infinity = infinity || contains(note.get<std::string>(), "time_step_limit[1] = Infinity");
    }
    EXPECT_TRUE(infinity) << n["notes"].dump();

    // The text output names the layer pattern and the weights as stored.
    const auto text = runDay0({ "inspect", "deepseek-v4-pro" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_TRUE(contains(text.out, "layer pattern")) << text.out;
    EXPECT_TRUE(contains(text.out, "compressed(1:4)")) << text.out;
    EXPECT_TRUE(contains(text.out, "fp4 e2m1")) << text.out;
}

TEST(CliFrontier, UnknownStructureIsOneLineNamingFileKeyAndValue)
{
    const std::string dir = scratchDir("frontier_bad");
    auto oss = readJson(kFrontier + "/openai--gpt-oss-120b.json");

    // A per-layer list of the wrong length.
    auto shortList = oss;
    shortList["layer_types"].erase(shortList["layer_types"].begin());
    auto r = runDay0({ "inspect", writeConfig(dir, shortList) });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_TRUE(oneLine(r.err)) << r.err;
    EXPECT_TRUE(contains(r.err, "config.json")) << r.err;
    EXPECT_TRUE(contains(r.err, "layer_types")) << r.err;
    EXPECT_TRUE(contains(r.err, "35")) << r.err;

    // An unknown layer type.
    auto badType = oss;
    badType["layer_types"][3] = "hyper_attention";
    r = runDay0({ "inspect", writeConfig(dir, badType) });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_TRUE(oneLine(r.err)) << r.err;
    EXPECT_TRUE(contains(r.err, "layer_types")) << r.err;
    EXPECT_TRUE(contains(r.err, "hyper_attention")) << r.err;

    // An unknown quantisation method.
    auto badQuant = oss;
    badQuant["quantization_config"] = { { "quant_method", "awq" }, { "bits", 4 } };
    r = runDay0({ "inspect", writeConfig(dir, badQuant), "--json" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_TRUE(r.out.empty()) << "no half JSON on stdout";
    EXPECT_TRUE(oneLine(r.err)) << r.err;
    EXPECT_TRUE(contains(r.err, "quantization_config.quant_method")) << r.err;
    EXPECT_TRUE(contains(r.err, "\"awq\"")) << r.err;

    // Kimi-K2 under a fork's model_type and architecture: refused, naming its MLA/MoE keys
    // (it used to read as a 39B dense Llama).
    auto kimi = readJson(std::string(DAY0_RESOURCE_DIR) + "/configs/kimi-k2.json");
    kimi["model_type"] = "my_fork";
    kimi["architectures"] = { "MyForkForCausalLM" };
    r = runDay0({ "inspect", writeConfig(dir, kimi) });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_TRUE(oneLine(r.err)) << r.err;
    EXPECT_TRUE(contains(r.err, "my_fork")) << r.err;
    EXPECT_TRUE(contains(r.err, "n_routed_experts")) << r.err;
}

TEST(CliFrontier, PartialOutputsSayWhatTheyLeaveOut)
{
    const std::string dir = scratchDir("frontier_partial");
    auto oss = readJson(kFrontier + "/openai--gpt-oss-120b.json");
    oss["model_type"] = "oss_fork";
    oss["architectures"] = { "OssForkForCausalLM" };
    const std::string config = writeConfig(dir, oss);

    const auto inspect = runDay0({ "inspect", config, "--partial", "--json" });
    ASSERT_EQ(inspect.exitCode, 0) << inspect.err;
    const auto j = inspect.json();
    EXPECT_EQ(j["partial"], true);
    std::set<std::string> ignored;
    for (const auto& k : j["ignored_keys"]) {
        ignored.insert(k["path"].get<std::string>());
        EXPECT_FALSE(k["reason"].get<std::string>().empty());
    }
    EXPECT_EQ(ignored.count("num_local_experts"), 1u);
    EXPECT_EQ(ignored.count("layer_types"), 1u);

    const auto text = runDay0({ "inspect", config, "--partial" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_TRUE(contains(text.out, "PARTIAL reading")) << text.out;
    EXPECT_TRUE(contains(text.out, "num_local_experts")) << text.out;

    const auto memory = runDay0({ "memory", config, "--partial", "--plan", "tp=1", "--mode",
        "infer", "--cluster", "h200:1x8", "--json", "--no-record" });
    ASSERT_LE(memory.exitCode, 1) << memory.err;
    EXPECT_EQ(memory.json()["partial"], true);
    EXPECT_FALSE(memory.json()["ignored_keys"].empty());

    const auto plan = runDay0({ "plan", config, "--partial", "--cluster", "h200:1x8", "--mode",
        "infer", "--json", "--no-record" });
    ASSERT_LE(plan.exitCode, 1) << plan.err;
    const auto planJson = plan.json();
    EXPECT_EQ(planJson["partial"], true);
    bool noted = false;
    for (const auto& note : planJson["notes"]) {
        noted = noted || contains(note.get<std::string>(), "PARTIAL");
    }
    EXPECT_TRUE(noted) << plan.out;

    // shrink and run compute from or write the model: refused, naming what is not modelled.
    const auto shrink = runDay0({ "shrink", dir, "--out", dir + "/small", "--partial" });
    EXPECT_EQ(shrink.exitCode, 2);
    EXPECT_TRUE(oneLine(shrink.err)) << shrink.err;
    EXPECT_TRUE(contains(shrink.err, "num_local_experts")) << shrink.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/small"));
    const auto run = runDay0({ "run", dir, "--partial", "--ids", "1,2" });
    EXPECT_EQ(run.exitCode, 2);
    EXPECT_TRUE(contains(run.err, "needs an exact reading")) << run.err;
}

TEST(CliFrontier, ShrinkGeneratesGptOssMxfp4Experts)
{
    const std::string dir = scratchDir("frontier_shrink");
    // gpt-oss ships MXFP4 experts: shrink quantises its drawn expert weights the same way, and
    // the result verifies against its own config.
    const auto oss = runDay0({ "shrink", "gpt-oss-20b", "--out", dir + "/oss", "--window", "3" });
    ASSERT_EQ(oss.exitCode, 0) << oss.err;
    EXPECT_EQ(readJson(dir + "/oss/config.json")["quantization_config"]["quant_method"], "mxfp4");
    EXPECT_EQ(readJson(dir + "/oss/config.json")["sliding_window"], 3);
    const auto verify = runDay0({ "verify", dir + "/oss", "-q" });
    EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;
}

TEST(CliFrontier, UnquantizedShrinkRunsAndTheDeltaChunkLeavesTheLogits)
{
    const std::string dir = scratchDir("frontier_unquantized");
    // DeepSeek-V4's released format (E8M0-scaled FP8, FP4 experts) shrinks and runs; with
    // --unquantized, an unquantised shrunk model that verifies and runs.
    const auto released
        = runDay0({ "shrink", "deepseek-v4-flash", "--out", dir + "/released", "-q" });
    ASSERT_EQ(released.exitCode, 0) << released.err;
    EXPECT_TRUE(readJson(dir + "/released/config.json").contains("quantization_config"));
    const auto runReleased = runDay0({ "run", dir + "/released", "--ids", "5,17,42,99,7,3,11,23",
        "--tokens", "2", "--reference", "fp64", "--no-record", "-q" });
    EXPECT_EQ(runReleased.exitCode, 0) << runReleased.out << runReleased.err;
    // Its MTP block (num_nextn_predict_layers 1) is not part of the main forward: named.
    EXPECT_TRUE(contains(runReleased.err, "not run: the 1 MTP block (num_nextn_predict_layers"))
        << runReleased.err;
    // Its layers' outputs are hyper-connection streams, into which nothing is injected: inject
    // mode is refused by name, not failed on a shape.
    const auto inject = runDay0({ "run", dir + "/released", "--ids", "5,17,42", "--tokens", "1",
        "--reference", "fp64", "--inject", "--no-record", "-q" });
    EXPECT_EQ(inject.exitCode, 2) << inject.out << inject.err;
    EXPECT_TRUE(contains(inject.err, "inject mode of deepseek_v4")) << inject.err;
    // The Day-0 pipeline on it: every step passes in fp32, its precision step comparing the
    // layers as propagated, and with the emulated NVFP4 target (deepseek_v4_forward.cpp).
    for (const char* precision : { "fp32", "nvfp4" }) {
        const auto validate = runDay0({ "validate", dir + "/released", "--precision", precision,
            "--work", dir + "/validate-" + precision, "--no-record", "-q" });
        EXPECT_EQ(validate.exitCode, 0) << precision << validate.out << validate.err;
        EXPECT_TRUE(contains(validate.out + validate.err, "9 of 9 steps passed"))
            << validate.out << validate.err;
    }
    // Its per-layer comparison under NVFP4, with the indexer's and routers' flips.
    const auto heatmap = runDay0({ "run", dir + "/released", "--ids", "5,17,42,99,7,3,11,23,64,8",
        "--tokens", "2", "--precision", "nvfp4", "--reference", "fp32", "--no-record", "--json" });
    ASSERT_LE(heatmap.exitCode, 1) << heatmap.err;
    std::set<std::string> compared;
    const auto heatmapJson = heatmap.json();
    for (const auto& row : heatmapJson["comparison"]["captures"]) {
        compared.insert(row["name"].get<std::string>());
    }
    EXPECT_TRUE(compared.contains("model.layers.3.self_attn")) << heatmap.out;
    EXPECT_TRUE(compared.contains("model.layers.3.mlp")) << heatmap.out;
    EXPECT_TRUE(compared.contains("model.layers.3.self_attn.compressor.indexer#topk"))
        << heatmap.out;
    // `day0 shard` keeps the released format in the rank files (blocks whole), which a sharded
    // run reads; a tp that cuts a 128 × 128 scale block of the small weights is refused, named.
    const auto cut = runDay0(
        { "shard", dir + "/released", "--plan", "tp=2", "--out", dir + "/shards-tp2", "-q" });
    EXPECT_EQ(cut.exitCode, 2) << cut.err;
    EXPECT_TRUE(contains(cut.err, ".scale'")) << cut.err;
    const auto shard = runDay0(
        { "shard", dir + "/released", "--plan", "pp=2,ep=2,dp=2", "--out", dir + "/shards", "-q" });
    ASSERT_EQ(shard.exitCode, 0) << shard.err;
    const auto sharded = runDay0({ "run", dir + "/shards", "--plan", "pp=2,ep=2,dp=2", "--ids",
        "5,17,42,99,7,3,11,23", "--tokens", "2", "--no-record", "-q" });
    EXPECT_EQ(sharded.exitCode, 0) << sharded.out << sharded.err;
    const auto v4
        = runDay0({ "shrink", "deepseek-v4-flash", "--unquantized", "--out", dir + "/v4", "-q" });
    ASSERT_EQ(v4.exitCode, 0) << v4.err;
    EXPECT_FALSE(readJson(dir + "/v4/config.json").contains("quantization_config"));
    const auto run = runDay0({ "run", dir + "/v4", "--ids", "5,17,42,99,7,3,11,23", "--tokens", "2",
        "--reference", "fp64", "--no-record", "-q" });
    EXPECT_EQ(run.exitCode, 0) << run.out << run.err;

    // Qwen3.5's delta rule chunked every 3 tokens or every 64: the same fp64 logits.
    const auto qwen = runDay0({ "shrink", "qwen3.5-27b", "--out", dir + "/qwen", "-q" });
    ASSERT_EQ(qwen.exitCode, 0) << qwen.err;
    for (const char* chunk : { "64", "3" }) {
        const auto r = runDay0({ "run", dir + "/qwen", "--ids", "5,17,42,99,7,3,11,23,64,8",
            "--tokens", "2", "--precision", "fp64", "--delta-chunk", chunk, "--dump",
            dir + "/dump" + chunk, "--no-record", "-q" });
        ASSERT_EQ(r.exitCode, 0) << r.err;
    }
    const auto same = runDay0({ "compare", dir + "/dump64", dir + "/dump3", "--no-record" });
    EXPECT_EQ(same.exitCode, 0) << same.out << same.err;
    EXPECT_TRUE(contains(same.out, "0 fail")) << same.out;
    const auto bad
        = runDay0({ "run", dir + "/qwen", "--ids", "5,17", "--delta-chunk", "0", "--no-record" });
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_TRUE(contains(bad.err, "--delta-chunk")) << bad.err;
}
