#include "actions/in_process_layout.h"

#include <gtest/gtest.h>

using namespace day0;

namespace {

plan::ParallelPlan planOf(const char* text)
{
    auto p = plan::parsePlan(text);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return *p;
}

} // namespace

TEST(InProcessLayout, ResolvesDpFromTheClusterAndKeepsASmallPlan)
{
    auto l = actions::inProcessLayout(planOf("tp=2,pp=2"), plan::Mode::Infer, 8);
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->layout.dp, 2) << "dp 0 is the rest of the cluster";
    EXPECT_EQ(l->planRanks, 8);
    EXPECT_FALSE(l->scaled);
    EXPECT_TRUE(l->note.empty());
}

TEST(InProcessLayout, ScalesA256RankPlanToItsShape)
{
    // The embedded default's starting plan on 32 × 8 GPUs: dp = 256 / 64 = 4.
    auto l = actions::inProcessLayout(
        planOf("tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full"), plan::Mode::Train, 256);
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->planRanks, 256);
    ASSERT_TRUE(l->scaled);
    const auto& s = l->layout;
    EXPECT_LE(s.worldSize(), actions::kMaxInProcessRanks);
    EXPECT_GT(s.worldSize(), actions::kMaxInProcessRanks / 4) << "no smaller than it must be";
    // Every kind of parallelism the plan has, the scaled group has.
    EXPECT_GT(s.tp, 1);
    EXPECT_GT(s.pp, 1);
    EXPECT_GT(s.ep, 1);
    EXPECT_GT(s.dp, 1);
    EXPECT_EQ(s.etp(), 1);
    EXPECT_EQ((s.dp * s.tp) % (s.ep * s.etp()), 0);
    EXPECT_NE(l->note.find("scaled tp=8,pp=8,ep=32,etp=1,dp=4 (256 ranks)"), std::string::npos)
        << l->note;
}

TEST(InProcessLayout, TrainingExpertTpFollowsTpWhenScaled)
{
    // Megatron's training default etp = tp: ep × etp = 32 must keep dividing dp × tp.
    auto l = actions::inProcessLayout(planOf("tp=4,pp=8,ep=8"), plan::Mode::Train, 256);
    ASSERT_TRUE(l.ok()) << l.error().message;
    ASSERT_TRUE(l->scaled);
    const auto& s = l->layout;
    EXPECT_LE(s.worldSize(), actions::kMaxInProcessRanks);
    EXPECT_EQ(s.etp(), s.tp);
    EXPECT_EQ((s.dp * s.tp) % (s.ep * s.etp()), 0);
    EXPECT_GT(s.ep, 1);
    EXPECT_GT(s.pp, 1);
}

TEST(InProcessLayout, RefusesAPlanWhoseDpCannotBeDerived)
{
    auto l = actions::inProcessLayout(planOf("tp=3"), plan::Mode::Infer, 8);
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("does not divide the cluster's 8 GPUs"), std::string::npos)
        << l.error().message;
}
