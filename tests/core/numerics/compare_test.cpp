#include "numerics/dump.h"
#include "numerics/dump_compare.h"
#include "tolerance_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace day0;
using namespace day0::numerics;

namespace {

Tensor randomTensor(const Shape& shape, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(numelOf(shape)));
    for (auto& x : v) {
        x = n(rng);
    }
    return Tensor::fromFloats(shape, v);
}

/// `r` plus Gaussian noise scaled to a relative L2 error of exactly `rel`.
Tensor withError(const Tensor& r, double rel, unsigned seed)
{
    const auto base = r.toDoubles();
    const auto noise = randomTensor(r.shape(), seed).toDoubles();
    double nr = 0.0;
    double nn = 0.0;
    for (std::size_t i = 0; i < base.size(); ++i) {
        nr += base[i] * base[i];
        nn += noise[i] * noise[i];
    }
    const double scale = rel * std::sqrt(nr / nn);
    std::vector<double> out(base.size());
    for (std::size_t i = 0; i < base.size(); ++i) {
        out[i] = base[i] + scale * noise[i];
    }
    return Tensor::fromDoubles(r.shape(), out);
}

const char* kNames[] = { "model.embed_tokens", "model.layers.0", "model.layers.1", "lm_head" };

Dump makeDump(
    const std::string& precision, const std::vector<double>& errors, const Dump* reference)
{
    Dump d;
    d.info.model = "tiny";
    d.info.fingerprint = "llama/h16/l2/v32";
    d.info.precision = precision;
    d.info.inputIds = { 1, 5, 7 };
    d.info.promptLength = 2;
    d.info.numLayers = 2;
    for (std::size_t i = 0; i < 4; ++i) {
        const Shape shape = i == 3 ? Shape { 3, 32 } : Shape { 3, 16 };
        Tensor t = reference != nullptr ? *reference->tensor(kNames[i])
                                        : randomTensor(shape, unsigned(i + 1));
        if (reference != nullptr && errors[i] > 0) {
            t = withError(t, errors[i], unsigned(100 + i));
        }
        d.add(kNames[i], t, true);
    }
    return d;
}

ToleranceTable table() { return test::bf16AnyTable(); }

} // namespace

TEST(CompareDumps, FirstDivergenceOnAccumulatedError)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    const Dump tgt = makeDump("bf16", { 0.0, 0.001, 0.05, 0.05 }, &ref);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    const auto c = compareDumps(ref, tgt, o, p, {});
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_EQ(c->rows.size(), 4u);
    EXPECT_NEAR(c->rows[2].metrics->relL2, 0.05, 1e-6);
    ASSERT_TRUE(c->firstDivergence.has_value());
    EXPECT_EQ(c->rows[*c->firstDivergence].name, "model.layers.1");
    EXPECT_EQ(c->divergenceBasis, "accumulated");
    EXPECT_EQ(c->status(), "fail");
    EXPECT_TRUE(c->rows[3].logits.has_value());
    EXPECT_EQ(c->rows[3].kind, OpKind::Logits);
    EXPECT_EQ(c->precision, DType::BF16);
    EXPECT_EQ(p.done(), 4);
}

TEST(CompareDumps, OwnErrorSeparatesCauseFromInheritance)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    const Dump tgt = makeDump("bf16", { 0.0, 0.001, 0.05, 0.05 }, &ref);
    // Inject mode: layer 0 breaks its tolerance on its own, layer 1 only inherits.
    Dump local = makeDump("bf16", { 0.0, 0.03, 0.001, 0.001 }, &ref);
    local.info.mode = "inject";
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    o.local = &local;
    Progress p;
    const auto c = compareDumps(ref, tgt, o, p, {});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->firstDivergence.has_value());
    EXPECT_EQ(c->rows[*c->firstDivergence].name, "model.layers.0");
    EXPECT_EQ(c->divergenceBasis, "own");
    EXPECT_EQ(c->rows[2].verdict.basis, "own");
    EXPECT_EQ(c->rows[2].verdict.status, VerdictStatus::Pass);
    EXPECT_NEAR(c->rows[1].own->relL2, 0.03, 1e-6);
}

TEST(CompareDumps, MeasuredFloorGivesTheRatio)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    const Dump tgt = makeDump("bf16", { 0.004, 0.004, 0.004, 0.004 }, &ref);
    const Dump floor = makeDump("bf16", { 0.002, 0.002, 0.002, 0.002 }, &ref);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    o.floor = &floor;
    Progress p;
    const auto c = compareDumps(ref, tgt, o, p, {});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->rows[1].verdict.floorSource, "measured");
    EXPECT_NEAR(c->rows[1].verdict.floorRatio, 2.0, 1e-6);
    EXPECT_NE(c->rows[1].verdict.reason.find("2.0× floor"), std::string::npos);
}

