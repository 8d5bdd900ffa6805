#include "numerics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace day0;
using namespace day0::numerics;

namespace {

Tensor vec(std::vector<float> v)
{
    const auto n = std::int64_t(v.size());
    return Tensor::fromFloats({ n }, v);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

} // namespace

TEST(Metrics, IdenticalTensorsAreExact)
{
    const auto m = compareTensors(vec({ 1, -2, 3 }), vec({ 1, -2, 3 }));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->relL2, 0.0);
    EXPECT_EQ(m->cosine, 1.0);
    EXPECT_TRUE(std::isinf(m->snrDb));
    EXPECT_EQ(m->within1e3, 1.0);
    EXPECT_EQ(m->maxAbsIndex, -1);
}

TEST(Metrics, HandComputedValues)
{
    const auto m = compareTensors(vec({ 1, 2, 3, 4 }), vec({ 1.1f, 2, 2.7f, 4 }));
    ASSERT_TRUE(m.ok());
    // d = [0.1, 0, -0.3, 0] (up to float rounding of 1.1 and 2.7).
    EXPECT_NEAR(m->relL2, std::sqrt(0.1 / 30.0), 1e-6);
    EXPECT_NEAR(m->maxAbs, 0.3, 1e-6);
    EXPECT_EQ(m->maxAbsIndex, 2);
    EXPECT_NEAR(m->rmse, std::sqrt(0.1 / 4.0), 1e-6);
    EXPECT_NEAR(m->snrDb, 10.0 * std::log10(300.0), 1e-4);
    EXPECT_NEAR(m->cosine, 29.2 / std::sqrt(30.0 * 28.5), 1e-6);
    EXPECT_NEAR(m->maxRel, 0.1, 1e-6);
    EXPECT_NEAR(m->meanRel, 0.05, 1e-6);
    EXPECT_DOUBLE_EQ(m->within1e3, 0.5);
    EXPECT_DOUBLE_EQ(m->within5e3, 0.5);
    EXPECT_DOUBLE_EQ(m->errorBalance, 0.0);
    EXPECT_NEAR(m->meanAbs, 0.1, 1e-6);
}

TEST(Metrics, RelativeErrorIsSafeNearZero)
{
    const auto m = compareTensors(vec({ 0, 1 }), vec({ 1e-6f, 1 }));
    ASSERT_TRUE(m.ok());
    EXPECT_NEAR(m->smallValue, 1e-3 * std::sqrt(0.5), 1e-12);
    EXPECT_NEAR(m->maxRel, 1e-6 / (1e-3 * std::sqrt(0.5)), 1e-6);
    EXPECT_TRUE(std::isfinite(m->maxRel));
    MetricOptions raw;
    raw.smallValueFraction = 0.0;
    const auto r = compareTensors(vec({ 0, 1 }), vec({ 1e-6f, 1 }), raw);
    EXPECT_TRUE(std::isinf(r->maxRel));
}

TEST(Metrics, NonFiniteValuesAreCountedNotCompared)
{
    const auto m = compareTensors(vec({ 1, kNaN, 3, kInf }), vec({ 1, kNaN, kInf, kInf }));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->count, 1);
    EXPECT_EQ(m->nanReference, 1);
    EXPECT_EQ(m->nanTarget, 1);
    EXPECT_EQ(m->infReference, 1);
    EXPECT_EQ(m->infTarget, 2);
    EXPECT_EQ(m->nonFiniteMismatch, 1);
}

TEST(Metrics, ShapeMismatchIsAnError)
{
    const auto m = compareTensors(vec({ 1, 2 }), vec({ 1, 2, 3 }));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("[2]"), std::string::npos);
    EXPECT_NE(m.error().message.find("[3]"), std::string::npos);
}

TEST(Metrics, ErrorBalanceSeesBias)
{
    const auto m = compareTensors(vec({ 1, 2, 3, 4 }), vec({ 1.01f, 2.01f, 3.01f, 4.01f }));
    EXPECT_DOUBLE_EQ(m->errorBalance, 1.0);
}

TEST(Metrics, LargeTensorsStreamInChunks)
{
    std::vector<float> r(100000);
    std::vector<float> t(100000);
    for (std::size_t i = 0; i < r.size(); ++i) {
        r[i] = float(i % 7) - 3.0f;
        t[i] = r[i] * 1.001f;
    }
    const auto m = compareTensors(vec(r), vec(t));
    EXPECT_NEAR(m->relL2, 1e-3, 1e-6);
    EXPECT_EQ(m->count, 100000);
}

TEST(Metrics, StatsOfATensor)
{
    const auto s = computeStats(vec({ 1, -3, kNaN, 2, kInf }));
    EXPECT_EQ(s.count, 5);
    EXPECT_EQ(s.nanCount, 1);
    EXPECT_EQ(s.infCount, 1);
    EXPECT_EQ(s.min, -3.0);
    EXPECT_EQ(s.max, 2.0);
    EXPECT_EQ(s.absMax, 3.0);
    EXPECT_NEAR(s.mean, 0.0, 1e-12);
    EXPECT_NEAR(s.rms, std::sqrt(14.0 / 3.0), 1e-12);
}

TEST(Metrics, LogitsKlTopKAndFirstDifference)
{
    const auto r = Tensor::fromFloats({ 2, 3 }, std::vector<float> { 1, 2, 3, 3, 2, 1 });
    const auto t = Tensor::fromFloats({ 2, 3 }, std::vector<float> { 1, 2, 3, 1, 2, 3 });
    const auto m = compareLogits(r, t);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->positions, 2);
    EXPECT_DOUBLE_EQ(m->top1Agreement, 0.5);
    EXPECT_EQ(m->firstDifferingPosition, 1);
    EXPECT_EQ(m->referenceToken, 0);
    EXPECT_EQ(m->targetToken, 2);
    const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
    const double kl = 2.0 * (std::exp(3.0) / z - std::exp(1.0) / z);
    EXPECT_NEAR(m->klMax, kl, 1e-9);
    EXPECT_NEAR(m->klMean, kl / 2.0, 1e-9);
    EXPECT_DOUBLE_EQ(m->top5Overlap, 1.0);
}

TEST(Metrics, TopKBreaksTiesByLowerIndex)
{
    const std::vector<double> v { 1, 3, 3, 2 };
    EXPECT_EQ(topKIndices(v, 2), (std::vector<std::int64_t> { 1, 2 }));
    EXPECT_EQ(topKIndices(v, 9).size(), 4u);
    const std::vector<double> withNan { std::nan(""), 1.0 };
    EXPECT_EQ(topKIndices(withNan, 1), (std::vector<std::int64_t> { 1 }));
}

TEST(Metrics, ExpertSelectionAgreement)
{
    const std::vector<std::int64_t> a { 0, 1, 2, 3 };
    const std::vector<std::int64_t> b { 1, 0, 2, 4 };
    const auto m
        = compareExpertSelection(Tensor::fromInts({ 2, 2 }, a), Tensor::fromInts({ 2, 2 }, b));
    ASSERT_TRUE(m.ok());
    EXPECT_DOUBLE_EQ(m->exactSetShare, 0.5);
    EXPECT_DOUBLE_EQ(m->overlap, 0.75);
    EXPECT_EQ(m->firstFlipToken, 1);
}
