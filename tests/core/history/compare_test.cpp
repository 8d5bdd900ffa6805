#include "history/run_compare.h"
#include "history/run_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace day0;
using namespace day0::history;

namespace {

RunRecord baseline()
{
    RunRecord r(RunKind::Run);
    r.info.modelName = "kimi-k2";
    r.info.plan = "tp=8";
    r.info.precision = "bf16";
    r.info.duration = Seconds(10.0);
    r.addMetric("tokens_per_s", 100.0, "tok/s");
    r.addMetric("ttft_s", 0.5, "s");
    r.addMetric("only_a", 1.0);
    r.addMemory(0, 0, "weights", Bytes(1000));
    r.addMemory(0, 0, "kv_cache", Bytes(500));
    r.addMemory(1, 0, "weights", Bytes(1000));
    r.layers.add("model.layers.0", "rel_l2", 1e-3);
    r.layers.add("model.layers.1", "rel_l2", 2e-3);
    r.layers.add("model.layers.2", "rel_l2", 4e-3);
    r.layers.add("model.layers.0", "max_abs", 0.25);
    r.layers.add("model.layers.3", "rel_l2", 1e-2); // only in A
    return r;
}

RunRecord candidate()
{
    RunRecord r(RunKind::Run);
    r.info.modelName = "kimi-k2";
    r.info.plan = "tp=8";
    r.info.precision = "fp8";
    r.info.duration = Seconds(7.5);
    r.addMetric("ttft_s", 0.25, "s");
    r.addMetric("tokens_per_s", 150.0, "tok/s");
    r.addMetric("only_b", 2.0);
    r.addMemory(0, 0, "weights", Bytes(500));
    r.addMemory(0, 0, "kv_cache", Bytes(500));
    r.addMemory(2, 0, "weights", Bytes(700)); // only in B
    r.layers.add("model.layers.1", "rel_l2", 2e-3); // unchanged
    r.layers.add("model.layers.0", "rel_l2", 1e-2); // 10x worse
    r.layers.add("model.layers.2", "rel_l2", 2e-3); // 2x better
    r.layers.add("model.layers.0", "max_abs", std::numeric_limits<double>::quiet_NaN());
    r.layers.add("model.layers.4.mlp", "rel_l2", 5e-3); // only in B
    return r;
}

} // namespace

TEST(CompareRuns, HeaderFieldsThatDiffer)
{
    const auto c = compareRuns(baseline(), candidate());
    ASSERT_EQ(c.fields.size(), 1u);
    EXPECT_EQ(c.fields[0].field, "precision");
    EXPECT_EQ(c.fields[0].a, "bf16");
    EXPECT_EQ(c.fields[0].b, "fp8");
    EXPECT_EQ(c.durationA->value, 10.0);
    EXPECT_EQ(c.durationB->value, 7.5);
}

TEST(CompareRuns, MetricsMatchedByName)
{
    const auto c = compareRuns(baseline(), candidate());
    ASSERT_EQ(c.metrics.size(), 4u);
    EXPECT_EQ(c.metrics[0].name, "tokens_per_s");
    EXPECT_EQ(*c.metrics[0].delta(), 50.0);
    EXPECT_DOUBLE_EQ(*c.metrics[0].relative(), 0.5);
    EXPECT_EQ(c.metrics[1].name, "ttft_s");
    EXPECT_DOUBLE_EQ(*c.metrics[1].relative(), -0.5);
    EXPECT_EQ(c.metrics[2].name, "only_a");
    EXPECT_FALSE(c.metrics[2].b.has_value());
    EXPECT_FALSE(c.metrics[2].delta().has_value());
    EXPECT_EQ(c.metrics[3].name, "only_b");
    EXPECT_FALSE(c.metrics[3].a.has_value());
}

TEST(CompareRuns, MemoryDeltasPerComponentAndTotals)
{
    const auto c = compareRuns(baseline(), candidate());
    ASSERT_EQ(c.memory.size(), 4u);
    EXPECT_EQ(c.memory[0].component, "weights");
    EXPECT_EQ(c.memory[0].delta(), Bytes(-500));
    EXPECT_EQ(c.memory[1].delta(), Bytes(0));
    EXPECT_EQ(c.memory[2].rank, 1);
    EXPECT_EQ(c.memory[2].delta(), Bytes(-1000)) << "missing in B counts as 0";
    EXPECT_EQ(c.memory[3].rank, 2);
    EXPECT_EQ(c.memory[3].delta(), Bytes(700));
    ASSERT_EQ(c.memoryTotals.size(), 3u);
    EXPECT_EQ(c.memoryTotals[0].rank, 0);
    EXPECT_EQ(c.memoryTotals[0].a, Bytes(1500));
    EXPECT_EQ(c.memoryTotals[0].b, Bytes(1000));
    EXPECT_FALSE(c.memoryTotals[2].a.has_value());
}

