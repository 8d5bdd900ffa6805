#include "profile/chrome_importer.h"
#include "profile_test_util.h"

#include <set>

namespace day0::profile {
namespace {

using test::byCat;
using test::dataFile;
using test::importOrFail;

struct Expected {
    const char* file;
    std::size_t slices;
    std::size_t instants;
    std::size_t flows;
    std::size_t tracks;
    std::int32_t rank;
    // kernel, communication, memcpy, memset, runtime, cpu_op, annotation, sync, other
    std::size_t byCategory[9];
};

// Counts from SOURCES.md (Chrome 'X' events by category; NCCL kernels are "communication"),
// 'i' events, flow start/finish pairs and distinct pid/tid pairs, checked with Python's json.
const Expected kSmallFiles[] = {
    { "hta_trace_compare_base.json.gz", 33, 0, 0, 4, 1, { 6, 0, 6, 6, 5, 6, 4, 0, 0 } },
    { "hta_trace_compare_test.json.gz", 34, 0, 0, 4, 1, { 5, 0, 6, 6, 5, 9, 3, 0, 0 } },
    { "hta_event_sync_multi_stream.json.gz", 57, 2, 8, 8, 0, { 3, 0, 0, 3, 39, 6, 0, 5, 1 } },
    { "hta_simple_add_rank0.json.gz", 838, 2, 139, 7, 0, { 79, 0, 16, 3, 331, 359, 8, 41, 1 } },
    { "hta_sampled_rank-0.json.gz", 4811, 0, 0, 8, 0, { 1144, 10, 40, 10, 1204, 2329, 73, 0, 1 } },
    { "hta_sampled_rank-1.json.gz", 4676, 0, 0, 8, 1, { 1094, 10, 40, 10, 1154, 2302, 65, 0, 1 } },
    { "hta_amd_mi250_rocm6_2.json.gz", 113, 2, 20, 6, 0, { 14, 0, 2, 0, 21, 70, 5, 0, 1 } },
    { "hta_triton_example.json.gz", 8, 2, 1, 6, 0, { 1, 0, 0, 0, 2, 3, 1, 0, 1 } },
    { "kineto_2021_resnet50_cut.json.gz", 167, 53, 24, 2, 0, { 25, 0, 0, 0, 37, 105, 0, 0, 0 } },
};

void checkCounts(const Trace& t, const Expected& e)
{
    const auto c = t.counts();
    EXPECT_EQ(c.slices, e.slices);
    EXPECT_EQ(c.instants, e.instants);
    EXPECT_EQ(c.flows, e.flows);
    EXPECT_EQ(c.tracks, e.tracks);
    EXPECT_EQ(c.counters, 0u);
    const Category order[] = { Category::Kernel, Category::Communication, Category::Memcpy,
        Category::Memset, Category::Runtime, Category::CpuOp, Category::Annotation, Category::Sync,
        Category::Other };
    for (int i = 0; i < 9; ++i) {
        EXPECT_EQ(c.byCategory[std::size_t(order[i])], e.byCategory[i]) << categoryName(order[i]);
    }
    ASSERT_EQ(t.ranks().size(), 1u);
    EXPECT_EQ(t.ranks()[0], e.rank);
    EXPECT_TRUE(t.warnings().empty()) << t.warnings().front();
}

TEST(KinetoImport, SmallReferenceFilesHaveDocumentedCounts)
{
    for (const auto& e : kSmallFiles) {
        SCOPED_TRACE(e.file);
        checkCounts(importOrFail(dataFile(e.file)), e);
    }
}

TEST(KinetoImport, TimestampsKeepNanosecondsAndBase)
{
    // A10 writes float µs relative to baseTimeNanoseconds = 1735632360000000000; its first
    // cpu_op starts at ts 4203669604595.407.
    const Trace t = importOrFail(dataFile("hta_amd_mi250_rocm6_2.json.gz"));
    const std::int64_t expected = 1735632360000000000ll + 4203669604595407ll;
    bool found = false;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        found = found || t.sliceStart(i) == expected;
    }
    EXPECT_TRUE(found);
    // Integer epoch µs (A1): the first cpu_op aten::zeros at 1661938466265032 µs for 25 µs.
    const Trace a1 = importOrFail(dataFile("hta_trace_compare_base.json.gz"));
    const auto [t0, t1] = a1.timeRange();
    EXPECT_EQ(t0, 1661938466265032000ll);
    EXPECT_EQ(t1, 1661938467009791000ll + 582000);
}

TEST(KinetoImport, GpuTracksAreStreamsOfTheirDevice)
{
    const Trace t = importOrFail(dataFile("hta_event_sync_multi_stream.json.gz"));
    std::set<std::int64_t> streams;
    for (const auto& track : t.tracks()) {
        if (track.kind == TrackKind::Stream) {
            EXPECT_EQ(track.device, 0);
            streams.insert(track.tid);
        }
    }
    // Kernels and memsets on streams 20, 24, 28; device-wide syncs on tid -1.
    EXPECT_EQ(streams, (std::set<std::int64_t> { -1, 20, 24, 28 }));
    ASSERT_FALSE(t.devices().empty());
}

TEST(KinetoImport, LegacyStringTidsAndOldFlowNames)
{
    const Trace t = importOrFail(dataFile("kineto_2021_resnet50_cut.json.gz"));
    bool stream7 = false;
    for (const auto& track : t.tracks()) {
        if (track.kind == TrackKind::Stream) {
            stream7 = track.tid == 7 && track.name == "stream 7" && track.device == 0;
        }
    }
    EXPECT_TRUE(stream7);
    // Every "launch" flow goes from a Runtime call to the kernel with the same correlation id.
    ASSERT_EQ(t.flowCount(), 24u);
    for (std::size_t f = 0; f < t.flowCount(); ++f) {
        EXPECT_EQ(t.sliceCategory(t.flowFrom(f)), Category::Runtime);
        EXPECT_EQ(t.flowKind(f), FlowKind::Launch);
        EXPECT_EQ(t.sliceCorrelation(t.flowFrom(f)), t.sliceCorrelation(t.flowTo(f)));
    }
    // Lowercase "external id" lands in the External id column.
    std::size_t withExternal = 0;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        withExternal += t.sliceExternalId(i) != 0 ? 1 : 0;
    }
    EXPECT_GT(withExternal, 50u);
}

