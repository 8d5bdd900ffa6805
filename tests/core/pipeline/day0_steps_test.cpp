// The Day-0 steps on a shrunk Kimi-K2: the multi-rank hook (absent, agreeing, disagreeing),
// cancellation, the figure renderer's input, the run record, and the record builders.
#include "actions/records.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "pipeline/day0_steps.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace day0;
using namespace day0::pipeline;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name)
{
    const auto dir = fs::temp_directory_path() / ("day0_steps_test_" + name);
    fs::remove_all(dir);
    return dir;
}

ValidateOptions kimi(const std::string& name)
{
    ValidateOptions o;
    o.model = "kimi-k2";
    o.work = scratch(name);
    o.tokens = 4;
    return o;
}

const StepRecord& step(const Validation& v, const std::string& id)
{
    for (const auto& s : v.result.steps) {
        if (s.id == id) {
            return s;
        }
    }
    throw std::runtime_error("no step " + id);
}

/// Installs a multi-rank runner for one test.
class RunnerScope {
public:
    explicit RunnerScope(MultiRankRunner runner) { setMultiRankRunner(std::move(runner)); }
    ~RunnerScope() { setMultiRankRunner(inProcessMultiRankRunner()); }
    RunnerScope(const RunnerScope&) = delete;
    RunnerScope& operator=(const RunnerScope&) = delete;
};

/// A stand-in for sharded execution that runs the whole model on one rank (what a correct
/// implementation must reproduce), optionally corrupting its output.
MultiRankRunner singleRankRunner(bool corrupt)
{
    return [corrupt](const MultiRankRequest& request, Progress& progress,
               std::stop_token stop) -> Result<MultiRankOutput> {
        auto weights = exec::openCheckpointWeights(request.checkpoint);
        if (!weights) {
            return weights.error();
        }
        auto engine = exec::Engine::create(*request.spec, **weights, false, progress, stop);
        if (!engine) {
            return engine.error();
        }
        exec::RunOptions o;
        o.promptIds = request.promptIds;
        o.newTokens = request.newTokens;
        o.capture.filters = { "lm_head" };
        auto run = engine->run(o, progress, stop);
        if (!run) {
            return run.error();
        }
        MultiRankOutput out { "fp32", 1, "test", run->generated,
            run->dump.tensor("lm_head")->toFloats() };
        if (corrupt) {
            out.generated.back() += 1;
        }
        return out;
    };
}

} // namespace

TEST(Day0Steps, EightStepsPassOnAShrunkKimiWithoutShardedExecution)
{
    RunnerScope none({});
    std::vector<FigureSpec> asked;
    FigureRenderer renderer = [&](const FigureSpec& spec) -> Result<ReportFigure> {
        asked.push_back(spec);
        return ReportFigure { spec.title, "image/png", "png bytes" };
    };
    Progress progress;
    auto v = runValidation(kimi("pass"), renderer, progress, {});
    ASSERT_TRUE(v.ok()) << v.error().message;
    ASSERT_EQ(v->result.steps.size(), 8u);
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(v->result.steps[i].id, day0StepIds()[i]);
    }
    EXPECT_EQ(v->result.exitCode(), 0);
    EXPECT_EQ(step(*v, "multi_rank").status, StepStatus::Skipped);
    EXPECT_EQ(step(*v, "multi_rank").reason, "sharded execution not available in this build");
    EXPECT_EQ(step(*v, "precision").status, StepStatus::Passed);
    // Error against depth, memory, time per step; the depth curve has one point per layer.
    ASSERT_EQ(asked.size(), 3u);
    EXPECT_EQ(asked[0].series.front().name, "accumulated");
    EXPECT_EQ(asked[0].series.front().x.size(), 4u);
    EXPECT_EQ(asked[2].categories.size(), 7u) << "the steps before the report";
    EXPECT_EQ(v->figures.size(), 3u);
    EXPECT_EQ(v->header.model, "kimi-k2");

    const auto record = validationRunRecord(*v, {});
    EXPECT_EQ(record.info.kind, history::RunKind::Validate);
    EXPECT_EQ(record.info.status, history::RunStatus::Ok);
    ASSERT_NE(record.findMetric("smoke.duration_s"), nullptr);
    ASSERT_NE(record.findMetric("shard.reassembly_mismatches"), nullptr);
    EXPECT_EQ(record.findMetric("shard.reassembly_mismatches")->value, 0.0);
    EXPECT_FALSE(record.layers.empty());
    EXPECT_TRUE(record.layers.find("lm_head", "rel_l2").has_value());
    EXPECT_TRUE(record.validate().ok()) << record.validate().error().message;
}

