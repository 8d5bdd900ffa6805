// The run and compare actions (actions::runCheckpoint, actions::compareDumpFolders) on their own,
// as `day0 run`, `day0 compare` and the precision panel call them.
#include "actions/compare.h"
#include "actions/run.h"
#include "exec/precision.h"
#include "shrunk.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace day0::actions {
namespace {

namespace fs = std::filesystem;

fs::path scratch() { return fs::path(::testing::TempDir()) / "compare_action_test"; }

fs::path shrunkLlama() { return test::shrunk("llama-3.1-8b", "llama"); }

RunRequest runOf(const std::string& precision, const fs::path& dump)
{
    RunRequest r;
    r.checkpoint = shrunkLlama().string();
    auto plan = exec::parsePrecisionPlan(precision, {}, {});
    EXPECT_TRUE(plan.ok()) << plan.error().message;
    r.options.target = *plan;
    r.options.promptIds = { 1, 2, 3 };
    r.options.newTokens = 2;
    r.dump = dump;
    return r;
}

TEST(RunAction, AReferenceRunIsComparedJudgedAndRecordedWithItsDump)
{
    auto request = runOf("bf16", scratch() / "with-reference");
    request.options.reference = exec::PrecisionMode::F32;
    request.options.inject = true;
    Progress progress;
    auto run = runCheckpoint(request, progress, {});
    ASSERT_TRUE(run.ok()) << run.error().message;
    ASSERT_TRUE(run->result.comparison);
    ASSERT_TRUE(run->result.injected);
    ASSERT_NE(run->table, nullptr) << "judged against a tolerance table";
    EXPECT_EQ(run->result.target.generated.size(), 2U);
    EXPECT_EQ(run->record.info.kind, history::RunKind::Run);
    EXPECT_EQ(run->record.info.precision, "bf16");
    EXPECT_NE(run->record.findMetric("compared_captures"), nullptr);
    ASSERT_EQ(run->record.artifacts.size(), 1U);
    EXPECT_EQ(run->record.artifacts[0].kind, "dump");
    EXPECT_TRUE(fs::exists(request.dump / "target" / "dump.json"));
    EXPECT_TRUE(fs::exists(request.dump / "target-inject" / "dump.json"));
}

TEST(RunAction, ABundledNameWithoutWeightsIsRefusedWithWhatToDo)
{
    RunRequest request = runOf("fp32", {});
    request.checkpoint = "llama-3.1-8b";
    Progress progress;
    auto run = runCheckpoint(request, progress, {});
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.error().message.find("day0 shrink"), std::string::npos) << run.error().message;
}

TEST(CompareAction, TwoDumpsOfTheSameRunAgreeAndTheInjectDumpBesideIsFound)
{
    Progress progress;
    const fs::path ref = scratch() / "ref";
    const fs::path tgt = scratch() / "tgt";
    ASSERT_TRUE(runCheckpoint(runOf("fp32", ref), progress, {}).ok());
    ASSERT_TRUE(runCheckpoint(runOf("bf16", tgt), progress, {}).ok());
    EXPECT_FALSE(injectDumpBeside(tgt));
    fs::create_directories(scratch() / "tgt-inject");
    ASSERT_TRUE(injectDumpBeside(tgt));
    EXPECT_EQ(*injectDumpBeside(tgt), scratch() / "tgt-inject");
    fs::remove_all(scratch() / "tgt-inject");

    CompareRequest same { ref, ref };
    auto self = compareDumpFolders(same, progress, {});
    ASSERT_TRUE(self.ok()) << self.error().message;
    EXPECT_EQ(self->comparison.failCount, 0);
    EXPECT_EQ(comparisonExitCode(self->comparison), 0);
    EXPECT_GT(self->comparison.rows.size(), 5U);

    CompareRequest request { ref, tgt };
    auto cmp = compareDumpFolders(request, progress, {});
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    EXPECT_EQ(cmp->record.info.kind, history::RunKind::Compare);
    ASSERT_TRUE(cmp->record.info.duration);
    EXPECT_GT(cmp->record.info.duration->value, 0.0);
    EXPECT_NE(cmp->reference, nullptr);
    EXPECT_NE(cmp->target, nullptr);
    EXPECT_EQ(cmp->local, nullptr);
    EXPECT_EQ(
        cmp->record.findMetric("compared_captures")->value, double(cmp->comparison.rows.size()));
}

TEST(CompareAction, ALongComparisonIsHandedOverAsItGrows)
{
    Progress progress;
    const fs::path ref = scratch() / "ref";
    const fs::path tgt = scratch() / "tgt";
    ASSERT_TRUE(runCheckpoint(runOf("fp32", ref), progress, {}).ok());
    ASSERT_TRUE(runCheckpoint(runOf("bf16", tgt), progress, {}).ok());
    std::vector<std::vector<std::string>> stages;
    auto cmp = compareDumpFolders({ ref, tgt }, progress, {}, [&stages](ComparisonSoFar&& sofar) {
        EXPECT_NE(sofar.reference, nullptr);
        EXPECT_NE(sofar.table, nullptr);
        EXPECT_FALSE(sofar.comparison.firstDivergence) << "decided at the end";
        std::vector<std::string> names;
        for (const auto& row : sofar.comparison.rows) {
            names.push_back(row.name);
        }
        stages.push_back(std::move(names));
    });
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    ASSERT_GE(stages.size(), 5U);
    EXPECT_LE(stages.size(), 10U);
    std::size_t previous = 0;
    for (const auto& names : stages) {
        EXPECT_GT(names.size(), previous);
        previous = names.size();
        for (std::size_t i = 0; i < names.size(); ++i) {
            EXPECT_EQ(names[i], cmp->comparison.rows[i].name) << "a prefix of the final rows";
        }
    }
}

TEST(CompareAction, EachBadInputNamesWhatIsWrong)
{
    Progress progress;
    CompareRequest missing { scratch() / "no-such-dump", scratch() / "no-such-dump" };
    auto r = compareDumpFolders(missing, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("reference dump"), std::string::npos) << r.error().message;

    CompareRequest badPrecision { scratch() / "ref", scratch() / "ref" };
    badPrecision.precision = "fp7";
    r = compareDumpFolders(badPrecision, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("fp7"), std::string::npos);

    CompareRequest badTable { scratch() / "ref", scratch() / "ref" };
    badTable.tolerances = "no-such-table";
    r = compareDumpFolders(badTable, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no-such-table"), std::string::npos);
}

} // namespace
} // namespace day0::actions
