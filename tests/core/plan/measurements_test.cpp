// The planner's time estimates held against published measurements
// (resources/plan/published_measurements.json): each case's own layout, batch and kernels,
// the estimate beside the measurement, and the mean absolute percentage error of the cases the
// constants were chosen on ("fit") and of the others ("holdout"), printed.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/cost_model.h"
#include "plan/model_summary.h"
#include "plan/planner.h"
#include "plan/published_measurements.h"
#include "plan/serving.h"
#include "test_models.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

using namespace day0;
using namespace day0::plan;

using test::publishedCaseModel;

namespace {

/// The bundled table, read once for the tests that use it.
const Result<std::vector<PublishedCase>>& bundledTable()
{
    static const Result<std::vector<PublishedCase>> cases = [] {
        setResourceDir(DAY0_RESOURCE_DIR);
        return readPublishedMeasurements(publishedMeasurementsFile());
    }();
    return cases;
}

/// Every case of the bundled table estimated, once (rows point into bundledTable()).
const Result<PublishedEvaluation>& bundledEvaluation()
{
    static const Result<PublishedEvaluation> ev = [] {
        const auto& cases = bundledTable();
        return cases ? evaluatePublished(*cases, publishedCaseModel)
                     : Result<PublishedEvaluation>(cases.error());
    }();
    return ev;
}

} // namespace

TEST(PublishedMeasurements, EveryCaseIsSourcedAndEstimatedAndMissesAreExplained)
{
    const auto& ev = bundledEvaluation();
    ASSERT_TRUE(ev) << ev.error().message;
    std::printf("%s", ev->format().c_str());
    // At least 15 training and 10 serving cases, sourced (the reader refuses a row without).
    EXPECT_GE(ev->count("fit", Mode::Train) + ev->count("holdout", Mode::Train), 15);
    EXPECT_GE(ev->count("fit", Mode::Infer) + ev->count("holdout", Mode::Infer), 10);
    for (const auto& r : ev->rows) {
        SCOPED_TRACE(r.c->id);
        // The cases the constants were chosen on stay within 12% each; the MoE ones within 10%
        // (two overheads serve three MoE models on two Blackwell systems).
        if (r.c->split == "fit") {
            EXPECT_LT(std::fabs(r.e.error), r.moe ? 0.10 : 0.12);
        }
        // A miss beyond 30% must say what the planner does not model.
        if (std::fabs(r.e.error) > 0.30) {
            EXPECT_FALSE(r.c->note.empty()) << "off by " << 100.0 * r.e.error << "% without a note";
        }
    }
    ASSERT_TRUE(ev->mape("fit", Mode::Train));
    EXPECT_LT(*ev->mape("fit", Mode::Train), 0.07);
    ASSERT_TRUE(ev->mape("fit", Mode::Infer));
    EXPECT_LT(*ev->mape("fit", Mode::Infer), 0.07);
    // Held out: dense training within the 10% the planner is meant to reach, serving within its
    // 15%; MoE training where it stands (every MoE miss beyond 30% carries its note), so that it
    // can only get better.
    ASSERT_GE(ev->count("holdout", Mode::Train, false), 8);
    EXPECT_LT(*ev->mape("holdout", Mode::Train, false), 0.10);
    ASSERT_GE(ev->count("holdout", Mode::Train, true), 14);
    EXPECT_LT(*ev->mape("holdout", Mode::Train, true), 0.36);
    ASSERT_GE(ev->count("holdout", Mode::Infer), 10);
    EXPECT_LT(*ev->mape("holdout", Mode::Infer), 0.15);
}