TEST(Day0Steps, MultiRankRunnerThatAgreesPassesAndOneThatDiffersFails)
{
    {
        RunnerScope scope(singleRankRunner(false));
        Progress progress;
        auto v = runValidation(kimi("agree"), {}, progress, {});
        ASSERT_TRUE(v.ok()) << v.error().message;
        EXPECT_EQ(step(*v, "multi_rank").status, StepStatus::Passed)
            << step(*v, "multi_rank").reason;
        EXPECT_EQ(step(*v, "multi_rank").report.metrics.at("logits_rel_l2"), 0.0);
        EXPECT_EQ(v->result.exitCode(), 0);
    }
    {
        RunnerScope scope(singleRankRunner(true));
        Progress progress;
        auto v = runValidation(kimi("differ"), {}, progress, {});
        ASSERT_TRUE(v.ok()) << v.error().message;
        EXPECT_EQ(step(*v, "multi_rank").status, StepStatus::Failed);
        EXPECT_NE(step(*v, "multi_rank").reason.find("generated"), std::string::npos);
        EXPECT_EQ(v->result.exitCode(), 1);
        EXPECT_EQ(validationRunRecord(*v, {}).info.status, history::RunStatus::Failed);
    }
}

TEST(Day0Steps, CancelledBeforeStartSkipsEveryStep)
{
    std::stop_source stop;
    stop.request_stop();
    Progress progress;
    auto v = runValidation(kimi("cancel"), {}, progress, stop.get_token());
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->result.cancelled);
    for (const auto& s : v->result.steps) {
        EXPECT_EQ(s.status, StepStatus::Skipped);
        EXPECT_EQ(s.reason, "cancelled");
    }
    EXPECT_EQ(validationRunRecord(*v, {}).info.status, history::RunStatus::Cancelled);
}

TEST(Day0Steps, BadOptionsAreErrorsNamingTheOption)
{
    Progress progress;
    auto o = kimi("bad");
    o.precision = "bf17";
    auto v = runValidation(o, {}, progress, {});
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.error().message.find("bf17"), std::string::npos) << v.error().message;
    o = kimi("bad");
    o.tokens = 0;
    EXPECT_FALSE(runValidation(o, {}, progress, {}).ok());
}

TEST(Day0Steps, InProcessShardedRunEqualsTheSingleRankRun)
{
    Progress progress;
    auto v = runValidation(kimi("in_process"), {}, progress, {});
    ASSERT_TRUE(v.ok()) << v.error().message;
    const auto& multi = step(*v, "multi_rank");
    EXPECT_EQ(multi.status, StepStatus::Passed) << multi.reason;
    EXPECT_EQ(multi.report.metrics.at("ranks"), 2.0);
    EXPECT_LT(multi.report.metrics.at("logits_rel_l2"), 1e-4);
    EXPECT_EQ(v->result.exitCode(), 0);
}

TEST(Day0Steps, WithoutARendererTheReportStepSaysSo)
{
    Progress progress;
    auto o = kimi("norender");
    auto v = runValidation(o, {}, progress, {});
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(step(*v, "report").status, StepStatus::Passed);
    EXPECT_NE(step(*v, "report").report.summary.find("no figure renderer"), std::string::npos);
    EXPECT_TRUE(v->figures.empty());
}

/// Figures that measure time or this process's memory, which differ between any two runs.
bool measured(const std::string& metric)
{
    for (const char* suffix : { "_s", "_seconds", "_per_s", "rss_bytes", "growth_bytes" }) {
        if (metric.ends_with(suffix)) {
            return true;
        }
    }
    return metric == "measured_over_estimate" || metric.starts_with("stream_");
}

