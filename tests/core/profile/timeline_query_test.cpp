#include "profile/timeline_lod.h"
#include "profile/timeline_query.h"
#include "profile/trace_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace day0::profile {
namespace {

Trace build(TraceBuilder& b)
{
    Progress progress;
    auto r = b.finish(progress, {});
    EXPECT_TRUE(r.ok());
    return std::move(*r);
}

// One thread: a step [0,1000) at depth 0; at depth 1 ops [100,200) "a", [300,310) "b",
// [600,600) "a" (zero length) and [700,900) "b".
struct Fixture {
    Trace trace;
    TrackId track = 0;
    StringId a = 0;
    StringId b = 0;
};

Fixture makeFixture()
{
    TraceBuilder builder;
    builder.addSource({});
    Fixture f;
    f.track = builder.addTrack({});
    const StringId step = builder.intern("step");
    f.a = builder.intern("a");
    f.b = builder.intern("b");
    builder.addSlice(f.track, 0, 1000, step, Category::Annotation);
    builder.addSlice(f.track, 100, 200, f.a, Category::CpuOp);
    builder.addSlice(f.track, 300, 310, f.b, Category::CpuOp);
    builder.addSlice(f.track, 600, 600, f.a, Category::CpuOp);
    builder.addSlice(f.track, 700, 900, f.b, Category::CpuOp);
    f.trace = build(builder);
    return f;
}

TEST(SliceNear, ContainingFirstThenNearestWithinTolerance)
{
    const Fixture f = makeFixture();
    const Trace& t = f.trace;
    auto nameAt = [&](int depth, std::int64_t ts, std::int64_t tol) -> std::string_view {
        const SliceIndex s = sliceNear(t, f.track, depth, ts, tol);
        return s == kNoSlice ? std::string_view("-") : t.sliceNameText(s);
    };
    EXPECT_EQ(nameAt(0, 500, 0), "step");
    EXPECT_EQ(nameAt(1, 150, 0), "a");
    EXPECT_EQ(nameAt(1, 250, 0), "-");
    EXPECT_EQ(nameAt(1, 250, 60), "a"); // 50 after "a" ends, 50 before "b" starts: the earlier
    EXPECT_EQ(nameAt(1, 290, 20), "b");
    EXPECT_EQ(nameAt(1, 600, 0), "a"); // zero length, exactly hit
    EXPECT_EQ(nameAt(1, 604, 5), "a");
    EXPECT_EQ(nameAt(1, 650, 5), "-");
    EXPECT_EQ(nameAt(2, 150, 1000), "-"); // no such depth
    EXPECT_EQ(nameAt(-1, 150, 1000), "-");
    EXPECT_EQ(nameAt(1, 2000, 1100), "b"); // 1100 after "b" ends
    EXPECT_EQ(nameAt(1, 2000, 1099), "-");
}

TEST(MarkNamedSlices, MarksEveryColumnTouchedAtItsDepth)
{
    const Fixture f = makeFixture();
    // Ten columns of 100 ns.
    const auto marksA = markNamedSlices(f.trace, f.track, f.a, 0, 1000, 10);
    ASSERT_EQ(marksA.size(), 20u);
    std::vector<std::uint8_t> depth0(marksA.begin(), marksA.begin() + 10);
    std::vector<std::uint8_t> depth1(marksA.begin() + 10, marksA.end());
    EXPECT_EQ(depth0, std::vector<std::uint8_t>(10, 0));
    // [100,200) is column 1 only (its end is the boundary); the zero-length one is column 6.
    EXPECT_EQ(depth1, (std::vector<std::uint8_t> { 0, 1, 0, 0, 0, 0, 1, 0, 0, 0 }));
    const auto marksB = markNamedSlices(f.trace, f.track, f.b, 0, 1000, 10);
    EXPECT_EQ(std::vector<std::uint8_t>(marksB.begin() + 10, marksB.end()),
        (std::vector<std::uint8_t> { 0, 0, 0, 1, 0, 0, 0, 1, 1, 0 }));
    // A window inside [650, 750): "b" covers its second half.
    const auto inner = markNamedSlices(f.trace, f.track, f.b, 650, 750, 4);
    EXPECT_EQ(std::vector<std::uint8_t>(inner.begin() + 4, inner.end()),
        (std::vector<std::uint8_t> { 0, 0, 1, 1 }));
    EXPECT_TRUE(markNamedSlices(f.trace, f.track, f.b, 10, 10, 4).size() == 8u);
}

TEST(MarkNamedSlices, MatchesBruteForceOnManySlices)
{
    TraceBuilder builder;
    builder.addSource({});
    const TrackId track = builder.addTrack({});
    const StringId names[3] = { builder.intern("x"), builder.intern("y"), builder.intern("z") };
    std::uint64_t seed = 7;
    auto next = [&]() {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return std::int64_t(seed >> 40);
    };
    std::int64_t ts = 0;
    for (int i = 0; i < 2000; ++i) {
        const std::int64_t len = next() % 40;
        builder.addSlice(track, ts, ts + len, names[next() % 3], Category::Kernel);
        ts += len + next() % 30;
    }
    const Trace trace = build(builder);
    const std::int64_t t0 = ts / 5;
    const std::int64_t t1 = ts / 2;
    const int pixels = 333;
    const auto marks = markNamedSlices(trace, track, names[1], t0, t1, pixels);
    std::vector<std::uint8_t> expected(std::size_t(pixels), 0);
    const double width = double(t1 - t0) / pixels;
    for (SliceIndex s = 0; s < trace.sliceCount(); ++s) {
        if (trace.sliceName(s) != names[1]) {
            continue;
        }
        for (int x = 0; x < pixels; ++x) {
            const auto a = t0 + std::int64_t(std::floor(x * width));
            const auto b = t0 + std::int64_t(std::floor((x + 1) * width));
            const bool touches = trace.sliceStart(s) < b
                && (trace.sliceEnd(s) > a
                    || (trace.sliceStart(s) == trace.sliceEnd(s) && trace.sliceStart(s) >= a));
            if (touches) {
                expected[std::size_t(x)] = 1;
            }
        }
    }
    int differing = 0;
    for (int x = 0; x < pixels; ++x) {
        differing += marks[std::size_t(x)] != expected[std::size_t(x)] ? 1 : 0;
    }
    // Column edges are fractional; rounding may move a mark by one column at most, rarely.
    EXPECT_LE(differing, 3);
    EXPECT_GT(std::count(marks.begin(), marks.end(), 1), 50);
}

TEST(FindSlicesNamed, EveryTrackInTheRange)
{
    const Fixture f = makeFixture();
    const auto all = findSlicesNamed(f.trace, f.b, 0, 2000);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(f.trace.sliceStart(all[0]), 300);
    EXPECT_EQ(f.trace.sliceStart(all[1]), 700);
    EXPECT_EQ(findSlicesNamed(f.trace, f.b, 305, 320).size(), 1u);
    EXPECT_TRUE(findSlicesNamed(f.trace, f.b, 400, 500).empty());
}

TEST(CounterLod, MinMaxAndValueInForce)
{
    TraceBuilder builder;
    builder.addSource({});
    Track counterTrack;
    counterTrack.kind = TrackKind::Counter;
    counterTrack.name = "memory";
    const TrackId other = builder.addTrack(counterTrack);
    const TrackId track = builder.addTrack(counterTrack);
    builder.addCounter(other, 5, 1000.0);
    builder.addCounter(track, 10, 5.0);
    builder.addCounter(track, 20, 7.0);
    builder.addCounter(track, 25, 3.0);
    builder.addCounter(track, 55, 9.0);
    const Trace trace = build(builder);
    // Columns of 10 ns over [0, 60).
    const auto cells = buildCounterLod(trace, track, 0, 60, 6);
    ASSERT_EQ(cells.size(), 6u);
    EXPECT_FALSE(cells[0].defined);
    EXPECT_FALSE(cells[0].any);
    EXPECT_TRUE(cells[1].any);
    EXPECT_EQ(cells[1].min, 5.0);
    EXPECT_EQ(cells[1].max, 5.0);
    // [20,30): starts at 5 (in force), then 7 and 3.
    EXPECT_EQ(cells[2].min, 3.0);
    EXPECT_EQ(cells[2].max, 7.0);
    EXPECT_EQ(cells[2].last, 3.0);
    // [30,50): no sample, the value 3 holds.
    EXPECT_FALSE(cells[3].any);
    EXPECT_TRUE(cells[3].defined);
    EXPECT_EQ(cells[4].last, 3.0);
    EXPECT_EQ(cells[5].max, 9.0);
    EXPECT_EQ(cells[5].min, 3.0);
    // A window starting after samples knows the value in force.
    const auto late = buildCounterLod(trace, track, 30, 40, 2);
    EXPECT_TRUE(late[0].defined);
    EXPECT_EQ(late[0].last, 3.0);
    EXPECT_EQ(counterRange(trace, track), (std::pair<double, double> { 3.0, 9.0 }));
    EXPECT_EQ(counterRange(trace, other), (std::pair<double, double> { 1000.0, 1000.0 }));
}

TEST(InstantMarks, OneMarkPerColumnMatchingBruteForce)
{
    TraceBuilder builder;
    builder.addSource({});
    const TrackId before = builder.addTrack({});
    const TrackId track = builder.addTrack({});
    const TrackId after = builder.addTrack({});
    const StringId mark = builder.intern("mark");
    builder.addInstant(before, 50, mark, Category::Annotation);
    builder.addInstant(after, 50, mark, Category::Annotation);
    // Deterministic, clustered times, added out of order.
    std::vector<std::int64_t> times;
    std::uint64_t x = 12345;
    for (int i = 0; i < 3000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::int64_t t = std::int64_t((x >> 33) % 100000) / ((i % 3) + 1);
        times.push_back(t);
        builder.addInstant(track, t, mark, Category::Annotation);
    }
    const Trace trace = build(builder);
    const auto [first, last] = trackInstants(trace, track);
    EXPECT_EQ(last - first, times.size());
    EXPECT_EQ(trackInstants(trace, before).second - trackInstants(trace, before).first, 1u);
    for (const auto& [t0, t1, pixels] :
        { std::tuple<std::int64_t, std::int64_t, int> { 0, 100000, 97 }, { 1234, 56789, 1000 },
            { 40000, 40010, 3 }, { -500, 250000, 7 }, { 5, 6, 1 } }) {
        std::vector<std::uint32_t> expected(std::size_t(pixels), 0);
        for (const auto t : times) {
            if (t >= t0 && t < t1) {
                ++expected[std::size_t((__int128_t(t - t0) * pixels) / (t1 - t0))];
            }
        }
        const auto marks = markInstants(trace, track, t0, t1, pixels);
        std::vector<std::uint32_t> got(std::size_t(pixels), 0);
        int previous = -1;
        for (const auto& m : marks) {
            ASSERT_GT(m.column, previous) << "columns ascend, each once";
            ASSERT_LT(m.column, pixels);
            ASSERT_GT(m.count, 0u);
            ASSERT_EQ(trace.instantTrack(m.first), track);
            const std::int64_t t = trace.instantTime(m.first);
            ASSERT_EQ((__int128_t(t - t0) * pixels) / (t1 - t0), m.column);
            got[std::size_t(m.column)] = m.count;
            previous = m.column;
        }
        EXPECT_EQ(got, expected) << t0 << ".." << t1 << " in " << pixels;
    }
    EXPECT_TRUE(markInstants(trace, track, 10, 10, 5).empty());
    EXPECT_TRUE(markInstants(trace, track, 0, 10, 0).empty());
}

TEST(ShortSliceName, SignaturesLoseTheirDecoration)
{
    EXPECT_EQ(shortSliceName("void at::native::vectorized_elementwise_kernel<4, "
                             "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, "
                             "at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
        "vectorized_elementwise_kernel");
    EXPECT_EQ(shortSliceName("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, "
                             "unsigned int, 3, 128, 1>(float*, unsigned int)"),
        "CatArrayBatchedCopy");
    EXPECT_EQ(shortSliceName("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<"
                             "(unsigned long)4096>)"),
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    EXPECT_EQ(shortSliceName("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_tn>"
                             "(cutlass_80_tensorop_s1688gemm_64x64_tn::Params)"),
        "cutlass_80_tensorop_s1688gemm_64x64_tn");
    EXPECT_EQ(shortSliceName("void cutlass::device_kernel<flash::FlashAttnFwd<Traits<128>>>(Args)"),
        "FlashAttnFwd");
    EXPECT_EQ(shortSliceName("std::enable_if<true, void>::type internal::gemvx::kernel<int, "
                             "float>(cublasGemvParams)"),
        "kernel");
    EXPECT_EQ(shortSliceName("ampere_sgemm_128x64_tn"), "ampere_sgemm_128x64_tn");
    EXPECT_EQ(shortSliceName("aten::mm"), "aten::mm");
    EXPECT_EQ(
        shortSliceName("Memcpy HtoD (Pageable -> Device)"), "Memcpy HtoD (Pageable -> Device)");
    EXPECT_EQ(shortSliceName("ProfilerStep#3"), "ProfilerStep#3");
    EXPECT_EQ(shortSliceName("unbalanced)"), "unbalanced)");
    EXPECT_EQ(shortSliceName(""), "");
    EXPECT_EQ(shortSliceName("foo<int>"), "foo");
}

TEST(LodIndex, IndexedLodCountsEqualTheDirectOnesAtEveryZoom)
{
    TraceBuilder builder;
    builder.addSource({});
    const TrackId track = builder.addTrack({});
    const StringId n = builder.intern("k");
    std::uint64_t seed = 99;
    auto next = [&](std::int64_t mod) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return std::int64_t((seed >> 33) % std::uint64_t(mod));
    };
    // Parents of 1–20 µs holding 0–6 children: two depths, 20 000+ slices.
    std::int64_t ts = 0;
    for (int i = 0; i < 8000; ++i) {
        const std::int64_t len = 1000 + next(19000);
        builder.addSlice(track, ts, ts + len, n, Category::CpuOp);
        std::int64_t inner = ts;
        for (int c = next(7); c > 0; --c) {
            const std::int64_t childLen = 1 + next(len / 8);
            if (inner + childLen > ts + len) {
                break;
            }
            builder.addSlice(track, inner, inner + childLen, n, Category::Runtime);
            inner += childLen + next(50);
        }
        ts += len + next(3000);
    }
    const Trace trace = build(builder);
    const LodIndex index(trace);
    EXPECT_EQ(index.sliceRange(), trace.timeRange());
    EXPECT_LT(index.memoryBytes(), trace.sliceCount() * 2);
    const std::pair<std::int64_t, std::int64_t> windows[]
        = { { 0, ts }, { ts / 3, ts / 3 + ts / 50 }, { ts / 2, ts / 2 + 40000 }, { -5000, 7000 },
              { ts - 1000, ts + 100000 } };
    for (const auto& [t0, t1] : windows) {
        for (const int pixels : { 1, 37, 1600 }) {
            const TrackLod direct = buildTrackLod(trace, track, t0, t1, pixels);
            const TrackLod indexed = buildTrackLod(trace, index, track, t0, t1, pixels);
            ASSERT_EQ(direct.cells.size(), indexed.cells.size());
            for (std::size_t c = 0; c < direct.cells.size(); ++c) {
                const LodCell& x = direct.cells[c];
                const LodCell& y = indexed.cells[c];
                ASSERT_EQ(x.count, y.count) << t0 << " " << t1 << " " << pixels << " cell " << c;
                ASSERT_EQ(x.dense, y.dense);
                ASSERT_FLOAT_EQ(x.coverage, y.coverage);
                if (!x.dense) {
                    ASSERT_EQ(x.representative, y.representative);
                } else {
                    ASSERT_NE(y.representative, kNoSlice);
                }
            }
        }
    }
    // Only the first level when asked.
    EXPECT_EQ(buildTrackLod(trace, index, track, 0, ts, 100, 1).depths, 1);
    EXPECT_EQ(buildTrackLod(trace, index, track, 0, ts, 100).depths, 2);
}

} // namespace
} // namespace day0::profile
