// deriveToleranceTable on synthetic healthy comparisons: the limit is the largest healthy value ×
// the margin, the growth law is the one the accumulated errors follow, the derivation is recorded
// and the table reads back; no runs, non-finite errors and bad options are refused.
#include "numerics/tolerance_derivation.h"

#include <fmt/format.h>
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

/// A gradient run over a 2-layer model: the router's logit gradient and a q_proj weight's
/// gradient of each layer, plus the router logits a gradient dump also holds (forward rows, not
/// learnt from). Accumulated errors `acc` × linear growth at each row's backward depth, own `own`.
HealthyRun syntheticGradientRun(double acc, double own)
{
    HealthyRun run;
    run.model = "synthetic-moe";
    run.prompt = "q";
    run.dtype = DType::BF16;
    run.gradients = true;
    run.propagated.reference.numLayers = 2;
    DumpComparison local;
    for (int layer = 1; layer >= 0; --layer) {
        for (const auto& [name, kind] :
            { std::pair { fmt::format("model.layers.{}.mlp.gate#grad", layer), OpKind::Router },
                std::pair { fmt::format("model.layers.{}.self_attn.q_proj.weight#grad", layer),
                    OpKind::Other },
                std::pair { fmt::format("model.layers.{}.mlp.gate", layer), OpKind::Router } }) {
            CaptureComparison row;
            row.name = name;
            row.kind = kind;
            row.layer = layer;
            row.metrics = ErrorMetrics {};
            // Depth N + (N − 1 − L): 3 for layer 0, 2 for layer 1.
            row.metrics->relL2 = acc * growthFactor(DepthGrowth::Linear, 2 + (1 - layer));
            if (!name.ends_with("#grad")) {
                row.metrics->relL2 = 0.5; // a forward row of the gradient dump: not learnt from
            }
            run.propagated.rows.push_back(row);
            row.own = ErrorMetrics {};
            row.own->relL2 = own;
            local.rows.push_back(row);
        }
    }
    run.local = local;
    return run;
}

const nlohmann::json* gradientRuleOf(const nlohmann::json& table, const std::string& id)
{
    for (const auto& r : table["gradient_rules"]) {
        if (r["id"] == id) {
            return &r;
        }
    }
    return nullptr;
}

TEST(ToleranceDerivation, GradientRunsGiveGradientRulesAndKeepTheBasesForwardRules)
{
    auto base = baseTable();
    base.accumulatedGrowth = DepthGrowth::Linear;
    DerivationOptions o;
    o.name = "derived";
    o.version = 5;
    o.margin = 2.0;
    o.command = "day0 tolerances derive --grad synthetic-moe";
    auto j = deriveToleranceTable(
        { syntheticGradientRun(0.004, 0.012), syntheticGradientRun(0.005, 0.01) }, base, o);
    ASSERT_TRUE(j) << j.error().message;
    EXPECT_EQ((*j)["format"], 2);
    EXPECT_EQ((*j)["accumulated_growth"], "linear") << "the base's law, which its rules use";
    EXPECT_FALSE(j->contains("derivation")) << "no forward runs: the base's record, none here";
    ASSERT_NE(ruleOf(*j, "bf16.any"), nullptr);
    EXPECT_EQ((*ruleOf(*j, "bf16.any"))["max_rel_l2"], 0.016) << "forward rules kept";
    const auto* router = gradientRuleOf(*j, "bf16.grad.activation.router");
    const auto* weight = gradientRuleOf(*j, "bf16.grad.parameter.linear");
    ASSERT_NE(router, nullptr);
    ASSERT_NE(weight, nullptr);
    EXPECT_NE(gradientRuleOf(*j, "bf16.grad.activation.any"), nullptr);
    EXPECT_NE(gradientRuleOf(*j, "bf16.grad.parameter.any"), nullptr);
    // The largest own error 0.012 × 2; the forward router rows' 0.5 is not learnt from.
    EXPECT_NEAR((*router)["max_rel_l2"].get<double>(), 0.024, 1e-12);
    EXPECT_EQ((*router)["gradient"], "activation");
    const auto& d = (*j)["gradient_derivation"];
    EXPECT_EQ(d["runs"], 2);
    EXPECT_EQ(d["command"], o.command);
    EXPECT_EQ(d["models"], nlohmann::json::array({ "synthetic-moe" }));
    EXPECT_TRUE(d["growth_spread"].contains("sqrt") && d["growth_spread"].contains("linear"));
    EXPECT_NE(d["summary"].get<std::string>().find("2 healthy gradient runs (2 bf16)"),
        std::string::npos);
    auto back = parseToleranceTable(*j, "derived");
    ASSERT_TRUE(back) << back.error().message;
    JudgeInput in { 0.02, false, 3 };
    in.gradient = GradientKey { GradientOf::Activation, OpKind::Router };
    EXPECT_EQ(judge(*back, DType::BF16, OpKind::Router, in).status, VerdictStatus::Pass);
    in.relL2 = 0.03;
    EXPECT_EQ(judge(*back, DType::BF16, OpKind::Router, in).status, VerdictStatus::Fail);
    // Pinning another growth law than the base's forward rules use is refused.
    o.growth = DepthGrowth::Sqrt;
    EXPECT_FALSE(deriveToleranceTable({ syntheticGradientRun(0.004, 0.012) }, base, o));
}

} // namespace
} // namespace day0::numerics
