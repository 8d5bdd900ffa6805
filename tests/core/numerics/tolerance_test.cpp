#include "base/resources.h"
#include "numerics/tolerance.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace day0;
using namespace day0::numerics;

namespace {

nlohmann::json smallTable()
{
    return nlohmann::json::parse(R"({
        "name": "test", "version": 3, "accumulated_growth": "sqrt",
        "rules": [
            { "id": "any", "dtype": "*", "op": "*", "max_rel_l2": 0.5 },
            { "id": "bf16.any", "dtype": "bf16", "op": "*", "max_rel_l2": 1e-2, "floor_units": 1.0, "max_floor_ratio": 3.0 },
            { "id": "bf16.linear", "dtype": "bf16", "op": "linear", "max_rel_l2": 2e-2, "floor_units": 1.0, "max_floor_ratio": 3.0 },
            { "id": "x.logits", "dtype": "*", "op": "logits", "max_rel_l2": 0.1, "max_kl": 0.01, "min_top1": 0.9 }
        ] })");
}

} // namespace

TEST(Tolerance, OpKindsFromAnchorNames)
{
    EXPECT_EQ(opKindForAnchor("model.embed_tokens"), OpKind::Embedding);
    EXPECT_EQ(opKindForAnchor("model.layers.7.input_layernorm"), OpKind::Norm);
    EXPECT_EQ(opKindForAnchor("model.layers.7.self_attn.q_norm"), OpKind::Norm);
    EXPECT_EQ(opKindForAnchor("model.norm"), OpKind::Norm);
    EXPECT_EQ(opKindForAnchor("model.layers.7.self_attn.q_proj"), OpKind::Linear);
    EXPECT_EQ(opKindForAnchor("model.layers.7.self_attn"), OpKind::Attention);
    EXPECT_EQ(opKindForAnchor("model.layers.4.linear_attn"), OpKind::Attention);
    EXPECT_EQ(opKindForAnchor("model.layers.4.linear_attn.in_proj_qkvz"), OpKind::Linear);
    EXPECT_EQ(opKindForAnchor("model.layers.7.self_attn.kv_a_proj_with_mqa"), OpKind::Linear);
    EXPECT_EQ(opKindForAnchor("model.layers.7.mlp.gate"), OpKind::Router);
    EXPECT_EQ(opKindForAnchor("model.layers.7.mlp.gate#topk"), OpKind::RouterSelection);
    EXPECT_EQ(opKindForAnchor("model.layers.7.mlp.experts.12"), OpKind::Mlp);
    EXPECT_EQ(opKindForAnchor("model.layers.7.mlp.shared_experts"), OpKind::Mlp);
    EXPECT_EQ(opKindForAnchor("model.layers.7.mlp"), OpKind::Mlp);
    EXPECT_EQ(opKindForAnchor("model.layers.7"), OpKind::DecoderLayer);
    EXPECT_EQ(opKindForAnchor("model.layers.7#in0"), OpKind::DecoderLayer);
    EXPECT_EQ(opKindForAnchor("visual.blocks.3"), OpKind::DecoderLayer);
    EXPECT_EQ(opKindForAnchor("lm_head"), OpKind::Logits);
    EXPECT_EQ(opKindForAnchor("something.else"), OpKind::Other);
    EXPECT_EQ(layerOfAnchor("model.layers.12.mlp.experts.3"), 12);
    EXPECT_EQ(layerOfAnchor("visual.blocks.0"), 0);
    EXPECT_EQ(layerOfAnchor("lm_head"), -1);
    EXPECT_EQ(parseOpKind(opKindName(OpKind::DecoderLayer)), OpKind::DecoderLayer);
}

TEST(Tolerance, MostSpecificRuleWins)
{
    const auto table = parseToleranceTable(smallTable(), "test.json");
    ASSERT_TRUE(table.ok()) << table.error().message;
    EXPECT_EQ(table->label(), "test v3");
    EXPECT_EQ(table->match(DType::BF16, OpKind::Linear)->id, "bf16.linear");
    EXPECT_EQ(table->match(DType::BF16, OpKind::Norm)->id, "bf16.any");
    EXPECT_EQ(table->match(DType::F16, OpKind::Logits)->id, "x.logits");
    EXPECT_EQ(table->match(DType::F16, OpKind::Norm)->id, "any");
}

