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
