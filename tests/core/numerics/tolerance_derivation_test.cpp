// deriveToleranceTable on synthetic healthy comparisons: the limit is the largest healthy value ×
// the margin, the growth law is the one the accumulated errors follow, the derivation is recorded
// and the table reads back; no runs, non-finite errors and bad options are refused.
#include "numerics/tolerance_derivation.h"

#include <gtest/gtest.h>

#include <cmath>

namespace day0::numerics {
namespace {

/// A run whose attention errors at layers 0..3 are base × growth(layer), own errors `own`.
HealthyRun syntheticRun(double base, DepthGrowth growth, double own)
{
    HealthyRun run;
    run.model = "synthetic";
    run.prompt = "p";
    run.dtype = DType::BF16;
    run.propagated.reference.numLayers = 4;
    DumpComparison local;
    for (int layer = 0; layer < 4; ++layer) {
        CaptureComparison row;
        row.name = "model.layers." + std::to_string(layer) + ".self_attn";
        row.kind = OpKind::Attention;
        row.layer = layer;
        row.metrics = ErrorMetrics {};
        row.metrics->relL2 = base * growthFactor(growth, layer);
        run.propagated.rows.push_back(row);
        row.own = ErrorMetrics {};
        row.own->relL2 = own;
        local.rows.push_back(row);
    }
    run.local = local;
    return run;
}

ToleranceTable baseTable()
{
    auto t = parseToleranceTable(nlohmann::json::parse(R"({"name": "b", "version": 1, "rules": [
        {"id": "bf16.any", "dtype": "bf16", "op": "*", "max_rel_l2": 0.016},
        {"id": "fp32.any", "dtype": "fp32", "op": "*", "max_rel_l2": 1e-5}]})"),
        "base");
    EXPECT_TRUE(t) << t.error().message;
    return *t;
}

const nlohmann::json* ruleOf(const nlohmann::json& table, const std::string& id)
{
    for (const auto& r : table["rules"]) {
        if (r["id"] == id) {
            return &r;
        }
    }
    return nullptr;
}

TEST(ToleranceDerivation, LimitsAreTheLargestHealthyValueTimesTheMarginWithTheirGrowth)
{
    for (const auto growth : { DepthGrowth::Linear, DepthGrowth::Sqrt }) {
        std::vector<HealthyRun> runs
            = { syntheticRun(0.01, growth, 0.004), syntheticRun(0.012, growth, 0.005) };
        DerivationOptions o;
        o.name = "derived";
        o.margin = 2.0;
        auto j = deriveToleranceTable(runs, baseTable(), o);
        ASSERT_TRUE(j) << j.error().message;
        EXPECT_EQ((*j)["accumulated_growth"], growth == DepthGrowth::Linear ? "linear" : "sqrt");
        const auto* attention = ruleOf(*j, "bf16.attention");
        ASSERT_NE(attention, nullptr);
        EXPECT_NEAR((*attention)["max_rel_l2"].get<double>(), 0.024, 1e-12); // 0.012 × 2
        EXPECT_NE(ruleOf(*j, "bf16.any"), nullptr);
        EXPECT_NE(ruleOf(*j, "fp32.any"), nullptr) << "underived dtypes keep the base's rules";
        EXPECT_EQ((*j)["derivation"]["runs"], 2);
        auto back = parseToleranceTable(*j, "derived");
        ASSERT_TRUE(back) << back.error().message;
        EXPECT_NE(back->derivation.find("derived from 2 healthy runs (2 bf16)"), std::string::npos)
            << back->derivation;
        // A healthy run at the largest values passes the table; one 3× beyond fails.
        const auto* rule = back->match(DType::BF16, OpKind::Attention);
        ASSERT_NE(rule, nullptr);
        EXPECT_EQ(judge(*back, DType::BF16, OpKind::Attention,
                      { 0.012 * growthFactor(growth, 3), true, 3 })
                      .status,
            VerdictStatus::Pass);
        EXPECT_EQ(judge(*back, DType::BF16, OpKind::Attention,
                      { 0.036 * growthFactor(growth, 3), true, 3 })
                      .status,
            VerdictStatus::Fail);
    }
}

