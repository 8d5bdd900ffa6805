#include "profile/cpu_tracer.h"
#include "profile/trace_scope.h"

#include <gtest/gtest.h>

#include <thread>

namespace day0::profile {
namespace {

TEST(CpuTracer, NestedScopesOnSeveralThreads)
{
    CpuTracer tracer;
    const TracerName layer = tracer.intern("model.layers.0");
    const TracerName mlp = tracer.intern("model.layers.0.mlp");
    const TracerName allReduce = tracer.intern("all_reduce");
    EXPECT_EQ(tracer.intern("model.layers.0"), layer);
    tracer.start();
    constexpr int kThreads = 4;
    constexpr int kIterations = 5000; // more than one buffer chunk per thread
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            tracer.setThreadName("worker " + std::to_string(t));
            for (int i = 0; i < kIterations; ++i) {
                CpuTracer::Scope outer(tracer, layer);
                {
                    CpuTracer::Scope inner(tracer, mlp);
                }
                CpuTracer::Scope comm(tracer, allReduce, Category::Communication);
            }
        });
    }
    for (auto& th : threads) {
        th.join();
    }
    tracer.stop();
    {
        CpuTracer::Scope ignored(tracer, layer); // off: records nothing
    }
    EXPECT_EQ(tracer.eventCount(), std::size_t(kThreads * kIterations * 3));
    auto trace = tracer.toTrace(2);
    ASSERT_TRUE(trace.ok());
    EXPECT_EQ(trace->counts().slices, std::size_t(kThreads * kIterations * 3));
    EXPECT_EQ(trace->counts().byCategory[std::size_t(Category::Communication)],
        std::size_t(kThreads * kIterations));
    EXPECT_EQ(trace->ranks(), (std::vector<std::int32_t> { 2 }));
    ASSERT_EQ(trace->tracks().size(), std::size_t(kThreads));
    for (const auto& track : trace->tracks()) {
        EXPECT_EQ(track.name.rfind("worker ", 0), 0u);
        EXPECT_EQ(track.maxDepth, 1); // mlp and all_reduce inside the layer
        EXPECT_EQ(track.kind, TrackKind::Thread);
    }
    for (SliceIndex i = 0; i < trace->sliceCount(); ++i) {
        const bool top = trace->sliceNameText(i) == "model.layers.0";
        EXPECT_EQ(trace->sliceDepth(i), top ? 0 : 1);
        EXPECT_GE(trace->sliceEnd(i), trace->sliceStart(i));
    }
    // Restarting drops what was recorded and reuses the buffers.
    tracer.start();
    EXPECT_EQ(tracer.eventCount(), 0u);
    tracer.instant(layer, Category::Annotation, CpuTracer::now());
    {
        CpuTracer::Scope s(tracer, mlp);
    }
    tracer.stop();
    auto again = tracer.toTrace();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->counts().slices, 1u);
    EXPECT_EQ(again->counts().instants, 1u);
}

TEST(CpuTracer, ReadWhileRecordingSeesOnlyWholeEvents)
{
    CpuTracer tracer;
    const TracerName op = tracer.intern("op");
    tracer.start();
    std::atomic<bool> done { false };
    // Bounded, so that a slow reader cannot let the buffers grow without limit.
    std::thread writer([&] {
        for (int n = 0; n < 300000 && !done.load(); ++n) {
            CpuTracer::Scope s(tracer, op);
        }
    });
    for (int i = 0; i < 10; ++i) {
        auto t = tracer.toTrace();
        ASSERT_TRUE(t.ok());
        for (SliceIndex s = 0; s < t->sliceCount(); ++s) {
            ASSERT_EQ(t->sliceNameText(s), "op");
        }
    }
    done.store(true);
    writer.join();
}

TEST(CpuTracer, TwoTracersOnOneThread)
{
    CpuTracer a;
    CpuTracer b;
    const TracerName na = a.intern("a");
    const TracerName nb = b.intern("b");
    a.start();
    b.start();
    for (int i = 0; i < 10; ++i) {
        CpuTracer::Scope sa(a, na);
        CpuTracer::Scope sb(b, nb);
    }
    EXPECT_EQ(a.eventCount(), 10u);
    EXPECT_EQ(b.eventCount(), 10u);
    EXPECT_EQ(a.toTrace()->tracks().size(), 1u);
}

TEST(TraceScope, RecordsIntoTheActiveTracerOfItsThreadOnly)
{
    {
        const TraceScope none("nobody listens"); // no tracer active: nothing, no crash
    }
    CpuTracer outer;
    CpuTracer inner;
    outer.start();
    inner.start();
    EXPECT_EQ(TraceActivation::current(), nullptr);
    {
        const TraceActivation a(outer);
        {
            const TraceScope s("phase", Category::Annotation);
            const TraceActivation b(inner);
            EXPECT_EQ(TraceActivation::current(), &inner);
            const TraceScope t("op");
            std::thread([] {
                const TraceScope other("other thread"); // activation is per thread
            }).join();
        }
        EXPECT_EQ(TraceActivation::current(), &outer);
        outer.stop();
        const TraceScope stopped("after stop");
    }
    EXPECT_EQ(TraceActivation::current(), nullptr);
    EXPECT_EQ(outer.eventCount(), 1u);
    EXPECT_EQ(inner.eventCount(), 1u);
    auto trace = outer.toTrace();
    ASSERT_TRUE(trace.ok());
    ASSERT_EQ(trace->sliceCount(), 1u);
    EXPECT_EQ(trace->sliceNameText(0), "phase");
    EXPECT_EQ(trace->sliceCategory(0), Category::Annotation);
}

} // namespace
} // namespace day0::profile
