// `day0 run --plan` on a shrunk Kimi-Linear (KDA and MLA without RoPE): the sharded tokens equal
// the single rank's, and what the sharded executor does not do is refused by name.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>

using day0::test::runDay0;
namespace fs = std::filesystem;

namespace {

std::string shrunkKimiLinear()
{
    static const std::string dir = [] {
        const std::string d
            = (fs::path(day0::test::scratchDir("run_plan_hybrid_cli")) / "kimi").string();
        const std::string config
            = (fs::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "kimi-linear-48b-a3b.json")
                  .string();
        const auto r
            = runDay0({ "shrink", config, "--out", d, "--force", "--layers", "4", "--hidden", "64",
                "--heads", "4", "--experts", "8", "--vocab", "250", "-q", "--no-record" });
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return d;
    }();
    return dir;
}

} // namespace

TEST(RunPlanHybridCli, KimiLinearShardedTokensEqualOneRank)
{
    const std::string ckpt = shrunkKimiLinear();
    const auto single = runDay0(
        { "run", ckpt, "--ids", "3,1,4,1,5", "--tokens", "3", "--json", "-q", "--no-record" });
    ASSERT_EQ(single.exitCode, 0) << single.err;
    // KDA heads over TP, the last KDA layer and the MLA one in different stages, experts on EP.
    const auto planned
        = runDay0({ "run", ckpt, "--plan", "tp=2,pp=2,ep=2,layers=3/1", "--micro-batches", "2",
            "--ids", "3,1,4,1,5;2,7,1", "--tokens", "3", "--json", "-q", "--no-record" });
    ASSERT_EQ(planned.exitCode, 0) << planned.err;
    const auto j = planned.json();
    ASSERT_EQ(j["sequences"].size(), 2U);
    EXPECT_EQ(j["sequences"][0]["generated"], single.json()["target"]["generated"]);
}

TEST(RunPlanHybridCli, KimiLinearRefusalsNameTheirReason)
{
    const std::string ckpt = shrunkKimiLinear();
    // Two KDA heads: tp=4 would cut them.
    const auto split
        = runDay0({ "run", ckpt, "--plan", "tp=4", "--ids", "1,2", "-q", "--no-record" });
    EXPECT_EQ(split.exitCode, 2) << split.err;
    EXPECT_NE(split.err.find("linear_attn_config.num_heads"), std::string::npos) << split.err;
    // The recurrent state lives split over the ranks: its dumps come from the single rank.
    const auto state = runDay0(
        { "run", ckpt, "--plan", "tp=2", "--ids", "1,2", "--capture-state", "-q", "--no-record" });
    EXPECT_EQ(state.exitCode, 2) << state.err;
    EXPECT_NE(state.err.find("--capture-state"), std::string::npos) << state.err;
}
