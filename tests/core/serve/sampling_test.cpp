// The sampler of day0 serve (sampling.h): the order logits → temperature → top-k → top-p →
// softmax → draw, a seed that reproduces, frequencies that match the distribution, and the
// request fields' validation.
#include "exec/sequence_decoder.h"
#include "serve/openai_protocol.h"
#include "serve/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

using namespace day0::serve;

namespace {

std::vector<double> logOf(const std::vector<double>& probs)
{
    std::vector<double> out;
    for (const double p : probs) {
        out.push_back(std::log(p));
    }
    return out;
}

/// Pearson's chi-square of `n` draws against `expected` probabilities (by id).
double chiSquare(
    Sampler& sampler, const std::vector<double>& logits, const std::vector<double>& expected, int n)
{
    std::vector<int> counts(expected.size(), 0);
    for (int i = 0; i < n; ++i) {
        ++counts[std::size_t(sampler.sample(logits))];
    }
    double chi = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the candidates";
            continue;
        }
        const double e = expected[i] * n;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

// Chi-square upper 0.1% points: 3 degrees of freedom 16.27, 1 degree 10.83. The draws are
// seeded, so each check gives the same figure every run.
constexpr double kChi3 = 16.27;
constexpr double kChi1 = 10.83;

} // namespace

TEST(Sampling, CandidatesAreInIdOrderAndNormalised)
{
    const std::vector<double> logits { 1.0, 3.0, 2.0, 3.0 };
    SamplingParams p;
    auto c = candidateDistribution(logits, p);
    EXPECT_EQ(c.ids, (std::vector<std::int64_t> { 0, 1, 2, 3 }));
    const double z = 2 * std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
    EXPECT_NEAR(c.probs[0], std::exp(1.0) / z, 1e-15);
    EXPECT_NEAR(c.probs[1], std::exp(3.0) / z, 1e-15);
    EXPECT_NEAR(c.probs[2], std::exp(2.0) / z, 1e-15);
    // top-k ranks by logit, ties to the lower id: k = 1 keeps 1 of the tied 1 and 3; k = 3 drops 0.
    p.topK = 1;
    EXPECT_EQ(candidateDistribution(logits, p).ids, (std::vector<std::int64_t> { 1 }));
    p.topK = 3;
    EXPECT_EQ(candidateDistribution(logits, p).ids, (std::vector<std::int64_t> { 1, 2, 3 }));
    // top-p ranks the same way: 1 holds e³/z = 0.3995, 1 and 3 hold 0.799.
    p.topK = 0;
    p.topP = 0.75;
    EXPECT_EQ(candidateDistribution(logits, p).ids, (std::vector<std::int64_t> { 1, 3 }));
    p.topP = 0.39;
    EXPECT_EQ(candidateDistribution(logits, p).ids, (std::vector<std::int64_t> { 1 }));
}

TEST(Sampling, TopPOverALargeVocabularyKeepsTheShortestPrefix)
{
    // 5000 tokens with p ∝ 0.999^rank in a shuffled id order: the prefix that reaches top_p is
    // longer than the first sorting step (64), so the sort has to go on.
    std::vector<std::int64_t> rankOf(5000);
    std::iota(rankOf.begin(), rankOf.end(), 0);
    std::shuffle(rankOf.begin(), rankOf.end(), std::mt19937_64(3));
    std::vector<double> logits(5000);
    for (std::size_t id = 0; id < logits.size(); ++id) {
        logits[id] = double(rankOf[id]) * std::log(0.999);
    }
    double total = 0.0;
    for (int r = 0; r < 5000; ++r) {
        total += std::pow(0.999, r);
    }
    SamplingParams p;
    p.topP = 0.5;
    std::int64_t want = 0;
    for (double mass = 0.0; mass < 0.5; ++want) {
        mass += std::pow(0.999, double(want)) / total;
    }
    const auto c = candidateDistribution(logits, p);
    ASSERT_EQ(std::int64_t(c.ids.size()), want);
    for (const auto id : c.ids) {
        EXPECT_LT(rankOf[std::size_t(id)], want);
    }
    EXPECT_TRUE(std::is_sorted(c.ids.begin(), c.ids.end()));
}