TEST(Tolerance, PolicyLimitsNeedAReason)
{
    auto json = smallTable();
    json["rules"].push_back({ { "id", "fp16.loose" }, { "dtype", "fp16" }, { "op", "linear" },
        { "max_rel_l2", 2e-3 } });
    const auto bad = parseToleranceTable(json, "loose.json");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("looser_because"), std::string::npos);
    EXPECT_NE(bad.error().message.find("loose.json"), std::string::npos);
    json["rules"].back()["looser_because"] = "K = 16384 reductions";
    EXPECT_TRUE(parseToleranceTable(json, "loose.json").ok());

    auto int8 = smallTable();
    int8["rules"].push_back(
        { { "id", "int8.x" }, { "dtype", "int8" }, { "op", "mlp" }, { "max_rel_l2", 0.02 } });
    EXPECT_FALSE(parseToleranceTable(int8, "t.json").ok());
}

TEST(Tolerance, MalformedTablesAreRejectedWithTheField)
{
    auto json = smallTable();
    json["rules"][1]["dtype"] = "bf17";
    auto r = parseToleranceTable(json, "t.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("dtype"), std::string::npos);
    json = smallTable();
    json["rules"][2]["id"] = "bf16.any";
    EXPECT_FALSE(parseToleranceTable(json, "t.json").ok());
    json = smallTable();
    json.erase("version");
    EXPECT_FALSE(parseToleranceTable(json, "t.json").ok());
}

TEST(Tolerance, VerdictsNameRuleTableAndFloorRatio)
{
    const auto table = parseToleranceTable(smallTable(), "test.json");
    const double u = std::ldexp(1.0, -8);
    // Own error, 2.1 × the analytic floor of a linear op (u).
    JudgeInput in;
    in.relL2 = 2.1 * u;
    in.accumulated = false;
    auto v = judge(*table, DType::BF16, OpKind::Linear, in);
    EXPECT_EQ(v.status, VerdictStatus::Pass);
    EXPECT_EQ(v.rule, "bf16.linear");
    EXPECT_EQ(v.table, "test v3");
    EXPECT_NEAR(v.floorRatio, 2.1, 1e-9);
    EXPECT_NE(v.reason.find("2.1× floor"), std::string::npos) << v.reason;
    EXPECT_NE(v.reason.find("rule bf16.linear of test v3"), std::string::npos) << v.reason;

    in.relL2 = 0.019; // within 2e-2 but 4.9× floor
    v = judge(*table, DType::BF16, OpKind::Linear, in);
    EXPECT_EQ(v.status, VerdictStatus::Warn);
    in.relL2 = 0.03;
    v = judge(*table, DType::BF16, OpKind::Linear, in);
    EXPECT_EQ(v.status, VerdictStatus::Fail);
    // Accumulated at depth 3: the limit doubles (sqrt(1 + 3)).
    in.accumulated = true;
    in.depth = 3;
    v = judge(*table, DType::BF16, OpKind::Linear, in);
    EXPECT_DOUBLE_EQ(v.limit, 0.04);
    EXPECT_NE(v.status, VerdictStatus::Fail);
    // A measured floor replaces the analytic one.
    in.measuredFloor = 0.015;
    v = judge(*table, DType::BF16, OpKind::Linear, in);
    EXPECT_EQ(v.floorSource, "measured");
    EXPECT_NEAR(v.floorRatio, 2.0, 1e-12);
    // NaN where the reference is finite always fails.
    in.nonFiniteMismatch = 2;
    EXPECT_EQ(judge(*table, DType::BF16, OpKind::Linear, in).status, VerdictStatus::Fail);
}

TEST(Tolerance, LogitRulesCheckKlAndTop1)
{
    const auto table = parseToleranceTable(smallTable(), "test.json");
    JudgeInput in;
    in.relL2 = 0.01;
    in.klMean = 0.02;
    in.top1Agreement = 1.0;
    auto v = judge(*table, DType::F32, OpKind::Logits, in);
    EXPECT_EQ(v.status, VerdictStatus::Fail);
    EXPECT_NE(v.reason.find("KL"), std::string::npos);
    in.klMean = 0.001;
    in.top1Agreement = 0.5;
    v = judge(*table, DType::F32, OpKind::Logits, in);
    EXPECT_EQ(v.status, VerdictStatus::Fail);
    EXPECT_NE(v.reason.find("top-1"), std::string::npos);
}

TEST(Tolerance, BundledTableLoadsAndHonoursPolicy)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto table = resolveToleranceTable("");
    ASSERT_TRUE(table.ok()) << table.error().message;
    EXPECT_EQ(table->name, "day0-default");
    EXPECT_GE(table->version, 1);
    for (const auto& rule : table->rules) {
        if (rule.dtype == DType::F16 && rule.looserBecause.empty()) {
            EXPECT_LE(rule.maxRelL2, 1e-3) << rule.id;
        }
        if (rule.dtype == DType::I8 && rule.looserBecause.empty()) {
            EXPECT_LE(rule.maxRelL2, 1e-2) << rule.id;
        }
    }
    EXPECT_TRUE(resolveToleranceTable("day0-default-v1").ok());
    // The FP4 targets (nvfp4, mxfp4) have rules of their own, keyed by their E2M1 format.
    const auto* fp4 = table->match(DType::F4E2M1, OpKind::Logits);
    ASSERT_NE(fp4, nullptr);
    EXPECT_EQ(fp4->id, "fp4.logits");
    EXPECT_EQ(parseToleranceDType("nvfp4"), DType::F4E2M1);
    EXPECT_EQ(parseToleranceDType("MXFP4"), DType::F4E2M1);
    EXPECT_EQ(parseToleranceDType("bf16"), DType::BF16);
    EXPECT_EQ(parseToleranceDType("int4-g32"), DType::I4);
    const auto* int4 = table->match(DType::I4, OpKind::Mlp);
    ASSERT_NE(int4, nullptr);
    EXPECT_EQ(int4->id, "int4.mlp");
    EXPECT_FALSE(parseDTypeLoose("int4").has_value());
    // Only tolerance keys take the FP4 spellings: a tensor or plan dtype of "fp4" stays unknown.
    EXPECT_FALSE(parseDTypeLoose("fp4").has_value());
    EXPECT_FALSE(parseDType("F4").has_value());
    const auto missing = resolveToleranceTable("no-such-table");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("day0-default-v1"), std::string::npos);
}

