// bf16-mixed training of a checkpoint (`day0 train CKPT --precision bf16-mixed`): the model
// computes on the bf16 copy of the fp32 master weights through the emulated-bf16 backward
// (exec::GradientOptions::emulated), the trainer keeps fp32 masters, optimizer state and
// gradients. Against the fp64 run of the same steps on shrunk Llama-3.1-8B.
#include "actions/checkpoint_trainable.h"
#include "actions/train.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "numerics/float_formats.h"
#include "shrunk.h"
#include "train/synthetic_corpus.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <random>

using namespace day0;

namespace {

std::filesystem::path shrunkLlama() { return actions::test::shrunkGqaLlama("llama-bf16"); }

train::TrainOptions run(std::int64_t steps, train::TrainPrecision precision, double lr = 3e-3)
{
    train::TrainOptions o;
    o.steps = steps;
    o.globalBatch = 4;
    o.sequenceLength = 24;
    o.seed = 5;
    o.schedule = { train::ScheduleKind::WarmupCosine, lr, lr / 10, 2, steps };
    o.precision = precision;
    return o;
}

/// The same four random sequences every step: a model memorises them, so its loss falls fast
/// from ln(vocab).
class FixedSequences final : public train::TrainingData {
public:
    explicit FixedSequences(int vocab)
    {
        std::mt19937 random(3);
        std::uniform_int_distribution<int> id(0, vocab - 1);
        for (auto& s : m_sequences) {
            for (int i = 0; i < 24; ++i) {
                s.push_back(id(random));
            }
        }
    }
    [[nodiscard]] train::Batch batch(
        std::int64_t /*step*/, std::int64_t first, int count, int length) const override
    {
        train::Batch b;
        for (std::int64_t i = first; i < first + count; ++i) {
            const auto& s = m_sequences[std::size_t(i % 4)];
            b.sequences.emplace_back(s.begin(), s.begin() + std::min<std::ptrdiff_t>(length, 24));
        }
        return b;
    }
    [[nodiscard]] std::string describe() const override { return "4 fixed sequences"; }

private:
    std::array<std::vector<std::int32_t>, 4> m_sequences;
};

/// ‖a − b‖₂ / ‖b‖₂.
double relativeL2(const std::vector<double>& a, const std::vector<double>& b)
{
    double diff = 0.0;
    double norm = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return std::sqrt(diff / norm);
}

/// tp=2 bf16-mixed training of `checkpoint` against one rank's bf16-mixed run of the same steps.
void expectTwoRanksFollowOne(const std::filesystem::path& checkpoint)
{
    // tp=2 bf16-mixed against one rank's bf16-mixed run of the same steps. Not bit-equal:
    // under tp each rank's row-parallel projection (o_proj, down_proj) rounds its partial sum to
    // bf16 before the group adds the partials and rounds again (as Megatron's bf16 all-reduce
    // does), where one rank rounds the whole fp32-accumulated sum once; the column-parallel
    // backward's input gradients are summed the same way. That is bf16 rounding noise of the
    // size of the bf16-mixed run's own gap to fp64, so the tolerance is that gap's.
    auto m = actions::CheckpointTrainable::load(checkpoint);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const FixedSequences corpus(int(m->spec().vocabSize));
    const std::int64_t steps = 12;
    auto wide = train::runTraining(*m, corpus, run(steps, train::TrainPrecision::F64));
    auto one = train::runTraining(*m, corpus, run(steps, train::TrainPrecision::MixedBf16));
    auto o = run(steps, train::TrainPrecision::MixedBf16);
    o.tp = 2;
    auto two = train::runTraining(*m, corpus, o);
    ASSERT_TRUE(wide.ok()) << wide.error().message;
    ASSERT_TRUE(one.ok()) << one.error().message;
    ASSERT_TRUE(two.ok()) << two.error().message;
    ASSERT_EQ(two->buffersPerRank.size(), 2u); // two ranks ran, each on its shard
    ASSERT_EQ(one->history.size(), std::size_t(steps));
    ASSERT_EQ(two->history.size(), std::size_t(steps));
    double tpGap = 0.0;
    double oneToWide = 0.0;
    double twoToWide = 0.0;
    for (std::size_t i = 0; i < std::size_t(steps); ++i) {
        const double l64 = wide->history[i].loss;
        const double l1 = one->history[i].loss;
        const double l2 = two->history[i].loss;
        tpGap = std::max(tpGap, std::abs(l2 - l1));
        oneToWide = std::max(oneToWide, std::abs(l1 - l64));
        twoToWide = std::max(twoToWide, std::abs(l2 - l64));
        std::printf("step %2zu: loss fp64 %.6f bf16-mixed tp=1 %.6f tp=2 %.6f (tp gap %.2e)\n", i,
            l64, l1, l2, std::abs(l2 - l1));
    }
    std::printf("bf16-mixed over %lld steps: largest loss gap tp=2 vs tp=1 %.3g nats; to fp64: "
                "tp=1 %.3g, tp=2 %.3g\n",
        static_cast<long long>(steps), tpGap, oneToWide, twoToWide);
    EXPECT_GT(wide->history.front().loss - wide->history.back().loss, 1.0); // it trains
    // Step 0 computes on the same bf16 weights: only the forward's rounding of the partials
    // differs, under one bf16 unit of a token's loss (2^-8 x 5.5 = 0.02) averaged over the
    // 96 tokens (/ sqrt 96): 2e-3. Measured on shrunk Llama: 7.3e-6 at step 0, 9.7e-4 at most
    // over the 12 steps, where one rank's bf16-mixed curve is up to 3.9e-3 from the fp64 one;
    // on shrunk DeepSeek-V3 2.7e-5 at step 0, 1.4e-3 at most, one rank up to 2.4e-3 from fp64.
    EXPECT_LE(std::abs(two->history[0].loss - one->history[0].loss), 2e-3);
    // The documented tolerance: within the bf16-mixed run's own budget against fp64 (0.02
    // nats, train_mixed_precision's tolerance above) and no more than twice one rank's
    // measured gap to fp64 (two bf16 runs each that far from fp64 are at most twice that apart).
    EXPECT_LE(tpGap, 0.02);
    EXPECT_LE(tpGap, 2.0 * oneToWide);
    // bf16 is applied under tp, too: the curve is not the fp64 one.
    EXPECT_GE(twoToWide, 5e-4);
    // fp32 masters on every rank: the shards put together are fp32 values.
    const auto& w = two->finalWeights;
    ASSERT_EQ(w.size(), one->finalWeights.size());
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](double v) { return double(float(v)) == v; }));
}

} // namespace

