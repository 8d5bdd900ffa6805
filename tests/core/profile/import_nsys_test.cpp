#include "profile_test_util.h"

#include <set>

namespace day0::profile {
namespace {

using test::byCat;
using test::dataFile;
using test::importOrFail;

struct Expected {
    const char* file;
    std::size_t kernels, memcpy, memset, runtime, sync, nvtx;
    std::size_t flows;
    std::size_t tracks;
    const char* gpu;
};

// SOURCES.md B1, B3, B4 (row counts per table checked with the sqlite3 CLI; flows are GPU rows
// whose (process, correlationId) matches a CUPTI_ACTIVITY_KIND_RUNTIME row).
const Expected kFiles[] = {
    { "fuser_h200_report1.sqlite.gz", 19, 1, 1, 968, 1, 652, 22, 3, "NVIDIA H200" },
    { "testcuda_rtx4060ti_report1.sqlite.gz", 4, 12, 0, 44, 1, 0, 17, 6,
        "NVIDIA GeForce RTX 4060 Ti" },
    { "kernellib_rtxa4500_report2.sqlite.gz", 1, 227, 0, 6, 1, 0, 2, 4, "NVIDIA RTX A4500" },
};

TEST(NsysImport, ReferenceExportsHaveTheirRowCounts)
{
    for (const auto& e : kFiles) {
        SCOPED_TRACE(e.file);
        const Trace t = importOrFail(dataFile(e.file));
        EXPECT_EQ(byCat(t, Category::Kernel), e.kernels);
        EXPECT_EQ(byCat(t, Category::Memcpy), e.memcpy);
        EXPECT_EQ(byCat(t, Category::Memset), e.memset);
        EXPECT_EQ(byCat(t, Category::Runtime), e.runtime);
        EXPECT_EQ(byCat(t, Category::Sync), e.sync);
        EXPECT_EQ(byCat(t, Category::Annotation), e.nvtx);
        EXPECT_EQ(t.counts().slices, e.kernels + e.memcpy + e.memset + e.runtime + e.sync + e.nvtx);
        EXPECT_EQ(t.flowCount(), e.flows);
        EXPECT_EQ(t.counts().tracks, e.tracks);
        ASSERT_EQ(t.devices().size(), 1u);
        EXPECT_EQ(t.devices()[0].name, e.gpu);
        EXPECT_EQ(t.sources()[0].format, "nsys");
        EXPECT_TRUE(t.warnings().empty()) << t.warnings().front();
    }
}

TEST(NsysImport, PlainSqliteFileImportsToo)
{
    const auto shared = test::sharedTraces();
    if (!shared) {
        GTEST_SKIP() << "shared reference traces not present (set DAY0_SHARED_DIR)";
    }
    for (const char* f : { "fuser_h200_report1.sqlite", "testcuda_rtx4060ti_report1.sqlite",
             "kernellib_rtxa4500_report2.sqlite" }) {
        const Trace plain = importOrFail(*shared / "nsys_sqlite" / f);
        const Trace packed = importOrFail(dataFile(std::string(f) + ".gz"));
        EXPECT_EQ(plain.counts().slices, packed.counts().slices);
        EXPECT_EQ(plain.flowCount(), packed.flowCount());
    }
}

TEST(NsysImport, NamesTimesAndLaunchFlows)
{
    const Trace t = importOrFail(dataFile("fuser_h200_report1.sqlite.gz"));
    // Session start 1733877925987393218 ns + the first kernel's start 770742793.
    const std::int64_t firstKernel = 1733877925987393218ll + 770742793ll;
    bool found = false;
    std::set<std::string> memcpyNames;
    std::set<std::string> apiNames;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        if (t.sliceCategory(i) == Category::Kernel && t.sliceStart(i) == firstKernel) {
            found = true;
            EXPECT_EQ(t.sliceDuration(i), 770783434 - 770742793);
            EXPECT_EQ(t.sliceArg(i, "grid")->text, "[1056, 1, 1]");
            EXPECT_EQ(t.sliceArg(i, "registers per thread")->intValue, 40);
            const auto in = t.flowsTo(i);
            ASSERT_EQ(in.size(), 1u);
            EXPECT_EQ(t.sliceNameText(t.flowFrom(in[0])), "cudaLaunchKernel");
        }
        if (t.sliceCategory(i) == Category::Memcpy) {
            memcpyNames.emplace(t.sliceNameText(i));
        }
        if (t.sliceCategory(i) == Category::Runtime) {
            apiNames.emplace(t.sliceNameText(i));
        }
    }
    EXPECT_TRUE(found);
    EXPECT_EQ(memcpyNames, (std::set<std::string> { "Memcpy DtoH (Device -> Pinned)" }));
    // Versioned API names lose their suffix (cudaLaunchKernel_v7000 → cudaLaunchKernel).
    EXPECT_TRUE(apiNames.count("cudaLaunchKernel"));
    for (const auto& n : apiNames) {
        EXPECT_EQ(n.find("_v7000"), std::string::npos) << n;
    }
    // NVTX ranges sit on their own lane and nest.
    bool nvtx = false;
    for (const auto& track : t.tracks()) {
        if (track.lane == Lane::Nvtx) {
            nvtx = true;
            EXPECT_GT(track.maxDepth, 0);
            EXPECT_EQ(track.processName, "test_matmul");
        }
    }
    EXPECT_TRUE(nvtx);
}

TEST(NsysImport, NoUserOrHostNamesAreStored)
{
    for (const char* f :
        { "testcuda_rtx4060ti_report1.sqlite.gz", "kernellib_rtxa4500_report2.sqlite.gz" }) {
        const Trace t = importOrFail(dataFile(f));
        for (std::size_t s = 0; s < t.strings().size(); ++s) {
            // Never print the text itself: it is exactly what must not leak.
            const auto text = t.strings().view(StringId(s));
            EXPECT_EQ(text.find("hangyudu"), std::string_view::npos) << "string #" << s;
            EXPECT_EQ(text.find("/home/user"), std::string_view::npos) << "string #" << s;
        }
        for (const auto& track : t.tracks()) {
            EXPECT_EQ(track.processName.find('/'), std::string::npos);
        }
    }
}

} // namespace
} // namespace day0::profile
