// The trainer on the small next-token task: data parallelism and ZeRO-1 give the single-rank
// loss curve, mixed precision keeps fp32 masters, bad options are refused by name.
#include "base/file_util.h"
#include "plan/memory_kernel.h"
#include "train/next_token_mlp.h"
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace day0;
using namespace day0::train;

namespace {

TrainOptions smallRun()
{
    TrainOptions o;
    o.steps = 30;
    o.globalBatch = 12;
    o.sequenceLength = 20;
    o.seed = 11;
    o.schedule = { ScheduleKind::WarmupCosine, 2e-2, 2e-3, 5, 30 };
    o.maxGradNorm = 1.0;
    return o;
}

double maxCurveDifference(const TrainResult& a, const TrainResult& b)
{
    EXPECT_EQ(a.history.size(), b.history.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.history.size() && i < b.history.size(); ++i) {
        worst = std::max(worst, std::fabs(a.history[i].loss - b.history[i].loss));
        worst = std::max(worst, std::fabs(a.history[i].gradNorm - b.history[i].gradNorm));
    }
    return worst;
}

} // namespace

TEST(Trainer, DataParallelAndZero1GiveTheSingleRankLossCurve)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = smallRun();
    auto single = runTraining(model, corpus, o);
    ASSERT_TRUE(single.ok()) << single.error().message;
    o.dp = 2;
    auto dp2 = runTraining(model, corpus, o);
    ASSERT_TRUE(dp2.ok()) << dp2.error().message;
    o.zero = 1;
    auto zero2 = runTraining(model, corpus, o);
    ASSERT_TRUE(zero2.ok()) << zero2.error().message;
    // Three ranks: 3,664 parameters do not split evenly, so the last shard is padded.
    o.dp = 3;
    auto zero3 = runTraining(model, corpus, o);
    ASSERT_TRUE(zero3.ok()) << zero3.error().message;
    const double d2 = maxCurveDifference(*single, *dp2);
    const double z2 = maxCurveDifference(*single, *zero2);
    const double z3 = maxCurveDifference(*single, *zero3);
    std::printf("fp64 loss/grad-norm curves vs single rank: dp=2 %.2e, dp=2+zero1 %.2e, "
                "dp=3+zero1 %.2e; loss %.4f -> %.4f\n",
        d2, z2, z3, single->history.front().loss, single->history.back().loss);
    EXPECT_LE(d2, 1e-9);
    EXPECT_LE(z2, 1e-9);
    EXPECT_LE(z3, 1e-9);
    // ZeRO-1 only moves where the optimizer runs: dp=2 with and without it are the same bits.
    EXPECT_EQ(dp2->finalWeights, zero2->finalWeights);
    // And the task is learnt.
    EXPECT_LT(single->history.back().loss, single->history.front().loss - 0.2);
}

TEST(Trainer, MixedPrecisionComputesInBf16OnFp32MastersAndFollowsFp64)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = smallRun();
    auto f64 = runTraining(model, corpus, o);
    ASSERT_TRUE(f64.ok()) << f64.error().message;
    o.precision = TrainPrecision::MixedBf16;
    o.dp = 2;
    o.zero = 1;
    const auto dir = std::filesystem::temp_directory_path()
        / ("day0_train_mixed_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    o.checkpointDir = dir;
    o.checkpointEvery = o.steps;
    auto mixed = runTraining(model, corpus, o);
    ASSERT_TRUE(mixed.ok()) << mixed.error().message;
    // The weights the model computes on are bf16 values.
    for (const double w : mixed->finalWeights) {
        ASSERT_EQ(w, roundTo(w, DType::BF16));
    }
    // The masters (rank 1's ZeRO-1 shard, from its checkpoint) are fp32, and most are not bf16:
    // updates smaller than a bf16 ulp accumulate there.
    CheckpointStore store(dir, 2);
    std::vector<std::string> notes;
    auto found = store.findNewestValid({ 0, 2, configurationKey(model, o) }, notes);
    ASSERT_TRUE(found.ok() && found->has_value());
    auto shard = store.loadShard(**found, 1);
    ASSERT_TRUE(shard.ok()) << shard.error().message;
    EXPECT_EQ(shard->shardBegin, 1832);
    EXPECT_EQ(shard->master.size(), 1832u);
    std::size_t notBf16 = 0;
    for (const double m : shard->master) {
        ASSERT_EQ(m, roundTo(m, DType::F32));
        notBf16 += m != roundTo(m, DType::BF16) ? 1 : 0;
    }
    EXPECT_GT(notBf16, shard->master.size() / 2);
    double worst = 0.0;
    for (std::size_t i = 0; i < f64->history.size(); ++i) {
        worst = std::max(worst, std::fabs(mixed->history[i].loss - f64->history[i].loss));
    }
    std::printf("bf16-mixed vs fp64 loss curve: max |d| %.4f (final %.4f vs %.4f)\n", worst,
        mixed->history.back().loss, f64->history.back().loss);
    EXPECT_GT(worst, 0.0);
    EXPECT_LT(worst, 0.05);
    std::filesystem::remove_all(dir);
}

