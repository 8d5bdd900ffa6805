// day0 train CHECKPOINT --grad-dump: the chosen steps' gradients written as gradient dumps that
// day0 compare takes (heatmap rows by the model's anchors), the first step's equal to day0 run
// --grad of the same weights and sequence, under tp=2 too, recorded with the run; what it
// refuses.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

nlohmann::json dumpJson(const std::string& dump)
{
    std::ifstream in(dump + "/dump.json");
    return nlohmann::json::parse(in);
}

std::string joined(const nlohmann::json& ids)
{
    std::string out;
    for (const auto& id : ids) {
        out += (out.empty() ? "" : ",") + std::to_string(id.get<long long>());
    }
    return out;
}

/// `day0 compare REF TARGET --json`, expecting every capture of each in the other and each
/// within `tolerance` (relative L2; an all-zero tensor exactly).
void expectSameGradients(const std::string& ref, const std::string& target, double tolerance)
{
    const auto c = runDay0({ "compare", ref, target, "--json", "-q", "--no-record" });
    ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.err;
    const auto cmp = c.json();
    EXPECT_TRUE(cmp["only_in_reference"].empty()) << cmp["only_in_reference"].dump();
    EXPECT_TRUE(cmp["only_in_target"].empty()) << cmp["only_in_target"].dump();
    ASSERT_FALSE(cmp["captures"].empty());
    for (const auto& row : cmp["captures"]) {
        const auto& m = row["metrics"];
        if (m["rel_l2"].is_number()) {
            EXPECT_LE(m["rel_l2"].get<double>(), tolerance) << row["name"];
        } else {
            EXPECT_EQ(m["max_abs"].get<double>(), 0.0) << row["name"];
        }
    }
}

} // namespace