TEST(TrainMixedPrecision, ShrunkLlamaBf16GradientsCarryBf16SizedErrors)
{
    auto m = actions::CheckpointTrainable::load(shrunkLlama());
    ASSERT_TRUE(m.ok()) << m.error().message;
    // The bf16 copy the model computes on, as the trainer makes it from its masters.
    auto weights = m->initialValues(0);
    for (double& w : weights) {
        w = double(numerics::roundToFormat(float(w), DType::BF16));
    }
    const train::SyntheticCorpus corpus(int(m->spec().vocabSize), 5);
    const auto batch = corpus.batch(0, 0, 4, 24);
    std::vector<double> wide(weights.size());
    std::vector<double> fp32(weights.size());
    std::vector<double> bf16(weights.size());
    const auto l64 = m->lossAndGradients(weights, batch, DType::F64, wide);
    const auto l32 = m->lossAndGradients(weights, batch, DType::F32, fp32);
    const auto l16 = m->lossAndGradients(weights, batch, DType::BF16, bf16);
    ASSERT_TRUE(l64.ok() && l32.ok() && l16.ok()) << (l16.ok() ? "" : l16.error().message);
    const double e32 = relativeL2(fp32, wide);
    const double e16 = relativeL2(bf16, wide);
    std::printf("shrunk llama-3.1-8b, one batch of 4 x 24 tokens: loss fp64 %.8f, bf16 %.8f; "
                "gradient relative L2 error against fp64: fp32 %.2e, bf16 %.2e\n",
        *l64, *l16, e32, e16);
    EXPECT_LE(e32, 1e-5);
    EXPECT_GE(e16, 1e-3); // bf16 rounding is applied...
    EXPECT_LE(e16, 2e-2); // ...and only bf16 rounding: the gradient is the same gradient
    EXPECT_NE(*l16, *l64);
    EXPECT_NEAR(*l16, *l64, 1e-2);
    // Every gradient is an fp32 value: fp32 main gradients.
    for (const double g : bf16) {
        ASSERT_EQ(double(float(g)), g);
    }
}