TEST(CompareDumps, MismatchedDumpsAreRefused)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    Dump other = makeDump("bf16", { 0, 0, 0, 0 }, &ref);
    other.info.fingerprint = "qwen3/h16/l2/v32";
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    auto c = compareDumps(ref, other, o, p, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find("different models"), std::string::npos);
    other.info.fingerprint = ref.info.fingerprint;
    other.info.inputIds = { 1, 5, 8 };
    c = compareDumps(ref, other, o, p, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find("token 2 is 7 in the reference and 8 in the target"),
        std::string::npos);
    o.allowMismatch = true;
    c = compareDumps(ref, other, o, p, {});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->warnings.size(), 1u);
    other.info.precision = "bf17";
    EXPECT_FALSE(compareDumps(ref, other, o, p, {}).ok());
}

TEST(CompareDumps, MissingCapturesShapesAndStatsOnly)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    Dump tgt;
    tgt.info = ref.info;
    tgt.info.precision = "bf16";
    tgt.add("model.embed_tokens", *ref.tensor("model.embed_tokens"), true);
    tgt.add("model.layers.0", randomTensor({ 3, 8 }, 9), true);
    tgt.add("model.layers.1", withError(*ref.tensor("model.layers.1"), 0.5, 3), false);
    tgt.add("extra.anchor", randomTensor({ 2 }, 4), true);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    const auto c = compareDumps(ref, tgt, o, p, {});
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->onlyInReference, (std::vector<std::string> { "lm_head" }));
    EXPECT_EQ(c->onlyInTarget, (std::vector<std::string> { "extra.anchor" }));
    EXPECT_TRUE(c->rows[1].shapeMismatch);
    EXPECT_EQ(c->rows[1].verdict.status, VerdictStatus::Fail);
    EXPECT_TRUE(c->rows[2].statsOnly);
    ASSERT_TRUE(c->rows[2].stats.has_value());
}

TEST(CompareDumps, CancelledByStopToken)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    std::stop_source stop;
    stop.request_stop();
    const auto c = compareDumps(ref, ref, o, p, stop.get_token());
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().code, ErrorCode::Cancelled);
}

TEST(CompareDumps, JsonAndCsvOutputs)
{
    const Dump ref = makeDump("fp32", {}, nullptr);
    const Dump tgt = makeDump("bf16", { 0.0, 0.001, 0.05, 0.05 }, &ref);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    const auto c = compareDumps(ref, tgt, o, p, {});
    const auto j = comparisonToJson(*c);
    EXPECT_EQ(j["status"], "fail");
    EXPECT_EQ(j["first_divergence"]["capture"], "model.layers.1");
    EXPECT_EQ(j["captures"].size(), 4u);
    EXPECT_TRUE(j["captures"][3].contains("logits"));
    EXPECT_EQ(j["captures"][2]["verdict"]["rule"], "bf16.any");
    const std::string csv = comparisonToCsv(*c);
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
    EXPECT_EQ(csv.rfind("name,op,layer,shape,cosine", 0), 0u);
}

TEST(Dump, JsonRoundTrip)
{
    Dump d = makeDump("bf16", {}, nullptr);
    d.info.generatedIds = { 9 };
    Tensor experts = Tensor::fromInts({ 3, 2 }, std::vector<std::int64_t> { 0, 1, 2, 3, 1, 0 });
    d.add("model.layers.1.mlp.gate#topk", experts, false, "router_selection", "bf16");
    const auto json = dumpToJson(d);
    auto back = dumpFromJson(json, "dump.json");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->info.fingerprint, d.info.fingerprint);
    EXPECT_EQ(back->info.inputIds, d.info.inputIds);
    EXPECT_EQ(back->info.generatedIds, d.info.generatedIds);
    ASSERT_EQ(back->captures().size(), 5u);
    EXPECT_EQ(back->captures()[4].op, "router_selection");
    EXPECT_EQ(back->captures()[4].precision, "bf16");
    EXPECT_TRUE(back->captures()[0].precision.empty());
    EXPECT_TRUE(back->captures()[0].stored);
    EXPECT_EQ(back->tensor("model.embed_tokens"), nullptr);
    EXPECT_NEAR(back->captures()[1].stats.rms, d.captures()[1].stats.rms, 1e-12);
    ASSERT_TRUE(back->attach("model.embed_tokens", *d.tensor("model.embed_tokens")).ok());
    EXPECT_FALSE(back->attach("model.embed_tokens", Tensor::zeros({ 1 }, DType::F32)).ok());
    EXPECT_FALSE(back->attach("nope", Tensor::zeros({ 1 }, DType::F32)).ok());

    auto bad = json;
    bad["captures"][0]["dtype"] = "F33";
    EXPECT_FALSE(dumpFromJson(bad, "dump.json").ok());
    bad = json;
    bad["format"] = "other";
    EXPECT_FALSE(dumpFromJson(bad, "dump.json").ok());
    bad = json;
    bad["version"] = 99;
    EXPECT_EQ(dumpFromJson(bad, "dump.json").error().code, ErrorCode::Unsupported);
}