TEST(PublishedMeasurements, TheDefaultsAreWhatTheFitCasesChoose)
{
    const auto& cases = bundledTable();
    ASSERT_TRUE(cases) << cases.error().message;
    auto cal = calibrateOnFitCases(*cases, publishedCaseModel);
    ASSERT_TRUE(cal) << cal.error().message;
    std::printf("%s\n", cal->describe().c_str());
    const CostOptions defaults;
    EXPECT_NEAR(defaults.fp8ComputeEfficiency, cal->options.fp8ComputeEfficiency, 1e-12);
    EXPECT_NEAR(defaults.rooflineOverlapLoss, cal->options.rooflineOverlapLoss, 1e-12);
    EXPECT_NEAR(defaults.decodeStepOverhead, cal->options.decodeStepOverhead, 1e-12);
    EXPECT_NEAR(defaults.decodeSequenceOverhead, cal->options.decodeSequenceOverhead, 1e-12);
    EXPECT_NEAR(defaults.moeLayerOverhead, cal->options.moeLayerOverhead, 1e-12);
    EXPECT_NEAR(defaults.moeExpertOverhead, cal->options.moeExpertOverhead, 1e-12);
    EXPECT_EQ(cal->fp8Cases, 4);
    EXPECT_EQ(cal->servingCases, 6);
    EXPECT_EQ(cal->moeCases, 5);
    // Nothing was chosen on a held-out case.
    std::vector<PublishedCase> heldOut = *cases;
    std::erase_if(heldOut, [](const PublishedCase& c) { return c.split == "fit"; });
    EXPECT_FALSE(calibrateOnFitCases(heldOut, publishedCaseModel));
}

TEST(PublishedMeasurements, LayoutsOneSourceComparesAreRankedInTheMeasuredOrder)
{
    const auto& ev = bundledEvaluation();
    ASSERT_TRUE(ev) << ev.error().message;
    std::map<std::string, std::vector<const PublishedEvaluation::Row*>> groups;
    for (const auto& r : ev->rows) {
        if (r.c->row.contains("ranking")) {
            groups[r.c->row.at("ranking").get<std::string>()].push_back(&r);
        }
    }
    ASSERT_GE(groups.size(), 5U);
    for (const auto& [group, rows] : groups) {
        SCOPED_TRACE(group);
        ASSERT_GE(rows.size(), 2U);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            for (std::size_t j = i + 1; j < rows.size(); ++j) {
                const auto& a = rows[i]->e;
                const auto& b = rows[j]->e;
                EXPECT_EQ(a.estimate < b.estimate, a.measured < b.measured)
                    << rows[i]->c->id << " against " << rows[j]->c->id << ": estimates "
                    << a.estimate << ", " << b.estimate << "; measured " << a.measured << ", "
                    << b.measured;
            }
        }
    }
}

TEST(PublishedMeasurements, AServingRunHoldsTheSequencesItsSchedulerAdmits)
{
    const auto& cases = bundledTable();
    ASSERT_TRUE(cases) << cases.error().message;
    const auto it = std::find_if(cases->begin(), cases->end(),
        [](const PublishedCase& c) { return c.id == "trtllm-llama31-8b-h100-tp1-128-2048"; });
    ASSERT_NE(it, cases->end());
    const auto model = publishedCaseModel(it->row.at("model"));
    ASSERT_TRUE(model) << model.error().message;
    auto admitted = [&](const char* scheduler, double fraction) {
        PublishedCase c = *it;
        c.row["workload"]["scheduler"] = scheduler;
        c.row["workload"]["kv_cache_fraction"] = fraction;
        const auto e = estimatePublishedCase(c, *model);
        EXPECT_TRUE(e) << e.error().message;
        return e ? e->batch : 0;
    };
    // No-evict admission reserves the prompt and the whole output: 2176 tokens of FP8 KV, 32
    // layers × 8 KV heads × 128 × (K, V) = 65,536 bytes each. 0.9 of the 80 GiB left beside at
    // least the 8.03e9 weight bytes bounds it above (491); 8 GB more of weights kept in BF16,
    // CUDA context and workspace bounds it below (441).
    const int whole = admitted("guaranteed_no_evict", 0.9);
    EXPECT_GE(whole, 441);
    EXPECT_LE(whole, 491);
    // Admitting against what sequences hold on average (128 + 1024 tokens) fits 2176/1152 as
    // many; half the KV-cache share, half as many.
    EXPECT_NEAR(admitted("max_utilization", 0.9), whole * 2176.0 / 1152.0, 0.01 * whole * 2);
    EXPECT_NEAR(admitted("guaranteed_no_evict", 0.45), whole / 2.0, 1.0);
}