TEST(ToleranceDerivation, APercentileBelowTheLargestLeavesTheOutlierOut)
{
    std::vector<HealthyRun> runs;
    for (int i = 0; i < 9; ++i) {
        runs.push_back(syntheticRun(0.01, DepthGrowth::Linear, 0.001));
    }
    runs.push_back(syntheticRun(0.1, DepthGrowth::Linear, 0.001));
    DerivationOptions o;
    o.percentile = 90;
    o.margin = 1.0;
    auto j = deriveToleranceTable(runs, baseTable(), o);
    ASSERT_TRUE(j) << j.error().message;
    EXPECT_NEAR((*ruleOf(*j, "bf16.attention"))["max_rel_l2"].get<double>(), 0.01, 1e-12);
}

TEST(ToleranceDerivation, ExactHealthyValuesGiveTheNoiseFloorNotAZeroLimit)
{
    auto j = deriveToleranceTable(
        { syntheticRun(0.0, DepthGrowth::Linear, 0.0) }, baseTable(), DerivationOptions {});
    ASSERT_TRUE(j) << j.error().message;
    const auto* attention = ruleOf(*j, "bf16.attention");
    ASSERT_NE(attention, nullptr);
    EXPECT_NEAR((*attention)["max_rel_l2"].get<double>(), 0.0059, 1e-12); // 2^-8 × 1.5, rounded up
    EXPECT_NE((*attention)["note"].get<std::string>().find("all exact"), std::string::npos);
}

TEST(ToleranceDerivation, RefusesWhatIsNotAHealthyRun)
{
    DerivationOptions o;
    EXPECT_FALSE(deriveToleranceTable({}, baseTable(), o));
    auto bad = syntheticRun(0.01, DepthGrowth::Linear, 0.001);
    bad.propagated.rows[2].metrics->relL2 = std::nan("");
    auto r = deriveToleranceTable({ bad }, baseTable(), o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("model.layers.2.self_attn"), std::string::npos);
    o.margin = 0.5;
    EXPECT_FALSE(
        deriveToleranceTable({ syntheticRun(0.01, DepthGrowth::Linear, 0.001) }, baseTable(), o));
    HealthyRun empty;
    empty.model = "empty";
    EXPECT_FALSE(deriveToleranceTable({ empty }, baseTable(), DerivationOptions {}));
}

TEST(ToleranceDerivation, APinnedGrowthLawIsUsedAndRecordedBesideTheEvidence)
{
    // Errors that grow as sqrt(1 + depth), with the law pinned to linear: the table grows
    // linearly and its derivation says the law was pinned and what the errors showed.
    const std::vector<HealthyRun> runs = { syntheticRun(0.01, DepthGrowth::Sqrt, 0.004) };
    DerivationOptions o;
    o.growth = DepthGrowth::Linear;
    auto j = deriveToleranceTable(runs, baseTable(), o);
    ASSERT_TRUE(j) << j.error().message;
    EXPECT_EQ((*j)["accumulated_growth"], "linear");
    const std::string summary = (*j)["derivation"]["summary"];
    EXPECT_NE(summary.find("pinned by --growth"), std::string::npos) << summary;
    EXPECT_LT((*j)["derivation"]["growth_spread"]["sqrt"].get<double>(),
        (*j)["derivation"]["growth_spread"]["linear"].get<double>());
    o.growth.reset();
    j = deriveToleranceTable(runs, baseTable(), o);
    ASSERT_TRUE(j) << j.error().message;
    EXPECT_EQ((*j)["accumulated_growth"], "sqrt");
}

} // namespace
} // namespace day0::numerics
