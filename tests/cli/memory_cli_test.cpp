// Golden tests of `day0 memory`: the JSON document's integers, exit codes, one-line errors.

#include "cli_runner.h"

#include <gtest/gtest.h>

using day0::test::runDay0;

namespace {

bool oneLine(const std::string& text)
{
    return !text.empty() && text.find('\n') == text.size() - 1;
}

} // namespace

TEST(CliMemory, TrainingJson)
{
    const auto r = runDay0(
        { "memory", "kimi-k2", "--plan", "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=selective",
            "--mode", "train", "--cluster", "h200:32x8", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["per_rank"].size(), 8u); // one entry per pipeline stage
    std::int64_t previous = INT64_MAX;
    for (const auto& e : j["per_rank"]) {
        for (const char* key : { "rank", "pp_stage", "weights", "gradients", "optimizer",
                 "activations", "kv_cache", "buffers", "total" }) {
            ASSERT_TRUE(e[key].is_number_integer()) << key;
        }
        const std::int64_t sum = e["weights"].get<std::int64_t>()
            + e["gradients"].get<std::int64_t>() + e["optimizer"].get<std::int64_t>()
            + e["activations"].get<std::int64_t>() + e["kv_cache"].get<std::int64_t>()
            + e["buffers"].get<std::int64_t>();
        EXPECT_EQ(sum, e["total"].get<std::int64_t>());
        EXPECT_LE(e["total"].get<std::int64_t>(), previous); // most loaded first
        previous = e["total"].get<std::int64_t>();
        EXPECT_EQ(e["rank"].get<int>(), e["pp_stage"].get<int>() * 32); // first rank of its stage
        EXPECT_EQ(e["kv_cache"], 0);
    }
    EXPECT_EQ(j["max_total"], j["per_rank"][0]["total"]);
    EXPECT_EQ(j["device_memory"].get<std::int64_t>(), 141LL * 1024 * 1024 * 1024);
    EXPECT_TRUE(j["fits"].get<bool>());
    EXPECT_EQ(j["dp"], 4);
    EXPECT_EQ(j["edp"], 1);
    EXPECT_TRUE(j["megatron"]["total"].is_number_integer());
    EXPECT_FALSE(j["notes"].empty());
}

TEST(CliMemory, AllRanksListsEveryRank)
{
    const auto r = runDay0(
        { "memory", "llama-3.1-8b", "--plan", "tp=2,pp=2,dp=2", "--json", "--all-ranks" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["per_rank"].size(), 8u);
    std::vector<int> ranks;
    for (const auto& e : j["per_rank"]) {
        ranks.push_back(e["rank"].get<int>());
    }
    std::sort(ranks.begin(), ranks.end());
    EXPECT_EQ(ranks, (std::vector<int> { 0, 1, 2, 3, 4, 5, 6, 7 }));
}

TEST(CliMemory, InferenceKvCacheFollowsBatchAndDtype)
{
    auto kv = [](const std::vector<std::string>& extra) {
        std::vector<std::string> args
            = { "memory", "llama-3.1-8b", "--plan", "tp=1", "--mode", "infer", "--json" };
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = runDay0(args);
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return r.json()["per_rank"][0]["kv_cache"].get<std::int64_t>();
    };
    // Llama-3.1-8B: 32 layers × 8 KV heads × (128 + 128) × 2 bytes = 131,072 B per token.
    EXPECT_EQ(kv({ "--batch", "1", "--context", "1000" }), 131072LL * 1000);
    EXPECT_EQ(kv({ "--batch", "4", "--context", "1000" }), 4 * 131072LL * 1000);
    EXPECT_EQ(
        kv({ "--batch", "4", "--context", "1000", "--kv-dtype", "fp8" }), 2 * 131072LL * 1000);
}

TEST(CliMemory, ReadableTableAndDoesNotFit)
{
    const auto ok = runDay0({ "memory", "deepseek-v3", "--plan", "tp=8,pp=8,ep=8,etp=1,zero=1",
        "--cluster", "h200:32x8" });
    ASSERT_EQ(ok.exitCode, 0) << ok.err;
    for (const char* text : { "Memory per GPU, most loaded first", "weights", "optimizer",
             "Megatron-LM's theoretical memory", "Fits:", "Notes:" }) {
        EXPECT_NE(ok.out.find(text), std::string::npos) << text << "\n" << ok.out;
    }
    const auto tooBig
        = runDay0({ "memory", "llama-3.1-405b", "--plan", "tp=8", "--device", "h100" });
    EXPECT_EQ(tooBig.exitCode, 1);
    EXPECT_NE(tooBig.out.find("Does not fit"), std::string::npos) << tooBig.out;
}

TEST(CliMemory, ImpossiblePlansAndBadInputExitTwo)
{
    struct Case {
        std::vector<std::string> args;
        const char* expected;
    };
    const std::vector<Case> cases = {
        { { "memory", "kimi-k2", "--plan", "tp=3" }, "tp=3 does not divide 64 attention heads" },
        { { "memory", "kimi-k2", "--plan", "tp=16", "--cluster", "h200:2x8" },
            "tp=16 > 8 GPUs per node" },
        { { "memory", "kimi-k2", "--plan", "tp=1,ep=256", "--cluster", "h200:32x8" },
            "ep=256 does not divide 384 experts" },
        { { "memory", "kimi-k2", "--plan", "tp=8,bogus=1" }, "unknown key 'bogus'" },
        { { "memory", "kimi-k2", "--plan", "zero=1", "--mode", "infer" },
            "zero=1 applies to training only" },
        { { "memory", "kimi-k2", "--plan", "tp=8", "--device", "tpu" }, "unknown device 'tpu'" },
        { { "memory", "kimi-k2", "--plan", "tp=8", "--kv-dtype", "int4" }, "--kv-dtype 'int4'" },
        { { "memory", "no-such-model-anywhere", "--plan", "tp=8" }, "no-such-model-anywhere" },
    };
    for (const auto& c : cases) {
        const auto r = runDay0(c.args);
        EXPECT_EQ(r.exitCode, 2) << c.expected << ": " << r.err;
        EXPECT_TRUE(oneLine(r.err)) << r.err;
        EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    }
    const auto usage = runDay0({ "memory", "kimi-k2" });
    EXPECT_EQ(usage.exitCode, 2); // --plan is required
}
