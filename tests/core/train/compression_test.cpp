// Gradient compression in the data-parallel all-reduce: what each scheme sends, and whether
// training still converges on the small next-token task (same seed as the uncompressed run).
#include "comm/in_process_communicator.h"
#include "train/compression.h"
#include "train/next_token_mlp.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <mutex>

using namespace day0;
using namespace day0::train;

TEST(Compression, ParsesAndDescribes)
{
    for (const std::string text : { "none", "fp16", "bf16", "topk:0.01", "topk:0.001,ef=off" }) {
        auto c = CompressionOptions::parse(text);
        ASSERT_TRUE(c.ok()) << text << ": " << c.error().message;
        EXPECT_EQ(c->describe(), text);
    }
    EXPECT_FALSE(CompressionOptions::parse("topk:0").ok());
    EXPECT_FALSE(CompressionOptions::parse("topk:2").ok());
    EXPECT_FALSE(CompressionOptions::parse("topk:0.1,ef=maybe").ok());
    EXPECT_FALSE(CompressionOptions::parse("int8").ok());
}

TEST(Compression, EachSchemeSendsWhatItSays)
{
    // Two ranks, eight elements; rank r holds (r+1)·base.
    const std::vector<double> base { 0.1, -4.0, 0.3, 2.0, -0.05, 1.0 / 3.0, 7.0, -0.2 };
    std::int64_t sentBytes = 0; // rank 0's, by the last reduceWith
    auto reduceWith = [&](const std::string& spec, std::vector<std::vector<double>>& residuals,
                          int valueBytes = 4) {
        const auto options = *CompressionOptions::parse(spec);
        std::vector<std::vector<double>> out(2);
        std::mutex mutex;
        auto ok = comm::runInProcess(2, [&](comm::Communicator& c) -> Result<void> {
            std::vector<double> g = base;
            for (double& v : g) {
                v *= double(c.rank() + 1);
            }
            auto stats = meanAllReduce(c, g, options, residuals[std::size_t(c.rank())], valueBytes);
            if (!stats) {
                return stats.error();
            }
            std::lock_guard lock(mutex);
            if (c.rank() == 0) {
                sentBytes = stats->sentBytes;
            }
            out[std::size_t(c.rank())] = g;
            return success();
        });
        EXPECT_TRUE(ok.ok());
        EXPECT_EQ(out[0], out[1]); // every rank holds the same bits
        return out[0];
    };
    std::vector<std::vector<double>> residuals(2);
    const auto none = reduceWith("none", residuals);
    for (std::size_t i = 0; i < base.size(); ++i) {
        EXPECT_DOUBLE_EQ(none[i], 1.5 * base[i]);
    }
    const auto bf16 = reduceWith("bf16", residuals);
    // Each rank's value is rounded to bf16 before the sum, the mean rounded again.
    const double expected
        = roundTo((roundTo(0.1, DType::BF16) + roundTo(0.2, DType::BF16)) / 2.0, DType::BF16);
    EXPECT_EQ(bf16[0], expected);
    EXPECT_NE(bf16[0], none[0]);
    for (const double v : bf16) {
        EXPECT_EQ(v, roundTo(v, DType::BF16));
    }
    // Top-2 of 8 (ratio 0.25): 7 and -4 on both ranks, the rest zero.
    EXPECT_EQ(sentBytes, 8 * 2); // eight bf16 values
    const auto top = reduceWith("topk:0.25,ef=off", residuals);
    EXPECT_EQ(top, (std::vector<double> { 0, -6.0, 0, 0, 0, 0, 10.5, 0 }));
    EXPECT_EQ(sentBytes, 2 * (4 + 4)); // two int32 indices and fp32 values
    EXPECT_EQ(reduceWith("topk:0.25,ef=off", residuals, 8), top);
    EXPECT_EQ(sentBytes, 2 * (4 + 8)); // fp64 values
    EXPECT_TRUE(residuals[0].empty());
    // With error feedback what stayed behind is remembered, and comes out next time.
    const auto first = reduceWith("topk:0.25", residuals);
    EXPECT_EQ(first, top);
    EXPECT_DOUBLE_EQ(residuals[1][3], 4.0);
    EXPECT_EQ(residuals[1][6], 0.0);
    const auto second = reduceWith("topk:0.25", residuals);
    // Rank 1's index 3 now holds 4.0 + its residual 4.0 = 8.0, tying |-8.0| at index 1: the
    // lower index wins, so 1 and 6 are sent again and index 3 stays behind, grown to 8.0.
    EXPECT_DOUBLE_EQ(residuals[1][3], 8.0);
    EXPECT_EQ(second[1], -6.0);
}

namespace {

TrainOptions convergenceRun(const std::string& compression)
{
    TrainOptions o;
    o.steps = 600;
    o.globalBatch = 16;
    o.sequenceLength = 32;
    o.seed = 11;
    o.schedule = { ScheduleKind::WarmupCosine, 2e-2, 2e-3, 30, 600 };
    o.maxGradNorm = 1.0;
    o.dp = 2;
    o.compression = *CompressionOptions::parse(compression);
    return o;
}

std::vector<double> lossCurve(const std::string& compression)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    auto r = runTraining(model, corpus, convergenceRun(compression));
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    std::vector<double> curve;
    if (r.ok()) {
        for (const auto& s : r->history) {
            curve.push_back(s.loss);
        }
    }
    return curve;
}

} // namespace

TEST(Compression, TopKWithErrorFeedbackConvergesAndAggressiveTopKWithoutIsFlagged)
{
    // 3,664 parameters over dp=2 for 600 steps: top-K at 1% sends 37 per rank and step, at
    // 0.1% four.
    const auto baseline = lossCurve("none");
    ASSERT_EQ(baseline.size(), 600u);
    struct Case {
        std::string compression;
        bool converges;
    };
    for (const auto& c : std::vector<Case> { { "bf16", true }, { "topk:0.01", true },
             { "topk:0.01,ef=off", false }, { "topk:0.001,ef=off", false } }) {
        const auto curve = lossCurve(c.compression);
        auto v = judgeConvergence(baseline, curve);
        ASSERT_TRUE(v.ok()) << v.error().message;
        std::printf("%-18s %s\n", c.compression.c_str(), v->message.c_str());
        EXPECT_EQ(v->converges, c.converges) << c.compression << ": " << v->message;
    }
    EXPECT_FALSE(judgeConvergence(baseline, std::vector<double>(5, 1.0)).ok());
}
