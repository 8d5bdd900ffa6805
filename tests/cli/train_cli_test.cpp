// `day0 train`: the built-in task trains and is recorded, drills recover, compression is judged
// against an uncompressed run, checkpoints it cannot train are refused by name.

#include "cli_runner.h"

#include <gtest/gtest.h>

using day0::test::runDay0;
using day0::test::scratchDir;

TEST(TrainCli, TrainsTheBuiltInTaskOverDataParallelRanksAndRecordsTheCurve)
{
    const std::string store = scratchDir("train_cli_record") + "/runs.sqlite";
    const auto r = runDay0({ "train", "next-token-mlp", "--steps", "30", "--plan", "dp=2,zero=1",
        "--precision", "bf16-mixed", "--json", "--quiet", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["loss"].size(), 30u);
    EXPECT_LT(j["loss"].back().get<double>(), j["loss"].front().get<double>() - 0.1);
    EXPECT_EQ(j["plan"], "dp=2,zero=1");
    EXPECT_EQ(j["precision"], "bf16-mixed");
    ASSERT_TRUE(j["run_id"].is_number_integer());
    const auto show = runDay0(
        { "runs", "show", std::to_string(j["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    EXPECT_EQ(run["properties"]["tool"], "train");
    EXPECT_EQ(run["model"], "next-token-mlp");
}

TEST(TrainCli, AKillDrillRestartsFromTheLastCheckpointToTheSameCurve)
{
    const std::string dir = scratchDir("train_cli_drill");
    const auto plain = runDay0({ "train", "next-token-mlp", "--steps", "20", "--plan", "dp=2",
        "--json", "--quiet", "--no-record" });
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    const auto drilled = runDay0({ "train", "next-token-mlp", "--steps", "20", "--plan", "dp=2",
        "--checkpoint-dir", dir + "/ck", "--checkpoint-every", "5", "--max-restarts", "1",
        "--drill", "kill-at=12,rank=1", "--json", "--quiet", "--no-record" });
    ASSERT_EQ(drilled.exitCode, 0) << drilled.err;
    const auto d = drilled.json();
    EXPECT_EQ(d["restarts"], 1);
    EXPECT_EQ(d["resumed_from_step"], 10);
    EXPECT_EQ(d["loss"], plain.json()["loss"]);
    // Without a restart the kill fails the job (exit 1, a check failed) and says so.
    const auto killed = runDay0({ "train", "next-token-mlp", "--steps", "20", "--plan", "dp=2",
        "--drill", "kill-at=3", "--quiet", "--no-record" });
    EXPECT_EQ(killed.exitCode, 1);
    EXPECT_NE(killed.err.find("drill: rank 0 killed at step 3"), std::string::npos) << killed.err;
}

TEST(TrainCli, AggressiveTopKWithoutErrorFeedbackIsFlaggedAsNotConverging)
{
    const auto r = runDay0({ "train", "next-token-mlp", "--steps", "200", "--plan", "dp=2",
        "--compress", "topk:0.001,ef=off", "--json", "--quiet", "--no-record" });
    EXPECT_EQ(r.exitCode, 1) << r.err;
    const auto j = r.json();
    EXPECT_FALSE(j["compression"]["converges"].get<bool>());
    EXPECT_GT(j["compression"]["gap"].get<double>(), j["compression"]["tolerance"].get<double>());
    EXPECT_EQ(j["compression"]["baseline_loss"].size(), 200u);
}

TEST(TrainCli, RefusesWhatItCannotTrainByName)
{
    const auto ckpt = runDay0({ "train", "some/checkpoint", "--no-record" });
    EXPECT_EQ(ckpt.exitCode, 2);
    EXPECT_NE(ckpt.err.find("needs the LLM backward pass"), std::string::npos) << ckpt.err;
    const auto tp = runDay0({ "train", "next-token-mlp", "--plan", "tp=2", "--no-record" });
    EXPECT_EQ(tp.exitCode, 2);
    EXPECT_NE(tp.err.find("tensor, pipeline"), std::string::npos) << tp.err;
    const auto bad = runDay0({ "train", "next-token-mlp", "--compress", "int4", "--no-record" });
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("--compress: compression 'int4'"), std::string::npos) << bad.err;
}
