#include "exec/attention.h"
#include "exec/ops.h"
#include "exec/precision.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "numerics/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

using namespace day0;
using namespace day0::exec;

TEST(Ops, LinearWithBiasIsXWt)
{
    // x [2,3], W [2,3] (out, in), b [2]
    const std::vector<double> x { 1, 2, 3, 4, 5, 6 };
    const std::vector<double> w { 1, 0, -1, 0.5, 0.5, 0.5 };
    const std::vector<double> b { 10, 20 };
    std::vector<double> y(4);
    linear<double>(x.data(), w.data(), b.data(), y.data(), 2, 3, 2);
    EXPECT_DOUBLE_EQ(y[0], 1 - 3 + 10);
    EXPECT_DOUBLE_EQ(y[1], 3 + 20);
    EXPECT_DOUBLE_EQ(y[2], 4 - 6 + 10);
    EXPECT_DOUBLE_EQ(y[3], 7.5 + 20);
    std::vector<float> yf(4);
    const std::vector<float> xf(x.begin(), x.end());
    const std::vector<float> wf(w.begin(), w.end());
    linear<float>(xf.data(), wf.data(), nullptr, yf.data(), 2, 3, 2);
    EXPECT_FLOAT_EQ(yf[3], 7.5f);
    // matmul: [1,2]·[[1,2],[3,4]] = [7, 10]
    const std::vector<double> a { 1, 2 };
    const std::vector<double> m { 1, 2, 3, 4 };
    std::vector<double> c(2);
    matmul<double>(a.data(), m.data(), c.data(), 1, 2, 2);
    EXPECT_DOUBLE_EQ(c[0], 7);
    EXPECT_DOUBLE_EQ(c[1], 10);
}

TEST(Ops, RmsNormAndLayerNorm)
{
    const std::vector<double> x { 1, 2, 3, 4 };
    const std::vector<double> w { 1, 2, 1, 2 };
    std::vector<double> y(4);
    rmsNorm<double>(x.data(), w.data(), y.data(), 1, 4, 0.0);
    const double rms = std::sqrt(30.0 / 4.0);
    EXPECT_DOUBLE_EQ(y[1], 2.0 * 2.0 / rms);
    EXPECT_DOUBLE_EQ(y[2], 3.0 / rms);
    const std::vector<double> b { 0, 0, 1, 1 };
    layerNorm<double>(x.data(), nullptr, b.data(), y.data(), 1, 4, 0.0);
    // mean 2.5, var 1.25
    EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25), 1e-15);
    EXPECT_NEAR(y[3], 1.5 / std::sqrt(1.25) + 1.0, 1e-15);
    // eps enters under the root
    rmsNorm<double>(x.data(), nullptr, y.data(), 1, 4, 1.0);
    EXPECT_NEAR(y[0], 1.0 / std::sqrt(7.5 + 1.0), 1e-15);
}

TEST(Ops, Activations)
{
    const auto value = [](Activation a, double x) {
        activate<double>(&x, 1, a);
        return x;
    };
    EXPECT_NEAR(value(Activation::Silu, 1.0), 0.7310585786300049, 1e-15);
    EXPECT_NEAR(value(Activation::Gelu, 1.0), 0.8413447460685429, 1e-15);
    EXPECT_NEAR(value(Activation::GeluTanh, 1.0), 0.8411919906082768, 1e-15);
    EXPECT_NEAR(value(Activation::QuickGelu, 1.0), 1.0 / (1.0 + std::exp(-1.702)), 1e-15);
    EXPECT_EQ(value(Activation::Relu, -2.0), 0.0);
    double g = 2.0;
    const double u = 3.0;
    gatedActivate<double>(&g, &u, 1, Activation::Silu);
    EXPECT_NEAR(g, 3.0 * 2.0 / (1.0 + std::exp(-2.0)), 1e-15);
    EXPECT_TRUE(parseActivation("gelu_pytorch_tanh").ok());
    EXPECT_EQ(parseActivation("mish").error().code, ErrorCode::Unsupported);
}

