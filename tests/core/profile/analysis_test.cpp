#include "profile/collectives.h"
#include "profile/kernel_stats.h"
#include "profile/temporal_breakdown.h"
#include "profile/trace_diff.h"
#include "profile_test_util.h"

#include <algorithm>

namespace day0::profile {
namespace {

using test::dataFile;
using test::importOrFail;

constexpr std::int64_t kUs = 1000;

const RankBreakdown* rankRow(const std::vector<RankBreakdown>& rows, std::int32_t rank)
{
    for (const auto& r : rows) {
        if (r.rank == rank) {
            return &r;
        }
    }
    return nullptr;
}

TEST(Intervals, UnionIntersectLength)
{
    const Intervals u = unionOf({ { 5, 10 }, { 0, 3 }, { 2, 4 }, { 10, 12 }, { 7, 7 } });
    EXPECT_EQ(u, (Intervals { { 0, 4 }, { 5, 12 } }));
    EXPECT_EQ(lengthOf(u), 11);
    EXPECT_EQ(
        intersect(u, { { 3, 6 }, { 11, 20 } }), (Intervals { { 3, 4 }, { 5, 6 }, { 11, 12 } }));
}

// synthetic_rank0.json (tests/data/profile/SOURCES.md): compute kernels [0,100) [150,250)
// [300,350) µs; collectives [80,180) [400,450) [500,520) [550,600) [850,900); memcpy [360,380)
// and memset [370,390). By hand: span 900, compute 250, collective union 270 of which 50 overlap
// compute, memory 30, idle 400 µs.
TEST(TemporalBreakdown, SyntheticRankByHand)
{
    const Trace t = importOrFail(dataFile("synthetic_rank0.json"));
    const auto rows = temporalBreakdown(t);
    ASSERT_EQ(rows.size(), 1u);
    const auto& r = rows[0];
    EXPECT_EQ(r.span, 900 * kUs);
    EXPECT_EQ(r.compute, 250 * kUs);
    EXPECT_EQ(r.communicationTotal, 270 * kUs);
    EXPECT_EQ(r.overlap, 50 * kUs);
    EXPECT_EQ(r.communication, 220 * kUs);
    EXPECT_EQ(r.memory, 30 * kUs);
    EXPECT_EQ(r.idle, 400 * kUs);
    EXPECT_EQ(r.compute + r.communication + r.memory + r.idle, r.span);
    EXPECT_NEAR(r.overlapPercent(), 100.0 * 50 / 270, 1e-9);
}

// Expected values computed independently with Python (interval unions over the 'X' events).
TEST(TemporalBreakdown, SelectedRangeIsClipped)
{
    // [50, 200) µs of synthetic rank 0: compute [50,100) and [150,200) = 100, collective [80,180)
    // = 100 of which 20 + 30 overlap compute, no copies: idle [100,150) minus the collective = 0.
    const Trace t = importOrFail(dataFile("synthetic_rank0.json"));
    const std::int64_t t0 = temporalBreakdown(t)[0].spanStart;
    const auto rows = temporalBreakdown(t, t0 + 50 * kUs, t0 + 200 * kUs);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].span, 150 * kUs);
    EXPECT_EQ(rows[0].compute, 100 * kUs);
    EXPECT_EQ(rows[0].communicationTotal, 100 * kUs);
    EXPECT_EQ(rows[0].overlap, 50 * kUs);
    EXPECT_EQ(rows[0].memory, 0);
    EXPECT_EQ(rows[0].idle, 0);
    KernelStatsOptions options;
    options.rangeStart = t0 + 100 * kUs;
    options.rangeEnd = t0 + 400 * kUs;
    // Starting in [100, 400): gemm at 150 and 300, memcpy 360, memset 370; the collectives start
    // at 80 and 400, outside.
    const auto stats = kernelStatistics(t, options);
    std::size_t count = 0;
    for (const auto& s : stats) {
        count += s.count;
        EXPECT_NE(s.category, Category::Communication);
    }
    EXPECT_EQ(count, 4u);
}