TEST(Sampling, TemperatureThenTopKThenTopP)
{
    const auto logits = logOf({ 0.4, 0.3, 0.2, 0.1 });
    SamplingParams p;
    p.temperature = 2.0; // p ∝ sqrt(p0)
    auto c = candidateDistribution(logits, p);
    const double s = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
    EXPECT_NEAR(c.probs[0], std::sqrt(0.4) / s, 1e-14);
    EXPECT_NEAR(c.probs[3], std::sqrt(0.1) / s, 1e-14);
    // top-k cuts before the softmax: two tokens, renormalised.
    p.temperature = 1.0;
    p.topK = 2;
    c = candidateDistribution(logits, p);
    ASSERT_EQ(c.ids, (std::vector<std::int64_t> { 0, 1 }));
    EXPECT_NEAR(c.probs[0], 4.0 / 7.0, 1e-14);
    // top-p over what top-k kept: 4/7 < 0.6 ≤ 1, so both stay; at 0.5 only the first.
    p.topP = 0.6;
    EXPECT_EQ(candidateDistribution(logits, p).ids.size(), 2U);
    p.topP = 0.5;
    c = candidateDistribution(logits, p);
    ASSERT_EQ(c.ids, (std::vector<std::int64_t> { 0 }));
    EXPECT_DOUBLE_EQ(c.probs[0], 1.0);
    // top-p alone: 0.4 + 0.3 reaches 0.65, the shortest prefix that does.
    p.topK = 0;
    p.topP = 0.65;
    c = candidateDistribution(logits, p);
    ASSERT_EQ(c.ids, (std::vector<std::int64_t> { 0, 1 }));
    EXPECT_NEAR(c.probs[1], 3.0 / 7.0, 1e-14);
    // The temperature acts before top-p: at T = 0.5 (p ∝ p0²: 16, 9, 4, 1 over 30) the first
    // token alone holds 0.533 ≥ 0.5.
    p.temperature = 0.5;
    p.topP = 0.5;
    EXPECT_EQ(candidateDistribution(logits, p).ids.size(), 1U);
}

TEST(Sampling, FrequenciesMatchTheDistribution)
{
    const std::vector<double> probs { 0.4, 0.3, 0.2, 0.1 };
    const auto logits = logOf(probs);
    SamplingParams p;
    p.seed = 12345;
    Sampler plain(p);
    EXPECT_LT(chiSquare(plain, logits, probs, 20000), kChi3);
    // Against the wrong distribution (no temperature applied) the same test fails by far.
    p.temperature = 2.0;
    Sampler hot(p);
    EXPECT_GT(chiSquare(hot, logits, probs, 20000), 100.0);
    const double s = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
    Sampler hot2(p);
    EXPECT_LT(
        chiSquare(hot2, logits,
            { std::sqrt(0.4) / s, std::sqrt(0.3) / s, std::sqrt(0.2) / s, std::sqrt(0.1) / s },
            20000),
        kChi3);
    p.temperature = 1.0;
    p.topK = 2;
    Sampler k2(p);
    EXPECT_LT(chiSquare(k2, logits, { 4.0 / 7.0, 3.0 / 7.0, 0.0, 0.0 }, 20000), kChi1);
}

TEST(Sampling, TopKOneAndATinyTemperatureAreGreedy)
{
    std::mt19937_64 gen(7);
    std::normal_distribution<double> normal(0.0, 3.0);
    SamplingParams k1;
    k1.topK = 1;
    k1.seed = 1;
    SamplingParams cold;
    cold.temperature = 1e-3;
    cold.seed = 2;
    SamplingParams zero;
    zero.temperature = 0.0;
    Sampler a(k1);
    Sampler b(cold);
    Sampler g(zero);
    for (int step = 0; step < 200; ++step) {
        std::vector<double> logits(64);
        for (auto& l : logits) {
            l = normal(gen);
        }
        // Keep the runner-up at least 0.05 below the top, so that exp(-0.05 / 1e-3) ≈ 2e-22
        // makes the cold draw greedy in double precision.
        const auto top = day0::exec::greedyToken(logits);
        for (std::size_t i = 0; i < logits.size(); ++i) {
            if (std::int64_t(i) != top && logits[i] > logits[std::size_t(top)] - 0.05) {
                logits[i] = logits[std::size_t(top)] - 0.05;
            }
        }
        const auto greedy = day0::exec::greedyToken(logits);
        EXPECT_EQ(a.sample(logits), greedy);
        EXPECT_EQ(b.sample(logits), greedy);
        EXPECT_EQ(g.sample(logits), greedy);
    }
    // Ties: top_k = 1 keeps the lower id, as greedy does.
    const std::vector<double> tie { 0.0, 2.0, 2.0 };
    EXPECT_EQ(a.sample(tie), 1);
}

TEST(Sampling, ASeedReproducesAndAnotherSeedDiffers)
{
    const auto logits = logOf({ 0.25, 0.25, 0.25, 0.25 });
    const auto draws = [&](std::optional<std::uint64_t> seed) {
        SamplingParams p;
        p.seed = seed;
        Sampler s(p);
        std::vector<std::int64_t> out;
        for (int i = 0; i < 64; ++i) {
            out.push_back(s.sample(logits));
        }
        return out;
    };
    EXPECT_EQ(draws(42), draws(42));
    EXPECT_NE(draws(42), draws(43));
    // The generator is mt19937_64, whose 10000th output the standard fixes, and u its top 53 bits.
    std::mt19937_64 gen;
    gen.discard(9999);
    std::mt19937_64 again;
    again.discard(9999);
    EXPECT_EQ(again(), 9981545732273789042ULL);
    EXPECT_DOUBLE_EQ(uniform53(gen), double(9981545732273789042ULL >> 11) * 0x1.0p-53);
}

