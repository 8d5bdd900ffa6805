// numerics/end_to_end.h: one position's KL, agreement and NLLs, and their summary. Expected
// values computed with numpy (log-softmax, np.percentile) from the same inputs.
#include "numerics/end_to_end.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace day0::numerics;

TEST(EndToEnd, PositionMatchesNumpy)
{
    const std::vector<double> r { 1.0, 2.0, 0.5, -1.0 };
    const std::vector<double> t { 1.1, 1.9, 0.7, -1.0 };
    const auto s = comparePosition(r, t, 2, 2);
    EXPECT_NEAR(s.kl, 0.007008799200091846, 1e-15);
    EXPECT_NEAR(*s.referenceNll, 1.995181898085856, 1e-14);
    EXPECT_NEAR(*s.targetNll, 1.7908632584895814, 1e-14);
    EXPECT_TRUE(s.sameTop);
    EXPECT_EQ(s.referenceTop, 1);
    EXPECT_DOUBLE_EQ(s.topkOverlap, 1.0); // {1, 0} both
    // A shift of all logits changes nothing; identical rows have no divergence.
    std::vector<double> shifted = t;
    for (double& v : shifted) {
        v += 40.0;
    }
    EXPECT_NEAR(comparePosition(r, shifted, 2, 2).kl, s.kl, 1e-14);
    EXPECT_EQ(comparePosition(r, r, -1, 2).kl, 0.0);
    EXPECT_FALSE(comparePosition(r, r, -1, 2).referenceNll.has_value());
    // Another argmax and half the top-2 in common.
    const std::vector<double> other { 3.0, 2.0, 0.5, -1.0 };
    const auto o = comparePosition(r, other, -1, 2);
    EXPECT_FALSE(o.sameTop);
    EXPECT_DOUBLE_EQ(o.topkOverlap, 1.0);
    const std::vector<double> third { 0.0, 2.0, 3.0, -1.0 };
    EXPECT_DOUBLE_EQ(comparePosition(r, third, -1, 2).topkOverlap, 0.5);
}

TEST(EndToEnd, PercentilesAreNumpysLinearOnes)
{
    const std::vector<double> v { 5, 1, 4, 2, 3 };
    EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
    EXPECT_NEAR(percentile(v, 99), 4.96, 1e-12);
    EXPECT_NEAR(percentile(v, 99.9), 4.996, 1e-12);
    EXPECT_NEAR(percentile(v, 10), 1.4, 1e-12);
    EXPECT_EQ(percentile({}, 50), 0.0);
}

TEST(EndToEnd, SummaryCountsCurveAndPerplexity)
{
    EndToEndAccumulator acc(2);
    const std::vector<double> r { 1.0, 2.0, 0.5, -1.0 };
    const std::vector<double> t { 1.1, 1.9, 0.7, -1.0 };
    const std::vector<double> other { 3.0, 2.0, 0.5, -1.0 };
    acc.add(comparePosition(r, t, 2, 2), 0);
    acc.add(comparePosition(r, other, 1, 2), 1);
    acc.add(comparePosition(r, r, -1, 2), 0);
    const auto s = acc.summary();
    EXPECT_EQ(s.positions, 3);
    EXPECT_EQ(s.scoredTokens, 2);
    EXPECT_NEAR(s.sameTop.value, 2.0 / 3.0, 1e-15);
    ASSERT_EQ(s.klByPosition.size(), 2u);
    EXPECT_EQ(s.countByPosition[0], 2);
    EXPECT_NEAR(s.klByPosition[0], acc.klValues()[0] / 2.0, 1e-15);
    // PPL: exp of the mean NLL of the scored positions under each.
    const auto a = comparePosition(r, t, 2, 2);
    const auto b = comparePosition(r, other, 1, 2);
    EXPECT_NEAR(s.referencePpl.value, std::exp((*a.referenceNll + *b.referenceNll) / 2.0), 1e-12);
    EXPECT_NEAR(s.targetPpl.value, std::exp((*a.targetNll + *b.targetNll) / 2.0), 1e-12);
    EXPECT_NEAR(s.pplRatio.value, s.targetPpl.value / s.referencePpl.value, 1e-12);
    EXPECT_EQ(s.klMaxPosition, 1);
    std::int64_t binned = 0;
    for (const auto c : s.histogram.counts) {
        binned += c;
    }
    EXPECT_EQ(binned, 3);
}