TEST(Ops, EmbeddingAndSoftmax)
{
    const std::vector<float> table { 0, 0, 1, 1, 2, 2 };
    const std::vector<std::int64_t> ids { 2, 0 };
    std::vector<float> out(4);
    ASSERT_TRUE(embedding<float>(ids, table.data(), 3, 2, out.data()).ok());
    EXPECT_EQ(out, (std::vector<float> { 2, 2, 0, 0 }));
    const std::vector<std::int64_t> bad { 3 };
    const auto r = embedding<float>(bad, table.data(), 3, 2, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("token id 3"), std::string::npos);
    std::vector<double> s { 1, 2, 3 };
    softmaxRows<double>(s.data(), 1, 3);
    const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
    EXPECT_NEAR(s[2], std::exp(3.0) / z, 1e-15);
}

TEST(Rope, DefaultRotatesPairsByPositionTimesFrequency)
{
    auto rope = makeRope(4, 10000.0, {}, RopeLayout::RotateHalf);
    ASSERT_TRUE(rope.ok());
    EXPECT_DOUBLE_EQ(rope->invFreq[0], 1.0);
    EXPECT_DOUBLE_EQ(rope->invFreq[1], 0.01);
    // one token, one head: x = [1, 0, 0, 0] at position 2 -> pair 0 (lanes 0, 2) turns by 2 rad
    std::vector<double> x { 1, 0, 0, 0 };
    const std::int64_t pos[] = { 2 };
    applyRope<double>(x.data(), 1, 1, 4, pos, *rope);
    EXPECT_NEAR(x[0], std::cos(2.0), 1e-15);
    EXPECT_NEAR(x[2], std::sin(2.0), 1e-15);
    // interleaved pairs lanes (0, 1)
    auto inter = makeRope(4, 10000.0, {}, RopeLayout::Interleaved);
    std::vector<double> y { 1, 0, 0, 0 };
    applyRope<double>(y.data(), 1, 1, 4, pos, *inter);
    EXPECT_NEAR(y[0], std::cos(2.0), 1e-15);
    EXPECT_NEAR(y[1], std::sin(2.0), 1e-15);
    EXPECT_EQ(y[2], 0.0);
    // position 0 is the identity
    std::vector<double> z { 0.3, -1, 2, 5 };
    const std::int64_t zero[] = { 0 };
    applyRope<double>(z.data(), 1, 1, 4, zero, *rope);
    EXPECT_EQ(z, (std::vector<double> { 0.3, -1, 2, 5 }));
}

TEST(Rope, Llama3SmoothsMediumFrequencies)
{
    model::RopeScaling s;
    s.type = "llama3";
    s.factor = 8;
    s.lowFreqFactor = 1;
    s.highFreqFactor = 4;
    s.originalMaxPositions = 8192;
    auto rope = makeRope(128, 500000.0, s, RopeLayout::RotateHalf);
    ASSERT_TRUE(rope.ok());
    EXPECT_DOUBLE_EQ(rope->invFreq[0], 1.0); // high frequency kept
    EXPECT_NEAR(
        rope->invFreq[63], std::pow(500000.0, -126.0 / 128.0) / 8.0, 1e-20); // low: / factor
    // a medium frequency: wavelength between 8192/4 and 8192
    for (std::size_t i = 0; i < 64; ++i) {
        const double f = std::pow(500000.0, -double(2 * i) / 128.0);
        const double wl = 2 * std::numbers::pi / f;
        if (wl > 2048 && wl < 8192) {
            const double smooth = (8192.0 / wl - 1.0) / 3.0;
            EXPECT_NEAR(rope->invFreq[i], (1 - smooth) * f / 8 + smooth * f, 1e-15 * f);
        }
    }
}

