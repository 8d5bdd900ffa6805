// The CPU tracer's cost per event and the trace model's memory per event.
// Baselines, measured in the same run: a pair of steady_clock::now() calls (what timing a scope
// costs with no recording at all) for the tracer; for memory, the bytes a naive array-of-structs
// slice (start, end, name pointer, category, track, args pointer: 48 bytes) would need before
// any argument or name storage. Ratios are printed after the benchmark table.
// DAY0_BENCH_QUICK=1 (CTest) builds 200 000 events instead of ten million.

#include "bench_support.h"
#include "profile/cpu_tracer.h"
#include "profile/trace_builder.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace {

using namespace day0;
using namespace day0::profile;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

void clockPair(benchmark::State& state)
{
    for (auto _ : state) {
        auto a = std::chrono::steady_clock::now();
        auto b = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(a);
        benchmark::DoNotOptimize(b);
    }
}

CpuTracer& tracer()
{
    static CpuTracer t;
    return t;
}

void tracerScope(benchmark::State& state)
{
    CpuTracer& t = tracer();
    const TracerName name = t.intern("model.layers.7.mlp");
    std::size_t n = 0;
    t.start();
    for (auto _ : state) {
        CpuTracer::Scope scope(t, name);
        // Keep the buffers bounded across Google Benchmark's repetitions.
        if (++n == (1u << 22)) {
            state.PauseTiming();
            t.start();
            n = 0;
            state.ResumeTiming();
        }
    }
    t.stop();
}

void tracerScopeOff(benchmark::State& state)
{
    CpuTracer& t = tracer();
    const TracerName name = t.intern("model.layers.7.mlp");
    t.stop();
    for (auto _ : state) {
        CpuTracer::Scope scope(t, name);
        benchmark::ClobberMemory();
    }
}

void tracerScopeFourThreads(benchmark::State& state)
{
    CpuTracer& t = tracer();
    const TracerName name = t.intern("all_reduce");
    if (state.thread_index() == 0) {
        t.start();
    }
    for (auto _ : state) {
        CpuTracer::Scope scope(t, name, Category::Communication);
    }
}

BENCHMARK(clockPair);
BENCHMARK(tracerScope);
BENCHMARK(tracerScopeOff);
BENCHMARK(tracerScopeFourThreads)->Threads(4)->Iterations(1 << 20);

/// Builds a trace shaped like a PyTorch training step: per launch a CPU op, a runtime call, a
/// kernel with Kineto's launch arguments and a flow; returns bytes per event.
struct MemoryFigure {
    std::size_t events = 0;
    std::size_t slices = 0;
    std::size_t bytes = 0;
    double seconds = 0.0;
};

MemoryFigure buildModel(std::size_t events)
{
    const auto started = std::chrono::steady_clock::now();
    TraceBuilder b;
    b.addSource({});
    Track cpu;
    cpu.pid = 1;
    cpu.tid = 1;
    const TrackId cpuTrack = b.addTrack(cpu);
    Track gpu;
    gpu.kind = TrackKind::Stream;
    gpu.device = 0;
    gpu.tid = 7;
    const TrackId gpuTrack = b.addTrack(gpu);
    std::vector<StringId> ops;
    std::vector<StringId> kernels;
    for (int i = 0; i < 64; ++i) {
        ops.push_back(b.intern(fmt::format("aten::op_{}", i)));
        kernels.push_back(b.intern(
            fmt::format("void at::native::kernel_{}<float, 4>(float*, float const*, int)", i)));
    }
    const StringId launch = b.intern("cudaLaunchKernel");
    const StringId kGrid = b.intern("grid");
    const StringId kBlock = b.intern("block");
    const StringId kRegs = b.intern("registers per thread");
    const StringId kShared = b.intern("shared memory");
    const StringId kSeq = b.intern("Sequence number");
    const StringId kCbid = b.intern("cbid");
    std::vector<StringId> grids;
    for (int i = 0; i < 16; ++i) {
        grids.push_back(b.intern(fmt::format("[{}, 1, 1]", 64 << (i % 8))));
    }
    const StringId block = b.intern("[256, 1, 1]");
    std::int64_t ts = 1700000000000000000ll;
    std::size_t made = 0;
    for (std::uint32_t g = 1; made < events; ++g) {
        // Four events per launch: op, runtime, kernel, and the flow between them (counted once).
        auto& args = b.args();
        args.begin();
        args.addInt(kSeq, g);
        b.addSlice(
            cpuTrack, ts, ts + 9000, ops[g % ops.size()], Category::CpuOp, 0, g, args.commit());
        args.begin();
        args.addInt(kCbid, 211);
        const SliceIndex rt = b.addSlice(
            cpuTrack, ts + 1000, ts + 6000, launch, Category::Runtime, g, g, args.commit());
        args.begin();
        args.addJson(kGrid, grids[g % grids.size()]);
        args.addJson(kBlock, block);
        args.addInt(kRegs, 32 + (g % 4) * 8);
        args.addInt(kShared, (g % 3) * 16384);
        const SliceIndex k = b.addSlice(gpuTrack, ts + 8000, ts + 8000 + 2000 + (g % 50) * 100,
            kernels[g % kernels.size()], Category::Kernel, g, g, args.commit());
        b.addFlow(rt, k, FlowKind::Launch);
        ts += 10000;
        made += 4;
    }
    Progress progress;
    auto trace = b.finish(progress, {});
    MemoryFigure f;
    f.events = made;
    f.slices = trace->sliceCount();
    f.bytes = trace->memory().total();
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return f;
}

/// Prints each figure per event relative to the clock pair. CPU time: on a shared build machine
/// wall time mostly measures the neighbours.
void printSummary(const day0::bench::BenchTimes& times)
{
    const double base = times.cpu("clockPair") * 1e9;
    fmt::print("\nCPU tracer, CPU time per event relative to two steady_clock::now() calls "
               "({:.1f} ns):\n",
        base);
    for (const auto& [name, time] : times.byName) {
        const double ns = time.cpu * 1e9;
        if (name != "clockPair") {
            fmt::print("  {:<36} {:6.1f} ns  {:5.2f}x the clock pair{}\n", name, ns,
                base > 0 ? ns / base : 0.0,
                name.rfind("tracerScope", 0) == 0 && name.find("Off") == std::string::npos
                    ? (ns < 100.0 ? "  (goal < 100 ns: met)" : "  (goal < 100 ns: MISSED)")
                    : "");
        }
    }
}

} // namespace

int main(int argc, char** argv)
{
    day0::bench::runBenchmarks(argc, argv, printSummary);

    const std::size_t events = quick() ? 200000 : 10000000;
    const MemoryFigure f = buildModel(events);
    const double perEvent = double(f.bytes) / double(f.events);
    const double naive = 48.0;
    fmt::print("\nTrace model: {} events ({} slices, the rest flows) built and indexed in {:.2f} "
               "s, {:.1f} MiB in memory\n",
        f.events, f.slices, f.seconds, double(f.bytes) / (1024.0 * 1024.0));
    fmt::print("  {:.1f} bytes per event, {:.1f} per slice, arguments and index included ({:.2f}x "
               "a bare 48-byte "
               "slice struct without any arguments){}\n",
        perEvent, double(f.bytes) / double(f.slices), perEvent / naive,
        perEvent < 100.0 ? "  (goal < 100 bytes: met)" : "  (goal < 100 bytes: MISSED)");
    return 0;
}