TEST(TemporalBreakdown, ReferenceTraces)
{
    struct Case {
        const char* file;
        std::int64_t span, compute, communication, memory, idle, communicationTotal, overlap;
    };
    const Case cases[] = {
        { "hta_event_sync_multi_stream.json.gz", 19506000, 369000, 0, 3000, 19134000, 0, 0 },
        { "hta_simple_add_rank0.json.gz", 16025575000, 10670000, 0, 39088000, 15975817000, 0, 0 },
        { "hta_sampled_rank-0.json.gz", 1222847000, 210320000, 336983000, 353000, 675191000,
            396199000, 59216000 },
        { "hta_trace_compare_base.json.gz", 274498000, 432000, 0, 1262000, 272804000, 0, 0 },
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.file);
        const auto rows = temporalBreakdown(importOrFail(dataFile(c.file)));
        ASSERT_EQ(rows.size(), 1u);
        EXPECT_EQ(rows[0].span, c.span);
        EXPECT_EQ(rows[0].compute, c.compute);
        EXPECT_EQ(rows[0].communication, c.communication);
        EXPECT_EQ(rows[0].memory, c.memory);
        EXPECT_EQ(rows[0].idle, c.idle);
        EXPECT_EQ(rows[0].communicationTotal, c.communicationTotal);
        EXPECT_EQ(rows[0].overlap, c.overlap);
    }
}

TEST(KernelStats, SyntheticAndReferenceByHand)
{
    const Trace t = importOrFail(dataFile("synthetic_rank0.json"));
    const auto stats = kernelStatistics(t);
    const auto gemm = std::find_if(stats.begin(), stats.end(),
        [](const KernelStat& s) { return s.name == "void gemm_kernel<128>(float*)"; });
    ASSERT_NE(gemm, stats.end());
    EXPECT_EQ(gemm->count, 3u);
    EXPECT_EQ(gemm->total, 250 * kUs);
    EXPECT_EQ(gemm->min, 50 * kUs);
    EXPECT_EQ(gemm->max, 100 * kUs);
    EXPECT_NEAR(gemm->mean, 250.0 * kUs / 3, 1e-6);
    EXPECT_DOUBLE_EQ(gemm->p50, 100.0 * kUs);
    EXPECT_DOUBLE_EQ(gemm->p95, 100.0 * kUs);
    EXPECT_EQ(gemm->category, Category::Kernel);

    // A1: "Memcpy HtoD (Pinned -> Device)" ×5 with durations 3, 3, 4, 476, 740 µs is the top row;
    // p50 = 4 µs, p95 = 476 + 0.8 × (740 − 476) = 687.2 µs; six memsets of 1, 2, 4, 4, 5, 11 µs.
    const auto a1 = kernelStatistics(importOrFail(dataFile("hta_trace_compare_base.json.gz")));
    ASSERT_GE(a1.size(), 6u);
    EXPECT_EQ(a1[0].name, "Memcpy HtoD (Pinned -> Device)");
    EXPECT_EQ(a1[0].category, Category::Memcpy);
    EXPECT_EQ(a1[0].count, 5u);
    EXPECT_EQ(a1[0].total, 1226 * kUs);
    EXPECT_DOUBLE_EQ(a1[0].p50, 4.0 * kUs);
    EXPECT_NEAR(a1[0].p95, 687.2 * kUs, 1e-6);
    EXPECT_EQ(a1[0].max, 740 * kUs);
    const auto memset = std::find_if(
        a1.begin(), a1.end(), [](const KernelStat& s) { return s.name == "Memset (Device)"; });
    ASSERT_NE(memset, a1.end());
    EXPECT_EQ(memset->count, 6u);
    EXPECT_EQ(memset->total, 27 * kUs);
    EXPECT_DOUBLE_EQ(memset->p50, 4.0 * kUs);
    EXPECT_NEAR(memset->p95, 9.5 * kUs, 1e-6); // 5 + 0.75 × (11 − 5)
}