TEST(TrainMixedPrecision, ShrunkLlamaBf16MixedLossCurveFollowsTheFp64One)
{
    auto m = actions::CheckpointTrainable::load(shrunkLlama());
    ASSERT_TRUE(m.ok()) << m.error().message;
    // From random weights the loss starts at ln 250 and falls by half in 20 steps.
    const FixedSequences corpus(int(m->spec().vocabSize));
    const std::int64_t steps = 20;
    auto wide = train::runTraining(*m, corpus, run(steps, train::TrainPrecision::F64));
    auto mixed = train::runTraining(*m, corpus, run(steps, train::TrainPrecision::MixedBf16));
    ASSERT_TRUE(wide.ok()) << wide.error().message;
    ASSERT_TRUE(mixed.ok()) << mixed.error().message;
    ASSERT_EQ(mixed->history.size(), wide->history.size());
    double gap = 0.0;
    for (std::size_t i = 0; i < wide->history.size(); ++i) {
        gap = std::max(gap, std::abs(mixed->history[i].loss - wide->history[i].loss));
        std::printf("step %2zu: loss fp64 %.6f bf16-mixed %.6f\n", i, wide->history[i].loss,
            mixed->history[i].loss);
    }
    const double fell = wide->history.front().loss - wide->history.back().loss;
    std::printf("bf16-mixed against fp64 over %lld steps: largest loss gap %.3g nats (the fp64 "
                "loss fell by %.3g)\n",
        static_cast<long long>(steps), gap, fell);
    EXPECT_GT(fell, 2.0);
    // The documented tolerance: the bf16-mixed curve stays within 0.02 nats of the fp64 one
    // (under 1% of the loss; measured 0.004 here), and differs from it by far more than fp32
    // rounding would (bf16 is applied).
    EXPECT_LE(gap, 0.02);
    EXPECT_GE(gap, 5e-4);
    // fp32 masters: the final weights are fp32 values, not bf16 ones.
    const auto& w = mixed->finalWeights;
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](double v) { return double(float(v)) == v; }));
}

TEST(TrainMixedPrecision, TheTrainActionRunsBf16MixedOnACheckpointAndComparesItsMemory)
{
    Progress progress;
    actions::TrainRequest request;
    request.model = shrunkLlama().string();
    request.options = run(2, train::TrainPrecision::MixedBf16);
    const auto out = actions::trainModel(request, progress);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->result.history.size(), 2u);
    // Set against the planner's bf16-mixed estimate (train_action_test counts it by hand).
    ASSERT_TRUE(out->memory.has_value()) << out->memoryNotCompared;
    EXPECT_NE(out->memory->plannerConfig.find("weights bf16, gradients fp32, optimizer fp32"),
        std::string::npos)
        << out->memory->plannerConfig;
    // Multi-head latent attention too: shrunk Kimi-K2 (MLA, block-FP8 weights) trains.
    request.model = actions::test::shrunk("kimi-k2", "kimi-k2").string();
    const auto mla = actions::trainModel(request, progress);
    ASSERT_TRUE(mla.ok()) << mla.error().message;
    ASSERT_EQ(mla->result.history.size(), 2u);
    EXPECT_TRUE(std::isfinite(mla->result.history.back().loss));
}

TEST(TrainMixedPrecision, ShrunkLlamaBf16MixedUnderTensorParallelismFollowsOneRanksCurve)
{
    expectTwoRanksFollowOne(actions::test::shrunkGqaLlama("llama-bf16-tp"));
}

TEST(TrainMixedPrecision, ShrunkDeepSeekV3Bf16MixedUnderTensorParallelismFollowsOneRanksCurve)
{
    // MLA under tp=2: each rank's heads (q_b_proj and kv_b_proj by rows, o_proj by columns),
    // the head-split blocks' input gradients and the shared rope key's summed over the group
    // in the emulated backward; the experts' widths split.
    expectTwoRanksFollowOne(actions::test::shrunk("deepseek-v3", "deepseek"));
}

