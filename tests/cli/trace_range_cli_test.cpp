#include "cli_runner.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using day0::test::runDay0;

namespace {

std::string data(const std::string& name)
{
    return std::string(DAY0_TEST_DATA_DIR) + "/profile/" + name;
}

/// Kernel name → count from `day0 trace stats --json` with optional extra arguments.
std::map<std::string, int> kernelCounts(
    const std::vector<std::string>& extra, int* spanNs = nullptr)
{
    std::vector<std::string> args { "trace", "stats", data("synthetic_rank0.json"), "--top", "-1",
        "--json" };
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = runDay0(args);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    std::map<std::string, int> out;
    const auto j = r.json();
    for (const auto& k : j["kernels"]) {
        out[k["name"].get<std::string>()] += k["count"].get<int>();
    }
    if (spanNs && !j["breakdown"].empty()) {
        *spanNs = j["breakdown"][0]["span_ns"].get<int>();
    }
    return out;
}

TEST(TraceRangeCli, RangesPartitionTheKernelsAndClipTheBreakdown)
{
    int fullSpan = 0;
    const auto all = kernelCounts({}, &fullSpan);
    ASSERT_FALSE(all.empty());
    ASSERT_GT(fullSpan, 0);
    // Kernels are counted where they start, so [0, t) and [t, end) split them exactly.
    const std::string cut = std::to_string(fullSpan / 2) + "ns";
    int firstSpan = 0;
    const auto first = kernelCounts({ "--range", ":" + cut }, &firstSpan);
    const auto second = kernelCounts({ "--range", cut + ":" });
    int firstTotal = 0;
    int secondTotal = 0;
    int allTotal = 0;
    for (const auto& [name, n] : all) {
        allTotal += n;
        const int a = first.count(name) ? first.at(name) : 0;
        const int b = second.count(name) ? second.at(name) : 0;
        EXPECT_EQ(a + b, n) << name;
        firstTotal += a;
        secondTotal += b;
    }
    EXPECT_GT(firstTotal, 0);
    EXPECT_GT(secondTotal, 0);
    EXPECT_EQ(firstTotal + secondTotal, allTotal);
    EXPECT_LT(firstSpan, fullSpan); // the GPU time breakdown is clipped to the range

    const auto j = runDay0(
        { "trace", "stats", data("synthetic_rank0.json"), "--range", "1.5us:0.1ms", "--json" })
                       .json();
    EXPECT_EQ(j["range"]["start_ns"].get<std::int64_t>()
            - j["range"]["trace_start_ns"].get<std::int64_t>(),
        1500);
    EXPECT_EQ(
        j["range"]["end_ns"].get<std::int64_t>() - j["range"]["trace_start_ns"].get<std::int64_t>(),
        100000);
    const auto text
        = runDay0({ "trace", "stats", data("synthetic_rank0.json"), "--range", "0:0.1ms" });
    EXPECT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("after the trace's first event"), std::string::npos) << text.out;
}

TEST(TraceRangeCli, BadRangesAreUsageErrors)
{
    for (const char* bad : { "3ms:1ms", "5", "1.5min:2min" }) {
        const auto r = runDay0({ "trace", "stats", data("synthetic_rank0.json"), "--range", bad });
        EXPECT_EQ(r.exitCode, 2) << bad;
        EXPECT_NE(r.err.find("--range"), std::string::npos) << r.err;
    }
}

} // namespace
