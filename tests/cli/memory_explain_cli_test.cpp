// `day0 memory --explain` prints each figure with its formula and inputs; `--json` carries them.

#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cmath>

using day0::test::runDay0;

TEST(CliMemoryExplain, TextNamesEachFiguresInputs)
{
    const std::vector<std::string> args = { "memory", "llama-3.1-8b", "--plan", "tp=2", "--mode",
        "infer", "--batch", "4", "--context", "1000", "--cluster", "h100:1x8" };
    const auto plain = runDay0(args);
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    EXPECT_EQ(plain.out.find("How the figures"), std::string::npos);

    auto explainArgs = args;
    explainArgs.emplace_back("--explain");
    const auto r = runDay0(explainArgs);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // Llama-3.1-8B: K+V of 8 KV heads × 128 per token, the 8 heads split over tp = 2.
    for (const char* text :
        { "How the figures of stage 0 (ranks 0-7) are computed:", "weights = ", "kv_cache = ",
            "elements_per_token = 2,048 (model:", "context = 1,000 tokens (workload: context)",
            "sequences = 4 (workload: batch", "heads_on_rank = 4 (derived: max(1, heads / tp)",
            "tp = 2 (plan: tp)", "bytes_per_element = 2 B (plan: kv=bf16)",
            "fragmentation = 0.05 (option: --fragmentation)",
            "total = weights + gradients + optimizer + activations + kv_cache + buffers" }) {
        EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
    }
    // The KV line's arithmetic: 32 layers × 4 × 2,048 × 1,000 × 2 × 4 ÷ 8.
    EXPECT_NE(r.out.find("32 × 4 × 2,048 × 1,000 × 2 × 4 ÷ 8 = 262,144,000"), std::string::npos)
        << r.out;
}

TEST(CliMemoryExplain, JsonCarriesTheDerivations)
{
    const auto r = runDay0({ "memory", "llama-3.1-8b", "--plan", "tp=2,pp=2,zero=1", "--cluster",
        "h100:1x8", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["per_rank"].size(), 2u);
    for (const auto& e : j["per_rank"]) {
        const auto& d = e["derivations"];
        for (const char* figure :
            { "weights", "gradients", "optimizer", "activations", "buffers", "total" }) {
            ASSERT_TRUE(d.contains(figure)) << figure;
            EXPECT_EQ(d[figure]["bytes"], e[figure]) << figure;
            EXPECT_FALSE(d[figure]["formula"].get<std::string>().empty());
            // The terms' inputs multiply to the figure.
            double sum = 0;
            for (const auto& t : d[figure]["terms"]) {
                double v = 1;
                for (const auto& i : t["inputs"]) {
                    ASSERT_FALSE(i["source"].get<std::string>().empty());
                    v = i["divides"].get<bool>() ? v / i["value"].get<double>()
                                                 : v * i["value"].get<double>();
                }
                sum += v;
            }
            EXPECT_NEAR(sum, e[figure].get<double>(), 1.0) << figure;
        }
        bool dp = false;
        for (const auto& t : d["optimizer"]["terms"]) {
            for (const auto& i : t["inputs"]) {
                dp = dp || (i["name"] == "dp" && i["value"] == 2 && i["divides"].get<bool>());
            }
        }
        EXPECT_TRUE(dp) << d["optimizer"].dump(1); // zero=1 over dp = 8 / (2·2)
    }
}
