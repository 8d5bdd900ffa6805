// appendTrace: a finished trace copied into a builder next to others (a run's CPU scopes and the
// GPU work a profiler plugin recorded) keeps every slice, argument, flow, instant and counter.
#include "profile/cpu_tracer.h"
#include "profile/trace_merge.h"
#include "profile_test_util.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace day0::profile {
namespace {

using test::dataFile;
using test::importOrFail;

Trace finish(TraceBuilder& builder)
{
    Progress progress;
    auto t = builder.finish(progress, {});
    EXPECT_TRUE(t.ok());
    return std::move(*t);
}

/// Every slice as (name, start, end, category, correlation, External id, arguments as text).
std::multiset<std::tuple<std::string, std::int64_t, std::int64_t, int, std::uint32_t, std::uint32_t,
    std::string>>
sliceSet(const Trace& t)
{
    std::multiset<std::tuple<std::string, std::int64_t, std::int64_t, int, std::uint32_t,
        std::uint32_t, std::string>>
        out;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        std::string args;
        for (const Arg& a : t.sliceArgs(i)) {
            args += std::string(a.key) + "=" + std::to_string(int(a.type)) + ":"
                + std::to_string(a.intValue) + "/" + std::to_string(a.doubleValue) + "/"
                + std::string(a.text) + ";";
        }
        out.emplace(std::string(t.sliceNameText(i)), t.sliceStart(i), t.sliceEnd(i),
            int(t.sliceCategory(i)), t.sliceCorrelation(i), t.sliceExternalId(i), args);
    }
    return out;
}

TEST(TraceMerge, ACopiedTraceKeepsEverySliceArgumentFlowAndCounter)
{
    const Trace kineto = importOrFail(dataFile("hta_simple_add_rank0.json.gz"));
    ASSERT_GT(kineto.flowCount(), 0U);
    TraceBuilder builder;
    appendTrace(builder, kineto);
    const Trace copy = finish(builder);
    EXPECT_EQ(copy.sliceCount(), kineto.sliceCount());
    EXPECT_EQ(copy.flowCount(), kineto.flowCount());
    EXPECT_EQ(copy.instantCount(), kineto.instantCount());
    EXPECT_EQ(copy.counterCount(), kineto.counterCount());
    EXPECT_EQ(copy.tracks().size(), kineto.tracks().size());
    EXPECT_EQ(copy.sources().size(), kineto.sources().size());
    EXPECT_EQ(sliceSet(copy), sliceSet(kineto)) << "names, times, ids and arguments";
    // Flows still join the same pairs of slices.
    std::multiset<std::pair<std::string, std::string>> a;
    std::multiset<std::pair<std::string, std::string>> b;
    for (std::size_t f = 0; f < kineto.flowCount(); ++f) {
        a.emplace(kineto.sliceNameText(kineto.flowFrom(f)), kineto.sliceNameText(kineto.flowTo(f)));
    }
    for (std::size_t f = 0; f < copy.flowCount(); ++f) {
        b.emplace(copy.sliceNameText(copy.flowFrom(f)), copy.sliceNameText(copy.flowTo(f)));
    }
    EXPECT_EQ(a, b);
}

TEST(TraceMerge, HostScopesAndDeviceWorkOnOneClockShareATimeline)
{
    CpuTracer tracer;
    tracer.start();
    {
        const CpuTracer::Scope scope(tracer, tracer.intern("model.layers.0"));
    }
    auto host = tracer.toTrace(0);
    ASSERT_TRUE(host.ok());
    const Trace device = importOrFail(dataFile("hta_simple_add_rank0.json.gz"));
    TraceBuilder builder;
    tracer.exportTo(builder, 0);
    appendTrace(builder, device);
    const Trace merged = finish(builder);
    EXPECT_EQ(merged.sliceCount(), host->sliceCount() + device.sliceCount());
    EXPECT_EQ(merged.flowCount(), device.flowCount());
    EXPECT_EQ(merged.sources().size(), host->sources().size() + device.sources().size());
    bool scope = false;
    std::size_t kernels = 0;
    for (SliceIndex i = 0; i < merged.sliceCount(); ++i) {
        scope = scope || merged.sliceNameText(i) == "model.layers.0";
        kernels += merged.sliceCategory(i) == Category::Kernel;
    }
    EXPECT_TRUE(scope);
    EXPECT_EQ(kernels, test::byCat(device, Category::Kernel));
}

} // namespace
} // namespace day0::profile
