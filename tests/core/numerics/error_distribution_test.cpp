#include "numerics/comparison_grid.h"
#include "numerics/error_distribution.h"
#include "numerics/tolerance.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::numerics;

TEST(ErrorDistribution, HistogramBinsRelativeErrors)
{
    const auto r = Tensor::fromFloats({ 5 }, std::vector<float> { 1, 1, 1, 1, 1 });
    const auto t = Tensor::fromFloats({ 5 }, std::vector<float> { 1, 1.001f, 1.1f, 3, NAN });
    const auto h = relativeErrorHistogram(r, t, 8, 1e-4, 1.0);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->edges.size(), 9u);
    EXPECT_NEAR(h->edges[2], 1e-3, 1e-15);
    EXPECT_EQ(h->exact, 1);
    EXPECT_EQ(h->nonFinite, 1);
    EXPECT_EQ(h->above, 1); // 200% error
    std::int64_t total = 0;
    for (const auto c : h->counts) {
        total += c;
    }
    EXPECT_EQ(total, 2);
    EXPECT_EQ(h->counts[2], 1); // ~1e-3 lands in [1e-3, 3.2e-3)
    EXPECT_EQ(h->counts[6], 1); // 0.1 lands in [1e-1, 3.2e-1)
    EXPECT_FALSE(relativeErrorHistogram(r, Tensor::zeros({ 4 }, DType::F32)).ok());
}

TEST(ErrorDistribution, ScatterKeepsTheWorstPoint)
{
    std::vector<float> rv(1000);
    std::vector<float> tv(1000);
    for (std::size_t i = 0; i < rv.size(); ++i) {
        rv[i] = float(i);
        tv[i] = float(i) + (i == 777 ? 5.0f : 0.0f);
    }
    const auto s
        = valueErrorScatter(Tensor::fromFloats({ 1000 }, rv), Tensor::fromFloats({ 1000 }, tv), 10);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->size(), 11u);
    EXPECT_EQ(s->back().value, 777.0);
    EXPECT_EQ(s->back().error, 5.0);
}

TEST(ErrorDistribution, PerPositionAndHeatmap)
{
    const auto r = Tensor::fromFloats({ 2, 2 }, std::vector<float> { 1, 0, 0, 1 });
    const auto t = Tensor::fromFloats({ 2, 2 }, std::vector<float> { 1, 0, 0, 1.5f });
    const auto p = relL2PerPosition(r, t);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ((*p)[0], 0.0);
    EXPECT_NEAR((*p)[1], 0.5, 1e-12);

    DumpComparison c;
    for (const char* name : { "model.layers.0.self_attn", "model.layers.0",
             "model.layers.1.self_attn", "model.layers.1.mlp", "model.layers.1", "lm_head" }) {
        CaptureComparison row;
        row.name = name;
        row.layer = layerOfAnchor(name);
        ErrorMetrics m;
        m.relL2 = 0.01 * (row.layer + 1);
        row.metrics = m;
        row.verdict.reason = std::string("pass ") + name;
        c.rows.push_back(row);
    }
    const auto h = layerHeatmap(c, HeatmapMetric::RelL2);
    EXPECT_EQ(h.layers, (std::vector<int> { 0, 1 }));
    EXPECT_EQ(h.columns, (std::vector<std::string> { "self_attn", "", "mlp" }));
    ASSERT_EQ(h.values.size(), 6u);
    EXPECT_DOUBLE_EQ(h.values[0], 0.01);
    EXPECT_TRUE(std::isnan(h.values[2])); // layer 0 has no mlp capture
    EXPECT_DOUBLE_EQ(h.values[5], 0.02);
    EXPECT_EQ(h.verdicts[4], "pass model.layers.1");
    EXPECT_TRUE(std::isnan(layerHeatmap(c, HeatmapMetric::OwnRelL2).values[0]));
}

TEST(ErrorDistribution, GradientDumpsFillTheHeatmapAndTheGrid)
{
    // A comparison of two gradient dumps (exec/backward.h): each anchor's output gradient is a
    // column "<sub-module>#grad"; parameter gradients and the logits stay out of the grid.
    DumpComparison c;
    for (const char* name :
        { "lm_head#grad", "model.layers.1#grad", "model.layers.1.mlp#grad",
            "model.layers.1.self_attn#grad", "model.layers.0#grad", "model.layers.0.self_attn#grad",
            "model.layers.0.self_attn.q_proj.weight#grad", "model.embed_tokens#grad" }) {
        CaptureComparison row;
        row.name = name;
        row.kind = opKindForAnchor(name);
        row.layer = layerOfAnchor(name);
        ErrorMetrics m;
        m.relL2 = 0.01 * (row.layer + 1);
        row.metrics = m;
        c.rows.push_back(row);
    }
    const auto h = layerHeatmap(c, HeatmapMetric::RelL2);
    EXPECT_EQ(h.layers, (std::vector<int> { 0, 1 }));
    EXPECT_EQ(h.columns, (std::vector<std::string> { "#grad", "mlp#grad", "self_attn#grad" }));
    ASSERT_EQ(h.values.size(), 6u);
    EXPECT_DOUBLE_EQ(h.values[0], 0.01);
    EXPECT_TRUE(std::isnan(h.values[1])); // layer 0 has no mlp gradient
    EXPECT_DOUBLE_EQ(h.values[5], 0.02);
    const auto grid = comparisonGrid(c);
    EXPECT_EQ(grid.layers, (std::vector<int> { 0, 1 }));
    EXPECT_EQ(grid.columns, (std::vector<std::string> { "#grad", "mlp#grad", "self_attn#grad" }));
    ASSERT_EQ(grid.cells.size(), 6u);
    EXPECT_EQ(grid.cells[2], 5); // layer 0's self_attn#grad is row 5
    EXPECT_EQ(grid.cells[3], 1); // layer 1's output gradient is row 1
}
