#include "numerics/dump.h"
#include "numerics/dump_compare.h"
#include "numerics/routing_flips.h"
#include "tolerance_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace day0;
using namespace day0::numerics;

namespace {

constexpr std::int64_t kTokens = 6;
constexpr std::int64_t kExperts = 8;
constexpr std::int64_t kHidden = 16;
const std::string kRouter = "model.layers.0.mlp.gate";
const std::string kSelection = "model.layers.0.mlp.gate#topk";
const std::string kMoe = "model.layers.0.mlp";

std::vector<double> moeOutput(unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    std::vector<double> v(std::size_t(kTokens * kHidden));
    for (auto& x : v) {
        x = n(rng);
    }
    return v;
}

/// Router logits: token t prefers experts 1 and 3 (2.0, 1.5); expert 5 scores `rival` for
/// token 4 and 0 elsewhere; the rest are negative.
Tensor routerLogits(double rival)
{
    std::vector<double> v(std::size_t(kTokens * kExperts), -1.0);
    for (std::int64_t t = 0; t < kTokens; ++t) {
        v[std::size_t(t * kExperts + 1)] = 2.0;
        v[std::size_t(t * kExperts + 3)] = 1.5;
        v[std::size_t(t * kExperts + 5)] = t == 4 ? rival : 0.0;
    }
    return Tensor::fromDoubles({ kTokens, kExperts }, v);
}

Tensor selection(bool flipToken4)
{
    std::vector<std::int64_t> ids;
    for (std::int64_t t = 0; t < kTokens; ++t) {
        ids.push_back(1);
        ids.push_back(t == 4 && flipToken4 ? 5 : 3);
    }
    return Tensor::fromInts({ kTokens, 2 }, ids);
}

Dump makeDump(const std::string& precision, double rival, bool flip, double noise)
{
    Dump d;
    d.info.model = "tiny-moe";
    d.info.fingerprint = "moe/h16/e8";
    d.info.precision = precision;
    d.info.numLayers = 1;
    d.add(kRouter, routerLogits(rival), true, "router");
    d.add(kSelection, selection(flip), true);
    auto out = moeOutput(1);
    if (noise > 0) {
        const auto n = moeOutput(2);
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] += noise * n[i];
        }
    }
    if (flip) {
        // The flipped token's output comes from another expert: unrelated values.
        const auto other = moeOutput(3);
        for (std::int64_t c = 0; c < kHidden; ++c) {
            out[std::size_t(4 * kHidden + c)] = other[std::size_t(4 * kHidden + c)];
        }
    }
    d.add(kMoe, Tensor::fromDoubles({ kTokens, kHidden }, out), true, "moe");
    return d;
}

ToleranceTable table() { return test::bf16AnyTable(); }

const CaptureComparison& row(const DumpComparison& c, const std::string& name)
{
    for (const auto& r : c.rows) {
        if (r.name == name) {
            return r;
        }
    }
    throw std::runtime_error("no row " + name);
}

} // namespace

TEST(RoutingFlips, SpacingOfBf16)
{
    EXPECT_DOUBLE_EQ(formatSpacing(DType::BF16, 1.0), std::exp2(-7));
    EXPECT_DOUBLE_EQ(formatSpacing(DType::BF16, 1.5), std::exp2(-7));
    EXPECT_DOUBLE_EQ(formatSpacing(DType::BF16, 3.0), std::exp2(-6));
    EXPECT_DOUBLE_EQ(formatSpacing(DType::BF16, -0.3), std::exp2(-9));
}