namespace {

/// smallTable with gradient rules (format 2).
nlohmann::json gradientTable()
{
    auto j = smallTable();
    j["format"] = 2;
    j["gradient_rules"] = nlohmann::json::parse(R"([
        { "id": "bf16.grad.activation.router", "dtype": "bf16", "gradient": "activation", "op": "router", "max_rel_l2": 0.03 },
        { "id": "bf16.grad.parameter.router", "dtype": "bf16", "gradient": "parameter", "op": "router", "max_rel_l2": 0.04 },
        { "id": "bf16.grad.activation.any", "dtype": "bf16", "gradient": "activation", "op": "*", "max_rel_l2": 0.05 },
        { "id": "bf16.grad.parameter.any", "dtype": "bf16", "gradient": "parameter", "op": "*", "max_rel_l2": 0.06 }
    ])");
    j["gradient_derivation"]
        = { { "summary", "derived from 2 healthy gradient runs" }, { "runs", 2 } };
    return j;
}

} // namespace

TEST(Tolerance, GradientKeysFollowTheAnchorOrTheParametersModule)
{
    EXPECT_FALSE(gradientKeyOf("model.layers.1.mlp.gate", OpKind::Router));
    const auto act = gradientKeyOf("model.layers.1.mlp.gate#grad", OpKind::Router);
    ASSERT_TRUE(act);
    EXPECT_EQ(act->of, GradientOf::Activation);
    EXPECT_EQ(act->op, OpKind::Router);
    const auto router = gradientKeyOf("model.layers.1.mlp.gate.weight#grad", OpKind::Other);
    ASSERT_TRUE(router);
    EXPECT_EQ(router->of, GradientOf::Parameter);
    EXPECT_EQ(router->op, OpKind::Router);
    EXPECT_EQ(
        gradientKeyOf("model.layers.1.mlp.experts.3.down_proj.weight#grad", OpKind::Other)->op,
        OpKind::Linear);
    EXPECT_EQ(
        gradientKeyOf("model.layers.1.post_attention_layernorm.weight#grad", OpKind::Other)->op,
        OpKind::Norm);
    EXPECT_EQ(
        gradientKeyOf("model.embed_tokens.weight#grad", OpKind::Other)->op, OpKind::Embedding);
    EXPECT_EQ(gradientKeyOf("lm_head.weight#grad", OpKind::Other)->op, OpKind::Logits);
    EXPECT_EQ(
        gradientKeyOf("model.layers.0.self_attn.sinks#grad", OpKind::Other)->op, OpKind::Attention);
    EXPECT_EQ(gradientKeyOf("model.layers.0.mlp.experts.gate_up_proj#grad", OpKind::Other)->op,
        OpKind::Linear);
}