TEST(Trainer, RefusesWhatItDoesNotModel)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = smallRun();
    o.zero = 2;
    o.dp = 2;
    auto zero2 = runTraining(model, corpus, o);
    ASSERT_FALSE(zero2.ok());
    EXPECT_NE(zero2.error().message.find("zero=2 is not modelled"), std::string::npos);
    o.zero = 0;
    o.globalBatch = 5;
    EXPECT_FALSE(runTraining(model, corpus, o).ok());
    o.globalBatch = 12;
    o.checkpointEvery = 5;
    EXPECT_FALSE(runTraining(model, corpus, o).ok()); // no folder
    EXPECT_FALSE(Drill::parse("explode-at=3").ok());
    EXPECT_FALSE(Drill::parse("kill-at=x").ok());
    auto drill = Drill::parse("kill-at=7,rank=1");
    ASSERT_TRUE(drill.ok());
    EXPECT_EQ(drill->step, 7);
    EXPECT_EQ(drill->rank, 1);
    auto plain = Drill::parse("hang-at=12");
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    EXPECT_EQ(plain->kind, DrillKind::Hang);
    EXPECT_EQ(plain->step, 12);
    EXPECT_EQ(plain->rank, 0);
    EXPECT_FALSE(Drill::parse("kill-at=3,rank=").ok());
    EXPECT_FALSE(Drill::parse("kill-at=3,node=1").ok());
    EXPECT_FALSE(Drill::parse("kill-at=-3").ok());
    EXPECT_FALSE(parsePrecision("fp8").ok());
}

TEST(Trainer, Zero1ShardsTheOptimizerStateAsThePlannerCountsIt)
{
    // The planner's per-rank optimizer bytes (plan/memory_kernel: fp32 master when the weights
    // are not fp32, two fp32 moments; divided over dp under ZeRO-1) against the buffers each
    // rank of the trainer really held.
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    const double params = double(FlatLayout::of(model.parameters()).total);
    struct Case {
        TrainPrecision precision;
        DType weights;
        int dp;
        int zero;
    };
    for (const auto& c : std::vector<Case> { { TrainPrecision::F32, DType::F32, 2, 0 },
             { TrainPrecision::F32, DType::F32, 2, 1 },
             { TrainPrecision::MixedBf16, DType::BF16, 2, 1 },
             { TrainPrecision::MixedBf16, DType::BF16, 4, 1 } }) {
        TrainOptions o = smallRun();
        o.steps = 2;
        o.precision = c.precision;
        o.dp = c.dp;
        o.zero = c.zero;
        auto r = runTraining(model, corpus, o);
        ASSERT_TRUE(r.ok()) << r.error().message;
        plan::Layout layout;
        layout.world = c.dp;
        layout.dp = c.dp;
        layout.zero = c.zero;
        layout.weights = c.weights;
        layout.optimizer = DType::F32;
        plan::detail::StageWeights w;
        w.denseParams = params;
        w.denseBytes = params * dtypeSize(c.weights);
        const double planned = plan::detail::modelStates(w, layout).optimizer;
        ASSERT_EQ(r->optimizerBytesPerRank.size(), std::size_t(c.dp));
        for (int rank = 0; rank < c.dp; ++rank) {
            EXPECT_EQ(double(r->optimizerBytesPerRank[std::size_t(rank)]), planned)
                << precisionName(c.precision) << " dp=" << c.dp << " zero=" << c.zero << " rank "
                << rank;
        }
    }
}

namespace {

/// The small task, reporting as its step footprint 1000 bytes per token of the batch's longest
/// sequence.
class MeasuredMlp final : public TrainableModel {
public:
    [[nodiscard]] std::vector<ParameterSpec> parameters() const override
    {
        return m_inner.parameters();
    }
    [[nodiscard]] std::vector<double> initialValues(std::uint64_t seed) const override
    {
        return m_inner.initialValues(seed);
    }
    Result<double> lossAndGradients(std::span<const double> flat, const Batch& batch, DType compute,
        std::span<double> grad) const override
    {
        return m_inner.lossAndGradients(flat, batch, compute, grad);
    }
    Result<double> lossGradientsAndFootprint(std::span<const double> flat, const Batch& batch,
        DType compute, std::span<double> grad, StepFootprint& footprint) const override
    {
        std::size_t longest = 0;
        for (const auto& s : batch.sequences) {
            longest = std::max(longest, s.size());
        }
        footprint.keptActivations = std::int64_t(1000 * longest);
        return m_inner.lossAndGradients(flat, batch, compute, grad);
    }

private:
    NextTokenMlp m_inner { {} };
};

} // namespace

TEST(Trainer, EveryRankKeepsItsBuffersAndTheLargestFootprintOfItsOwnSteps)
{
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = smallRun();
    o.steps = 2;
    o.dp = 2;
    o.zero = 1;
    const MeasuredMlp measured;
    auto r = runTraining(measured, corpus, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->buffersPerRank.size(), 2u);
    const auto params = FlatLayout::of(measured.parameters()).total;
    for (const auto& b : r->buffersPerRank) {
        // Measured in the steps that ran: no pass of its own.
        EXPECT_EQ(b.keptActivations, 1000 * o.sequenceLength);
        EXPECT_EQ(b.weights, 8 * params);
    }
    EXPECT_EQ(r->buffers.keptActivations, r->buffersPerRank[0].keptActivations);
    EXPECT_EQ(r->buffers.master, r->buffersPerRank[0].master);
    // ZeRO-1: the two ranks' master shards together are the whole buffer.
    EXPECT_EQ(r->buffersPerRank[0].master + r->buffersPerRank[1].master, 8 * params);
    // A model that does not measure reports nothing rather than a guess.
    const NextTokenMlp plain({});
    auto unmeasured = runTraining(plain, corpus, o);
    ASSERT_TRUE(unmeasured.ok()) << unmeasured.error().message;
    for (const auto& b : unmeasured->buffersPerRank) {
        EXPECT_EQ(b.keptActivations, 0);
    }
}
