#include "plan/parallel_plan.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::plan;

namespace {

TEST(PlanString, ParsesTheDesignExample)
{
    auto p = parsePlan("tp=8,pp=4,ep=16,dp=2,cp=1,zero=1,recompute=selective");
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->tp, 8);
    EXPECT_EQ(p->pp, 4);
    EXPECT_EQ(p->ep, 16);
    EXPECT_EQ(p->dp, 2);
    EXPECT_EQ(p->cp, 1);
    EXPECT_EQ(p->zero, 1);
    EXPECT_EQ(p->recompute, Recompute::Selective);
    EXPECT_EQ(p->etp, 0);
    EXPECT_EQ(p->expertTp(), 8); // Megatron's default: experts split like dense layers
}

TEST(PlanString, ParsesEveryKey)
{
    auto p = parsePlan(" tp=2, pp=4, etp=1, sp=off, mb=2, gbs=512, vpp=2, layers=15/16/15/15, "
                       "weights=fp8, kv=fp8, grads=bf16, optimizer=bf16, split=ends ");
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->etp, 1);
    EXPECT_EQ(p->sp, false);
    EXPECT_EQ(p->microBatch, 2);
    EXPECT_EQ(p->globalBatch, 512);
    EXPECT_EQ(p->vpp, 2);
    EXPECT_EQ(p->stageLayers, (std::vector<int> { 15, 16, 15, 15 }));
    EXPECT_EQ(p->weights, DType::F8E4M3);
    EXPECT_EQ(p->kv, DType::F8E4M3);
    EXPECT_EQ(p->grads, DType::BF16);
    EXPECT_EQ(p->optimizer, DType::BF16);
    EXPECT_EQ(p->split, StageSplit::LightEnds);
}

TEST(PlanString, LayersAloneSetThePipelineDepth)
{
    auto p = parsePlan("tp=8,layers=30:31");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->pp, 2);
}

TEST(PlanString, FormatRoundTrips)
{
    for (const char* text : { "tp=8,pp=4,ep=16,dp=2,zero=1,recompute=selective", "tp=1,pp=1",
             "tp=4,pp=2,etp=2,cp=2,sp=off,zero=3,recompute=full,mb=4,m=16,vpp=2",
             "tp=2,pp=4,layers=15/16/15/15,weights=fp8,kv=fp8,grads=bf16" }) {
        auto p = parsePlan(text);
        ASSERT_TRUE(p) << text << ": " << p.error().message;
        auto again = parsePlan(formatPlan(*p));
        ASSERT_TRUE(again) << formatPlan(*p);
        EXPECT_EQ(*p, *again) << text << " -> " << formatPlan(*p);
        auto full = parsePlan(formatPlan(*p, true));
        ASSERT_TRUE(full) << formatPlan(*p, true);
    }
    EXPECT_EQ(formatPlan(*parsePlan("pp=2,tp=8,zero=1")), "tp=8,pp=2,zero=1");
}

TEST(PlanString, BadStringsNameTheKey)
{
    struct Case {
        const char* text;
        const char* expected;
    };
    const Case cases[] = {
        { "tp=0", "'tp' must be a positive integer, found '0'" },
        { "tp=eight", "'tp' must be a positive integer, found 'eight'" },
        { "tp=8,pp=-1", "'pp' must be a positive integer" },
        { "tp=8,foo=2", "unknown key 'foo'" },
        { "zero=4", "'zero' must be 0, 1, 2 or 3" },
        { "recompute=some", "'recompute' must be none, selective or full" },
        { "sp=maybe", "'sp' must be on or off" },
        { "tp=8,pp", "'pp' is not key=value" },
        { "kv=int8", "'kv' must be a float dtype" },
        { "pp=3,layers=10/10", "'layers' lists 2 stages but pp=3" },
        { "layers=10/x", "'layers' must list positive layer counts" },
        { "", "empty plan" },
        { "split=left", "'split' must be balanced or ends" },
    };
    for (const auto& c : cases) {
        auto p = parsePlan(c.text);
        ASSERT_FALSE(p) << c.text;
        EXPECT_EQ(p.error().code, ErrorCode::BadInput);
        EXPECT_NE(p.error().message.find(c.expected), std::string::npos)
            << c.text << " -> " << p.error().message;
    }
}

TEST(PlanString, NamesOfEnums)
{
    EXPECT_EQ(parseRecompute("SELECTIVE"), Recompute::Selective);
    EXPECT_EQ(parseMode("inference"), Mode::Infer);
    EXPECT_EQ(parseMode("train"), Mode::Train);
    EXPECT_FALSE(parseMode("serve"));
    EXPECT_EQ(shortDtypeName(DType::F8E4M3), "fp8");
}

} // namespace