// Multi-head latent attention (shrunk DeepSeek-V3: MLA with q_a/kv_a low-rank projections, a
// sigmoid-routed MoE layer, block-FP8 weights) in bf16-mixed beside fp64, judged as the dense
// model above is. Its weights are trained as the engine reads them (block FP8 dequantised):
// the raw FP8 codes, up to 448 x each block's scale, gave a model whose attention saturated and
// whose bf16 gradients came out 1e4 off fp64's.
TEST(TrainMixedPrecision, ShrunkDeepSeekV3Bf16MixedFollowsFp64)
{
    auto m = actions::CheckpointTrainable::load(actions::test::shrunk("deepseek-v3", "deepseek"));
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_EQ(m->spec().attention, model::AttentionKind::MLA);
    // The trained weights are the engine's (`day0 run --grad` trains those): FP8 dequantised.
    const auto dir = actions::test::shrunk("deepseek-v3", "deepseek");
    auto opened = exec::openCheckpointWeights(dir);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    Progress progress;
    auto engine = exec::Engine::create(m->spec(), **opened, true, progress, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    const auto layout = train::FlatLayout::of(m->parameters());
    auto weights = m->initialValues(0);
    for (std::size_t i = 0; i < layout.parameters.size(); ++i) {
        const auto& name = layout.parameters[i].name;
        const auto values = engine->weightTable().tensors.at(name).toDoubles();
        const auto trained = layout.slice(std::span<const double>(weights), i);
        ASSERT_TRUE(std::equal(values.begin(), values.end(), trained.begin(), trained.end()))
            << name;
    }
    for (double& w : weights) {
        w = double(numerics::roundToFormat(float(w), DType::BF16));
    }
    const train::SyntheticCorpus corpus(int(m->spec().vocabSize), 5);
    const auto batch = corpus.batch(0, 0, 4, 24);
    std::vector<double> wide(weights.size());
    std::vector<double> fp32(weights.size());
    std::vector<double> bf16(weights.size());
    const auto l64 = m->lossAndGradients(weights, batch, DType::F64, wide);
    const auto l32 = m->lossAndGradients(weights, batch, DType::F32, fp32);
    const auto l16 = m->lossAndGradients(weights, batch, DType::BF16, bf16);
    ASSERT_TRUE(l64.ok() && l32.ok() && l16.ok()) << (l16.ok() ? "" : l16.error().message);
    const double e32 = relativeL2(fp32, wide);
    const double e16 = relativeL2(bf16, wide);
    std::printf("shrunk deepseek-v3, one batch of 4 x 24 tokens: loss fp64 %.8f, bf16 %.8f; "
                "gradient relative L2 error against fp64: fp32 %.2e, bf16 %.2e\n",
        *l64, *l16, e32, e16);
    // The dense model's bounds: fp32 rounding only in fp32, bf16's and only bf16's in bf16.
    EXPECT_LE(e32, 1e-5);
    EXPECT_GE(e16, 1e-3);
    EXPECT_LE(e16, 2e-2);
    EXPECT_NE(*l16, *l64);
    EXPECT_NEAR(*l16, *l64, 1e-2);

    const FixedSequences fixed(int(m->spec().vocabSize));
    const std::int64_t steps = 12;
    auto wideRun = train::runTraining(*m, fixed, run(steps, train::TrainPrecision::F64));
    auto mixed = train::runTraining(*m, fixed, run(steps, train::TrainPrecision::MixedBf16));
    ASSERT_TRUE(wideRun.ok()) << wideRun.error().message;
    ASSERT_TRUE(mixed.ok()) << mixed.error().message;
    ASSERT_EQ(mixed->history.size(), wideRun->history.size());
    double gap = 0.0;
    for (std::size_t i = 0; i < wideRun->history.size(); ++i) {
        const auto& a = wideRun->history[i];
        const auto& b = mixed->history[i];
        gap = std::max(gap, std::abs(b.loss - a.loss));
        std::printf("step %2zu: loss fp64 %.6f bf16-mixed %.6f, gradient norm fp64 %.4f "
                    "bf16-mixed %.4f\n",
            i, a.loss, b.loss, a.gradNorm, b.gradNorm);
        // Each step's gradient norm is bf16-sized away from fp64's (it was 1e4 times it).
        EXPECT_NEAR(b.gradNorm, a.gradNorm, 0.05 * a.gradNorm) << "step " << i;
    }
    const double fell = wideRun->history.front().loss - wideRun->history.back().loss;
    std::printf("deepseek-v3 bf16-mixed against fp64 over %lld steps: largest loss gap %.3g nats "
                "(the fp64 loss fell by %.3g)\n",
        static_cast<long long>(steps), gap, fell);
    EXPECT_GT(fell, 1.0);
    EXPECT_LE(gap, 0.02); // the documented tolerance, as the dense curve's
    EXPECT_GE(gap, 5e-4);
}