TEST(Rope, YarnDeepseekNumbers)
{
    EXPECT_NEAR(yarnMscale(40.0, 1.0), 1.0 + 0.1 * std::log(40.0), 1e-15);
    EXPECT_EQ(yarnMscale(1.0, 1.0), 1.0);
    // DeepSeek-V3 softmax scale: 192^-0.5 × mscale² ≈ 0.135234 (loading-inference-anchors §3.3)
    EXPECT_NEAR(std::pow(192.0, -0.5) * std::pow(yarnMscale(40.0, 1.0), 2), 0.135234, 1e-6);
    model::RopeScaling s;
    s.type = "yarn";
    s.factor = 40;
    s.originalMaxPositions = 4096;
    s.betaFast = 32;
    s.betaSlow = 1;
    s.mscale = 1;
    s.mscaleAllDim = 1;
    auto rope = makeRope(64, 10000.0, s, RopeLayout::Interleaved);
    ASSERT_TRUE(rope.ok());
    EXPECT_DOUBLE_EQ(rope->attentionScaling, 1.0); // mscale / mscale_all_dim
    EXPECT_DOUBLE_EQ(rope->invFreq[0], 1.0); // extrapolated (fast) end unchanged
    EXPECT_NEAR(rope->invFreq[31], std::pow(10000.0, -62.0 / 64.0) / 40.0, 1e-18); // interpolated
    // Kimi-K2: beta_fast == beta_slow gives a degenerate ramp, handled without NaN
    s.betaFast = 1;
    s.betaSlow = 1;
    auto kimi = makeRope(64, 50000.0, s, RopeLayout::Interleaved);
    ASSERT_TRUE(kimi.ok());
    for (const double f : kimi->invFreq) {
        EXPECT_TRUE(std::isfinite(f));
    }
    // no mscale keys: cos/sin scaled by 0.1 ln(factor) + 1
    s.mscale = 0;
    s.mscaleAllDim = 0;
    EXPECT_NEAR(makeRope(64, 10000.0, s, RopeLayout::RotateHalf)->attentionScaling,
        yarnMscale(40, 1), 1e-15);
    // gpt-oss (truncate false): the correction range stays fractional. head_dim 64, θ 150000,
    // factor 32 over 4096 positions: low = 64·ln(4096 / (32·2π)) / (2·ln 150000) = 8.0928,
    // high = 64·ln(4096 / 2π) / (2·ln 150000) = 17.3980; pair 10 is extrapolated by
    // 1 − (10 − low) / (high − low).
    model::RopeScaling oss;
    oss.type = "yarn";
    oss.factor = 32;
    oss.originalMaxPositions = 4096;
    oss.betaFast = 32;
    oss.betaSlow = 1;
    oss.truncate = false;
    const double theta = 150000.0;
    const auto dimOf = [&](double r) {
        return 64.0 * std::log(4096.0 / (r * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
    };
    const double low = dimOf(32);
    const double high = dimOf(1);
    EXPECT_NEAR(low, 8.0928, 1e-4);
    EXPECT_NEAR(high, 17.3980, 1e-4);
    const auto fractional = makeRope(64, theta, oss, RopeLayout::RotateHalf);
    ASSERT_TRUE(fractional.ok());
    const double f10 = std::pow(theta, -20.0 / 64.0);
    const double extrapolate = 1.0 - (10.0 - low) / (high - low);
    EXPECT_NEAR(fractional->invFreq[10], f10 / 32 * (1 - extrapolate) + f10 * extrapolate, 1e-16);
    EXPECT_NEAR(fractional->attentionScaling, 0.1 * std::log(32.0) + 1.0, 1e-15);
    // Truncated (the default), the ramp runs from 8 to 18 and pair 10 moves.
    oss.truncate = true;
    const auto whole = makeRope(64, theta, oss, RopeLayout::RotateHalf);
    const double wholeExtrapolate = 1.0 - (10.0 - 8.0) / (18.0 - 8.0);
    EXPECT_NEAR(
        whole->invFreq[10], f10 / 32 * (1 - wholeExtrapolate) + f10 * wholeExtrapolate, 1e-16);
    EXPECT_GT(std::fabs(whole->invFreq[10] - fractional->invFreq[10]), 1e-6 * f10);
    s.type = "longrope";
    EXPECT_EQ(
        makeRope(64, 10000.0, s, RopeLayout::RotateHalf).error().code, ErrorCode::Unsupported);
}

TEST(Rope, MropeUsesOneComponentPerSection)
{
    model::RopeScaling s;
    s.type = "mrope";
    s.mropeSection = { 1, 1, 2 };
    auto rope = makeRope(8, 10000.0, s, RopeLayout::RotateHalf);
    ASSERT_TRUE(rope.ok());
    EXPECT_EQ(rope->pairComponent, (std::vector<int> { 0, 1, 2, 2 }));
    // Text tokens (t = h = w) rotate exactly like 1-D RoPE.
    std::vector<double> a { 1, 2, 3, 4, 5, 6, 7, 8 };
    std::vector<double> b = a;
    const std::int64_t pos[] = { 5 };
    const std::int64_t pos3[] = { 5, 5, 5 };
    applyRope<double>(a.data(), 1, 1, 8, pos, *rope, pos3);
    auto plain = makeRope(8, 10000.0, {}, RopeLayout::RotateHalf);
    applyRope<double>(b.data(), 1, 1, 8, pos, *plain);
    EXPECT_EQ(a, b);
    // An image token: pair 1 follows h = 3, pairs 2-3 follow w = 7.
    std::vector<double> c { 1, 1, 1, 1, 0, 0, 0, 0 };
    const std::int64_t img[] = { 2, 3, 7 };
    applyRope<double>(c.data(), 1, 1, 8, pos, *rope, img);
    EXPECT_NEAR(c[0], std::cos(2.0 * rope->invFreq[0]), 1e-15);
    EXPECT_NEAR(c[1], std::cos(3.0 * rope->invFreq[1]), 1e-15);
    EXPECT_NEAR(c[3], std::cos(7.0 * rope->invFreq[3]), 1e-15);
    s.mropeSection = { 1, 1, 1 };
    EXPECT_FALSE(makeRope(8, 10000.0, s, RopeLayout::RotateHalf).ok());
}

TEST(Attention, CausalSoftmaxOverCachedKeys)
{
    // 1 head, d = 1; keys [1, 2], values [10, 20]; the last query (position 1) sees both.
    const std::vector<double> q { 1 };
    const std::vector<double> k { 1, 2 };
    const std::vector<double> v { 10, 20 };
    std::vector<double> out(1);
    AttentionShape s;
    s.queries = 1;
    s.keys = 2;
    s.heads = 1;
    s.kvHeads = 1;
    s.headDim = 1;
    s.valueDim = 1;
    attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    const double p1 = std::exp(2.0) / (std::exp(1.0) + std::exp(2.0));
    EXPECT_NEAR(out[0], 10 * (1 - p1) + 20 * p1, 1e-12);
    // Prefill of both tokens: the first query sees only the first key.
    const std::vector<double> q2 { 1, 1 };
    std::vector<double> out2(2);
    s.queries = 2;
    attention<double>(q2.data(), k.data(), v.data(), out2.data(), s);
    EXPECT_NEAR(out2[0], 10.0, 1e-12);
    EXPECT_NEAR(out2[1], out[0], 1e-12);
    // A sliding window of 1 keeps only the diagonal.
    s.window = 1;
    attention<double>(q2.data(), k.data(), v.data(), out2.data(), s);
    EXPECT_NEAR(out2[1], 20.0, 1e-12);
}

TEST(Attention, SinksJoinTheSoftmaxWithoutAValue)
{
    // gpt-oss: one learned logit per head in each softmax. Keys [1, 2], values [10, 20], sink
    // logit 1.5: out = (10·e¹ + 20·e²) / (e¹ + e² + e^1.5), below the sinkless mean.
    const std::vector<double> q { 1 };
    const std::vector<double> k { 1, 2 };
    const std::vector<double> v { 10, 20 };
    const std::vector<float> sinks { 1.5f };
    std::vector<double> out(1);
    AttentionShape s;
    s.queries = 1;
    s.keys = 2;
    s.heads = 1;
    s.kvHeads = 1;
    s.headDim = 1;
    s.valueDim = 1;
    s.sinks = sinks;
    attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    const double e1 = std::exp(1.0);
    const double e2 = std::exp(2.0);
    const double sink = std::exp(1.5);
    EXPECT_NEAR(out[0], (10 * e1 + 20 * e2) / (e1 + e2 + sink), 1e-12);
    // A sink far above the scores takes the whole mass (the max includes it: no overflow).
    const std::vector<float> huge { 1000.0f };
    s.sinks = huge;
    attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    EXPECT_NEAR(out[0], 0.0, 1e-12);
    // With a window of one key, the sink still joins: 20·e² / (e² + e^1.5).
    s.sinks = sinks;
    s.window = 1;
    attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    EXPECT_NEAR(out[0], 20 * e2 / (e2 + sink), 1e-12);
    // The float path agrees.
    const std::vector<float> qf { 1 };
    const std::vector<float> kf { 1, 2 };
    const std::vector<float> vf { 10, 20 };
    std::vector<float> outf(1);
    attention<float>(qf.data(), kf.data(), vf.data(), outf.data(), s);
    EXPECT_NEAR(outf[0], out[0], 1e-5);
}

TEST(Attention, GroupedQueryHeadsShareKvHeads)
{
    // 4 query heads, 2 kv heads: heads 0,1 use kv 0; heads 2,3 use kv 1. One key: output = value.
    const std::vector<double> q(4, 1.0);
    const std::vector<double> k { 1, 1 };
    const std::vector<double> v { 5, 7 };
    std::vector<double> out(4);
    AttentionShape s;
    s.queries = 1;
    s.keys = 1;
    s.heads = 4;
    s.kvHeads = 2;
    s.headDim = 1;
    s.valueDim = 1;
    attention<double>(q.data(), k.data(), v.data(), out.data(), s);
    EXPECT_EQ(out, (std::vector<double> { 5, 5, 7, 7 }));
}

TEST(Router, SoftmaxTopKWithRenormalisation)
{
    const std::vector<double> logits { 1, 3, 2, 0 };
    RouterConfig c;
    c.numExperts = 4;
    c.topK = 2;
    auto r = route(logits.data(), 1, c, nullptr);
    EXPECT_EQ(r.experts, (std::vector<std::int64_t> { 1, 2 }));
    const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
    EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-15);
    c.normTopkProb = true;
    r = route(logits.data(), 1, c, nullptr);
    EXPECT_NEAR(r.weights[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-15);
    EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-15);
}

TEST(Router, SigmoidGroupedWithBiasAndScaling)
{
    // 4 experts in 2 groups, top-1 group, top-2 experts. The bias lifts expert 3 for selection
    // only; weights stay the unbiased sigmoids.
    const std::vector<double> logits { 2.0, 1.0, 0.0, 0.5 };
    const std::vector<double> bias { 0.0, 0.0, 0.0, 2.0 };
    RouterConfig c;
    c.scoring = model::RouterScoring::Sigmoid;
    c.numExperts = 4;
    c.topK = 2;
    c.numGroups = 2;
    c.topkGroup = 1;
    c.normTopkProb = true;
    c.routedScalingFactor = 2.5;
    const auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
    auto r = route(logits.data(), 1, c, bias.data());
    // group 0: σ(2)+σ(1) = 1.612; group 1: σ(0)+σ(0.5)+2 = 3.122 -> group 1 wins
    EXPECT_EQ(r.experts, (std::vector<std::int64_t> { 3, 2 }));
    const double sum = sig(0.5) + sig(0.0) + 1e-20;
    EXPECT_NEAR(r.weights[0], sig(0.5) / sum * 2.5, 1e-15);
    EXPECT_NEAR(r.weights[1], sig(0.0) / sum * 2.5, 1e-15);
    // without bias group 0 wins
    r = route(logits.data(), 1, c, nullptr);
    EXPECT_EQ(r.experts, (std::vector<std::int64_t> { 0, 1 }));
}

TEST(Router, SelectionScoresAreWhatRouteRanks)
{
    const std::vector<double> logits { 2.0, 1.0, 0.0, 0.5, -1.0, 3.0, 0.25, 0.0 };
    const std::vector<double> bias { 0.0, 0.0, 0.0, 2.0 };
    RouterConfig c;
    c.scoring = model::RouterScoring::Sigmoid;
    c.numExperts = 4;
    c.topK = 2;
    const auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
    const auto s = selectionScores(logits.data(), 2, c, bias.data());
    ASSERT_EQ(s.size(), 8u);
    for (std::size_t i = 0; i < s.size(); ++i) {
        EXPECT_DOUBLE_EQ(s[i], sig(logits[i]) + bias[i % 4]) << i;
    }
    // Without groups route() takes the top-k of these scores.
    const auto r = route(logits.data(), 2, c, bias.data());
    EXPECT_EQ(r.experts, (std::vector<std::int64_t> { 3, 0, 3, 1 }));
    const std::vector<float> lf(logits.begin(), logits.end());
    const std::vector<float> bf(bias.begin(), bias.end());
    const auto sf = selectionScoresFloat(lf.data(), 2, c, bf.data());
    for (std::size_t i = 0; i < s.size(); ++i) {
        EXPECT_NEAR(sf[i], s[i], 1e-7) << i;
    }
    // Softmax routers: the probabilities.
    c.scoring = model::RouterScoring::Softmax;
    const auto p = selectionScores(logits.data(), 1, c, nullptr);
    const double z = std::exp(2.0) + std::exp(1.0) + 1.0 + std::exp(0.5);
    EXPECT_NEAR(p[0], std::exp(2.0) / z, 1e-15);
    EXPECT_NEAR(p[0] + p[1] + p[2] + p[3], 1.0, 1e-15);
}

TEST(Precision, PlansAndOverrides)
{
    auto plan = parsePrecisionPlan("bf16", "attention=fp32,router=fp32", "1=fp32,3-4=fp16");
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->modeFor(numerics::OpKind::Linear, 0), PrecisionMode::BF16);
    EXPECT_EQ(plan->modeFor(numerics::OpKind::Attention, 0), PrecisionMode::F32);
    EXPECT_EQ(plan->modeFor(numerics::OpKind::Linear, 1), PrecisionMode::F32);
    EXPECT_EQ(plan->modeFor(numerics::OpKind::Attention, 4), PrecisionMode::F16);
    EXPECT_EQ(plan->modeFor(numerics::OpKind::Linear, 5), PrecisionMode::BF16);
    EXPECT_NE(plan->describe().find("layer 3=fp16"), std::string::npos);
    EXPECT_FALSE(parsePrecisionPlan("bf17").ok());
    EXPECT_FALSE(parsePrecisionPlan("bf16", "softmax=fp32").ok());
    EXPECT_FALSE(parsePrecisionPlan("bf16", "", "x=fp32").ok());
    EXPECT_FALSE(parsePrecisionPlan("bf16", "attention=fp64").ok());
    EXPECT_EQ(*parsePrecision("FP8_E5M2"), PrecisionMode::F8E5M2);
    EXPECT_EQ(precisionDType(PrecisionMode::Int8), DType::I8);
    // Each plan names what it rounds where, overrides included.
    auto recipe = [](const char* base, const char* ops = "") {
        auto p = parsePrecisionPlan(base, ops);
        EXPECT_TRUE(p.ok());
        return precisionRecipe(*p);
    };
    EXPECT_NE(
        recipe("fp16").find("residual stream, KV cache and logits in fp16"), std::string::npos);
    auto block = *parsePrecisionPlan("fp8");
    block.fp8Scaling = Fp8Scaling::Block;
    EXPECT_NE(precisionRecipe(block).find("block scales"), std::string::npos);
    EXPECT_NE(
        recipe("fp8-e5m2").find("fp8 e5m2 with one dynamic scale per tensor"), std::string::npos);
    EXPECT_NE(recipe("int8").find("int8, symmetric per output channel"), std::string::npos);
    EXPECT_EQ(recipe("bf16").find("except"), std::string::npos);
    EXPECT_NE(recipe("bf16", "attention=fp32")
                  .find("except where the plan says otherwise: bf16 "
                        "(attention=fp32)"),
        std::string::npos);
}