TEST(Tolerance, GradientRulesJudgeGradientsAndReadBackFromTheirJson)
{
    const auto table = parseToleranceTable(gradientTable(), "grad.json");
    ASSERT_TRUE(table.ok()) << table.error().message;
    EXPECT_EQ(table->format, 2);
    ASSERT_EQ(table->gradientRules.size(), 4U);
    EXPECT_EQ(table->gradientDerivation, "derived from 2 healthy gradient runs");
    const GradientKey routerAct { GradientOf::Activation, OpKind::Router };
    const GradientKey linearParam { GradientOf::Parameter, OpKind::Linear };
    EXPECT_EQ(table->matchGradient(DType::BF16, routerAct)->id, "bf16.grad.activation.router");
    EXPECT_EQ(table->matchGradient(DType::BF16, linearParam)->id, "bf16.grad.parameter.any");
    EXPECT_EQ(table->matchGradient(DType::F16, linearParam), nullptr);
    // A router logit gradient 2.5e-2 off: beyond the forward rule (bf16.any 1e-2), within the
    // gradient rule (3e-2), judged by it and with no fallback note.
    JudgeInput in { 0.025, false, 2 };
    EXPECT_EQ(judge(*table, DType::BF16, OpKind::Router, in).status, VerdictStatus::Fail);
    in.gradient = routerAct;
    const auto v = judge(*table, DType::BF16, OpKind::Router, in);
    EXPECT_EQ(v.rule, "bf16.grad.activation.router");
    EXPECT_NE(v.status, VerdictStatus::Fail) << v.reason;
    EXPECT_TRUE(v.note.empty());
    in.relL2 = 0.031;
    EXPECT_EQ(judge(*table, DType::BF16, OpKind::Router, in).status, VerdictStatus::Fail);
    // Written and read back unchanged.
    const auto written = toleranceTableToJson(*table);
    EXPECT_EQ(written["format"], 2);
    const auto back = parseToleranceTable(written, "written");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(toleranceTableToJson(*back), written);
    ASSERT_EQ(back->gradientRules.size(), 4U);
    EXPECT_EQ(back->gradientRules[1].gradient, GradientOf::Parameter);
    EXPECT_EQ(back->gradientDerivationRecord["runs"], 2);
}

TEST(Tolerance, ATableWithoutGradientRulesJudgesGradientsByItsForwardRulesAndSaysSo)
{
    const auto table = parseToleranceTable(smallTable(), "test.json");
    ASSERT_TRUE(table.ok()) << table.error().message;
    EXPECT_EQ(table->format, 1);
    EXPECT_TRUE(table->gradientRules.empty());
    JudgeInput in { 0.015, true, 0 };
    in.gradient = GradientKey { GradientOf::Parameter, OpKind::Linear };
    const auto v = judge(*table, DType::BF16, OpKind::Other, in);
    EXPECT_EQ(v.rule, "bf16.any");
    EXPECT_EQ(v.status, VerdictStatus::Fail);
    EXPECT_NE(v.note.find("no gradient rule for"), std::string::npos) << v.note;
    EXPECT_NE(v.reason.find("judged by its forward rule"), std::string::npos) << v.reason;
    // So does a table with gradient rules for other dtypes only.
    const auto grad = parseToleranceTable(gradientTable(), "grad.json");
    ASSERT_TRUE(grad.ok());
    EXPECT_FALSE(judge(*grad, DType::F16, OpKind::Other, in).note.empty());
    // A table written without gradient rules stays format 1.
    EXPECT_FALSE(toleranceTableToJson(*table).contains("format"));
}

TEST(Tolerance, MalformedGradientRulesAreRefusedByName)
{
    auto j = gradientTable();
    j.erase("format");
    auto t = parseToleranceTable(j, "old.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("\"format\": 2"), std::string::npos) << t.error().message;
    j = gradientTable();
    j["format"] = 3;
    t = parseToleranceTable(j, "new.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("format"), std::string::npos) << t.error().message;
    j = gradientTable();
    j["gradient_rules"][0]["gradient"] = "weights";
    t = parseToleranceTable(j, "bad.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("gradient_rules[0]"), std::string::npos) << t.error().message;
    j = gradientTable();
    j["gradient_rules"][1]["gradient"] = "activation";
    t = parseToleranceTable(j, "dup.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("same dtype, gradient kind and op"), std::string::npos)
        << t.error().message;
    j = smallTable();
    j["rules"][0]["gradient"] = "activation";
    t = parseToleranceTable(j, "fwd.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("gradient_rules"), std::string::npos) << t.error().message;
}