TEST(PublishedMeasurements, AnErrorBarComesFromComparableHeldOutCasesOrSaysThereIsNone)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto deepseek = model::loadModel("deepseek-v3");
    ASSERT_TRUE(deepseek) << deepseek.error().message;
    const auto moe = summarizeModel(model::buildLayerGraph(*deepseek));
    auto h800 = hardware::parseCluster("h800:32x8");
    ASSERT_TRUE(h800);
    const auto bar = timeErrorBar(moe, *h800, Mode::Train);
    ASSERT_TRUE(bar.problem.empty()) << bar.problem;
    ASSERT_TRUE(bar.meanAbsError);
    EXPECT_EQ(bar.cases, (std::vector<std::string> { "deepseek-v3-pretraining" }));
    EXPECT_GT(*bar.meanAbsError, 0.0);
    EXPECT_NE(bar.describe().find("1 comparable published measurement"), std::string::npos)
        << bar.describe();
    EXPECT_EQ(bar.toJson().at("cases").size(), 1U);

    auto llama = model::loadModel("llama-3.1-8b");
    ASSERT_TRUE(llama);
    const auto dense = summarizeModel(model::buildLayerGraph(*llama));
    const auto none = timeErrorBar(dense, *h800, Mode::Train);
    EXPECT_FALSE(none.meanAbsError) << "a dense model is not compared with an MoE run";
    EXPECT_EQ(none.describe(), "no comparable published measurement (h800, training, dense)");
    EXPECT_TRUE(none.toJson().at("mean_abs_error").is_null());
    EXPECT_FALSE(timeErrorBar(moe, *h800, Mode::Infer).meanAbsError) << "no serving case on H800";

    // Serving a dense model on H100 is held against the held-out TensorRT-LLM rows, not the
    // training ones; the fit rows give no error bar.
    auto h100 = hardware::parseCluster("h100-sxm:1x8");
    ASSERT_TRUE(h100);
    const auto serving = timeErrorBar(dense, *h100, Mode::Infer);
    ASSERT_TRUE(serving.meanAbsError) << serving.describe();
    EXPECT_GE(serving.cases.size(), 3U);
    for (const auto& id : serving.cases) {
        EXPECT_EQ(id.rfind("trtllm-", 0), 0U) << id;
    }
    EXPECT_EQ(std::count(serving.cases.begin(), serving.cases.end(),
                  "trtllm-llama31-8b-h100-tp1-128-2048"),
        0);
    // A layout's own bar keeps the runs that use its parallel dimensions when two or more do,
    // and says when it could not.
    const auto tpPp = timeErrorBar(dense, *h100, Mode::Train, parallelDimsOf(4, 8, 1, 1));
    EXPECT_EQ(tpPp.cases,
        (std::vector<std::string> { "mb2511-llama3-70b-h100", "mb2602-llama3-70b-h100" }));
    EXPECT_NE(tpPp.describe().find("dense, tp+pp)"), std::string::npos) << tpPp.describe();
    const auto cpOnly = timeErrorBar(dense, *h100, Mode::Train, parallelDimsOf(1, 1, 4, 1));
    EXPECT_EQ(cpOnly.cases, timeErrorBar(dense, *h100, Mode::Train).cases);
    EXPECT_NE(cpOnly.describe().find("(fewer than two with cp)"), std::string::npos)
        << cpOnly.describe();
    EXPECT_EQ(parallelDimsOf(1, 1, 1, 1).describe(), "no model parallelism");
    const auto training = timeErrorBar(dense, *h100, Mode::Train);
    ASSERT_TRUE(training.meanAbsError) << training.describe();
    for (const auto& id : training.cases) {
        EXPECT_EQ(id.find("trtllm-"), std::string::npos) << id;
    }
}