TEST(RoutingFlips, NearTieFlipWarnsAndJudgesTheOtherTokens)
{
    const Dump ref = makeDump("fp32", 1.4998, false, 0.0);
    const Dump tgt = makeDump("bf16", 1.4998, true, 1e-3);
    const auto c = test::compareWithBf16Table(ref, tgt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const auto& moe = row(*c, kMoe);
    ASSERT_TRUE(moe.routing.has_value());
    ASSERT_EQ(moe.routing->flips.size(), 1u);
    const auto& f = moe.routing->flips[0];
    EXPECT_EQ(f.token, 4);
    EXPECT_EQ(f.dropped, std::vector<std::int64_t> { 3 });
    EXPECT_EQ(f.added, std::vector<std::int64_t> { 5 });
    ASSERT_TRUE(f.margin.has_value());
    EXPECT_NEAR(*f.margin, 2e-4, 1e-9);
    EXPECT_DOUBLE_EQ(f.resolution, 2.0 * std::exp2(-7));
    EXPECT_TRUE(f.nearTie);
    // The full tensor is still reported (and would fail), the other tokens pass.
    ASSERT_TRUE(moe.metrics.has_value());
    EXPECT_GT(moe.metrics->relL2, 0.1);
    ASSERT_TRUE(moe.routing->unflipped.has_value());
    EXPECT_NEAR(moe.routing->unflipped->relL2, 1e-3, 5e-4);
    EXPECT_EQ(moe.verdict.status, VerdictStatus::Warn);
    EXPECT_NE(moe.verdict.reason.find("near-tie for token 4"), std::string::npos)
        << moe.verdict.reason;
    EXPECT_NE(
        moe.verdict.reason.find("margin 2.0e-04 <= bf16 resolution 1.6e-02"), std::string::npos)
        << moe.verdict.reason;
    EXPECT_NE(moe.verdict.reason.find("the other tokens: rel L2"), std::string::npos);
    EXPECT_FALSE(c->firstDivergence.has_value());
    EXPECT_EQ(c->status(), "warn");
    const auto json = comparisonToJson(*c);
    bool found = false;
    for (const auto& r : json["captures"]) {
        if (r["name"] == kMoe) {
            found = true;
            EXPECT_EQ(r["routing_flips"]["flips"][0]["token"], 4);
            EXPECT_EQ(r["routing_flips"]["flips"][0]["near_tie"], true);
            EXPECT_EQ(r["verdict"]["reason"], moe.verdict.reason);
        }
    }
    EXPECT_TRUE(found);
    EXPECT_NE(comparisonToCsv(*c).find("near-tie for token 4"), std::string::npos);
}

TEST(RoutingFlips, InjectModeUsesTheLocalDumpsSelection)
{
    const Dump ref = makeDump("fp32", 1.4998, false, 0.0);
    const Dump tgt = makeDump("bf16", 1.4998, false, 1e-3);
    Dump local = makeDump("bf16", 1.4998, true, 1e-3);
    local.info.mode = "inject";
    const auto c = test::compareWithBf16Table(ref, tgt, &local);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const auto& moe = row(*c, kMoe);
    ASSERT_TRUE(moe.routing.has_value());
    EXPECT_EQ(moe.routing->basis, "own");
    EXPECT_EQ(moe.verdict.status, VerdictStatus::Warn);
    EXPECT_EQ(moe.verdict.basis, "own");
    EXPECT_GT(moe.own->relL2, 0.1);
}

TEST(RoutingFlips, LargeMarginFlipFailsNamingTheToken)
{
    const Dump ref = makeDump("fp32", 0.5, false, 0.0);
    const Dump tgt = makeDump("bf16", 0.5, true, 1e-3);
    const auto c = test::compareWithBf16Table(ref, tgt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const auto& moe = row(*c, kMoe);
    ASSERT_TRUE(moe.routing.has_value());
    EXPECT_FALSE(moe.routing->flips[0].nearTie);
    EXPECT_EQ(moe.verdict.status, VerdictStatus::Fail);
    EXPECT_NE(
        moe.verdict.reason.find("not a near-tie) for token 4 (reference margin 1.0e+00 > bf16"),
        std::string::npos)
        << moe.verdict.reason;
    ASSERT_TRUE(c->firstDivergence.has_value());
    EXPECT_EQ(c->rows[*c->firstDivergence].name, kMoe);
}

TEST(RoutingFlips, NoFlipLeavesVerdictsUnchanged)
{
    const Dump ref = makeDump("fp32", 1.4998, false, 0.0);
    const ToleranceTable t = table();
    CompareOptions o;
    o.table = &t;
    Progress p;
    for (const double noise : { 1e-3, 0.05 }) {
        const Dump tgt = makeDump("bf16", 1.4998, false, noise);
        const auto c = compareDumps(ref, tgt, o, p, {});
        ASSERT_TRUE(c.ok()) << c.error().message;
        const auto& moe = row(*c, kMoe);
        EXPECT_FALSE(moe.routing.has_value());
        const Verdict plain = judge(t, DType::BF16, OpKind::Moe, { moe.metrics->relL2 });
        EXPECT_EQ(moe.verdict.status, plain.status);
        EXPECT_EQ(moe.verdict.reason, plain.reason);
        EXPECT_EQ(moe.verdict.status, noise < 0.01 ? VerdictStatus::Pass : VerdictStatus::Fail);
    }
}

TEST(RoutingFlips, ExcludingTokensRecomputesOverTheRest)
{
    auto r = moeOutput(1);
    auto t = r;
    t[std::size_t(2 * kHidden)] += 10.0;
    const Tensor rt = Tensor::fromDoubles({ kTokens, kHidden }, r);
    const Tensor tt = Tensor::fromDoubles({ kTokens, kHidden }, t);
    TokenFlip f;
    f.token = 2;
    const auto m = compareExcludingTokens(rt, tt, kTokens, { f }, {});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->count, (kTokens - 1) * kHidden);
    EXPECT_EQ(m->relL2, 0.0);
    EXPECT_FALSE(compareExcludingTokens(rt, tt, kTokens + 1, { f }, {}).ok());
}
