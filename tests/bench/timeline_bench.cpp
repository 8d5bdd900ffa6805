// Frames per second of the timeline view on a generated trace of ten million slices (four ranks,
// each a CPU thread of steps → ops → launches and two GPU streams of kernels and collectives).
// Each iteration is one whole frame as the view makes it: the per-pixel draw lists of the
// visible tracks are prepared (on the calling thread here, on a worker in the workbench) and the
// widget is rendered offscreen into a 1600 × 1000 image.
// Baseline, measured in the same run: a timeline without level of detail, which fills one
// rectangle per slice in the window on the same rows (and paints nothing else: no labels, ruler
// or text, which the view's frames include, so with few slices in the window the baseline is the
// faster one). Frames per second and the ratios are printed after the benchmark table; the goal
// is at least 30 frames per second.
// DAY0_BENCH_QUICK=1 (CTest) generates 400 000 slices instead of ten million.

#include "bench_support.h"
#include "panels/timeline/timeline_colors.h"
#include "panels/timeline/timeline_view.h"
#include "panels/timeline/track_tree_model.h"
#include "profile/trace_builder.h"

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace {

using namespace day0;
using namespace day0::ui;
using profile::Category;

constexpr int kWidth = 1600;
constexpr int kHeight = 1000;
constexpr int kRanks = 4;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

/// A deterministic LLM-training-like trace with `total` slices.
std::shared_ptr<const profile::Trace> generateTrace(std::size_t total)
{
    profile::TraceBuilder b;
    std::uint64_t seed = 0x9e3779b97f4a7c15ull;
    auto next = [&](std::uint64_t mod) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        return std::int64_t(seed % mod);
    };
    std::vector<profile::StringId> kernels;
    for (int k = 0; k < 48; ++k) {
        kernels.push_back(b.intern(fmt::format(
            "void at::native::gemm_kernel_{}<float, 128, 64>(int, float const*, float*)", k)));
    }
    const profile::StringId allReduce = b.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    const profile::StringId launch = b.intern("cudaLaunchKernel");
    const profile::StringId op = b.intern("aten::linear");
    const profile::StringId step = b.intern("ProfilerStep");
    const std::size_t perRank = total / kRanks;
    for (int r = 0; r < kRanks; ++r) {
        profile::SourceInfo source;
        source.file = fmt::format("rank{}.json", r);
        source.format = "kineto";
        source.rank = r;
        b.addSource(source);
        profile::Track thread;
        thread.rank = r;
        thread.pid = 1000 + r;
        thread.tid = 1000 + r;
        thread.name = "thread (python)";
        thread.processName = "python";
        const auto cpu = b.addTrack(thread);
        profile::Track stream;
        stream.kind = profile::TrackKind::Stream;
        stream.rank = r;
        stream.device = r;
        stream.tid = 7;
        stream.name = "stream 7";
        const auto compute = b.addTrack(stream);
        stream.tid = 20;
        stream.name = "stream 20";
        const auto comm = b.addTrack(stream);
        // 60 % kernels, 5 % collectives, the rest CPU (steps, ops and launches).
        std::int64_t gpuTime = 0;
        std::int64_t cpuTime = 0;
        std::size_t emitted = 0;
        while (emitted < perRank) {
            const std::int64_t stepStart = cpuTime;
            const int opsPerStep = 2000;
            for (int o = 0; o < opsPerStep && emitted < perRank; ++o) {
                const std::int64_t opStart = cpuTime;
                cpuTime += 1000 + next(4000);
                b.addSlice(cpu, cpuTime, cpuTime + 3000, launch, Category::Runtime);
                const std::int64_t kernelLength = 2000 + next(30000);
                gpuTime = std::max(gpuTime, cpuTime + 5000) + next(2000);
                b.addSlice(compute, gpuTime, gpuTime + kernelLength, kernels[std::size_t(next(48))],
                    Category::Kernel);
                gpuTime += kernelLength;
                cpuTime += 4000;
                b.addSlice(cpu, opStart, cpuTime, op, Category::CpuOp);
                emitted += 3;
                if (o % 12 == 0) {
                    b.addSlice(comm, gpuTime - kernelLength, gpuTime + next(60000), allReduce,
                        Category::Communication);
                    ++emitted;
                }
            }
            b.addSlice(cpu, stepStart, cpuTime, step, Category::Annotation);
            ++emitted;
        }
    }
    Progress progress;
    auto trace = b.finish(progress, {});
    return std::make_shared<const profile::Trace>(std::move(*trace));
}

