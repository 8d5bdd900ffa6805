// The small next-token model's hand-written gradients against central finite differences, and
// the synthetic corpus's determinism.
#include "train/next_token_mlp.h"
#include "train/synthetic_corpus.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::train;

TEST(NextTokenMlp, GradientsMatchFiniteDifferencesForEveryParameterTensor)
{
    const NextTokenMlp model({ 11, 4, 6 });
    const SyntheticCorpus corpus(11, 5);
    const Batch batch = corpus.batch(0, 0, 3, 9);
    const FlatLayout layout = FlatLayout::of(model.parameters());
    auto w = model.initialValues(3);
    // Non-zero biases, so their gradients are exercised away from the initial point.
    for (std::size_t i = 0; i < w.size(); ++i) {
        w[i] += 0.05 * std::sin(double(i));
    }
    std::vector<double> grad(w.size());
    auto loss = model.lossAndGradients(w, batch, DType::F64, grad);
    ASSERT_TRUE(loss.ok()) << loss.error().message;
    EXPECT_GT(*loss, 0.0);
    std::vector<double> scratch(w.size());
    double worst = 0.0;
    std::size_t checked = 0;
    for (std::size_t p = 0; p < layout.parameters.size(); ++p) {
        double tensorWorst = 0.0;
        double tensorLargest = 0.0;
        for (std::int64_t k = 0; k < layout.parameters[p].numel(); ++k) {
            const std::size_t i = std::size_t(layout.offsets[p] + k);
            const double h = 1e-5;
            auto plus = w;
            auto minus = w;
            plus[i] += h;
            minus[i] -= h;
            const double lp = *model.lossAndGradients(plus, batch, DType::F64, scratch);
            const double lm = *model.lossAndGradients(minus, batch, DType::F64, scratch);
            const double numeric = (lp - lm) / (2 * h);
            tensorWorst = std::max(tensorWorst, std::fabs(numeric - grad[i]));
            tensorLargest = std::max(tensorLargest, std::fabs(grad[i]));
            ++checked;
        }
        // Relative to the tensor's largest gradient: central differences at h=1e-5 carry
        // ~h² truncation and ~1e-16/h rounding, both far below 1e-6 of the scale.
        ASSERT_GT(tensorLargest, 0.0) << layout.parameters[p].name;
        const double rel = tensorWorst / tensorLargest;
        std::printf("%-14s finite differences: max |d|/max|g| %.2e\n",
            layout.parameters[p].name.c_str(), rel);
        EXPECT_LE(rel, 1e-6) << layout.parameters[p].name;
        worst = std::max(worst, rel);
    }
    EXPECT_EQ(checked, std::size_t(layout.total));
}

TEST(NextTokenMlp, EmulatedPrecisionsRoundTheArithmeticAndBadTokensAreNamed)
{
    const NextTokenMlp model({ 16, 4, 8 });
    const SyntheticCorpus corpus(16, 2);
    const Batch batch = corpus.batch(0, 0, 2, 12);
    const auto w = model.initialValues(1);
    std::vector<double> g64(w.size()), gbf(w.size());
    const double l64 = *model.lossAndGradients(w, batch, DType::F64, g64);
    const double lbf = *model.lossAndGradients(w, batch, DType::BF16, gbf);
    // bf16 keeps 8 bits: the loss moves by more than fp64 noise but stays close.
    EXPECT_NE(l64, lbf);
    EXPECT_NEAR(l64, lbf, 0.05 * l64);
    for (const double g : gbf) {
        EXPECT_EQ(g, roundTo(g, DType::BF16));
    }
    Batch bad = batch;
    bad.sequences[1][4] = 16;
    auto refused = model.lossAndGradients(w, bad, DType::F64, g64);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("sequence 1 position 4: token id 16"), std::string::npos)
        << refused.error().message;
    EXPECT_FALSE(model.lossAndGradients(w, batch, DType::F8E4M3, g64).ok());
}

TEST(SyntheticCorpus, IsAPureFunctionOfSeedStepAndIndex)
{
    const SyntheticCorpus a(32, 7);
    const SyntheticCorpus b(32, 7);
    const SyntheticCorpus c(32, 8);
    EXPECT_EQ(a.sequence(3, 5, 40), b.sequence(3, 5, 40));
    EXPECT_NE(a.sequence(3, 5, 40), a.sequence(3, 6, 40));
    EXPECT_NE(a.sequence(3, 5, 40), a.sequence(4, 5, 40));
    EXPECT_NE(a.sequence(3, 5, 40), c.sequence(3, 5, 40));
    // A dp split of a step's batch is the same sequences as the whole batch.
    const Batch whole = a.batch(2, 0, 8, 16);
    const Batch second = a.batch(2, 4, 4, 16);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(whole.sequences[std::size_t(4 + i)], second.sequences[std::size_t(i)]);
    }
    EXPECT_NEAR(SyntheticCorpus::entropyNats(), 0.8018, 1e-4);
}
