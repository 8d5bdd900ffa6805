// The planner's time estimates held against published measurements
// (tests/data/plan/published_measurements.json): each case's own layout, batch and kernels,
// the estimate beside the measurement, and the mean absolute percentage error of the cases the
// constants were chosen on ("fit") and of the others ("holdout"), printed.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/cost_model.h"
#include "plan/layout.h"
#include "plan/model_summary.h"
#include "test_models.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

using namespace day0;
using namespace day0::plan;

namespace {

using nlohmann::json;

json loadCases()
{
    std::ifstream in(std::string(DAY0_TEST_DATA_DIR) + "/plan/published_measurements.json");
    EXPECT_TRUE(in.good()) << "published_measurements.json";
    return json::parse(in).at("cases");
}

/// The case's model: a GPT of the given shape (Megatron's, tied head) or a bundled config.
ModelSummary modelOf(const json& model)
{
    if (model.contains("gpt")) {
        const auto& g = model.at("gpt");
        auto spec = test::gptSpec(g.at("hidden").get<int>(), g.at("heads").get<int>(),
            g.at("layers").get<int>(), g.at("vocab").get<int>(), g.at("ffn").get<int>());
        spec.tieEmbeddings = true;
        return summarizeModel(test::buildTestGraph(spec));
    }
    auto spec = model::loadModel(model.at("bundled").get<std::string>());
    EXPECT_TRUE(spec) << spec.error().message;
    return summarizeModel(model::buildLayerGraph(*spec));
}

ParallelPlan planOf(const json& l)
{
    ParallelPlan p;
    p.tp = l.value("tp", 1);
    p.pp = l.value("pp", 1);
    p.ep = l.value("ep", 1);
    p.cp = l.value("cp", 1);
    p.dp = l.value("dp", 0);
    p.vpp = l.value("vpp", 1);
    p.zero = l.value("zero", 0);
    p.microBatch = l.value("micro_batch", 1);
    if (l.contains("sp")) {
        p.sp = l.at("sp").get<bool>();
    }
    const auto recompute = parseRecompute(l.value("recompute", std::string("none")));
    EXPECT_TRUE(recompute) << l.dump();
    p.recompute = recompute.value_or(Recompute::None);
    return p;
}

struct Row {
    std::string id;
    std::string split;
    double estimate = 0;
    double measured = 0;
    double error = 0; ///< (estimate − measured) / measured
    TrainingBreakdown parts; ///< where the estimated step goes
    double step = 0;
};

} // namespace

TEST(PublishedMeasurements, EveryCaseIsSourcedAndEstimatedAndMissesAreExplained)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const json cases = loadCases();
    ASSERT_GE(cases.size(), 9U);
    std::vector<Row> rows;
    for (const auto& c : cases) {
        Row row;
        row.id = c.at("id").get<std::string>();
        row.split = c.at("split").get<std::string>();
        SCOPED_TRACE(row.id);
        ASSERT_FALSE(c.at("source").get<std::string>().empty());
        ASSERT_FALSE(c.at("flops").get<std::string>().empty()) << "how the source counts";
        ASSERT_TRUE(row.split == "fit" || row.split == "holdout");
        ASSERT_EQ(c.at("kind"), "train") << "inference cases are not in the table yet";
        const auto model = modelOf(c.at("model"));
        auto cluster = hardware::parseCluster(c.at("cluster").get<std::string>());
        ASSERT_TRUE(cluster) << cluster.error().message;
        Workload wl;
        wl.seqLength = c.at("workload").at("seq").get<int>();
        wl.globalBatch = c.at("workload").at("global_batch").get<int>();
        CostOptions co;
        co.flashAttention = c.at("kernels").at("flash_attention").get<bool>();
        co.dropout = c.at("kernels").at("dropout").get<bool>();
        auto layout = resolveLayout(planOf(c.at("layout")), model, wl, *cluster);
        ASSERT_TRUE(layout) << layout.error().message;
        const auto cost = estimateTrainingCost(model, *layout, wl, *cluster, co);
        const auto& m = c.at("measured");
        if (m.contains("step_time_s")) {
            row.estimate = cost.stepTime;
            row.measured = m.at("step_time_s").get<double>();
        } else {
            row.estimate = cost.tokensPerSecond / double(cluster->worldSize());
            row.measured = m.at("tokens_per_s_per_gpu").get<double>();
        }
        ASSERT_TRUE(std::isfinite(row.estimate) && row.estimate > 0);
        row.parts = cost.breakdown;
        row.step = cost.stepTime;
        row.error = (row.estimate - row.measured) / row.measured;
        // A miss beyond 30% must say what the planner does not model.
        if (std::fabs(row.error) > 0.30) {
            EXPECT_FALSE(c.value("note", std::string()).empty())
                << "off by " << 100.0 * row.error << "% without a note";
        }
        rows.push_back(row);
    }
    std::map<std::string, std::pair<double, int>> mape;
    std::printf("%-32s %-8s %12s %12s %8s\n", "case", "split", "estimate", "measured", "error");
    for (const auto& r : rows) {
        const auto& b = r.parts;
        std::printf("%-32s %-8s %12.4g %12.4g %+7.1f%%   step %.4g s: compute %.3g, tp %.3g, "
                    "ep %.3g, cp %.3g, pp %.3g, bubble %.3g, dp %.3g, optimizer %.3g\n",
            r.id.c_str(), r.split.c_str(), r.estimate, r.measured, 100.0 * r.error, r.step,
            b.compute, b.tp, b.ep, b.cp, b.pp, b.bubble, b.dp, b.optimizer);
        mape[r.split].first += std::fabs(r.error);
        ++mape[r.split].second;
    }
    for (const auto& [split, sum] : mape) {
        std::printf("MAPE %-8s %5.1f%% over %d cases\n", split.c_str(),
            100.0 * sum.first / sum.second, sum.second);
    }
    ASSERT_TRUE(mape.contains("fit"));
    EXPECT_LT(mape["fit"].first / mape["fit"].second, 0.07);
}