TEST(Sampling, RequestFieldsAreValidated)
{
    struct Case {
        const char* body;
        const char* param;
    };
    for (const auto& c : { Case { R"({"temperature":-0.1})", "temperature" },
             Case { R"({"temperature":2.5})", "temperature" },
             Case { R"({"temperature":"hot"})", "temperature" }, Case { R"({"top_p":0})", "top_p" },
             Case { R"({"top_p":1.5})", "top_p" }, Case { R"({"top_k":-2})", "top_k" },
             Case { R"({"top_k":1.5})", "top_k" }, Case { R"({"seed":"x"})", "seed" },
             Case { R"({"seed":1.5})", "seed" } }) {
        SamplingParams p;
        const auto e = parseSampling(nlohmann::json::parse(c.body), p);
        ASSERT_TRUE(e.has_value()) << c.body;
        EXPECT_EQ(e->status, 400);
        const auto body = e->body();
        EXPECT_EQ(body["error"]["param"], c.param) << c.body;
        EXPECT_EQ(body["error"]["type"], "invalid_request_error");
        EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
    }
    SamplingParams p;
    EXPECT_FALSE(parseSampling(
        nlohmann::json::parse(R"({"temperature":0.7,"top_p":0.9,"top_k":-1,"seed":-5})"), p));
    EXPECT_DOUBLE_EQ(p.temperature, 0.7);
    EXPECT_DOUBLE_EQ(p.topP, 0.9);
    EXPECT_EQ(p.topK, 0);
    EXPECT_EQ(p.seed, std::uint64_t(-5));
    SamplingParams defaults;
    EXPECT_FALSE(parseSampling(nlohmann::json::object(), defaults));
    EXPECT_DOUBLE_EQ(defaults.temperature, 1.0); // OpenAI's default: sampling, not greedy
}

TEST(Sampler, PenaltiesCountThisChoicesTokensAndTheBiasIsAdded)
{
    // OpenAI: logit[j] − c[j]·frequency_penalty − [c[j] > 0]·presence_penalty, c[j] the times
    // token j was generated so far. Greedy over {0, 1.0, 0.5}:
    //   frequency 0.6: 1, then 1 is at 0.4 < 0.5 → 2, then 1 (0.4 > 0, −0.1), then 1 is at
    //   −0.2 → 0;
    //   presence 0.6: 1, 2, 1, and 1 stays at 0.4 (presence does not grow) → 1.
    const std::vector<double> logits { 0.0, 1.0, 0.5 };
    const auto run = [&](double presence, double frequency) {
        SamplingParams p;
        p.temperature = 0.0;
        p.presencePenalty = presence;
        p.frequencyPenalty = frequency;
        Sampler s(p);
        std::vector<std::int64_t> out;
        for (int i = 0; i < 4; ++i) {
            out.push_back(s.sample(logits));
        }
        return out;
    };
    EXPECT_EQ(run(0.0, 0.0), (std::vector<std::int64_t> { 1, 1, 1, 1 }));
    EXPECT_EQ(run(0.0, 0.6), (std::vector<std::int64_t> { 1, 2, 1, 0 }));
    EXPECT_EQ(run(0.6, 0.0), (std::vector<std::int64_t> { 1, 2, 1, 1 }));
    SamplingParams biased;
    biased.temperature = 0.0;
    biased.logitBias = { { 0, 1.5 } };
    Sampler s(biased);
    EXPECT_EQ(s.sample(logits), 0);
    // A bias of −100 removes a token from sampling in practice.
    SamplingParams banned;
    banned.seed = 3;
    banned.logitBias = { { 1, -100.0 } };
    Sampler b(banned);
    for (int i = 0; i < 200; ++i) {
        EXPECT_NE(b.sample(logits), 1);
    }
    SamplingParams parsed;
    EXPECT_FALSE(parseSampling(
        nlohmann::json::parse(R"({"presence_penalty":-1.5,"frequency_penalty":2})"), parsed));
    EXPECT_DOUBLE_EQ(parsed.presencePenalty, -1.5);
    EXPECT_DOUBLE_EQ(parsed.frequencyPenalty, 2.0);
    EXPECT_TRUE(parseSampling(nlohmann::json::parse(R"({"presence_penalty":2.01})"), parsed));
}
