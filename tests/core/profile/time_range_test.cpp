#include "profile/time_range.h"

#include <gtest/gtest.h>

namespace day0::profile {
namespace {

TEST(TimeRange, ParsesDurationsWithUnits)
{
    EXPECT_EQ(*parseDurationNs("1500"), 1500);
    EXPECT_EQ(*parseDurationNs("1500ns"), 1500);
    EXPECT_EQ(*parseDurationNs("20us"), 20'000);
    EXPECT_EQ(*parseDurationNs("20 \xC2\xB5s"), 20'000);
    EXPECT_EQ(*parseDurationNs("1.5ms"), 1'500'000);
    EXPECT_EQ(*parseDurationNs("2s"), 2'000'000'000);
    EXPECT_EQ(*parseDurationNs("1e3us"), 1'000'000);
    EXPECT_EQ(*parseDurationNs("0.0000015ms"), 2); // rounded to the nearest ns
    for (const char* bad : { "", "ms", "1.5 min", "-3ms", "1e30s", "abc", "1.2.3us" }) {
        const auto r = parseDurationNs(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos)
            << r.error().message;
    }
}

TEST(TimeRange, ParsesRangesWithOpenEnds)
{
    const auto r = parseTimeRange("1.5ms:3ms");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->start, 1'500'000);
    EXPECT_EQ(r->end, 3'000'000);
    EXPECT_TRUE(r->bounded());
    const auto from = parseTimeRange("10us:");
    ASSERT_TRUE(from.ok());
    EXPECT_EQ(from->start, 10'000);
    EXPECT_EQ(from->end, INT64_MAX);
    const auto to = parseTimeRange(":10us");
    ASSERT_TRUE(to.ok());
    EXPECT_EQ(to->start, INT64_MIN);
    EXPECT_EQ(to->end, 10'000);
    EXPECT_FALSE(parseTimeRange(":")->bounded());
    EXPECT_FALSE(parseTimeRange("3ms:1ms").ok());
    EXPECT_FALSE(parseTimeRange("3ms:3ms").ok());
    EXPECT_FALSE(parseTimeRange("3ms").ok());
    EXPECT_FALSE(parseTimeRange("1:2:3").ok());
}

TEST(TimeRange, ShiftsBoundedEndsOnlyAndSaturates)
{
    const TimeRange r { 10, INT64_MAX };
    const auto s = r.shifted(1000);
    EXPECT_EQ(s.start, 1010);
    EXPECT_EQ(s.end, INT64_MAX);
    EXPECT_EQ((TimeRange { INT64_MIN, 5 }.shifted(-7).end), -2);
    EXPECT_EQ((TimeRange { 0, INT64_MAX - 1 }.shifted(100).end), INT64_MAX);
}

} // namespace
} // namespace day0::profile