TEST(KinetoImport, CallStacksDoNotKeepUserNames)
{
    const Trace t = importOrFail(dataFile("kineto_2021_resnet50_cut.json.gz"));
    std::size_t stacks = 0;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        for (const auto& a : t.sliceArgs(i)) {
            EXPECT_EQ(a.text.find("/home/yangu"), std::string_view::npos);
            if (a.key == "Call stack") {
                ++stacks;
                EXPECT_NE(a.text.find("/home/<user>/"), std::string_view::npos);
            }
        }
    }
    EXPECT_GT(stacks, 0u);
    for (std::size_t s = 0; s < t.strings().size(); ++s) {
        EXPECT_EQ(t.strings().view(StringId(s)).find("yangu"), std::string_view::npos);
    }
}

TEST(KinetoImport, ArgsAreKept)
{
    const Trace t = importOrFail(dataFile("hta_event_sync_multi_stream.json.gz"));
    bool sawKernel = false;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        if (t.sliceCategory(i) != Category::Kernel) {
            continue;
        }
        sawKernel = true;
        EXPECT_NE(t.sliceCorrelation(i), 0u);
        const auto grid = t.sliceArg(i, "grid");
        ASSERT_TRUE(grid.has_value());
        EXPECT_EQ(grid->type, ArgType::Json);
        EXPECT_EQ(grid->text.front(), '[');
        EXPECT_TRUE(t.sliceArg(i, "stream").has_value());
        EXPECT_TRUE(t.sliceArg(i, "correlation").has_value());
    }
    EXPECT_TRUE(sawKernel);
}

TEST(KinetoImport, MultipleRanksMerge)
{
    Progress progress;
    auto r = importTraces(
        { dataFile("hta_sampled_rank-0.json.gz"), dataFile("hta_sampled_rank-1.json.gz") }, {},
        progress, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->ranks(), (std::vector<std::int32_t> { 0, 1 }));
    EXPECT_EQ(r->counts().slices, 4811u + 4676u);
    EXPECT_EQ(r->sources().size(), 2u);
    EXPECT_EQ(r->sources()[0].worldSize, 128);
    EXPECT_EQ(r->sources()[0].backend, "nccl");
    EXPECT_EQ(r->sources()[0].format, "kineto");
}

TEST(KinetoImport, RankOptionOverridesTheFile)
{
    ImportOptions options;
    options.rank = 5;
    const Trace t = importOrFail(dataFile("hta_trace_compare_base.json.gz"), options);
    EXPECT_EQ(t.ranks(), (std::vector<std::int32_t> { 5 }));
}

