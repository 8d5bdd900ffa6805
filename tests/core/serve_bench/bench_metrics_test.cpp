// The load client's pure parts: goodput under SLOs (vLLM's: every given objective met), the
// per-user rate, gamma arrivals with burstiness and ramp-up (vLLM's get_request), ranged and
// listed lengths, the flag parsers.
#include "serve/bench_metrics.h"
#include "serve/bench_workload.h"
#include "serve/serve_bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

using namespace day0::serve;

namespace {

RequestRecord done(double ttft, double e2el, long long output)
{
    RequestRecord r;
    r.ok = true;
    r.ttft = ttft;
    r.e2el = e2el;
    r.outputTokens = output;
    r.promptTokens = 4;
    return r;
}

/// Mean and coefficient of variation of the gaps between successive times.
std::pair<double, double> gapStats(
    const std::vector<double>& times, std::size_t from, std::size_t to)
{
    std::vector<double> gaps;
    for (std::size_t i = std::max<std::size_t>(from, 1); i < to; ++i) {
        gaps.push_back(times[i] - times[i - 1]);
    }
    const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / double(gaps.size());
    double var = 0.0;
    for (const double g : gaps) {
        var += (g - mean) * (g - mean);
    }
    return { mean, std::sqrt(var / double(gaps.size())) / mean };
}

} // namespace

TEST(BenchMetrics, GoodputCountsOnlyRequestsMeetingEveryGivenSlo)
{
    BenchResult r;
    r.options.percentiles = { 50, 90 };
    r.durationSeconds = 2.0;
    // ttft, e2el, output tokens -> tpot = (e2el - ttft) / (output - 1); binary-exact times.
    r.requests = {
        done(0.125, 0.625, 5), // tpot 125 ms
        done(0.375, 0.625, 5), // tpot 62.5 ms, ttft too slow for 250
        done(0.125, 1.375, 11), // tpot 125 ms, e2el 1375
        done(0.0625, 0.0625, 1), // one token: tpot 0
    };
    RequestRecord failed;
    failed.errorKind = "http_429";
    r.requests.push_back(failed);
    r.options.slos = *parseSlos({ "ttft:250", "tpot:125" });
    computeMetrics(r);
    EXPECT_EQ(r.completed, 4);
    EXPECT_EQ(r.failed, 1);
    EXPECT_EQ(r.errorsByKind.at("http_429"), 1);
    EXPECT_EQ(r.good, 3); // request 1 misses ttft; an objective equal to the value is met
    EXPECT_DOUBLE_EQ(r.goodput, 1.5);
    r.options.slos = *parseSlos({ "ttft:250,tpot:125", "e2el:1000" });
    computeMetrics(r);
    EXPECT_EQ(r.good, 2); // request 2 now misses e2el: one miss is enough
    r.options.slos = *parseSlos({ "tpot:100" });
    computeMetrics(r);
    EXPECT_EQ(r.good, 2); // requests 1 (62.5 ms) and 3 (one token: 0)
    EXPECT_DOUBLE_EQ(r.requestThroughput, 2.0);
    EXPECT_DOUBLE_EQ(r.outputThroughput, 22 / 2.0);
    // Per user: 1 / TPOT of the requests with more than one token: 8, 16, 8 tok/s.
    EXPECT_EQ(r.perUser.count, 3U);
    EXPECT_NEAR(r.perUser.mean, 32.0 / 3.0, 1e-9);
    EXPECT_NEAR(r.perUser.median, 8.0, 1e-9);
    EXPECT_NEAR(r.metrics.at("tpot").mean, (125 + 62.5 + 125) / 3.0, 1e-9);
    ASSERT_EQ(r.metrics.at("ttft").percentiles.size(), 2U);
    // TTFTs 62.5, 125, 125, 375 ms: p90 at rank 2.7 = 125 + 0.7 * 250.
    EXPECT_NEAR(r.metrics.at("ttft").percentiles[1].second, 300.0, 1e-9);
}

TEST(BenchMetrics, PercentilesInterpolateAsNumpy)
{
    const std::vector<double> v { 1, 2, 3, 4 };
    EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
    EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
    EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
    const auto s = summarize({ 0.001, 0.002, 0.003, 0.004 }, { 99.9 });
    EXPECT_DOUBLE_EQ(s.mean, 2.5);
    EXPECT_NEAR(s.percentiles[0].second, 3.997, 1e-12);
}

TEST(BenchMetrics, FlagParsersNameTheBadItem)
{
    EXPECT_FALSE(parseSlos({ "ttft:abc" }));
    EXPECT_NE(parseSlos({ "itl:5" }).error().message.find("'itl:5'"), std::string::npos);
    EXPECT_NE(parseSlos({ "ttft:5", "ttft:6" }).error().message.find("twice"), std::string::npos);
    EXPECT_FALSE(parseSlos({ "ttft:0" }));
    EXPECT_EQ(parseSlos({ "tpot:50", "ttft:500" })->describe(), "ttft:500 tpot:50");
    EXPECT_EQ(*parsePercentiles("50,99.9"), (std::vector<double> { 50, 99.9 }));
    EXPECT_FALSE(parsePercentiles("50,101"));
}

