#include "history/comparison_views.h"
#include "history/run_json.h"
#include "history/run_store.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace day0;
using namespace day0::history;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

RunRecord runA()
{
    RunRecord r(RunKind::Run);
    r.info.modelName = "kimi-k2";
    r.layers.add("model.layers.1", "rel_l2", 2e-3);
    r.layers.add("model.layers.0", "rel_l2", 1e-3);
    r.layers.add("model.layers.0.mlp", "rel_l2", 4e-3);
    r.layers.add("model.layers.1.mlp", "rel_l2", 8e-3);
    r.layers.add("model.layers.2.self_attn", "rel_l2", 0.0); // exact: no log ratio
    r.layers.add("model.layers.0", "max_abs", 0.5);
    r.layers.add("lm_head", "rel_l2", 0.1); // outside the numbered layers
    r.addMemory(0, 0, "weights", Bytes(1000));
    r.addMemory(0, 0, "activations", Bytes(300));
    r.addMemory(1, 1, "weights", Bytes(1200));
    r.addMemory(1, 1, "activations", Bytes(200));
    return r;
}

RunRecord runB()
{
    RunRecord r(RunKind::Run);
    r.info.modelName = "kimi-k2";
    r.layers.add("model.layers.0", "rel_l2", 1e-2);
    r.layers.add("model.layers.1", "rel_l2", kNaN);
    r.layers.add("model.layers.0.mlp", "rel_l2", 2e-3);
    r.layers.add("model.layers.2.self_attn", "rel_l2", 1e-4);
    r.layers.add("model.layers.3", "rel_l2", 5e-3); // only in B
    r.addMemory(0, 0, "weights", Bytes(500));
    r.addMemory(0, 0, "activations", Bytes(300));
    r.addMemory(0, 0, "kv_cache", Bytes(900));
    r.addMemory(1, 1, "weights", Bytes(600));
    return r;
}

} // namespace

TEST(ComparisonViews, DepthCurvesAlignByLayer)
{
    const auto c = compareRuns(runA(), runB());
    const auto curve = depthCurves(c, "rel_l2");
    ASSERT_EQ(curve.size(), 3u);
    EXPECT_EQ(curve[0].layer, 0);
    EXPECT_DOUBLE_EQ(*curve[0].a, 1e-3);
    EXPECT_DOUBLE_EQ(*curve[0].b, 1e-2);
    EXPECT_EQ(curve[1].layer, 1);
    EXPECT_DOUBLE_EQ(*curve[1].a, 2e-3);
    EXPECT_TRUE(std::isnan(*curve[1].b)) << "a NaN error is kept";
    EXPECT_EQ(curve[2].layer, 3);
    EXPECT_FALSE(curve[2].a.has_value());
    EXPECT_DOUBLE_EQ(*curve[2].b, 5e-3);

    const auto mlp = depthCurves(c, "rel_l2", "mlp");
    ASSERT_EQ(mlp.size(), 2u);
    EXPECT_DOUBLE_EQ(*mlp[1].a, 8e-3);
    EXPECT_FALSE(mlp[1].b.has_value());
    EXPECT_TRUE(depthCurves(c, "cosine").empty());
    EXPECT_TRUE(depthCurves(c, "rel_l2", "no_such_module").empty());
}

TEST(ComparisonViews, GridHasLayersBySubModulesAndItsChange)
{
    const auto c = compareRuns(runA(), runB());
    EXPECT_EQ(layerSubModules(c, "rel_l2"), (std::vector<std::string> { "", "mlp", "self_attn" }));
    const LayerGrid grid = layerGrid(c, "rel_l2");
    EXPECT_EQ(grid.layers, (std::vector<int> { 0, 1, 2, 3 }));
    ASSERT_EQ(grid.columns(), 3u);
    ASSERT_EQ(grid.a.size(), 12u);
    EXPECT_DOUBLE_EQ(*grid.a[grid.index(0, 1)], 4e-3);
    EXPECT_DOUBLE_EQ(*grid.b[grid.index(0, 1)], 2e-3);
    EXPECT_FALSE(grid.a[grid.index(3, 0)].has_value());
    EXPECT_FALSE(grid.b[grid.index(1, 1)].has_value());
    EXPECT_FALSE(grid.a[grid.index(0, 2)].has_value()) << "layer 0 has no self_attn value";

    const auto ratio = layerChanges(grid, LayerChange::Log10Ratio);
    EXPECT_DOUBLE_EQ(ratio[grid.index(0, 0)], 1.0) << "10x larger";
    EXPECT_NEAR(ratio[grid.index(0, 1)], std::log10(0.5), 1e-15);
    EXPECT_TRUE(std::isnan(ratio[grid.index(1, 0)])) << "B is NaN";
    EXPECT_TRUE(std::isnan(ratio[grid.index(2, 2)])) << "A is 0";
    EXPECT_TRUE(std::isnan(ratio[grid.index(3, 0)])) << "A lacks it";
    const auto diff = layerChanges(grid, LayerChange::Difference);
    EXPECT_DOUBLE_EQ(diff[grid.index(2, 2)], 1e-4);
    EXPECT_DOUBLE_EQ(diff[grid.index(0, 0)], 1e-2 - 1e-3);

    const LayerGrid maxAbs = layerGrid(c, "max_abs");
    EXPECT_EQ(maxAbs.layers, std::vector<int> { 0 });
    EXPECT_EQ(maxAbs.subModules, std::vector<std::string> { "" });
    EXPECT_TRUE(layerGrid(c, "nothing").layers.empty());
}

