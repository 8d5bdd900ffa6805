// The trace import action (actions::importTraceFiles): the trace handed over before the record
// is made, the record's files as absolute paths, errors naming the file.
#include "actions/trace_import.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace day0::actions {
namespace {

namespace fs = std::filesystem;

const fs::path kTrace = fs::path(DAY0_TEST_DATA_DIR) / "profile" / "hta_simple_add_rank0.json.gz";

TEST(TraceImportAction, TheTraceArrivesBeforeTheRecordAndIsTheSameTrace)
{
    Progress progress;
    std::shared_ptr<const profile::Trace> early;
    auto imported = importTraceFiles({ kTrace }, {}, progress, {},
        [&early](const std::shared_ptr<const profile::Trace>& trace) { early = trace; });
    ASSERT_TRUE(imported.ok()) << imported.error().message;
    ASSERT_NE(early, nullptr);
    EXPECT_EQ(early, imported->trace);
    EXPECT_GT(imported->trace->counts().slices, 0);
    const auto& r = imported->record;
    EXPECT_EQ(r.info.kind, history::RunKind::Trace);
    ASSERT_NE(r.findProperty("files"), nullptr);
    EXPECT_EQ(r.findProperty("files")->value, fs::absolute(kTrace).lexically_normal().string());
    EXPECT_EQ(r.findMetric("slices")->value, double(imported->trace->counts().slices));
    ASSERT_EQ(r.artifacts.size(), 1U);
}

TEST(TraceImportAction, ARelativePathIsRecordedAbsolute)
{
    const auto cwd = fs::current_path();
    fs::current_path(kTrace.parent_path());
    Progress progress;
    auto imported = importTraceFiles({ kTrace.filename() }, {}, progress, {});
    fs::current_path(cwd);
    ASSERT_TRUE(imported.ok()) << imported.error().message;
    EXPECT_EQ(imported->record.findProperty("files")->value,
        fs::absolute(kTrace).lexically_normal().string());
}

TEST(TraceImportAction, AMissingFileIsNamedAndNothingIsHandedOver)
{
    Progress progress;
    bool called = false;
    const fs::path missing = fs::path(::testing::TempDir()) / "no-such-trace.json";
    auto imported = importTraceFiles(
        { missing }, {}, progress, {}, [&called](const auto&) { called = true; });
    ASSERT_FALSE(imported.ok());
    EXPECT_NE(imported.error().message.find("no-such-trace.json"), std::string::npos);
    EXPECT_FALSE(called);
}

TEST(TraceImportAction, ACancelledImportHandsNothingOver)
{
    std::stop_source source;
    source.request_stop();
    Progress progress;
    bool called = false;
    auto imported = importTraceFiles(
        { kTrace }, {}, progress, source.get_token(), [&called](const auto&) { called = true; });
    ASSERT_FALSE(imported.ok());
    EXPECT_EQ(imported.error().code, ErrorCode::Cancelled);
    EXPECT_FALSE(called);
}

} // namespace
} // namespace day0::actions