TEST(BenchWorkload, GammaGapsFollowTheBurstinessAndTheAskedRate)
{
    for (const double b : { 0.25, 1.0, 4.0 }) {
        ArrivalOptions a;
        a.rate = 20.0;
        a.burstiness = b;
        std::mt19937_64 rng(7);
        const auto t = arrivalTimes(a, 4000, rng);
        // Rescaled as vLLM does: the last send at n / rate exactly.
        EXPECT_NEAR(t.back(), 4000 / 20.0, 1e-9);
        const auto [mean, cv] = gapStats(t, 0, t.size());
        EXPECT_NEAR(mean, 1 / 20.0, 0.1 / 20.0) << b;
        // Gamma(shape B): coefficient of variation 1 / sqrt(B).
        EXPECT_NEAR(cv, 1 / std::sqrt(b), 0.1 / std::sqrt(b)) << b;
        std::mt19937_64 again(7);
        EXPECT_EQ(arrivalTimes(a, 4000, again), t) << "a seed reproduces the load";
    }
    ArrivalOptions all;
    std::mt19937_64 rng(1);
    EXPECT_EQ(arrivalTimes(all, 3, rng), (std::vector<double> { 0, 0, 0 }));
}

TEST(BenchWorkload, RampUpMovesTheRateFromStartToEnd)
{
    for (const auto ramp : { RampUp::Linear, RampUp::Exponential }) {
        ArrivalOptions a;
        a.ramp = ramp;
        a.rampStart = 10;
        a.rampEnd = 100;
        a.rate = 1; // not used by a ramp
        std::mt19937_64 rng(3);
        const auto t = arrivalTimes(a, 20000, rng);
        const auto [first, cv1] = gapStats(t, 0, 2000);
        const auto [last, cv2] = gapStats(t, 18000, 20000);
        // The mean gap over a tenth is the mean of 1 / rate there: linear 10..19 against
        // 91..100 req/s gives a ratio of ln(1.9) / ln(100/91) = 6.81; exponential 10..12.6
        // against 79..100, 7.94.
        const double ratio = ramp == RampUp::Linear ? 6.81 : 7.94;
        EXPECT_NEAR(first / last, ratio, 0.15 * ratio) << rampUpName(ramp);
        const auto [middle, cv3] = gapStats(t, 9500, 10500);
        // Half way: linear 55 req/s, exponential sqrt(10 * 100) = 31.6 req/s.
        const double expected = ramp == RampUp::Linear ? 55.0 : std::sqrt(1000.0);
        EXPECT_NEAR(1 / middle, expected, 0.15 * expected) << rampUpName(ramp);
    }
    ArrivalOptions bad;
    bad.ramp = RampUp::Linear;
    EXPECT_FALSE(checkArrivals(bad));
    ArrivalOptions orphan;
    orphan.rampStart = 5;
    EXPECT_FALSE(checkArrivals(orphan));
    ArrivalOptions b0;
    b0.burstiness = 0;
    EXPECT_FALSE(checkArrivals(b0));
}

TEST(BenchWorkload, LengthsAreFixedRangedOrListed)
{
    LengthOptions o;
    o.inputTokens = 100;
    o.outputTokens = 10;
    std::mt19937_64 rng(5);
    for (const auto& [in, out] : requestLengths(o, 5, rng)) {
        EXPECT_EQ(in, 100);
        EXPECT_EQ(out, 10);
    }
    o.inputRange = 0.25;
    std::int64_t lo = 1000;
    std::int64_t hi = 0;
    for (const auto& [in, out] : requestLengths(o, 2000, rng)) {
        lo = std::min(lo, in);
        hi = std::max(hi, in);
        EXPECT_EQ(out, 10);
    }
    EXPECT_EQ(lo, 75);
    EXPECT_EQ(hi, 125);
    const auto dir = std::filesystem::temp_directory_path() / "day0_bench_lengths_test";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "ok.txt") << "# input output\n3 2\n\n7,5  # a comment\n";
    o.fromFile = *readLengthsFile(dir / "ok.txt");
    const auto listed = requestLengths(o, 3, rng);
    EXPECT_EQ(listed,
        (std::vector<std::pair<std::int64_t, std::int64_t>> { { 3, 2 }, { 7, 5 }, { 3, 2 } }));
    std::ofstream(dir / "bad.txt") << "3 2\n4 x\n";
    const auto bad = readLengthsFile(dir / "bad.txt");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("bad.txt:2: 'x'"), std::string::npos) << bad.error().message;
    EXPECT_FALSE(readLengthsFile(dir / "missing.txt"));
}
