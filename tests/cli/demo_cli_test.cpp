// day0 demo: the embedded default headless, every step on real data (DESIGN.md §6).
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using day0::test::runDay0;
using day0::test::scratchDir;

TEST(DemoCli, RunsEveryStepAndSaysWhatItFound)
{
    const std::string cache = scratchDir("demo_cli_cache");
    ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
    const auto r = runDay0({ "demo", "--json", "-q" });
    ::unsetenv("XDG_CACHE_HOME");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_TRUE(j["ok"].get<bool>());
    ASSERT_EQ(j["steps"].size(), 6u);
    for (const auto& step : j["steps"]) {
        EXPECT_TRUE(step["ok"].get<bool>()) << step.dump();
        EXPECT_FALSE(step["summary"].get<std::string>().empty());
    }
    EXPECT_EQ(j["steps"][0]["step"], "plan");
    EXPECT_TRUE(j["steps"][0]["run_id"].is_number()) << "recorded in the store";
    EXPECT_EQ(j["steps"][3]["step"], "precision");

    const auto text = runDay0({ "demo", "-q", "--no-record" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("[4/6] precision  bf16 against fp32"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("not recorded (--no-record)"), std::string::npos) << text.out;
    EXPECT_EQ(text.out.find("\033"), std::string::npos) << "no terminal codes when not a terminal";
}
