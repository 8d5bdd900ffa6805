#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

std::string data(const std::string& name)
{
    return std::string(DAY0_TEST_DATA_DIR) + "/profile/" + name;
}

TEST(TraceCli, ImportJsonHasTheDocumentedShape)
{
    const auto r = runDay0({ "trace", "import", data("hta_trace_compare_base.json.gz"), "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["slices"], 33);
    EXPECT_EQ(j["flows"], 0);
    EXPECT_EQ(j["instants"], 0);
    EXPECT_EQ(j["counters"], 0);
    EXPECT_EQ(j["tracks"], 4);
    EXPECT_EQ(j["ranks"], nlohmann::json::array({ 1 }));
    const auto& c = j["by_category"];
    EXPECT_EQ(c["kernel"], 6);
    EXPECT_EQ(c["memcpy"], 6);
    EXPECT_EQ(c["memset"], 6);
    EXPECT_EQ(c["runtime"], 5);
    EXPECT_EQ(c["cpu_op"], 6);
    EXPECT_EQ(c["communication"], 0);
    EXPECT_EQ(c["annotation"], 4);
    EXPECT_EQ(c["sync"], 0);
    EXPECT_EQ(c["other"], 0);
    EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(TraceCli, ImportNsysExportAndJsonBeforeTheVerb)
{
    const auto r = runDay0({ "--json", "trace", "import", data("fuser_h200_report1.sqlite.gz") });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["slices"], 1642);
    EXPECT_EQ(j["flows"], 22);
    EXPECT_EQ(j["by_category"]["kernel"], 19);
    EXPECT_EQ(j["by_category"]["runtime"], 968);
    EXPECT_EQ(j["by_category"]["annotation"], 652);
    EXPECT_EQ(j["devices"][0]["name"], "NVIDIA H200");
}

TEST(TraceCli, ImportTextIsATable)
{
    const auto r = runDay0({ "trace", "import", data("hta_event_sync_multi_stream.json.gz") });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("57 slices, 8 flows, 2 instants"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stream 24"), std::string::npos);
    EXPECT_NE(r.out.find("rank"), std::string::npos);
}

TEST(TraceCli, MultiRankStatsSuggestsButDoesNotApplyAlignment)
{
    const auto r = runDay0(
        { "trace", "stats", data("synthetic_rank0.json"), data("synthetic_rank1.json"), "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    ASSERT_EQ(j["breakdown"].size(), 2u);
    EXPECT_EQ(j["breakdown"][0]["compute_ns"], 250000);
    EXPECT_EQ(j["breakdown"][0]["idle_ns"], 400000);
    EXPECT_NEAR(j["breakdown"][0]["overlap_percent"].get<double>(), 100.0 * 50 / 270, 1e-9);
    ASSERT_EQ(j["alignment"].size(), 1u);
    EXPECT_EQ(j["alignment"][0]["offset_ns"], -5000000);
    EXPECT_EQ(j["alignment_applied"], false);
    EXPECT_EQ(j["collectives"].size(), 6u);

    const auto text
        = runDay0({ "trace", "stats", data("synthetic_rank0.json"), data("synthetic_rank1.json") });
    ASSERT_EQ(text.exitCode, 0);
    EXPECT_NE(text.out.find("not applied"), std::string::npos);
    EXPECT_NE(text.out.find("ncclSymkDevKernel_*"), std::string::npos);
    const auto applied = runDay0({ "trace", "stats", data("synthetic_rank0.json"),
        data("synthetic_rank1.json"), "--apply-alignment", "--json" });
    EXPECT_EQ(applied.json()["alignment_applied"], true);
}

TEST(TraceCli, DiffListsAddedOps)
{
    const auto r = runDay0({ "trace", "diff", data("hta_trace_compare_base.json.gz"),
        data("hta_trace_compare_test.json.gz"), "--cpu", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["summary"]["added"], 3);
    EXPECT_EQ(j["summary"]["removed"], 0);
    EXPECT_EQ(j["rows"][0]["status"], "added");
    const auto text = runDay0({ "trace", "diff", data("synthetic_rank0.json"),
        data("synthetic_rank1.json"), "--threshold", "1" });
    EXPECT_NE(text.out.find("slower"), std::string::npos) << text.out;
    const auto one = runDay0({ "trace", "diff", data("synthetic_rank0.json") });
    EXPECT_EQ(one.exitCode, 2);
}

TEST(TraceCli, ExportThenImportAgain)
{
    const auto dir = scratchDir("trace_export");
    const auto out = dir + "/out.json";
    const auto r = runDay0(
        { "trace", "export", data("hta_simple_add_rank0.json.gz"), "--chrome", out, "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["slices"], 838);
    const auto back = runDay0({ "trace", "import", out, "--json" });
    ASSERT_EQ(back.exitCode, 0) << back.err;
    EXPECT_EQ(back.json()["slices"], 838);
    EXPECT_EQ(back.json()["flows"], 139);
    EXPECT_EQ(back.json()["by_category"], r.json()["by_category"]);
    const auto missing = runDay0({ "trace", "export", data("hta_simple_add_rank0.json.gz") });
    EXPECT_EQ(missing.exitCode, 2);
}

TEST(TraceCli, BadInputExitsTwoNamingTheFile)
{
    const auto dir = scratchDir("trace_bad");
    const std::string bad = dir + "/broken.json";
    std::ofstream(bad) << "this is not json";
    for (const auto& file :
        { bad, dir + "/absent.json.gz", data("fuser_h200_report1_head.nsys-rep") }) {
        for (const char* verb : { "import", "stats" }) {
            const auto r = runDay0({ "trace", verb, file });
            EXPECT_EQ(r.exitCode, 2) << verb << " " << file;
            EXPECT_NE(
                r.err.find(std::filesystem::path(file).filename().string()), std::string::npos)
                << r.err;
            EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
        }
    }
}

TEST(TraceCli, NoUserOrHostNameIsPrinted)
{
    for (const char* verb : { "import", "stats" }) {
        for (const char* file :
            { "testcuda_rtx4060ti_report1.sqlite.gz", "kineto_2021_resnet50_cut.json.gz" }) {
            const auto text = runDay0({ "trace", verb, data(file) });
            const auto json = runDay0({ "trace", verb, data(file), "--json" });
            for (const auto* r : { &text, &json }) {
                EXPECT_EQ(r->exitCode, 0);
                for (const char* secret : { "hangyudu", "yangu", "0x822a5b873" }) {
                    EXPECT_EQ(r->out.find(secret), std::string::npos) << verb << " " << file;
                    EXPECT_EQ(r->err.find(secret), std::string::npos) << verb << " " << file;
                }
            }
        }
    }
}

} // namespace
