// Training step times from the PyTorch profiler's ProfilerStep#N ranges, as `day0 plan
// --measured-trace` holds them against the planner's estimate. The expected durations were read
// from the files with Python's json module (tests/data/profile/SOURCES.md: A6, A7, A4).
#include "profile/importer.h"
#include "profile/step_times.h"
#include "profile_test_util.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::profile;
using test::dataFile;
using test::importOrFail;

TEST(StepTimes, EachRanksProfilerStepsCountOnceAndTheMedianIsTaken)
{
    Progress progress;
    auto trace = importTraces(
        { dataFile("hta_sampled_rank-0.json.gz"), dataFile("hta_sampled_rank-1.json.gz") }, {},
        progress, {});
    ASSERT_TRUE(trace) << trace.error().message;
    const auto steps = profilerSteps(*trace);
    // user_annotation ProfilerStep#551 and #552 on each rank: 607312, 622928 µs (rank 0) and
    // 607904, 630639 µs (rank 1).
    ASSERT_EQ(steps.steps.size(), 4U);
    EXPECT_NEAR(steps.medianSeconds(), (607904.0 + 622928.0) / 2 * 1e-6, 1e-9);
    EXPECT_EQ(steps.describe(), "median 0.6154 s over 4 ProfilerStep ranges (2 ranks)");
    for (const auto& s : steps.steps) {
        EXPECT_TRUE(s.number == 551 || s.number == 552) << s.number;
    }

    const auto one = profilerSteps(importOrFail(dataFile("hta_sampled_rank-0.json.gz")));
    ASSERT_EQ(one.steps.size(), 2U);
    EXPECT_NEAR(one.medianSeconds(), (607312.0 + 622928.0) / 2 * 1e-6, 1e-9);
}

TEST(StepTimes, ATraceWithoutStepsSaysSo)
{
    const auto none = profilerSteps(importOrFail(dataFile("hta_simple_add_rank0.json.gz")));
    EXPECT_TRUE(none.steps.empty());
    EXPECT_EQ(none.medianSeconds(), 0.0);
    EXPECT_EQ(none.describe(), "no ProfilerStep#N range on a host thread");
}