TEST(KernelStats, QuantilesInterpolateLikeNumpy)
{
    EXPECT_DOUBLE_EQ(quantileSorted({ 1, 2, 3, 4 }, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantileSorted({ 1, 2, 4, 4, 5, 11 }, 0.95), 9.5);
    EXPECT_DOUBLE_EQ(quantileSorted({ 7 }, 0.95), 7.0);
    EXPECT_DOUBLE_EQ(quantileSorted({}, 0.5), 0.0);
}

TEST(Collectives, ClassifiesEverySchemeByRank)
{
    const Trace t = importOrFail(dataFile("synthetic_rank0.json"));
    const auto stats = collectiveStatistics(t);
    ASSERT_EQ(stats.size(), 3u);
    auto find = [&](Collective c) {
        return *std::find_if(
            stats.begin(), stats.end(), [&](const CollectiveStat& s) { return s.collective == c; });
    };
    const auto ar = find(Collective::AllReduce);
    EXPECT_EQ(ar.naming, NcclNaming::Device);
    EXPECT_EQ(ar.count, 3u);
    EXPECT_EQ(ar.total, 200 * kUs);
    EXPECT_EQ(ar.max, 100 * kUs);
    EXPECT_EQ(ar.algorithm, "RING_LL");
    const auto ag = find(Collective::AllGather);
    EXPECT_EQ(ag.naming, NcclNaming::Symmetric);
    EXPECT_EQ(ag.algorithm, "STMC");
    const auto rs = find(Collective::ReduceScatter);
    EXPECT_EQ(rs.naming, NcclNaming::Legacy);
    EXPECT_EQ(rs.total, 20 * kUs);

    // A6: ten legacy SendRecv kernels.
    const auto a6 = collectiveStatistics(importOrFail(dataFile("hta_sampled_rank-0.json.gz")));
    ASSERT_EQ(a6.size(), 1u);
    EXPECT_EQ(a6[0].collective, Collective::SendRecv);
    EXPECT_EQ(a6[0].naming, NcclNaming::Legacy);
    EXPECT_EQ(a6[0].count, 10u);
}

// synthetic_rank1.json is rank 0 moved 5000 µs later, with one more all-reduce at the start of
// its capture and ±1 µs jitter on two all-reduce ends: the collective ends give −5000 µs.
TEST(ClockAlignment, MatchesCollectiveEndsAcrossShiftedWindows)
{
    Progress progress;
    auto r = importTraces(
        { dataFile("synthetic_rank0.json"), dataFile("synthetic_rank1.json") }, {}, progress, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    Trace trace = std::move(*r);
    const auto offsets = suggestClockAlignment(trace);
    ASSERT_EQ(offsets.size(), 1u);
    const auto& o = offsets[0];
    EXPECT_EQ(o.rank, 1);
    EXPECT_EQ(o.reference, 0);
    EXPECT_EQ(o.offsetNs, -5000 * kUs);
    EXPECT_EQ(o.madNs, 0);
    EXPECT_EQ(o.matched, 5u);
    EXPECT_EQ(o.lag, 1);
    EXPECT_TRUE(o.usable);

    // Suggested only: nothing moved until it is applied.
    const auto before = temporalBreakdown(trace);
    EXPECT_EQ(rankRow(before, 1)->spanStart - rankRow(before, 0)->spanStart, (5000 - 300) * kUs);
    trace.applyClockOffset(o.rank, o.offsetNs);
    const auto after = temporalBreakdown(trace);
    EXPECT_EQ(rankRow(after, 1)->spanStart - rankRow(after, 0)->spanStart, -300 * kUs);
    EXPECT_EQ(trace.sources()[1].clockOffsetNs, -5000 * kUs);
    const auto again = suggestClockAlignment(trace);
    EXPECT_EQ(again[0].offsetNs, 0);
}

// A6/A7 come from one job whose clocks were already in step: of their ten SendRecv kernels each,
// two pairs end within 50 µs of each other (8 µs apart and at the same µs). Too few to apply.
TEST(ClockAlignment, RealRanksWithPointToPointOnly)
{
    Progress progress;
    auto r = importTraces(
        { dataFile("hta_sampled_rank-0.json.gz"), dataFile("hta_sampled_rank-1.json.gz") }, {},
        progress, {});
    ASSERT_TRUE(r.ok());
    const auto offsets = suggestClockAlignment(*r);
    ASSERT_EQ(offsets.size(), 1u);
    EXPECT_EQ(offsets[0].matched, 2u);
    EXPECT_EQ(offsets[0].offsetNs, -4 * kUs);
    EXPECT_EQ(offsets[0].madNs, 4 * kUs);
    EXPECT_FALSE(offsets[0].usable);
}

TEST(ClockAlignment, SingleRankHasNothingToAlign)
{
    EXPECT_TRUE(suggestClockAlignment(importOrFail(dataFile("synthetic_rank0.json"))).empty());
}

TEST(TraceDiff, HtaComparePairByHand)
{
    // A2 has one CUDAFunctor_add<int> kernel fewer (3 → 2, each 4 µs) and three CPU ops that A1
    // lacks (All2All_Pooled_Req, CatBackward0, AddmmBackward0); everything else is identical.
    const Trace a = importOrFail(dataFile("hta_trace_compare_base.json.gz"));
    const Trace b = importOrFail(dataFile("hta_trace_compare_test.json.gz"));
    const auto gpu = diffTraces(a, b);
    ASSERT_EQ(gpu.size(), 6u);
    for (const auto& row : gpu) {
        EXPECT_EQ(row.status, DiffStatus::Unchanged) << row.name;
        if (row.name.find("CUDAFunctor_add<int>") != std::string::npos) {
            EXPECT_EQ(row.countA, 3u);
            EXPECT_EQ(row.countB, 2u);
            EXPECT_EQ(row.totalA, 12 * kUs);
            EXPECT_EQ(row.totalB, 8 * kUs);
        }
    }
    DiffOptions withCpu;
    withCpu.includeCpu = true;
    const auto all = diffTraces(a, b, withCpu);
    std::vector<std::string> added;
    for (const auto& row : all) {
        if (row.status == DiffStatus::Added) {
            added.push_back(row.name);
        }
        EXPECT_NE(row.status, DiffStatus::Removed);
    }
    std::sort(added.begin(), added.end());
    EXPECT_EQ(added,
        (std::vector<std::string> { "AddmmBackward0", "All2All_Pooled_Req", "CatBackward0" }));
}

TEST(TraceDiff, SlowerAndFaster)
{
    // Rank 1 of the synthetic pair has all-reduces of 100 (the extra one), 101, 50 and 49 µs
    // against rank 0's 100, 50 and 50: mean 66.67 → 75 µs, +12.5 %.
    const Trace a = importOrFail(dataFile("synthetic_rank0.json"));
    const Trace b = importOrFail(dataFile("synthetic_rank1.json"));
    DiffOptions options;
    options.thresholdPercent = 1.0;
    const auto rows = diffTraces(a, b, options);
    bool sawAllReduce = false;
    for (const auto& row : rows) {
        if (row.name.rfind("ncclDevKernel_AllReduce", 0) == 0) {
            sawAllReduce = true;
            EXPECT_EQ(row.countA, 3u);
            EXPECT_EQ(row.countB, 4u);
            EXPECT_EQ(row.totalA, 200 * kUs);
            EXPECT_EQ(row.totalB, 300 * kUs);
            EXPECT_EQ(row.status, DiffStatus::Slower); // mean 66.7 → 75 µs
            EXPECT_NEAR(row.meanChangePercent, 12.5, 1e-9);
        } else {
            EXPECT_EQ(row.status, DiffStatus::Unchanged) << row.name;
        }
    }
    EXPECT_TRUE(sawAllReduce);
    // Swapped, the same change is "faster".
    const auto back = diffTraces(b, a, options);
    EXPECT_EQ(back.front().status, DiffStatus::Faster);
}

} // namespace
} // namespace day0::profile
