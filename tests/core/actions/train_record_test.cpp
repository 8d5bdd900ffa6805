// A training run's record: its loss curve goes into the run store as per-step rows and comes
// back.
#include "actions/train_record.h"
#include "history/run_store.h"
#include "train/next_token_mlp.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

using namespace day0;

TEST(TrainRecord, StoresTheLossCurveGradNormsAndEventsPerStep)
{
    const train::NextTokenMlp model({});
    const train::SyntheticCorpus corpus(32, 3);
    train::TrainOptions o;
    o.steps = 12;
    o.globalBatch = 4;
    o.sequenceLength = 12;
    o.dp = 2;
    o.zero = 1;
    o.compression = *train::CompressionOptions::parse("topk:0.01");
    auto result = train::runTraining(model, corpus, o);
    ASSERT_TRUE(result.ok()) << result.error().message;
    result->events.push_back("resuming from step-00000010 (after step 10)");
    const auto record = actions::trainRunRecord("next-token-mlp", o, *result, 0.5);
    ASSERT_TRUE(record.validate().ok()) << record.validate().error().message;
    EXPECT_EQ(record.findProperty("tool")->value, "train");
    EXPECT_EQ(record.info.plan, "dp=2,zero=1");
    EXPECT_EQ(record.info.precision, "f64");
    EXPECT_EQ(record.findProperty("compression")->value, "topk:0.01");
    EXPECT_EQ(record.findMetric("final_loss")->value, result->history.back().loss);
    // 37 entries of 3,664 at 1%, each an int32 index and an f64 value.
    EXPECT_EQ(record.findMetric("sent_bytes_per_step")->value, 37 * (4 + 8));

    const auto file = std::filesystem::temp_directory_path()
        / ("day0_train_record_" + std::to_string(::getpid()) + ".sqlite");
    std::filesystem::remove(file);
    {
        auto store = history::RunStore::open(file);
        ASSERT_TRUE(store.ok()) << store.error().message;
        auto id = store->commit(record);
        ASSERT_TRUE(id.ok()) << id.error().message;
        auto back = store->load(*id);
        ASSERT_TRUE(back.ok()) << back.error().message;
        ASSERT_EQ(back->layers.size(), 3u * 12u);
        for (std::size_t step = 0; step < 12; ++step) {
            const auto row = back->layers.find(fmt::format("step.{}", step), "loss");
            ASSERT_TRUE(row.has_value()) << step;
            EXPECT_EQ(back->layers.row(*row).layer, int(step));
            EXPECT_EQ(back->layers.row(*row).value, result->history[step].loss);
            const auto norm = back->layers.find(fmt::format("step.{}", step), "grad_norm");
            ASSERT_TRUE(norm.has_value());
            EXPECT_EQ(back->layers.row(*norm).value, result->history[step].gradNorm);
        }
        ASSERT_EQ(back->events.size(), 1u);
        EXPECT_EQ(back->events[0].message, "resuming from step-00000010 (after step 10)");
    }
    std::filesystem::remove(file);
}

TEST(TrainRecord, TheTrainingRunsOfAStoreComeBackWithTheirCurvesNewestFirst)
{
    const train::NextTokenMlp model({});
    const train::SyntheticCorpus corpus(32, 3);
    train::TrainOptions o;
    o.steps = 6;
    o.globalBatch = 2;
    o.sequenceLength = 8;
    const auto f64 = train::runTraining(model, corpus, o);
    o.precision = train::TrainPrecision::F32;
    o.steps = 4;
    const auto f32 = train::runTraining(model, corpus, o);
    ASSERT_TRUE(f64.ok() && f32.ok());
    const auto file = std::filesystem::temp_directory_path()
        / ("day0_train_runs_" + std::to_string(::getpid()) + ".sqlite");
    std::filesystem::remove(file);
    EXPECT_TRUE(actions::readTrainingRuns(file, 0)->empty()); // a missing store: no runs
    EXPECT_FALSE(std::filesystem::exists(file)); // and it is not created
    {
        auto store = history::RunStore::open(file);
        ASSERT_TRUE(store.ok()) << store.error().message;
        o.precision = train::TrainPrecision::F64;
        ASSERT_TRUE(store->commit(actions::trainRunRecord("a", o, *f64, 0.1)).ok());
        history::RunRecord other(history::RunKind::Run); // a forward run: not a training run
        other.info.modelName = "a";
        other.layers.add("step.0", 0, "", "loss", 1.0);
        ASSERT_TRUE(store->commit(other).ok());
        o.precision = train::TrainPrecision::F32;
        ASSERT_TRUE(store->commit(actions::trainRunRecord("b", o, *f32, 0.1)).ok());
    }
    const auto runs = actions::readTrainingRuns(file, 0);
    ASSERT_TRUE(runs.ok()) << runs.error().message;
    ASSERT_EQ(runs->size(), 2u);
    EXPECT_EQ((*runs)[0].info.modelName, "b");
    EXPECT_EQ((*runs)[0].info.precision, "f32");
    EXPECT_EQ((*runs)[1].info.modelName, "a");
    const auto& curve = (*runs)[1].curve;
    ASSERT_EQ(curve.loss.size(), 6u);
    for (std::size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(curve.steps[i], std::int64_t(i));
        EXPECT_EQ(curve.loss[i], f64->history[i].loss);
        EXPECT_EQ(curve.gradNorm[i], f64->history[i].gradNorm);
        EXPECT_EQ(curve.lr[i], f64->history[i].lr);
    }
    std::filesystem::remove(file);
}

TEST(TrainRecord, AStepRowMissingAMetricOrRepeatedIsRefusedByName)
{
    history::RunRecord r(history::RunKind::Run);
    r.setProperty("tool", "train");
    r.layers.add("step.0", 0, "", "loss", 2.0);
    r.layers.add("step.0", 0, "", "grad_norm", 1.0);
    r.layers.add("step.0", 0, "", "lr", 1e-3);
    r.layers.add("step.1", 1, "", "loss", 1.5);
    r.layers.add("step.1", 1, "", "lr", 1e-3);
    EXPECT_TRUE(actions::isTrainingRun(r));
    const auto missing = actions::trainingCurve(r);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("step 1 lacks its grad_norm"), std::string::npos)
        << missing.error().message;
    r.layers.add("step.1", 1, "", "grad_norm", 0.5);
    ASSERT_TRUE(actions::trainingCurve(r).ok());
    EXPECT_EQ(actions::trainingCurve(r)->loss, (std::vector<double> { 2.0, 1.5 }));
}