TEST(CompareRuns, LayersAlignedByAnchorAndMetric)
{
    const auto c = compareRuns(baseline(), candidate());
    ASSERT_EQ(c.layers.size(), 6u);
    const auto& first = c.layers[0];
    EXPECT_EQ(c.name(first.anchor), "model.layers.0");
    EXPECT_EQ(c.name(first.metric), "rel_l2");
    EXPECT_EQ(*first.a, 1e-3);
    EXPECT_EQ(*first.b, 1e-2);
    EXPECT_FALSE(c.layers[4].b.has_value()) << "model.layers.3 is only in A";
    EXPECT_EQ(c.name(c.layers[5].anchor), "model.layers.4.mlp");
    EXPECT_EQ(c.name(c.layers[5].subModule), "mlp");
    EXPECT_EQ(c.layers[5].layer, 4);
    EXPECT_FALSE(c.layers[5].a.has_value());

    ASSERT_EQ(c.layerSummary.size(), 2u);
    const auto& rel = c.layerSummary[0];
    EXPECT_EQ(rel.metric, "rel_l2");
    EXPECT_EQ(rel.aligned, 3u);
    EXPECT_EQ(rel.onlyA, 1u);
    EXPECT_EQ(rel.onlyB, 1u);
    EXPECT_EQ(rel.increased, 1u);
    EXPECT_EQ(rel.decreased, 1u);
    EXPECT_NEAR(rel.geomeanRatio, std::cbrt(10.0 * 1.0 * 0.5), 1e-12);
    ASSERT_TRUE(rel.largestChange.has_value());
    EXPECT_EQ(*rel.largestChange, 0u);
    const auto& maxAbs = c.layerSummary[1];
    EXPECT_EQ(maxAbs.metric, "max_abs");
    EXPECT_TRUE(std::isnan(maxAbs.geomeanRatio));
    EXPECT_EQ(*maxAbs.largestChange, 3u) << "a value turning NaN is the largest change";

    const auto top = largestLayerChanges(c, "rel_l2", 10);
    // Only-in-one-side rows score +inf and come first (in row order), then 10x, then 2x; the
    // unchanged row is left out.
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0], 4u);
    EXPECT_EQ(top[1], 5u);
    EXPECT_EQ(top[2], 0u);
    EXPECT_EQ(top[3], 2u);
    EXPECT_EQ(largestLayerChanges(c, "rel_l2", 1).size(), 1u);
}

TEST(CompareRuns, ChangeScore)
{
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(changeScore(1.0, 1.0), 0.0);
    EXPECT_NEAR(changeScore(1.0, 10.0), std::log(10.0), 1e-12);
    EXPECT_DOUBLE_EQ(changeScore(10.0, 1.0), changeScore(1.0, 10.0));
    EXPECT_NEAR(changeScore(-1.0, -2.0), std::log(2.0), 1e-12);
    EXPECT_EQ(changeScore(0.0, 1.0), inf);
    EXPECT_EQ(changeScore(-1.0, 1.0), inf);
    EXPECT_EQ(changeScore(1.0, nan), inf);
    EXPECT_EQ(changeScore(nan, nan), 0.0);
    EXPECT_EQ(changeScore(std::nullopt, 1.0), inf);
}

TEST(CompareRuns, JsonHasEverySection)
{
    const auto c = compareRuns(baseline(), candidate());
    const auto json = toJson(c, 2, true);
    EXPECT_EQ(json["fields"][0]["field"], "precision");
    EXPECT_EQ(json["duration_s"]["delta"], -2.5);
    EXPECT_EQ(json["metrics"][0]["relative"], 0.5);
    EXPECT_TRUE(json["metrics"][2]["b"].is_null());
    EXPECT_EQ(json["memory"][0]["delta"], -500);
    EXPECT_EQ(json["memory_totals"].size(), 3u);
    EXPECT_EQ(json["layer_summary"][0]["aligned"], 3);
    // Two per metric at most: rel_l2 has 4 changed rows, max_abs has 1.
    EXPECT_EQ(json["largest_layer_changes"].size(), 3u);
    EXPECT_EQ(json["layers"].size(), 6u);
    EXPECT_TRUE(json["layers"][3]["b"].is_null()) << "NaN is written as null";
    EXPECT_FALSE(toJson(c, 2, false).contains("layers"));
}