TEST(KinetoImport, ParsesMicrosecondText)
{
    std::int64_t ns = 0;
    ASSERT_TRUE(parseMicrosToNanos("1661203462598738", ns));
    EXPECT_EQ(ns, 1661203462598738000ll);
    ASSERT_TRUE(parseMicrosToNanos("4458676522690.655", ns));
    EXPECT_EQ(ns, 4458676522690655ll);
    ASSERT_TRUE(parseMicrosToNanos("1712195495519695.8", ns));
    EXPECT_EQ(ns, 1712195495519695800ll);
    ASSERT_TRUE(parseMicrosToNanos("156.7775", ns));
    EXPECT_EQ(ns, 156778);
    ASSERT_TRUE(parseMicrosToNanos("-2.5", ns));
    EXPECT_EQ(ns, -2500);
    ASSERT_TRUE(parseMicrosToNanos("1.5e3", ns));
    EXPECT_EQ(ns, 1500000);
    EXPECT_FALSE(parseMicrosToNanos("abc", ns));
    EXPECT_FALSE(parseMicrosToNanos("", ns));
}

struct LargeExpected {
    const char* file;
    std::size_t slices;
    std::size_t instants;
    std::size_t kernels; // compute kernels
    std::size_t collectives; // NCCL kernels
    std::size_t runtime;
    std::size_t cpuOps;
    std::int32_t rank;
};

// SOURCES.md: A5, A8, A9, A12, A13 (too large to copy into the repository).
const LargeExpected kLargeFiles[] = {
    { "hta_nccl_data_rank0_ws2.json.gz", 26933, 2, 2700 - 21, 21, 8740, 14346, 0 },
    { "hta_trace_diff_control.json.gz", 74937, 2, 8568 - 60, 60, 24692, 40506, 3 },
    { "hta_trace_diff_test.json.gz", 68324, 2, 9876 - 64, 64, 21167, 31236, 1 },
    { "hta_ns_resolution_rank-0.json.gz", 45420, 2, 4350, 0, 15329, 23910, 0 },
    { "kineto_tbplugin_resnet50_worker0_2021.pt.trace.json.gz", 44666, 12840, 8772, 0, 11923, 23646,
        0 },
};

TEST(KinetoImport, LargeReferenceFilesWhenAvailable)
{
    const auto shared = test::sharedTraces();
    if (!shared) {
        GTEST_SKIP() << "shared reference traces not present (set DAY0_SHARED_DIR)";
    }
    for (const auto& e : kLargeFiles) {
        SCOPED_TRACE(e.file);
        const Trace t = importOrFail(*shared / "kineto" / e.file);
        EXPECT_EQ(t.counts().slices, e.slices);
        EXPECT_EQ(t.counts().instants, e.instants);
        EXPECT_EQ(byCat(t, Category::Kernel), e.kernels);
        EXPECT_EQ(byCat(t, Category::Communication), e.collectives);
        EXPECT_EQ(byCat(t, Category::Runtime), e.runtime);
        EXPECT_EQ(byCat(t, Category::CpuOp), e.cpuOps);
        EXPECT_EQ(t.ranks(), (std::vector<std::int32_t> { e.rank }));
        EXPECT_TRUE(t.warnings().empty()) << t.warnings().front();
        EXPECT_GT(t.flowCount(), 0u);
    }
}

} // namespace
} // namespace day0::profile

namespace day0::profile {
namespace {

TEST(Import, CancellationIsReportedAsCancelled)
{
    std::stop_source stop;
    stop.request_stop();
    for (const char* file : { "hta_simple_add_rank0.json.gz", "fuser_h200_report1.sqlite.gz" }) {
        Progress progress;
        auto r = importTrace(test::dataFile(file), {}, progress, stop.get_token());
        ASSERT_FALSE(r.ok()) << file;
        EXPECT_EQ(r.error().code, ErrorCode::Cancelled) << file;
    }
}

TEST(Import, ProgressCountsTheWholeFile)
{
    Progress progress;
    auto r = importTrace(test::dataFile("hta_sampled_rank-0.json.gz"), {}, progress, {});
    ASSERT_TRUE(r.ok());
    EXPECT_GT(progress.total(), 0);
    EXPECT_EQ(progress.done(), progress.total());
}

} // namespace
} // namespace day0::profile