TEST(Precision, GemmInputRounding)
{
    // fp8 per tensor: the largest magnitude lands exactly on 448 × scale.
    std::vector<float> v { 0.001f, -3.0f, 1.7f, 0.5f };
    roundGemmInput(v, 1, 4, PrecisionMode::F8E4M3, Fp8Scaling::PerTensor, false);
    EXPECT_FLOAT_EQ(v[1], -3.0f);
    const float scale = 3.0f / 448.0f;
    EXPECT_FLOAT_EQ(v[2], numerics::roundToFormat(1.7f / scale, DType::F8E4M3) * scale);
    // int8 weights: per output row
    std::vector<float> w { 1.0f, 0.5f, 10.0f, 2.5f };
    roundGemmInput(w, 2, 2, PrecisionMode::Int8, Fp8Scaling::PerTensor, true);
    EXPECT_FLOAT_EQ(w[0], 1.0f);
    EXPECT_FLOAT_EQ(w[1], 64.0f / 127.0f); // 63.5 -> 64
    EXPECT_FLOAT_EQ(w[2], 10.0f);
    // bf16 activations
    std::vector<float> a { 1.0f + 1.0f / 256.0f };
    roundActivations(a, PrecisionMode::BF16);
    EXPECT_EQ(a[0], 1.0f);
    roundActivations(a, PrecisionMode::F32);
    // block scales: each 128-column block of an activation row has its own scale
    std::vector<float> blocks(256, 1.0f);
    blocks[200] = 100.0f;
    blocks[1] = 1.015625f;
    roundGemmInput(blocks, 1, 256, PrecisionMode::F8E4M3, Fp8Scaling::Block, false);
    EXPECT_FLOAT_EQ(blocks[0], 1.015625f); // 441.1 -> 448 on the e4m3 grid of block 0
    EXPECT_FLOAT_EQ(blocks[130], 4.5f * 100.0f / 448.0f); // block 1 is scaled by its 100
}

