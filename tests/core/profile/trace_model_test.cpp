#include "profile/nccl.h"
#include "profile/privacy.h"
#include "profile/timeline_lod.h"
#include "profile/trace_builder.h"

#include <gtest/gtest.h>

namespace day0::profile {
namespace {

Trace finish(TraceBuilder& b)
{
    Progress progress;
    auto r = b.finish(progress, {});
    EXPECT_TRUE(r.ok());
    return std::move(*r);
}

TEST(StringTable, InternsOnceAndKeepsViewsStable)
{
    StringTable t;
    EXPECT_EQ(t.intern(""), 0u);
    const StringId a = t.intern("aten::mm");
    const auto view = t.view(a);
    for (int i = 0; i < 100000; ++i) {
        t.intern("name " + std::to_string(i));
    }
    EXPECT_EQ(t.intern("aten::mm"), a);
    EXPECT_EQ(t.view(a), "aten::mm");
    EXPECT_EQ(view.data(), t.view(a).data());
    EXPECT_EQ(t.find("name 99999"), t.intern("name 99999"));
    EXPECT_EQ(t.find("absent"), StringTable::kNotFound);
    const std::string longText(100000, 'x');
    EXPECT_EQ(t.view(t.intern(longText)), longText);
}

TEST(ArgStore, RoundTripsAndDeduplicates)
{
    StringTable s;
    ArgStore store;
    auto write = [&](std::int64_t v) {
        store.begin();
        store.addInt(s.intern("registers per thread"), v);
        store.addDouble(s.intern("blocks per SM"), 0.5925926);
        store.addString(s.intern("dtype"), s.intern("float"));
        store.addJson(s.intern("grid"), s.intern("[64, 1, 1]"));
        store.addBool(s.intern("flag"), true);
        store.addNull(s.intern("none"));
        store.addInt(s.intern("negative"), -123456789012345);
        return store.commit();
    };
    const ArgsRef a = write(90);
    const ArgsRef b = write(90);
    const ArgsRef c = write(91);
    EXPECT_NE(a, 0u);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    std::vector<Arg> out;
    store.decode(c, s, out);
    ASSERT_EQ(out.size(), 7u);
    EXPECT_EQ(out[0].key, "registers per thread");
    EXPECT_EQ(out[0].intValue, 91);
    EXPECT_DOUBLE_EQ(out[1].doubleValue, 0.5925926);
    EXPECT_EQ(out[2].text, "float");
    EXPECT_EQ(out[3].type, ArgType::Json);
    EXPECT_EQ(out[3].text, "[64, 1, 1]");
    EXPECT_EQ(out[4].type, ArgType::True);
    EXPECT_EQ(out[5].type, ArgType::Null);
    EXPECT_EQ(out[6].intValue, -123456789012345);
    store.begin();
    EXPECT_EQ(store.commit(), 0u);
}

TEST(TraceBuilder, SortsNestsAndFindsRanges)
{
    TraceBuilder b;
    b.addSource({});
    Track cpu;
    cpu.name = "thread 1";
    const TrackId t = b.addTrack(cpu);
    const StringId step = b.intern("step");
    const StringId op = b.intern("op");
    const StringId leaf = b.intern("leaf");
    // Added out of order on purpose.
    b.addSlice(t, 300, 400, op, Category::CpuOp);
    b.addSlice(t, 0, 1000, step, Category::Annotation);
    b.addSlice(t, 100, 200, op, Category::CpuOp);
    b.addSlice(t, 120, 150, leaf, Category::CpuOp);
    b.addSlice(t, 500, 500, leaf, Category::CpuOp); // zero length
    const Trace trace = finish(b);
    ASSERT_EQ(trace.sliceCount(), 5u);
    EXPECT_EQ(trace.sliceStart(0), 0);
    EXPECT_EQ(trace.sliceDepth(0), 0);
    EXPECT_EQ(trace.sliceStart(1), 100);
    EXPECT_EQ(trace.sliceDepth(1), 1);
    EXPECT_EQ(trace.sliceDepth(2), 2);
    EXPECT_EQ(trace.sliceDepth(3), 1);
    EXPECT_EQ(trace.sliceDepth(4), 1);
    EXPECT_EQ(trace.tracks()[0].maxDepth, 2);
    EXPECT_EQ(trace.sliceTrack(3), t);

    // [130, 310): the step, the op at 100 and its leaf (spanning), and the op starting at 300.
    EXPECT_EQ(trace.slicesInRange(t, 130, 310), (std::vector<SliceIndex> { 0, 1, 2, 3 }));
    EXPECT_EQ(trace.slicesInRange(t, 210, 290), (std::vector<SliceIndex> { 0 }));
    EXPECT_EQ(trace.slicesInRange(t, 500, 501), (std::vector<SliceIndex> { 0, 4 }));
    EXPECT_EQ(trace.slicesInRange(t, 1000, 2000), (std::vector<SliceIndex> {}));
    EXPECT_EQ(trace.sliceAt(t, 125), 2u);
    EXPECT_EQ(trace.sliceAt(t, 250), 0u);
    EXPECT_EQ(trace.sliceAt(t, 5000), kNoSlice);
    const auto range = trace.timeRange();
    EXPECT_EQ(range.first, 0);
    EXPECT_EQ(range.second, 1000);
}

TEST(TraceBuilder, RangeQueryMatchesBruteForce)
{
    TraceBuilder b;
    b.addSource({});
    const TrackId t = b.addTrack({});
    const StringId n = b.intern("x");
    // A deterministic forest: long parents with nested children and gaps.
    std::uint64_t seed = 12345;
    auto next = [&]() {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return std::int64_t(seed >> 40);
    };
    std::int64_t ts = 0;
    for (int i = 0; i < 300; ++i) {
        const std::int64_t len = 100 + next() % 1000;
        b.addSlice(t, ts, ts + len, n, Category::CpuOp);
        std::int64_t inner = ts;
        while (inner + 20 < ts + len) {
            const std::int64_t childLen = 1 + next() % 50;
            if (inner + childLen > ts + len) {
                break;
            }
            b.addSlice(t, inner, inner + childLen, n, Category::CpuOp);
            inner += childLen + next() % 10;
        }
        ts += len + next() % 100;
    }
    const Trace trace = finish(b);
    for (int q = 0; q < 500; ++q) {
        const std::int64_t t0 = next() % ts;
        const std::int64_t t1 = t0 + next() % 2000;
        std::vector<SliceIndex> expected;
        for (SliceIndex i = 0; i < trace.sliceCount(); ++i) {
            const bool overlaps = trace.sliceStart(i) < t1
                && (trace.sliceEnd(i) > t0
                    || (trace.sliceEnd(i) == trace.sliceStart(i) && trace.sliceStart(i) >= t0));
            if (overlaps) {
                expected.push_back(i);
            }
        }
        EXPECT_EQ(trace.slicesInRange(t, t0, t1), expected) << "range " << t0 << " " << t1;
    }
}

TEST(TimelineLod, CountsMatchBruteForceAndCoverageIsExact)
{
    TraceBuilder b;
    b.addSource({});
    const TrackId t = b.addTrack({});
    const StringId n = b.intern("k");
    // Depth 0: [0,1000); depth 1: 200 slices of 3 ns every 5 ns from 0, and one long [100,900).
    b.addSlice(t, 0, 1000, n, Category::Kernel);
    for (int i = 0; i < 200; ++i) {
        b.addSlice(t, i * 5, i * 5 + 3, n, Category::Kernel);
    }
    const Trace trace = finish(b);
    const auto lod = buildTrackLod(trace, t, 0, 1000, 10, 32);
    ASSERT_EQ(lod.depths, 2);
    for (int x = 0; x < 10; ++x) {
        EXPECT_EQ(lod.at(0, x).count, 1u);
        EXPECT_FLOAT_EQ(lod.at(0, x).coverage, 1.0f);
        EXPECT_EQ(lod.at(0, x).representative, 0u);
        // Each 100 ns column holds 20 slices of 3 ns: 60 % covered, exact below the limit.
        EXPECT_EQ(lod.at(1, x).count, 20u);
        EXPECT_FALSE(lod.at(1, x).dense);
        EXPECT_NEAR(lod.at(1, x).coverage, 0.6f, 1e-6);
    }
    const auto coarse = buildTrackLod(trace, t, 0, 1000, 2, 8);
    EXPECT_EQ(coarse.at(1, 0).count, 100u);
    EXPECT_TRUE(coarse.at(1, 0).dense);
    EXPECT_NE(coarse.at(1, 0).representative, kNoSlice);
    // A window inside: [2, 7) touches the slices at 0 ([0,3)) and 5 ([5,8)).
    const auto inner = buildTrackLod(trace, t, 2, 7, 1);
    EXPECT_EQ(inner.at(1, 0).count, 2u);
    EXPECT_NEAR(inner.at(1, 0).coverage, 3.0f / 5.0f, 1e-6);
}

TEST(TraceBuilder, BindsFlowEndpointsAndExplicitFlows)
{
    TraceBuilder b;
    const auto src = b.addSource({});
    const TrackId cpu = b.addTrack({});
    Track streamTrack;
    streamTrack.kind = TrackKind::Stream;
    const TrackId gpu = b.addTrack(streamTrack);
    const StringId launch = b.intern("cudaLaunchKernel");
    const StringId kernel = b.intern("gemm");
    const auto rt = b.addSlice(cpu, 100, 110, launch, Category::Runtime, 7);
    const auto k = b.addSlice(gpu, 150, 190, kernel, Category::Kernel, 7);
    b.addSlice(cpu, 200, 210, launch, Category::Runtime, 8);
    b.addSlice(gpu, 220, 260, kernel, Category::Kernel, 8);
    b.addFlow(rt, k, FlowKind::Launch);
    const StringId cat = b.intern("ac2g");
    b.addFlowEndpoint({ cpu, 200, 8, cat, src, 's', false, FlowKind::Launch });
    b.addFlowEndpoint({ gpu, 220, 8, cat, src, 'f', false, FlowKind::Launch });
    b.addFlowEndpoint({ gpu, 500, 9, cat, src, 'f', false, FlowKind::Launch }); // no start: no flow
    // A kernel whose start the GPU clock puts 5 ns before its launch still gets its arrow.
    b.addSlice(cpu, 300, 310, launch, Category::Runtime, 10);
    b.addSlice(gpu, 295, 330, kernel, Category::Kernel, 10);
    b.addFlowEndpoint({ cpu, 300, 10, cat, src, 's', false, FlowKind::Launch });
    b.addFlowEndpoint({ gpu, 295, 10, cat, src, 'f', false, FlowKind::Launch });
    const Trace trace = finish(b);
    ASSERT_EQ(trace.flowCount(), 3u);
    for (std::size_t f = 0; f < trace.flowCount(); ++f) {
        EXPECT_EQ(trace.sliceCategory(trace.flowFrom(f)), Category::Runtime);
        EXPECT_EQ(trace.sliceCategory(trace.flowTo(f)), Category::Kernel);
        EXPECT_EQ(
            trace.sliceCorrelation(trace.flowFrom(f)), trace.sliceCorrelation(trace.flowTo(f)));
    }
    const auto into = trace.flowsTo(trace.flowTo(1));
    ASSERT_EQ(into.size(), 1u);
    EXPECT_EQ(into[0], 1u);
    EXPECT_EQ(trace.flowsFrom(trace.flowFrom(0)).size(), 1u);
}

TEST(Trace, ClockOffsetMovesOneRank)
{
    TraceBuilder b;
    SourceInfo r0;
    r0.rank = 0;
    SourceInfo r1;
    r1.rank = 1;
    b.addSource(r0);
    b.addSource(r1);
    Track a;
    a.rank = 0;
    Track c;
    c.rank = 1;
    c.source = 1;
    const TrackId ta = b.addTrack(a);
    const TrackId tc = b.addTrack(c);
    b.addSlice(ta, 10, 20, b.intern("a"), Category::Kernel);
    b.addSlice(tc, 10, 20, b.intern("c"), Category::Kernel);
    b.addInstant(tc, 15, b.intern("i"), Category::Other);
    Trace trace = finish(b);
    trace.applyClockOffset(1, 1000);
    EXPECT_EQ(trace.sliceStart(trace.trackSlices(ta).first), 10);
    EXPECT_EQ(trace.sliceStart(trace.trackSlices(tc).first), 1010);
    EXPECT_EQ(trace.instantTime(0), 1015);
    EXPECT_EQ(trace.sources()[1].clockOffsetNs, 1000);
    EXPECT_EQ(trace.ranks(), (std::vector<std::int32_t> { 0, 1 }));
}

TEST(Privacy, RedactsHomeFolders)
{
    EXPECT_TRUE(containsUserPath("/home/alice/run.py(12): main"));
    EXPECT_FALSE(containsUserPath("/usr/lib/python3/torch.py"));
    EXPECT_EQ(redactUserPaths("/home/alice/a.py;/Users/bob/b.py"),
        "/home/<user>/a.py;/Users/<user>/b.py");
    EXPECT_EQ(redactUserPaths("C:\\Users\\carol\\x.py"), "C:\\Users\\<user>\\x.py");
    EXPECT_EQ(baseName("/home/alice/tmp/async.out"), "async.out");
}

TEST(Nccl, ClassifiesAllThreeNamingSchemes)
{
    auto legacy = parseNcclKernelName(
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
    ASSERT_TRUE(legacy.has_value());
    EXPECT_EQ(legacy->collective, Collective::AllReduce);
    EXPECT_EQ(legacy->naming, NcclNaming::Legacy);
    EXPECT_EQ(legacy->algorithm, "RING");
    EXPECT_EQ(legacy->protocol, "LL");
    EXPECT_EQ(legacy->reduceOp, "Sum");
    EXPECT_EQ(legacy->dataType, "float");
    auto sendrecv = parseNcclKernelName(
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)");
    EXPECT_EQ(sendrecv->collective, Collective::SendRecv);
    EXPECT_EQ(sendrecv->dataType, "int8_t");
    auto collnet = parseNcclKernelName("ncclKernel_AllReduce_COLLNET_DIRECT_SIMPLE_Sum_half");
    EXPECT_EQ(collnet->algorithm, "COLLNET_DIRECT");
    auto dev = parseNcclKernelName(
        "ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)");
    ASSERT_TRUE(dev.has_value());
    EXPECT_EQ(dev->naming, NcclNaming::Device);
    EXPECT_EQ(dev->collective, Collective::ReduceScatter);
    EXPECT_EQ(dev->reduceOp, "Sum");
    EXPECT_EQ(dev->dataType, "bf16");
    EXPECT_EQ(dev->algorithm, "NVLS_TREE");
    EXPECT_EQ(dev->protocol, "SIMPLE");
    EXPECT_EQ(
        parseNcclKernelName("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")->collective,
        Collective::SendRecv);
    EXPECT_EQ(parseNcclKernelName("ncclDevKernel_Generic_4")->collective, Collective::Generic);
    auto symk = parseNcclKernelName(
        "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f8e5m2(ncclSymkDevWorkArgs4K)");
    ASSERT_TRUE(symk.has_value());
    EXPECT_EQ(symk->naming, NcclNaming::Symmetric);
    EXPECT_EQ(symk->collective, Collective::AllReduce);
    EXPECT_EQ(symk->algorithm, "AGxLL_R");
    EXPECT_EQ(symk->reduceOp, "sum");
    EXPECT_EQ(symk->dataType, "f8e5m2");
    EXPECT_EQ(
        parseNcclKernelName("ncclSymkDevKernel_AllGather_STMC")->collective, Collective::AllGather);
    EXPECT_EQ(parseNcclKernelName("ncclSymkDevKernel_AllGather_STMC")->algorithm, "STMC");
    EXPECT_FALSE(
        parseNcclKernelName("void at::native::vectorized_elementwise_kernel<4>").has_value());

    EXPECT_TRUE(
        isCollectiveKernelName("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
    EXPECT_TRUE(isCollectiveKernelName("ncclDevKernel_AllGather_RING_LL"));
    EXPECT_TRUE(isCollectiveKernelName("hcclAllReduce"));
    EXPECT_FALSE(isCollectiveKernelName("Cijk_Alik_Bljk_SB_Bias"));
    EXPECT_FALSE(isCollectiveKernelName("hipLaunchKernel"));

    EXPECT_EQ(collectiveFromText("allreduce"), Collective::AllReduce);
    EXPECT_EQ(collectiveFromText("_allgather_base"), Collective::AllGather);
    EXPECT_EQ(collectiveFromText("reduce_scatter_tensor_coalesced"), Collective::ReduceScatter);
    EXPECT_EQ(collectiveFromText("nccl:all_to_all"), Collective::AllToAll);
    EXPECT_EQ(collectiveFromText("send"), Collective::Send);
    EXPECT_EQ(collectiveFromText("barrier"), Collective::Unknown);
}

} // namespace
} // namespace day0::profile