TEST(ComparisonViews, MemoryBarsOfTheMostLoadedRankOrAChosenOne)
{
    const auto c = compareRuns(runA(), runB());
    const MemoryBars busiest = memoryBars(c);
    ASSERT_TRUE(busiest.slotA && busiest.slotB);
    EXPECT_EQ(*busiest.slotA, (MemorySlot { 1, 1 })) << "A: 1400 B on rank 1 beats 1300";
    EXPECT_EQ(*busiest.slotB, (MemorySlot { 0, 0 })) << "B: 1700 B on rank 0 beats 600";
    EXPECT_EQ(
        busiest.components, (std::vector<std::string> { "weights", "activations", "kv_cache" }));
    EXPECT_EQ(busiest.a, (std::vector<Bytes> { Bytes(1200), Bytes(200), Bytes(0) }));
    EXPECT_EQ(busiest.b, (std::vector<Bytes> { Bytes(500), Bytes(300), Bytes(900) }));
    EXPECT_EQ(busiest.totalA, Bytes(1400));
    EXPECT_EQ(busiest.totalB, Bytes(1700));

    const MemoryBars rank1 = memoryBars(c, MemorySlot { 1, 1 });
    EXPECT_EQ(rank1.components, (std::vector<std::string> { "weights", "activations" }));
    EXPECT_EQ(rank1.a, (std::vector<Bytes> { Bytes(1200), Bytes(200) }));
    EXPECT_EQ(rank1.b, (std::vector<Bytes> { Bytes(600), Bytes(0) }));
    EXPECT_EQ(rank1.totalB, Bytes(600));

    EXPECT_EQ(memorySlots(c), (std::vector<MemorySlot> { { 0, 0 }, { 1, 1 } }));
    const MemoryBars none = memoryBars(c, MemorySlot { 7, 0 });
    EXPECT_FALSE(none.slotA || none.slotB);
    EXPECT_TRUE(none.components.empty());
    const MemoryBars empty = memoryBars(compareRuns(RunRecord(), RunRecord()));
    EXPECT_FALSE(empty.slotA.has_value());
}

TEST(ComparisonViews, BaselineIsTheLastRunOfTheSameKindAndModel)
{
    std::vector<RunInfo> runs(5);
    const auto set = [&](std::size_t i, RunKind kind, const char* model) {
        runs[i].kind = kind;
        runs[i].modelName = model;
    };
    set(0, RunKind::Run, "kimi-k2");
    set(1, RunKind::Plan, "kimi-k2");
    set(2, RunKind::Run, "deepseek-v3");
    set(3, RunKind::Run, "kimi-k2");
    set(4, RunKind::Run, "kimi-k2");
    EXPECT_EQ(baselineFor(runs, 0), 3u);
    EXPECT_EQ(baselineFor(runs, 1), std::nullopt) << "no older plan: nothing comparable";
    EXPECT_EQ(baselineFor(runs, 2), std::nullopt) << "no older deepseek-v3 run";
    EXPECT_EQ(baselineFor(runs, 3), 4u);
    EXPECT_EQ(baselineFor(runs, 4), std::nullopt);
    EXPECT_EQ(baselineFor(runs, 9), std::nullopt);
}

TEST(ComparisonViews, FixtureRunsGiveTheGridTheStoreKeeps)
{
    // The two fixture runs through the store: what the runs panel loads and plots.
    const std::string dir = std::string(DAY0_TEST_DATA_DIR) + "/history/";
    const auto read = [](const std::string& file) {
        std::ifstream in(file);
        auto json = nlohmann::json::parse(in);
        if (json.is_array()) {
            json = json.front();
        }
        return runFromJson(json, file).value();
    };
    test::TempDir tmp("views_fixture");
    auto store = RunStore::open(tmp / "runs.sqlite");
    ASSERT_TRUE(store.ok()) << store.error().message;
    const auto idA = store->commit(read(dir + "run_bf16.json")).value();
    const auto idB = store->commit(read(dir + "run_fp8.json")).value();
    const auto c = compareRuns(store->load(idA).value(), store->load(idB).value());
    const LayerGrid grid = layerGrid(c, "rel_l2");
    EXPECT_EQ(grid.layers, (std::vector<int> { 0, 1, 2, 3 }));
    EXPECT_EQ(grid.subModules,
        (std::vector<std::string> { "", "self_attn.q_proj", "self_attn", "mlp.gate", "mlp" }))
        << "capture order, the layer output first";
    for (std::size_t i = 0; i < grid.a.size(); ++i) {
        ASSERT_TRUE(grid.a[i] && grid.b[i]) << "cell " << i;
    }
    // The fp8 run's errors are four times the bf16 run's (SOURCES.md).
    const auto ratio = layerChanges(grid, LayerChange::Log10Ratio);
    for (const double r : ratio) {
        EXPECT_NEAR(r, std::log10(4.0), 1e-12);
    }
    const auto bars = memoryBars(c);
    ASSERT_FALSE(bars.components.empty());
    EXPECT_EQ(bars.components.front(), "weights");
    EXPECT_EQ(bars.a.front().value, 2 * bars.b.front().value) << "fp8 halves the weights";
}