TEST(Day0Steps, StreamedValidationGivesTheSameFiguresWithoutAnEngine)
{
    Progress progress;
    auto whole = runValidation(kimi("whole"), {}, progress, {});
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    auto o = kimi("streamed");
    o.stream = true;
    auto streamed = runValidation(o, {}, progress, {});
    ASSERT_TRUE(streamed.ok()) << streamed.error().message;
    ASSERT_EQ(whole->result.steps.size(), streamed->result.steps.size());
    for (std::size_t i = 0; i < whole->result.steps.size(); ++i) {
        const auto& a = whole->result.steps[i];
        const auto& b = streamed->result.steps[i];
        SCOPED_TRACE(a.id);
        if (a.id == "multi_rank") {
            // Its ranks streamed their rank files, and said so.
            EXPECT_NE(b.report.summary.find("each rank streamed its rank file"), std::string::npos)
                << b.report.summary;
            ASSERT_TRUE(b.report.metrics.contains("stream_bytes_read"));
            EXPECT_GT(b.report.metrics.at("stream_bytes_read"), 0.0);
        }
        EXPECT_EQ(a.status, StepStatus::Passed) << a.reason;
        EXPECT_EQ(b.status, StepStatus::Passed) << b.reason;
        std::size_t compared = 0;
        for (const auto& [name, value] : a.report.metrics) {
            if (measured(name)) {
                continue;
            }
            ASSERT_TRUE(b.report.metrics.contains(name)) << name;
            EXPECT_EQ(b.report.metrics.at(name), value) << name;
            ++compared;
        }
        if (a.id == "smoke" || a.id == "precision") {
            EXPECT_GT(compared, 2u);
            EXPECT_EQ(a.report.summary, b.report.summary); // tokens, verdicts, KL, end to end
        }
    }
    // The streamed runs read the weights a layer at a time, and the step says so.
    const auto& perf = step(*streamed, "performance").report;
    ASSERT_TRUE(perf.metrics.contains("stream_bytes_read"));
    EXPECT_GT(perf.metrics.at("stream_bytes_read"), 0.0);
    EXPECT_NE(perf.summary.find("streamed"), std::string::npos) << perf.summary;
    EXPECT_FALSE(step(*whole, "performance").report.metrics.contains("stream_bytes_read"));
    EXPECT_EQ(validationRunRecord(*streamed, {}).info.status, history::RunStatus::Ok);
}

// The serving step cannot stream: its skip names why (the server keeps every weight resident,
// and its answers are checked against a whole-model reference).
TEST(Day0Steps, StreamedServingStepSaysWhyItCannotStream)
{
    Progress progress;
    auto o = kimi("streamed_serve");
    o.stream = true;
    o.serve = true;
    auto v = runValidation(o, {}, progress, {});
    ASSERT_TRUE(v.ok()) << v.error().message;
    const auto& serving = step(*v, kServingStepId);
    EXPECT_EQ(serving.status, StepStatus::Skipped);
    EXPECT_NE(serving.reason.find("keeps every weight resident"), std::string::npos)
        << serving.reason;
    EXPECT_NE(serving.reason.find("no layer can be released after it runs"), std::string::npos)
        << serving.reason;
    EXPECT_EQ(step(*v, "multi_rank").status, StepStatus::Passed) << step(*v, "multi_rank").reason;
}

TEST(Day0Steps, WhatAStreamedValidationCannotRunIsRefusedBeforeAnyStep)
{
    Progress progress;
    auto o = kimi("refused");
    o.streamOptions.memoryBudget = 1 << 30;
    auto noStream = runValidation(o, {}, progress, {});
    ASSERT_FALSE(noStream.ok());
    EXPECT_NE(noStream.error().message.find("--stream"), std::string::npos);
    o = kimi("refused");
    o.model = "qwen3-next-80b-a3b"; // Gated DeltaNet layers: not a streamed family
    o.stream = true;
    auto family = runValidation(o, {}, progress, {});
    ASSERT_FALSE(family.ok());
    EXPECT_NE(family.error().message.find("--stream"), std::string::npos) << family.error().message;
    EXPECT_FALSE(fs::exists(o.work / "shrunk")) << "refused before the weights step";
}

TEST(Records, ComparisonLayerMetricsKeepVerdictsAndOwnError)
{
    numerics::DumpComparison c;
    numerics::CaptureComparison row;
    row.name = "model.layers.3.mlp";
    row.metrics = numerics::ErrorMetrics {};
    row.metrics->relL2 = 0.02;
    row.own = numerics::ErrorMetrics {};
    row.own->relL2 = 0.004;
    row.verdict.status = numerics::VerdictStatus::Fail;
    row.verdict.floor = 0.002;
    row.verdict.floorRatio = 10.0;
    c.rows.push_back(row);
    c.failCount = 1;
    c.firstDivergence = 0;
    const auto layers = actions::comparisonLayerMetrics(c);
    ASSERT_TRUE(layers.find("model.layers.3.mlp", "own_rel_l2").has_value());
    EXPECT_EQ(layers.row(*layers.find("model.layers.3.mlp", "verdict")).value, 2.0);
    EXPECT_EQ(layers.row(*layers.find("model.layers.3.mlp", "rel_l2")).layer, 3);
    history::RunRecord record(history::RunKind::Compare);
    actions::addComparison(record, c);
    EXPECT_EQ(record.info.status, history::RunStatus::Failed);
    ASSERT_NE(record.findProperty("first_divergence"), nullptr);
    EXPECT_EQ(record.findProperty("first_divergence")->value, "model.layers.3.mlp");
}