/// The trace, the rows and the view, made once for all benchmarks.
struct Scene {
    TimelineTraces traces;
    TrackTreeModel model;
    TimelineView view;

    Scene()
    {
        traces.set(0, generateTrace(quick() ? 400'000 : 10'000'000));
        model.setTraces(traces.traces[0], nullptr, QStringLiteral("generated"), {});
        view.setSynchronous(true);
        view.setModel(&model);
        view.resize(kWidth, kHeight);
        view.show();
        view.setTraces(traces);
    }
};

// Made on first use; destroyed before the QApplication (widgets must not outlive it).
std::unique_ptr<Scene>& sceneHolder()
{
    static std::unique_ptr<Scene> s;
    return s;
}

Scene& scene()
{
    if (!sceneHolder()) {
        sceneHolder() = std::make_unique<Scene>();
    }
    return *sceneHolder();
}

QImage& canvas()
{
    static QImage image(kWidth, kHeight, QImage::Format_ARGB32_Premultiplied);
    return image;
}

void renderView(TimelineView& view)
{
    view.render(&canvas());
    benchmark::DoNotOptimize(canvas().constBits());
}

/// What a timeline without level of detail does: one rectangle per slice in the window.
void renderNaive(const Scene& s)
{
    const auto& trace = *s.traces.traces[0];
    const std::int64_t origin = s.traces.origins[0];
    const std::int64_t t0 = origin + s.view.windowStart();
    const std::int64_t t1 = origin + s.view.windowEnd();
    const double scale = 1.0 / s.view.nsPerPixel();
    QPainter p(&canvas());
    p.fillRect(canvas().rect(), Qt::white);
    int y = TimelineView::kRulerHeight;
    for (profile::TrackId t = 0; t < trace.tracks().size(); ++t) {
        trace.forEachSliceInRange(t, t0, t1, [&](profile::SliceIndex i) {
            const double x0 = TimelineView::kLabelWidth + double(trace.sliceStart(i) - t0) * scale;
            const double w = std::max(1.0, double(trace.sliceDuration(i)) * scale);
            p.fillRect(QRectF(x0, y + trace.sliceDepth(i) * TimelineView::kDepthHeight, w,
                           TimelineView::kDepthHeight - 1),
                sliceColor(trace.sliceCategory(i), trace.sliceName(i)));
        });
        y += trace.trackDepths(t) * TimelineView::kDepthHeight + 2 * TimelineView::kTrackPadding;
    }
}

// Window: everything, or 1/100 of it, or 1/10 000 of it; each frame pans by 7 pixels.
void setWindow(TimelineView& view, double fraction, std::int64_t frame)
{
    const std::int64_t total = scene().traces.spans[0];
    const double nsPerPixel = double(total) * fraction / double(view.canvasWidth());
    const std::int64_t start = fraction >= 1.0
        ? 0
        : std::int64_t(double(total) * 0.37) + std::int64_t(frame * 7 * nsPerPixel);
    view.setWindow(start, nsPerPixel);
}

void lodFrame(benchmark::State& state, double fraction)
{
    Scene& s = scene();
    std::int64_t frame = 0;
    for (auto _ : state) {
        setWindow(s.view, fraction, frame++ % 200);
        renderView(s.view);
    }
    state.counters["fps"]
        = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["slices"] = double(s.traces.traces[0]->sliceCount());
}

void naiveFrame(benchmark::State& state, double fraction)
{
    Scene& s = scene();
    std::int64_t frame = 0;
    for (auto _ : state) {
        setWindow(s.view, fraction, frame++ % 200);
        renderNaive(s);
    }
    state.counters["fps"]
        = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

// A wheel zoom from everything down to a 1/100 000 window around one point, and back.
void lodZoomSweep(benchmark::State& state)
{
    Scene& s = scene();
    setWindow(s.view, 1.0, 0);
    const double x = TimelineView::kLabelWidth + s.view.canvasWidth() * 0.43;
    double factor = 1.25;
    for (auto _ : state) {
        s.view.zoomAround(x, factor);
        const double window = s.view.nsPerPixel() * s.view.canvasWidth();
        if (window < double(s.traces.spans[0]) * 1e-5) {
            factor = 0.8;
        } else if (window > double(s.traces.spans[0])) {
            factor = 1.25;
        }
        renderView(s.view);
    }
    state.counters["fps"]
        = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

// The two halves of lodAll: preparing the draw lists (a worker's job in the workbench) and
// painting them (the GUI thread's).
void prepareAll(benchmark::State& state)
{
    Scene& s = scene();
    std::int64_t frame = 0;
    for (auto _ : state) {
        setWindow(s.view, 1.0, frame++ % 200);
    }
}

void paintAll(benchmark::State& state)
{
    Scene& s = scene();
    setWindow(s.view, 1.0, 0);
    for (auto _ : state) {
        renderView(s.view);
    }
}

void lodAll(benchmark::State& state) { lodFrame(state, 1.0); }
void lodHundredth(benchmark::State& state) { lodFrame(state, 0.01); }
void lodTenThousandth(benchmark::State& state) { lodFrame(state, 1e-4); }
void naiveAll(benchmark::State& state) { naiveFrame(state, 1.0); }
void naiveHundredth(benchmark::State& state) { naiveFrame(state, 0.01); }
void naiveTenThousandth(benchmark::State& state) { naiveFrame(state, 1e-4); }

BENCHMARK(lodAll)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(prepareAll)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(paintAll)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(lodHundredth)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(lodTenThousandth)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(lodZoomSweep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(naiveAll)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(naiveHundredth)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10);
BENCHMARK(naiveTenThousandth)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Prints frames per second and each level-of-detail figure as a ratio to the naive frame of the
/// same window.
void printSummary(const day0::bench::BenchTimes& times)
{
    const auto& trace = *scene().traces.traces[0];
    fmt::print("\n{} slices on {} tracks, {} × {} pixels; frames per second (goal ≥ 30):\n",
        trace.sliceCount(), trace.tracks().size(), kWidth, kHeight);
    const std::pair<const char*, const char*> pairs[]
        = { { "lodAll", "naiveAll" }, { "lodHundredth", "naiveHundredth" },
              { "lodTenThousandth", "naiveTenThousandth" }, { "lodZoomSweep", nullptr } };
    for (const auto& [lod, naive] : pairs) {
        // "lodAll/real_time" → "lodAll".
        const double seconds = times.real(lod);
        if (seconds <= 0) {
            continue;
        }
        std::string line = fmt::format("  {:<18} {:8.1f} fps", lod, 1.0 / seconds);
        if (naive != nullptr) {
            if (const double baseline = times.real(naive); baseline > 0) {
                const double ratio = baseline / seconds;
                line += fmt::format("   baseline {:<20} {:8.2f} fps   {:7.1f}x {}", naive,
                    1.0 / baseline, ratio >= 1.0 ? ratio : 1.0 / ratio,
                    ratio >= 1.0 ? "faster" : "slower");
            }
        }
        fmt::print("{}\n", line);
    }
}

} // namespace

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }
    QApplication app(argc, argv);
    day0::bench::runBenchmarks(argc, argv, printSummary);
    sceneHolder().reset();
    return 0;
}