TEST(PublishedMeasurements, AMalformedTableIsRefusedNamingTheFileAndTheCase)
{
    const auto dir = std::filesystem::path(::testing::TempDir()) / "published_measurements_test";
    std::filesystem::create_directories(dir);
    const auto file = dir / "table.json";
    auto write = [&](const std::string& row) {
        std::ofstream(file) << R"({"cases": [)" << row << "]}";
        return readPublishedMeasurements(file);
    };
    const std::string good = R"({"id": "x", "source": "s", "flops": "f", "precision": "bf16",
        "split": "holdout", "kind": "train", "cluster": "h800:1x8", "plan": "tp=8",
        "model": {"gpt": {}}, "workload": {"seq": 2048, "global_batch": 8},
        "kernels": {"flash_attention": true, "dropout": false}, "measured": {"step_time_s": 1}})";
    auto r = write(good);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("table.json: case 'x'"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("bundled model"), std::string::npos);
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string row = good;
        row.replace(row.find(from), from.size(), to);
        return write(row);
    };
    struct Bad {
        std::string from, to, says;
    };
    for (const Bad& b : std::vector<Bad> {
             { R"("split": "holdout")", R"("split": "fit")", "" },
             { R"("tp=8")", R"("tp=8,qq=2")", "plan: " },
             { R"("h800:1x8")", R"("h900:1x8")", "cluster: " },
             { R"("kind": "train")", R"("kind": "serve")", "expected train or infer" },
             { R"("step_time_s": 1)", R"("step_time_s": -1)", "positive step_time_s" },
             { R"("global_batch": 8)", R"("global_batch": 8.5)", "seq and global_batch" },
             { R"("kind": "train")", R"("kind": "infer")", "output_tokens_per_s" },
             { R"("precision": "bf16",)", "", R"(no "precision")" },
             { R"("dropout": false)", R"("dropout": 0)", "dropout" },
             { R"("dropout": false)", R"("dropout": false, "fused_moe": true)",
                 R"("fused_moe" is not a setting the planner models)" },
             { R"("dropout": false)", R"("dropout": false, "ep_node_dedup": 1)",
                 R"("ep_node_dedup" is true or false)" },
         }) {
        SCOPED_TRACE(b.to);
        auto e = replaced(b.from, b.to);
        if (b.says.empty()) {
            EXPECT_TRUE(e) << e.error().message; // a fit row may use an inline GPT
            continue;
        }
        ASSERT_FALSE(e);
        EXPECT_NE(e.error().message.find(b.says), std::string::npos) << e.error().message;
        EXPECT_NE(e.error().message.find("case 'x'"), std::string::npos) << e.error().message;
    }
    // A serving row names the runtime's batch cap, its scheduler policy and its KV-cache share.
    const std::string serving = R"({"id": "x", "source": "s", "flops": "f", "precision": "fp8",
        "split": "fit", "kind": "infer", "cluster": "h100-sxm:1x1", "plan": "tp=1",
        "model": {"gpt": {}}, "workload": {"prompt": 128, "output": 2048, "max_batch": 4096,
        "scheduler": "guaranteed_no_evict", "kv_cache_fraction": 0.9},
        "kernels": {"flash_attention": true, "dropout": false},
        "measured": {"output_tokens_per_s": 1}})";
    EXPECT_TRUE(write(serving)) << write(serving).error().message;
    for (const Bad& b : std::vector<Bad> {
             { R"("max_batch": 4096)", R"("max_batch": 0)", "prompt, output and max_batch" },
             { "guaranteed_no_evict", "first_come", R"("scheduler" is)" },
             { R"("kv_cache_fraction": 0.9)", R"("kv_cache_fraction": 1.5)", "kv_cache_fraction" },
             { R"(, "kv_cache_fraction": 0.9)", "", "kv_cache_fraction" },
         }) {
        SCOPED_TRACE(b.to);
        std::string row = serving;
        row.replace(row.find(b.from), b.from.size(), b.to);
        auto e = write(row);
        ASSERT_FALSE(e);
        EXPECT_NE(e.error().message.find(b.says), std::string::npos) << e.error().message;
    }
    {
        std::string fit = good;
        fit.replace(fit.find("holdout"), 7, "fit");
        auto twice = write(fit + "," + fit);
        ASSERT_FALSE(twice);
        EXPECT_NE(twice.error().message.find("a second case"), std::string::npos);
    }
    std::ofstream(file) << "{";
    EXPECT_FALSE(readPublishedMeasurements(file));
    EXPECT_FALSE(readPublishedMeasurements(dir / "missing.json"));
}

