#include "pipeline/pipeline.h"
#include "pipeline/report.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::pipeline;

namespace {

Step passing(const std::string& id, std::vector<std::string> needs = {})
{
    return { id, "Step " + id, std::move(needs), [id](StepContext& ctx) -> Result<StepReport> {
                ctx.log("ran " + id);
                StepReport report;
                report.summary = id + " ok";
                report.metrics["value"] = 1.5;
                return report;
            } };
}

} // namespace

TEST(Pipeline, SkipsStepsWhoseNeedsFailedAndSetsExitCode)
{
    std::vector<Step> steps { passing("verify"),
        { "shard", "Shard", { "verify" },
            [](StepContext&) -> Result<StepReport> {
                return Error::checkFailed(
                    "tensor 'lm_head.weight' reassembled with 3 differing bytes");
            } },
        passing("smoke", { "shard" }), passing("report") };
    Progress progress;
    std::vector<std::string> started;
    PipelineObserver observer;
    observer.stepStarted = [&](const StepRecord& r) { started.push_back(r.id); };
    auto result = runPipeline("day0 validate test", steps, progress, {}, observer);
    ASSERT_EQ(result.steps.size(), 4u);
    EXPECT_EQ(result.steps[0].status, StepStatus::Passed);
    EXPECT_EQ(result.steps[0].log, std::vector<std::string> { "ran verify" });
    EXPECT_EQ(result.steps[1].status, StepStatus::Failed);
    EXPECT_EQ(result.steps[2].status, StepStatus::Skipped);
    EXPECT_EQ(result.steps[2].reason, "needs shard to pass first");
    EXPECT_EQ(result.steps[3].status, StepStatus::Passed);
    EXPECT_EQ(started, (std::vector<std::string> { "verify", "shard", "report" }));
    EXPECT_FALSE(result.passed());
    EXPECT_EQ(result.exitCode(), 1);
    EXPECT_DOUBLE_EQ(progress.fraction(), 1.0);
}

TEST(Pipeline, ErrorsAndExceptionsGiveExitTwoAndCancelSkipsTheRest)
{
    std::vector<Step> steps {
        { "a", "A", {},
            [](StepContext&) -> Result<StepReport> { throw std::runtime_error("boom"); } },
        passing("b")
    };
    Progress progress;
    auto result = runPipeline("p", steps, progress, {});
    EXPECT_EQ(result.steps[0].status, StepStatus::Error);
    EXPECT_EQ(result.steps[0].reason, "step threw: boom");
    EXPECT_EQ(result.exitCode(), 2);

    std::stop_source source;
    std::vector<Step> cancelling { { "a", "A", {},
                                       [&](StepContext&) -> Result<StepReport> {
                                           source.request_stop();
                                           return StepReport {};
                                       } },
        passing("b") };
    auto cancelled = runPipeline("p", cancelling, progress, source.get_token());
    EXPECT_TRUE(cancelled.cancelled);
    EXPECT_EQ(cancelled.steps[1].reason, "cancelled");
    EXPECT_EQ(cancelled.exitCode(), 1);
}

TEST(Report, JUnitHasOneCasePerStepWithEscapedReasons)
{
    std::vector<Step> steps { passing("verify"),
        { "precision", "Precision", {}, [](StepContext&) -> Result<StepReport> {
             return Error::checkFailed("layer 7 <mlp> error 3.1× floor & above \"tolerance\"");
         } } };
    Progress progress;
    auto result = runPipeline("suite", steps, progress, {});
    const auto xml
        = toJUnitXml(result, { "kimi-k2", "tp=8", "bf16", "0.1.0", "2026-11-29T00:00:00Z" });
    EXPECT_NE(xml.find("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\""), std::string::npos)
        << xml;
    EXPECT_NE(xml.find("<testcase classname=\"day0.validate\" name=\"verify\""), std::string::npos);
    EXPECT_NE(xml.find("<failure message=\"layer 7 &lt;mlp&gt; error 3.1× floor &amp; above "
                       "&quot;tolerance&quot;\"/>"),
        std::string::npos)
        << xml;
    EXPECT_NE(xml.find("<property name=\"model\" value=\"kimi-k2\"/>"), std::string::npos);
    const auto json = toJson(result, {});
    EXPECT_EQ(json["steps"][1]["status"], "failed");
    EXPECT_EQ(json["exit_code"], 1);
    EXPECT_EQ(json["steps"][0]["metrics"]["value"], 1.5);
}

TEST(Report, HtmlIsSelfContainedWithFigures)
{
    Progress progress;
    auto result = runPipeline("suite", { passing("verify") }, progress, {});
    const auto html = toHtml(result, ReportHeader { .model = "kimi-k2" },
        { { "Error vs depth", "image/png", std::string("\x89PNG", 4) } });
    EXPECT_NE(html.find("<span class=\"verdict ok\">PASSED</span>"), std::string::npos);
    EXPECT_NE(html.find("src=\"data:image/png;base64,iVBORw==\""), std::string::npos) << html;
    EXPECT_EQ(html.find("http"), std::string::npos); // nothing fetched from elsewhere
}

TEST(Report, Base64MatchesRfc4648Vectors)
{
    EXPECT_EQ(base64(""), "");
    EXPECT_EQ(base64("f"), "Zg==");
    EXPECT_EQ(base64("fo"), "Zm8=");
    EXPECT_EQ(base64("foo"), "Zm9v");
    EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
}

TEST(Pipeline, AFailedStepKeepsItsPartialReport)
{
    std::vector<Step> steps { { "check", "Check", {}, [](StepContext& ctx) -> Result<StepReport> {
                                   ctx.partial->details.push_back("tensor 'w' differs");
                                   ctx.partial->metrics["mismatches"] = 1;
                                   return Error::checkFailed("1 tensor differs");
                               } } };
    Progress progress;
    const auto result = runPipeline("t", steps, progress, {});
    ASSERT_EQ(result.steps.size(), 1u);
    EXPECT_EQ(result.steps[0].status, StepStatus::Failed);
    EXPECT_EQ(result.steps[0].report.details, std::vector<std::string> { "tensor 'w' differs" });
    EXPECT_EQ(result.steps[0].report.metrics.at("mismatches"), 1.0);
}
