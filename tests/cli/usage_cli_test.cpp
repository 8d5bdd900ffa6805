#include "cli_runner.h"

#include <gtest/gtest.h>

using day0::test::runDay0;

TEST(CliUsage, UnknownVerbIsUsageError)
{
    const auto r = runDay0({ "no-such-verb" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("day0: error:"), std::string::npos);
}

TEST(CliUsage, HelpExitsZero)
{
    const auto r = runDay0({ "--help" });
    EXPECT_EQ(r.exitCode, 0);
    EXPECT_NE(r.out.find("day0"), std::string::npos);
}
