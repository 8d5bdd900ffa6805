#include "profile/chrome_exporter.h"
#include "profile/kernel_stats.h"
#include "profile_test_util.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace day0::profile {
namespace {

namespace fs = std::filesystem;
using test::dataFile;
using test::importOrFail;

std::string toJson(const Trace& t)
{
    std::string text;
    Progress progress;
    auto r = writeChromeJson(t,
        [&](std::string_view piece) -> Result<void> {
            text.append(piece);
            return success();
        },
        progress, {});
    EXPECT_TRUE(r.ok());
    return text;
}

void expectSameTrace(const Trace& a, const Trace& b)
{
    const auto ca = a.counts();
    const auto cb = b.counts();
    EXPECT_EQ(ca.slices, cb.slices);
    EXPECT_EQ(ca.flows, cb.flows);
    EXPECT_EQ(ca.instants, cb.instants);
    EXPECT_EQ(ca.counters, cb.counters);
    EXPECT_EQ(ca.tracks, cb.tracks);
    for (int c = 0; c < kCategoryCount; ++c) {
        EXPECT_EQ(ca.byCategory[c], cb.byCategory[c]) << categoryName(Category(c));
    }
    EXPECT_EQ(a.timeRange(), b.timeRange());
    EXPECT_EQ(a.ranks(), b.ranks());
    const auto sa = kernelStatistics(a);
    const auto sb = kernelStatistics(b);
    ASSERT_EQ(sa.size(), sb.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(sa[i].name, sb[i].name);
        EXPECT_EQ(sa[i].total, sb[i].total);
        EXPECT_EQ(sa[i].count, sb[i].count);
    }
}

TEST(ChromeExport, RoundTripsEveryKindOfSource)
{
    const fs::path dir = fs::temp_directory_path() / fmt::format("day0_export_test_{}", ::getpid());
    fs::create_directories(dir);
    for (const char* file : { "hta_event_sync_multi_stream.json.gz",
             "kineto_2021_resnet50_cut.json.gz", "fuser_h200_report1.sqlite.gz",
             "synthetic_rank0.json", "hta_amd_mi250_rocm6_2.json.gz" }) {
        SCOPED_TRACE(file);
        const Trace original = importOrFail(dataFile(file));
        const std::string json = toJson(original);
        // Valid JSON in the object format Perfetto reads.
        const auto parsed = nlohmann::json::parse(json, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded());
        ASSERT_TRUE(parsed.contains("traceEvents"));
        ASSERT_TRUE(parsed["traceEvents"].is_array());
        for (const auto& e : parsed["traceEvents"]) {
            ASSERT_TRUE(e.contains("ph"));
            ASSERT_TRUE(e["pid"].is_number_integer());
        }
        const fs::path out = dir / (std::string(file) + ".out.json.gz");
        Progress progress;
        ASSERT_TRUE(exportChromeJson(original, out, progress, {}).ok());
        const Trace back = importOrFail(out);
        expectSameTrace(original, back);
        EXPECT_TRUE(back.warnings().empty());
    }
    fs::remove_all(dir);
}

TEST(ChromeExport, MultiRankKeepsRanksApart)
{
    Progress progress;
    auto r = importTraces(
        { dataFile("synthetic_rank0.json"), dataFile("synthetic_rank1.json") }, {}, progress, {});
    ASSERT_TRUE(r.ok());
    const auto parsed = nlohmann::json::parse(toJson(*r));
    std::set<std::string> processNames;
    for (const auto& e : parsed["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "process_name") {
            processNames.insert(e["args"]["name"].get<std::string>());
        }
    }
    EXPECT_TRUE(processNames.count("rank 0: GPU 0"));
    EXPECT_TRUE(processNames.count("rank 1: GPU 0"));
}

TEST(ChromeExport, EscapesStrings)
{
    std::string out;
    appendJsonString(out, std::string("a\"b\\c\n\x01") + "\xff" + "é");
    EXPECT_EQ(out, "\"a\\\"b\\\\c\\u000a\\u0001\xEF\xBF\xBD\xC3\xA9\"");
}

TEST(ChromeExport, UnwritablePathIsAnError)
{
    Progress progress;
    const Trace t = importOrFail(dataFile("synthetic_rank0.json"));
    auto r = exportChromeJson(t, "/nonexistent-dir/out.json", progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("out.json"), std::string::npos);
}

} // namespace
} // namespace day0::profile
