// CUPTI activity records → trace model, on synthetic records (no GPU, no CUPTI).
#include "activity_converter.h"

#include <gtest/gtest.h>

namespace day0::cupti {
namespace {

using profile::Category;
using profile::Trace;

constexpr std::int64_t kOffset = 1'700'000'000'000'000'000; // CUPTI ns → Unix-epoch ns

ConvertOptions options()
{
    ConvertOptions o;
    o.clockOffsetNs = kOffset;
    o.rank = 3;
    o.processId = 4242;
    o.deviceNames[0] = "NVIDIA H200";
    return o;
}

ActivityRecord api(RecordKind kind, std::string name, std::uint64_t start, std::uint64_t end,
    std::uint32_t correlation)
{
    ActivityRecord r;
    r.kind = kind;
    r.name = std::move(name);
    r.start = start;
    r.end = end;
    r.correlation = correlation;
    r.process = 4242;
    r.thread = 17;
    return r;
}

ActivityRecord gpu(RecordKind kind, std::uint64_t start, std::uint64_t end,
    std::uint32_t correlation, std::uint32_t stream = 7)
{
    ActivityRecord r;
    r.kind = kind;
    r.start = start;
    r.end = end;
    r.correlation = correlation;
    r.stream = stream;
    return r;
}

std::optional<profile::SliceIndex> findSlice(const Trace& t, std::string_view name)
{
    for (profile::SliceIndex i = 0; i < t.sliceCount(); ++i) {
        if (t.sliceNameText(i) == name) {
            return i;
        }
    }
    return std::nullopt;
}

Trace convert(const std::vector<ActivityRecord>& records, std::size_t* dropped = nullptr)
{
    ActivityConverter c(options());
    for (const auto& r : records) {
        c.add(r);
    }
    if (dropped) {
        *dropped = c.dropped();
    }
    Progress p;
    auto t = c.finish(p, {});
    EXPECT_TRUE(t.ok());
    return std::move(*t);
}

TEST(CuptiConvert, KernelLaunchBecomesAFlowFromTheRuntimeCallWhateverTheOrder)
{
    auto k = gpu(RecordKind::Kernel, 2000, 5000, 11);
    k.name = "rmsNormKernel";
    k.grid[0] = 16;
    k.block[0] = 256;
    k.registers = 32;
    k.sharedBytes = 128;
    // The GPU buffer arrives before the API buffer, as CUPTI may deliver them.
    const Trace t = convert({ k, api(RecordKind::Runtime, "cudaLaunchKernel_v7000", 1000, 1500, 11),
        api(RecordKind::Driver, "cuLaunchKernel", 1100, 1400, 11) });
    const auto kernel = findSlice(t, "rmsNormKernel");
    const auto launch = findSlice(t, "cudaLaunchKernel");
    ASSERT_TRUE(kernel && launch);
    EXPECT_EQ(t.sliceCategory(*kernel), Category::Kernel);
    EXPECT_EQ(t.sliceStart(*kernel), kOffset + 2000);
    EXPECT_EQ(t.sliceEnd(*kernel), kOffset + 5000);
    EXPECT_EQ(t.sliceCorrelation(*kernel), 11u);
    EXPECT_EQ(t.sliceCategory(*launch), Category::Runtime);
    // One flow, from the runtime call (not the driver call under it).
    ASSERT_EQ(t.flowCount(), 1u);
    EXPECT_EQ(t.flowFrom(0), *launch);
    EXPECT_EQ(t.flowTo(0), *kernel);
    EXPECT_EQ(t.flowKind(0), profile::FlowKind::Launch);
    const auto& track = t.tracks()[t.sliceTrack(*kernel)];
    EXPECT_EQ(track.kind, profile::TrackKind::Stream);
    EXPECT_EQ(track.tid, 7);
    EXPECT_EQ(track.rank, 3);
    EXPECT_EQ(track.pid, 4242);
    EXPECT_EQ(track.processName, "GPU 0 (NVIDIA H200)");
    const auto grid = t.sliceArg(*kernel, "grid");
    ASSERT_TRUE(grid.has_value());
}

TEST(CuptiConvert, DriverCallsCarryTheFlowWhenThereIsNoRuntimeCall)
{
    auto k = gpu(RecordKind::Kernel, 2000, 3000, 5);
    k.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
    const Trace t = convert({ api(RecordKind::Driver, "cuLaunchKernelEx", 1000, 1200, 5), k });
    const auto kernel = findSlice(t, k.name);
    ASSERT_TRUE(kernel);
    EXPECT_EQ(t.sliceCategory(*kernel), Category::Communication);
    ASSERT_EQ(t.flowCount(), 1u);
    EXPECT_EQ(t.sliceNameText(t.flowFrom(0)), "cuLaunchKernelEx");
}

TEST(CuptiConvert, CopiesSetsAndSynchronisationAreNamedAsKinetoNamesThem)
{
    auto copy = gpu(RecordKind::Memcpy, 100, 300, 1);
    copy.copyKind = 1;
    copy.srcKind = 1;
    copy.dstKind = 3;
    copy.bytes = 4096;
    auto set = gpu(RecordKind::Memset, 400, 500, 2);
    set.memoryKind = 3;
    set.bytes = 64;
    auto sync = gpu(RecordKind::Sync, 600, 900, 3, kNoStream);
    sync.syncType = 4;
    const Trace t = convert(
        { copy, set, sync, api(RecordKind::Runtime, "cudaDeviceSynchronize_v3020", 590, 910, 3) });
    const auto c = findSlice(t, "Memcpy HtoD (Pageable -> Device)");
    const auto s = findSlice(t, "Memset (Device)");
    const auto y = findSlice(t, "Context Sync");
    ASSERT_TRUE(c && s && y);
    EXPECT_EQ(t.sliceCategory(*c), Category::Memcpy);
    EXPECT_EQ(t.sliceArg(*c, "bytes")->intValue, 4096);
    EXPECT_EQ(t.sliceCategory(*s), Category::Memset);
    EXPECT_EQ(t.sliceCategory(*y), Category::Sync);
    EXPECT_EQ(t.tracks()[t.sliceTrack(*y)].tid, -1);
    EXPECT_EQ(t.tracks()[t.sliceTrack(*y)].name, "device-wide");
    ASSERT_EQ(t.flowCount(), 1u);
    EXPECT_EQ(t.flowKind(0), profile::FlowKind::Other);
    EXPECT_TRUE(findSlice(t, "cudaDeviceSynchronize"));
}

TEST(CuptiConvert, NvtxRangesPairByIdOnTheThreadsNvtxLane)
{
    ActivityRecord start;
    start.kind = RecordKind::MarkerStart;
    start.start = 1000;
    start.markerId = 9;
    start.name = "forward";
    start.process = 4242;
    start.thread = 17;
    ActivityRecord end;
    end.kind = RecordKind::MarkerEnd;
    end.start = 8000;
    end.markerId = 9;
    ActivityRecord open = start;
    open.markerId = 10;
    open.name = "never closed";
    ActivityRecord mark = start;
    mark.kind = RecordKind::MarkerInstant;
    mark.name = "checkpoint";
    const Trace t = convert({ start, open, mark, end });
    const auto range = findSlice(t, "forward");
    ASSERT_TRUE(range);
    EXPECT_EQ(t.sliceCategory(*range), Category::Annotation);
    EXPECT_EQ(t.sliceDuration(*range), 7000);
    EXPECT_EQ(t.tracks()[t.sliceTrack(*range)].lane, profile::Lane::Nvtx);
    EXPECT_EQ(t.counts().instants, 1u);
    ASSERT_FALSE(t.warnings().empty());
    EXPECT_NE(t.warnings()[0].find("1 NVTX range"), std::string::npos);
}

TEST(CuptiConvert, RecordsWithImpossibleTimesAreDroppedAndCounted)
{
    std::size_t dropped = 0;
    auto backwards = gpu(RecordKind::Kernel, 5000, 4000, 1);
    backwards.name = "backwards";
    auto huge = gpu(RecordKind::Kernel, std::uint64_t(1) << 63, (std::uint64_t(1) << 63) + 5, 2);
    huge.name = "huge";
    ActivityRecord orphanEnd;
    orphanEnd.kind = RecordKind::MarkerEnd;
    orphanEnd.markerId = 77;
    orphanEnd.start = 10;
    const Trace t = convert({ backwards, huge, orphanEnd }, &dropped);
    EXPECT_EQ(dropped, 3u);
    EXPECT_EQ(t.sliceCount(), 0u);
    bool warned = false;
    for (const auto& w : t.warnings()) {
        warned = warned || w.find("3 activity record") != std::string::npos;
    }
    EXPECT_TRUE(warned);
}

TEST(CuptiConvert, NamesOfEnumsAndApiVersions)
{
    EXPECT_EQ(memcpyKindName(2), "DtoH");
    EXPECT_EQ(memcpyKindName(8), "DtoD");
    EXPECT_EQ(memcpyKindName(99), "Unknown");
    EXPECT_EQ(memoryKindName(2), "Pinned");
    EXPECT_EQ(syncTypeName(3), "Stream Sync");
    EXPECT_EQ(stripVersion("cudaMemcpyAsync_v3020"), "cudaMemcpyAsync");
    EXPECT_EQ(stripVersion("cuLaunchKernel"), "cuLaunchKernel");
    EXPECT_EQ(stripVersion("odd_vx"), "odd_vx");
}

TEST(CuptiConvert, ASecondSubscriberIsNamed)
{
    const auto nsys = describeSubscriberConflict(
        "/opt/nvidia/nsight-systems/2025.1/target-linux-x64/libToolsInjection64.so");
    EXPECT_NE(nsys.find("Nsight Systems"), std::string::npos);
    EXPECT_NE(nsys.find("only one"), std::string::npos);
    EXPECT_NE(describeSubscriberConflict("/usr/lib/ncu/libInjection.so").find("Nsight Compute"),
        std::string::npos);
    EXPECT_NE(describeSubscriberConflict(nullptr).find("Nsight Systems, Nsight Compute"),
        std::string::npos);
}

} // namespace
} // namespace day0::cupti
