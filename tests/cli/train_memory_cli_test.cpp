// `day0 train CHECKPOINT` prints and returns each rank's measured memory against the planner's
// estimate, per category, with the process's peak resident set.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

using day0::test::runDay0;

namespace {

const std::string kStories = std::string(DAY0_TEST_DATA_DIR) + "/exec/stories260K-hf";
constexpr std::int64_t kStoriesParameters = 260'032; // tests/core/actions/train_action_test.cpp

} // namespace

TEST(TrainCli, PrintsTheStepsMemoryAgainstThePlannersPerCategory)
{
    const auto r = runDay0({ "train", kStories, "--steps", "1", "--batch", "2", "--seq", "8",
        "--precision", "f32", "--json", "--quiet", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto m = r.json()["memory"];
    ASSERT_EQ(m["categories"].size(), 4u);
    std::map<std::string, nlohmann::json> by;
    for (const auto& c : m["categories"]) {
        by[c["category"].get<std::string>()] = c;
        EXPECT_FALSE(c["why"].get<std::string>().empty());
    }
    // Doubles in the trainer, fp32 in the planner.
    EXPECT_EQ(by["weights"]["trainer_bytes"].get<std::int64_t>(), 8 * kStoriesParameters);
    EXPECT_EQ(by["weights"]["planner_bytes"].get<std::int64_t>(), 4 * kStoriesParameters);
    EXPECT_GT(by["activations"]["trainer_bytes"].get<std::int64_t>(), 0);
    EXPECT_GT(m["peak_rss_bytes"].get<std::int64_t>(), 8 * kStoriesParameters);

    const auto text = runDay0({ "train", kStories, "--steps", "1", "--batch", "2", "--seq", "8",
        "--quiet", "--no-record" });
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("memory of rank 0 against the planner"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("peak resident set"), std::string::npos) << text.out;
}