TEST(Precision, Fp4RecipesQuantiseAsNvfp4AndMxfp4)
{
    EXPECT_EQ(*parsePrecision("NVFP4"), PrecisionMode::Nvfp4);
    EXPECT_EQ(*parsePrecision("mxfp4"), PrecisionMode::Mxfp4);
    EXPECT_EQ(precisionDType(PrecisionMode::Nvfp4), DType::F4E2M1);
    // "fp4" names two recipes: refused, with both named.
    const auto ambiguous = parsePrecision("fp4");
    ASSERT_FALSE(ambiguous.ok());
    EXPECT_NE(ambiguous.error().message.find("nvfp4"), std::string::npos);
    EXPECT_NE(ambiguous.error().message.find("mxfp4"), std::string::npos);
    // Only the projections are quantised; the rest runs in bf16.
    const auto plan = *parsePrecisionPlan("nvfp4");
    EXPECT_EQ(plan.modeFor(numerics::OpKind::Linear, 0), PrecisionMode::Nvfp4);
    EXPECT_EQ(plan.modeFor(numerics::OpKind::Norm, 0), PrecisionMode::BF16);
    EXPECT_NE(precisionRecipe(plan).find("E4M3 scale per 16"), std::string::npos);
    EXPECT_NE(precisionRecipe(*parsePrecisionPlan("mxfp4")).find("W4A16"), std::string::npos);

    // NVFP4: tensor scale amax / (6 · 448); block scale amax_block / 6 on the E4M3 grid of that
    // tensor scale; values on E2M1 × the block's scale.
    std::vector<float> row(32);
    for (int i = 0; i < 16; ++i) {
        row[std::size_t(i)] = 0.1f * float(i + 1); // block 0: amax 1.6
        row[std::size_t(16 + i)] = 12.0f * float(i % 2 ? 1 : -1) / float(i + 1); // amax 12
    }
    std::vector<float> q = row;
    roundGemmInput(q, 1, 32, PrecisionMode::Nvfp4, Fp8Scaling::PerTensor, false);
    const float global = 12.0f / (6.0f * 448.0f);
    const float s0 = numerics::roundToFormat(1.6f / 6.0f / global, DType::F8E4M3) * global;
    const float s1 = numerics::roundToFormat(12.0f / 6.0f / global, DType::F8E4M3) * global;
    EXPECT_FLOAT_EQ(s1, 2.0f); // 448 exactly
    for (int i = 0; i < 16; ++i) {
        EXPECT_FLOAT_EQ(q[std::size_t(i)], numerics::roundToE2m1(row[std::size_t(i)] / s0) * s0);
        EXPECT_FLOAT_EQ(
            q[std::size_t(16 + i)], numerics::roundToE2m1(row[std::size_t(16 + i)] / s1) * s1);
    }
    EXPECT_FLOAT_EQ(q[16], -12.0f); // the block's largest lands on 6 × its scale

    // MXFP4 weights: 2^(floor(log2 amax) − 2) per 32; 5.0 -> scale 1, 12.0 -> scale 2, and a
    // value past 6 × scale saturates. Its activations stay bf16.
    std::vector<float> w(64, 0.3f);
    w[0] = 5.0f;
    w[32] = 12.0f;
    w[33] = 7.3f;
    roundGemmInput(w, 1, 64, PrecisionMode::Mxfp4, Fp8Scaling::PerTensor, true);
    EXPECT_FLOAT_EQ(w[0], 4.0f); // 5 ties to the even code 4
    EXPECT_FLOAT_EQ(w[1], 0.5f); // 0.3 / 1 -> 0.5
    EXPECT_FLOAT_EQ(w[32], 12.0f); // 6 × 2
    EXPECT_FLOAT_EQ(w[33], 8.0f); // 3.65 -> 4 × 2
    EXPECT_FLOAT_EQ(w[34], 0.0f); // 0.15 -> 0
    std::vector<float> a { 1.0f + 1.0f / 256.0f, 0.3f };
    roundGemmInput(a, 1, 2, PrecisionMode::Mxfp4, Fp8Scaling::PerTensor, false);
    EXPECT_EQ(a[0], 1.0f);
    EXPECT_EQ(a[1], numerics::roundToFormat(0.3f, DType::BF16));
}