TEST(TrainGradDumpCli, DumpsTheStepsGradientsForDay0CompareAndDay0RunGradAgrees)
{
    const std::string dir = scratchDir("train_grad_dump_cli");
    const auto shrunk = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "--layers",
        "2", "--hidden", "64", "--vocab", "256", "-q", "--no-record", "--force" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::string store = dir + "/runs.sqlite";
    const auto train
        = [&](const std::string& precision, const std::string& out, const std::string& plan) {
              return runDay0({ "train", dir + "/llama", "--steps", "3", "--batch", "1", "--seq",
                  "12", "--precision", precision, "--plan", plan, "--grad-dump", out,
                  "--grad-steps", "0,2", "--json", "-q", "--store", store });
          };
    const auto f64 = train("f64", dir + "/f64", "dp=1");
    ASSERT_EQ(f64.exitCode, 0) << f64.err;
    const auto f32 = train("f32", dir + "/f32", "dp=1");
    ASSERT_EQ(f32.exitCode, 0) << f32.err;
    const auto j = f64.json();
    ASSERT_EQ(j["grad_dumps"].size(), 2u) << j.dump();
    EXPECT_EQ(j["grad_dumps"][0]["step"], 0);
    EXPECT_EQ(j["grad_dumps"][1]["step"], 2);
    const std::string step0 = dir + "/f64/step-0";
    EXPECT_TRUE(std::filesystem::equivalent(j["grad_dumps"][0]["path"].get<std::string>(), step0));
    EXPECT_TRUE(std::filesystem::exists(dir + "/f64/step-2/tensors.safetensors"));
    // Nothing but the dumps is left in the folder (the staging folder is gone).
    std::set<std::string> entries;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/f64")) {
        entries.insert(e.path().filename().string());
    }
    EXPECT_EQ(entries, (std::set<std::string> { "step-0", "step-2" }));

    // The f64 run against the f32 run of the same seed: a gradient comparison whose rows are
    // the model's anchors, each decoder layer's backward among them.
    const auto c
        = runDay0({ "compare", step0, dir + "/f32/step-0", "--json", "-q", "--no-record" });
    ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.err;
    const auto cmp = c.json();
    EXPECT_EQ(cmp["gradients"]["order"], "backward");
    ASSERT_EQ(cmp["gradients"]["layer_backward"].size(), 2u) << cmp["gradients"].dump();
    std::set<std::string> rows;
    for (const auto& row : cmp["captures"]) {
        rows.insert(row["name"].get<std::string>());
        EXPECT_FALSE(row["stats_only"].get<bool>()) << row["name"];
    }
    for (const char* anchor : { "lm_head#grad", "model.norm#grad", "model.layers.1#grad",
             "model.layers.1.mlp#grad", "model.layers.0.self_attn#grad", "model.embed_tokens#grad",
             "model.layers.0.self_attn.q_proj.weight#grad" }) {
        EXPECT_TRUE(rows.contains(anchor)) << anchor;
    }

    // The first step computed on the checkpoint's own weights: day0 run --grad of the same
    // sequence gives the same gradients, every one of them (the training dump's parameter
    // gradients are the trainer's own buffer).
    const auto info = dumpJson(step0);
    EXPECT_EQ(info["extra"]["training"]["step"], 0);
    EXPECT_EQ(info["extra"]["training"]["sequences"], 1);
    const auto ids = joined(info["input_ids"]);
    ASSERT_FALSE(ids.empty());
    const auto run = runDay0({ "run", dir + "/llama", "--grad", "--precision", "fp64", "--ids", ids,
        "--dump", dir + "/run-grad", "--no-record", "-q" });
    ASSERT_EQ(run.exitCode, 0) << run.err;
    expectSameGradients(dir + "/run-grad", step0, 1e-12);
    // The third step's weights have moved: its gradients are not the first step's.
    EXPECT_NE(dumpJson(dir + "/f64/step-2")["extra"]["loss"], info["extra"]["loss"]);

    // Under tp=2 the replica's shards are put together: the same whole-model dump.
    const auto tp = train("f64", dir + "/tp2", "tp=2");
    ASSERT_EQ(tp.exitCode, 0) << tp.err;
    expectSameGradients(dir + "/run-grad", dir + "/tp2/step-0", 1e-9);

    // The run store holds the dumps with the run.
    const auto show = runDay0(
        { "runs", "show", std::to_string(j["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto record = show.json();
    EXPECT_EQ(record["properties"]["grad_dump_steps"], "0,2");
    // The dumps' passes count in the process's peak resident set: the record says so.
    EXPECT_NE(record["properties"]["peak_rss_note"].get<std::string>().find("--grad-dump"),
        std::string::npos);
    int artifacts = 0;
    for (const auto& a : record["artifacts"]) {
        artifacts += a["kind"] == "grad_dump" ? 1 : 0;
    }
    EXPECT_EQ(artifacts, 2) << record["artifacts"].dump();
}

TEST(TrainGradDumpCli, ABf16MixedRunDumpsItsEmulatedPassAsDay0RunGradInBf16)
{
    // The step computes in emulated bf16 on the bf16 copy of its fp32 masters: its dump is that
    // pass (an fp32 pass on the masters gave another loss, and the run failed at its check).
    const std::string dir = scratchDir("train_grad_dump_bf16");
    const auto shrunk = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "--layers",
        "2", "--hidden", "64", "--vocab", "256", "-q", "--no-record", "--force" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const auto train = runDay0({ "train", dir + "/llama", "--steps", "3", "--batch", "2", "--seq",
        "12", "--precision", "bf16-mixed", "--grad-dump", dir + "/bf16", "--grad-steps", "0,2",
        "--json", "-q", "--no-record" });
    ASSERT_EQ(train.exitCode, 0) << train.err;
    ASSERT_EQ(train.json()["grad_dumps"].size(), 2u) << train.out;
    const auto info = dumpJson(dir + "/bf16/step-0");
    EXPECT_EQ(info["precision"], "bf16");
    EXPECT_EQ(info["extra"]["training"]["sequences"], 2);
    EXPECT_NEAR(info["extra"]["training"]["replica_loss"].get<double>(),
        info["extra"]["loss"].get<double>(), 1e-12)
        << "the dump's pass is the step's own emulated pass";
    EXPECT_TRUE(std::filesystem::exists(dir + "/bf16/step-2/tensors.safetensors"));
    // Against the fp32 run of the same seed, the first step's parameter gradients differ by
    // bf16's rounding, not by nothing.
    const auto f32 = runDay0({ "train", dir + "/llama", "--steps", "1", "--batch", "2", "--seq",
        "12", "--precision", "f32", "--grad-dump", dir + "/f32", "--grad-steps", "0", "--json",
        "-q", "--no-record" });
    ASSERT_EQ(f32.exitCode, 0) << f32.err;
    const auto c = runDay0(
        { "compare", dir + "/f32/step-0", dir + "/bf16/step-0", "--json", "-q", "--no-record" });
    ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.err;
    double largest = 0.0;
    const auto cmp = c.json();
    for (const auto& row : cmp["captures"]) {
        if (row["metrics"]["rel_l2"].is_number()) {
            largest = std::max(largest, row["metrics"]["rel_l2"].get<double>());
        }
    }
    EXPECT_GT(largest, 1e-3);
    EXPECT_LT(largest, 0.2);
}

TEST(TrainGradDumpCli, DataParallelReplicasEachWriteTheirOwnAndBadRequestsAreRefused)
{
    const std::string dir = scratchDir("train_grad_dump_cli_dp");
    const std::string stories = std::string(DAY0_TEST_DATA_DIR) + "/exec/stories260K-hf";
    const auto dp = runDay0({ "train", stories, "--steps", "2", "--batch", "4", "--seq", "8",
        "--plan", "dp=2", "--grad-dump", dir + "/dp", "--json", "-q", "--no-record" });
    ASSERT_EQ(dp.exitCode, 0) << dp.err;
    ASSERT_EQ(dp.json()["grad_dumps"].size(), 2u);
    for (const char* name : { "step-1-dp0", "step-1-dp1" }) {
        const auto info = dumpJson(dir + "/dp/" + name);
        EXPECT_EQ(info["extra"]["training"]["dp"], 2) << name;
        EXPECT_EQ(info["extra"]["training"]["sequences"], 2) << name;
    }
    // Each replica saw its own sequences: its own activation gradients, but the one parameter
    // gradient of the step (the mean over the replicas), bit for bit.
    EXPECT_NE(dumpJson(dir + "/dp/step-1-dp0")["input_ids"],
        dumpJson(dir + "/dp/step-1-dp1")["input_ids"]);
    const auto c = runDay0({ "compare", dir + "/dp/step-1-dp0", dir + "/dp/step-1-dp1",
        "--allow-mismatch", "--json", "-q", "--no-record" });
    ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.err;
    int parameters = 0;
    const auto cmp = c.json();
    for (const auto& row : cmp["captures"]) {
        const auto name = row["name"].get<std::string>();
        const double maxAbs = row["metrics"]["max_abs"].get<double>();
        if (name.ends_with(".weight#grad")) {
            ++parameters;
            EXPECT_EQ(maxAbs, 0.0) << name;
        } else if (name == "model.layers.1#grad") {
            EXPECT_GT(maxAbs, 0.0);
        }
    }
    EXPECT_GT(parameters, 10);

    // every=K: steps K-1, 2K-1, ... and the last.
    const auto every = runDay0({ "train", stories, "--steps", "5", "--batch", "1", "--seq", "8",
        "--grad-dump", dir + "/every", "--grad-steps", "every=2", "--json", "-q", "--no-record" });
    ASSERT_EQ(every.exitCode, 0) << every.err;
    std::vector<int> steps;
    const auto dumps = every.json();
    for (const auto& d : dumps["grad_dumps"]) {
        steps.push_back(d["step"].get<int>());
    }
    EXPECT_EQ(steps, (std::vector<int> { 1, 3, 4 }));

    // A run that fails leaves no dump, not even of the steps before the failure.
    const auto failed = runDay0({ "train", stories, "--steps", "3", "--batch", "4", "--seq", "8",
        "--plan", "dp=2", "--drill", "fail-at=1", "--grad-dump", dir + "/failed", "--grad-steps",
        "0,1", "-q", "--no-record" });
    EXPECT_EQ(failed.exitCode, 1) << failed.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir + "/failed"));

    // A killed run leaves no dump; its resume dumps what it runs and names the step it cannot.
    const std::vector<std::string> drilled { "train", stories, "--steps", "3", "--batch", "1",
        "--seq", "8", "--checkpoint-dir", dir + "/ck", "--checkpoint-every", "1", "--grad-dump",
        dir + "/resumed", "--grad-steps", "0,2", "--json", "-q", "--no-record" };
    auto killed = drilled;
    killed.insert(killed.end(), { "--drill", "kill-at=2" });
    EXPECT_EQ(runDay0(killed).exitCode, 1);
    EXPECT_TRUE(std::filesystem::is_empty(dir + "/resumed"));
    auto resume = drilled;
    resume.push_back("--resume");
    const auto resumed = runDay0(resume);
    ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
    const auto rj = resumed.json();
    ASSERT_EQ(rj["grad_dumps"].size(), 1u);
    EXPECT_EQ(rj["grad_dumps"][0]["step"], 2);
    EXPECT_EQ(rj["grad_steps_not_run"], nlohmann::json::array({ 0 }));
    EXPECT_TRUE(std::filesystem::exists(dir + "/resumed/step-2/dump.json"));

    auto r
        = runDay0({ "train", "next-token-mlp", "--grad-dump", dir + "/mlp", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--grad-dump: the built-in task"), std::string::npos) << r.err;
    r = runDay0({ "train", stories, "--steps", "2", "--grad-dump", dir + "/x", "--grad-steps", "5",
        "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("step 5 is past the run's last step 1"), std::string::npos) << r.err;
    r = runDay0({ "train", stories, "--grad-dump", dir + "/x", "--grad-steps", "every=0", "-q",
        "--no-record" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--grad-steps 'every=0'"), std::string::npos) << r.err;
}

TEST(TrainGradDumpCli, HelpSaysWhichFamiliesTensorParallelismSplits)
{
    const auto help = runDay0({ "train", "--help" });
    ASSERT_EQ(help.exitCode, 0) << help.err;
    for (const char* what :
        { "Qwen3-MoE", "DeepSeek-V3", "Kimi-K2 with MLA", "--grad-dump", "--grad-steps" }) {
        EXPECT_NE(help.out.find(what), std::string::npos) << what;
    }
    EXPECT_EQ(help.out.find("dense Llama/Mistral/Qwen2/Qwen3"), std::string::npos) << help.out;
}
