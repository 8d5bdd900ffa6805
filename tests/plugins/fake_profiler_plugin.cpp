// A profiler plugin that "records" one kernel launch, to test `day0 run --profiler` without a
// GPU: stop() returns a trace with a runtime call on a host thread, the kernel it launched on a
// device stream (same correlation id, a launch flow) and a stream counter, timed inside the
// recording window on the host clock (Unix-epoch ns), as CUPTI's records are.
#include "extend/plugin_api.h"
#include "extend/profiler_collector.h"
#include "profile/cpu_tracer.h"
#include "profile/trace_builder.h"

#include <cstdio>
#include <memory>

namespace {

using namespace day0;

class FakeProfiler final : public extend::ProfilerCollector {
public:
    std::string name() const override { return "fakeprof"; }
    Result<void> start() override
    {
        m_start = profile::CpuTracer::now();
        return success();
    }
    Result<profile::Trace> stop(Progress& progress, std::stop_token stop) override
    {
        const std::int64_t end = profile::CpuTracer::now();
        const std::int64_t mid = m_start + (end - m_start) / 2;
        profile::TraceBuilder b;
        const auto source = b.addSource({ "fakeprof", "fakeprof", 0, 1, {}, 0 });
        b.addDevice({ 0, 0, "Fake GPU" });
        profile::Track host;
        host.kind = profile::TrackKind::Thread;
        host.pid = 1;
        host.tid = 1;
        host.source = source;
        host.name = "runtime";
        const auto hostTrack = b.addTrack(host);
        profile::Track stream;
        stream.kind = profile::TrackKind::Stream;
        stream.device = 0;
        stream.pid = 2;
        stream.tid = 7;
        stream.source = source;
        stream.name = "stream 7";
        stream.processName = "GPU 0";
        const auto streamTrack = b.addTrack(stream);
        const auto launch = b.addSlice(hostTrack, m_start, m_start + 1000,
            b.intern("cudaLaunchKernel"), profile::Category::Runtime, 42);
        const auto kernel = b.addSlice(
            streamTrack, mid, end, b.intern("fake_gemm_kernel"), profile::Category::Kernel, 42);
        b.addFlow(launch, kernel, profile::FlowKind::Launch);
        return b.finish(progress, stop);
    }

private:
    std::int64_t m_start = 0;
};

void* create(const char*, char*, std::size_t)
{
    return new std::shared_ptr<extend::ProfilerCollector>(std::make_shared<FakeProfiler>());
}

void destroy(void* object)
{
    delete static_cast<std::shared_ptr<extend::ProfilerCollector>*>(object);
}

} // namespace

DAY0_DECLARE_PLUGIN("fakeprof", "profiler", "0.1", &create, &destroy)