TEST(Precision, Fp8ChannelScalingScalesEachRow)
{
    EXPECT_EQ(*parseFp8Scaling("Channel"), Fp8Scaling::Channel);
    EXPECT_FALSE(parseFp8Scaling("row").ok());
    auto plan = *parsePrecisionPlan("fp8");
    plan.fp8Scaling = Fp8Scaling::Channel;
    EXPECT_NE(precisionRecipe(plan).find("FP8_DYNAMIC"), std::string::npos);
    // Row 1's amax (0.01) lands on 448 × its own scale, not on row 0's.
    std::vector<float> v { 100.0f, 1.0f, 0.01f, 0.003f };
    roundGemmInput(v, 2, 2, PrecisionMode::F8E4M3, Fp8Scaling::Channel, true);
    EXPECT_FLOAT_EQ(v[2], 0.01f);
    const float scale = 0.01f / 448.0f;
    EXPECT_FLOAT_EQ(v[3], numerics::roundToFormat(0.003f / scale, DType::F8E4M3) * scale);
}

TEST(Precision, Int4WeightsAreSymmetricGroupwise)
{
    EXPECT_EQ(*parsePrecision("int4"), PrecisionMode::Int4G128);
    EXPECT_EQ(*parsePrecision("INT4-G32"), PrecisionMode::Int4G32);
    EXPECT_EQ(precisionDType(PrecisionMode::Int4G32), DType::I4);
    const auto ambiguous = parsePrecision("w4a16");
    ASSERT_FALSE(ambiguous.ok());
    EXPECT_NE(ambiguous.error().message.find("int4-g32"), std::string::npos);
    EXPECT_NE(precisionRecipe(*parsePrecisionPlan("int4-g32")).find("one scale per 32"),
        std::string::npos);
    // Group 0 (32 values): amax 7.5 -> scale 1 exactly; 7.5 rounds to 8 (even) and clamps to 7,
    // -7.5 reaches -8; the ties 2.5 and 3.5 go to the even 2 and 4. Group 1: amax 0.9375 ->
    // scale 0.125, and 0.3125 (2.5 steps) goes to 2 steps.
    std::vector<float> w(64, 0.0f);
    w[0] = 7.5f;
    w[1] = -7.5f;
    w[2] = 2.5f;
    w[3] = 3.5f;
    w[32] = 0.9375f;
    w[33] = 0.3125f;
    roundGemmInput(w, 1, 64, PrecisionMode::Int4G32, Fp8Scaling::PerTensor, true);
    EXPECT_EQ(w[0], 7.0f);
    EXPECT_EQ(w[1], -8.0f);
    EXPECT_EQ(w[2], 2.0f);
    EXPECT_EQ(w[3], 4.0f);
    EXPECT_EQ(w[32], 7.0f * 0.125f);
    EXPECT_EQ(w[33], 2.0f * 0.125f);
    // With groups of 128 the same values share one scale (1): 0.3125 rounds to 0.
    std::vector<float> g(64, 0.0f);
    g[0] = 7.5f;
    g[33] = 0.3125f;
    roundGemmInput(g, 1, 64, PrecisionMode::Int4G128, Fp8Scaling::PerTensor, true);
    EXPECT_EQ(g[33], 0.0f);
    // Activations stay bf16.
    std::vector<float> a { 1.0f + 1.0f / 256.0f };
    roundGemmInput(a, 1, 1, PrecisionMode::Int4G128, Fp8Scaling::PerTensor, false);
    EXPECT_EQ(a[0], 1.0f);
}