TEST(PublishedMeasurements, ThePlannerServesEveryPublishedServingRowAsTheTableEstimatesIt)
{
    // One admission model: `day0 plan --mode infer` with a serving row's layout, runtime and
    // workload pinned serves the batch the table's estimate holds, at the same throughput.
    const auto& ev = bundledEvaluation();
    ASSERT_TRUE(ev) << ev.error().message;
    int checked = 0;
    for (const auto& r : ev->rows) {
        if (r.c->mode != Mode::Infer) {
            continue;
        }
        SCOPED_TRACE(r.c->id);
        const auto model = publishedCaseModel(r.c->row.at("model"));
        ASSERT_TRUE(model) << model.error().message;
        const auto& w = r.c->row.at("workload");
        PlannerOptions o;
        o.workload.mode = Mode::Infer;
        o.workload.promptLength = w.at("prompt").get<int>();
        o.workload.outputLength = w.at("output").get<int>();
        o.workload.prefillChunk = std::min(o.workload.prefillChunk, o.workload.promptLength);
        o.workload.tpotBound = 1e9; // the table's runs are offline: no latency bound
        o.serving = { w.at("max_batch").get<int>(), w.at("kv_cache_fraction").get<double>(),
            *parseScheduler(w.at("scheduler").get<std::string>()) };
        o.tp = { r.c->plan.tp };
        o.pp = { r.c->plan.pp };
        o.weights = r.c->plan.weights;
        o.kv = r.c->plan.kv;
        o.top = 100;
        Progress progress;
        const auto planned = planLayouts(*model, r.c->cluster, o, progress);
        ASSERT_TRUE(planned) << planned.error().message;
        const auto it = std::find_if(planned->layouts.begin(), planned->layouts.end(),
            [&](const PlannedLayout& p) { return p.layout.dp == 1; });
        ASSERT_NE(it, planned->layouts.end());
        EXPECT_EQ(it->layout.microBatch, r.e.batch);
        EXPECT_EQ(it->admission.sequences, r.e.batch);
        EXPECT_NEAR(it->tokensPerSecond, r.e.estimate, 1e-9 * r.e.estimate);
        ++checked;
    }
    EXPECT_GE(checked, 10);
}

TEST(PublishedMeasurements, ALatencyBoundServesTheLargestBatchThatKeepsToIt)
{
    const auto model = publishedCaseModel({ { "bundled", "llama-3.1-8b" } });
    ASSERT_TRUE(model) << model.error().message;
    PlannerOptions o;
    o.workload.mode = Mode::Infer;
    o.workload.promptLength = 1000;
    o.workload.outputLength = 1000;
    o.tp = { 1 };
    o.pp = { 1 };
    const auto cluster = *hardware::parseCluster("h100-sxm:1x1");
    auto serve = [&](double bound) {
        o.workload.tpotBound = bound;
        Progress progress;
        const auto r = planLayouts(*model, cluster, o, progress);
        EXPECT_TRUE(r && r->layouts.size() == 1);
        return r && !r->layouts.empty() ? r->layouts.front() : PlannedLayout {};
    };
    const auto free = serve(1e9);
    ASSERT_GT(free.admission.sequences, 8);
    EXPECT_FALSE(free.admission.capped);
    EXPECT_EQ(free.layout.microBatch, free.admission.sequences);
    // A bound between the TPOT of the full batch and of one sequence: the batch served keeps to
    // it, and one more sequence would not.
    const auto one = [&] {
        auto p = o;
        p.serving.maxBatch = 1;
        p.workload.tpotBound = 1e9;
        Progress progress;
        return planLayouts(*model, cluster, p, progress)->layouts.front();
    }();
    ASSERT_EQ(one.layout.microBatch, 1);
    const double bound = 0.5 * (one.inference.tpot + free.inference.tpot);
    const auto bounded = serve(bound);
    EXPECT_EQ(bounded.admission.sequences, free.admission.sequences);
    EXPECT_LT(bounded.layout.microBatch, free.admission.sequences);
    EXPECT_GT(bounded.layout.microBatch, 1);
    EXPECT_LE(bounded.inference.tpot, bound);
    Layout more = bounded.layout;
    more.microBatch += 1;
    more.globalBatch = more.microBatch;
    Workload decoding = o.workload;
    decoding.context = averageContext(o.workload);
    EXPECT_GT(estimateInferenceCost(*model, more, decoding, cluster, o.cost).tpot, bound);
    // The runtime's cap bounds it where the pool would hold more.
    o.serving.maxBatch = 7;
    const auto capped = serve(1e9);
    EXPECT_EQ(capped.layout.microBatch, 7);
    EXPECT_TRUE(capped.admission.capped);
}
