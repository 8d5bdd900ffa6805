// How fast the planner sweeps every layout of Kimi-K2 (1T, 384 experts, 61 layers) on a cluster,
// and the 2026 frontier models DeepSeek-V4-Pro and Kimi-K3 against it.
// Baseline, measured in the same run: one memory estimate of one fixed layout through the public
// estimator, bytes only (what a GUI slider move would cost without the planner's precomputed
// tables). The figures are printed after the table as layouts evaluated per second and as ratios
// to that baseline; singleEstimateDerived is the same estimate with every figure's derivation
// (what --explain, --json, the memory panel and the planner's tooltip ask for).

#include "bench_support.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/memory_estimator.h"
#include "plan/model_summary.h"
#include "plan/planner.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace {

using namespace day0;
using namespace day0::plan;

model::LayerGraph graphOf(const char* name)
{
    auto spec = model::loadModel(name);
    if (!spec) {
        fmt::print(stderr, "{}: {}\n", name, spec.error().message);
        std::abort();
    }
    return model::buildLayerGraph(*spec);
}

const model::LayerGraph& kimiGraph()
{
    static const model::LayerGraph graph = graphOf("kimi-k2");
    return graph;
}

const ModelSummary& kimi()
{
    static const ModelSummary summary = summarizeModel(kimiGraph());
    return summary;
}

// The 2026 frontier models: DeepSeek-V4-Pro (compressed attention of three kinds, 384 experts,
// hash routing, MTP) and Kimi-K3 (KDA / MLA hybrid, 896 latent experts, vision tower).
const ModelSummary& deepseekV4()
{
    static const ModelSummary summary = summarizeModel(graphOf("deepseek-v4-pro"));
    return summary;
}

const ModelSummary& kimiK3()
{
    static const ModelSummary summary = summarizeModel(graphOf("kimi-k3"));
    return summary;
}

hardware::Cluster clusterOf(const char* text)
{
    auto c = hardware::parseCluster(text);
    if (!c) {
        fmt::print(stderr, "{}: {}\n", text, c.error().message);
        std::abort();
    }
    return *c;
}

std::map<std::string, double>& layoutsPerSweep()
{
    static std::map<std::string, double> counts;
    return counts;
}

void estimate(benchmark::State& state, Derive derive)
{
    const auto cluster = clusterOf("h200:256x8");
    Workload wl;
    const auto layout = resolveLayout(
        *parsePlan("tp=8,pp=16,ep=64,etp=1,zero=1,recompute=selective"), kimi(), wl, cluster);
    if (!layout) {
        state.SkipWithError(layout.error().message.c_str());
        return;
    }
    for (auto _ : state) {
        benchmark::DoNotOptimize(estimateMemory(kimi(), *layout, wl, cluster, {}, derive));
    }
}

void singleEstimate(benchmark::State& state) { estimate(state, Derive::BytesOnly); }
void singleEstimateDerived(benchmark::State& state) { estimate(state, Derive::WithDerivations); }

void summarize(benchmark::State& state)
{
    for (auto _ : state) {
        benchmark::DoNotOptimize(summarizeModel(kimiGraph()));
    }
}

void sweep(benchmark::State& state, const char* name, const char* clusterText, Mode mode,
    const ModelSummary& model = kimi())
{
    const auto cluster = clusterOf(clusterText);
    PlannerOptions options;
    options.workload.mode = mode;
    double evaluated = 0;
    for (auto _ : state) {
        Progress progress;
        auto result = planLayouts(model, cluster, options, progress);
        if (!result) {
            state.SkipWithError(result.error().message.c_str());
            return;
        }
        evaluated = double(result->evaluated);
        benchmark::DoNotOptimize(result->layouts.data());
    }
    layoutsPerSweep()[name] = evaluated;
    state.counters["layouts"] = evaluated;
    state.counters["layouts/s"]
        = benchmark::Counter(evaluated, benchmark::Counter::kIsIterationInvariantRate);
}

void trainSweep2048(benchmark::State& state)
{
    sweep(state, "trainSweep2048", "h200:256x8", Mode::Train);
}
void trainSweep256(benchmark::State& state)
{
    sweep(state, "trainSweep256", "h200:32x8", Mode::Train);
}
void inferSweep256(benchmark::State& state)
{
    sweep(state, "inferSweep256", "h200:32x8", Mode::Infer);
}

void deepseekV4Train2048(benchmark::State& state)
{
    sweep(state, "deepseekV4Train2048", "h200:256x8", Mode::Train, deepseekV4());
}
void kimiK3Train2048(benchmark::State& state)
{
    sweep(state, "kimiK3Train2048", "h200:256x8", Mode::Train, kimiK3());
}

BENCHMARK(singleEstimate)->Unit(benchmark::kMicrosecond);
BENCHMARK(singleEstimateDerived)->Unit(benchmark::kMicrosecond);
BENCHMARK(summarize)->Unit(benchmark::kMillisecond);
BENCHMARK(trainSweep2048)->Unit(benchmark::kMillisecond);
BENCHMARK(deepseekV4Train2048)->Unit(benchmark::kMillisecond);
BENCHMARK(kimiK3Train2048)->Unit(benchmark::kMillisecond);
BENCHMARK(trainSweep256)->Unit(benchmark::kMillisecond);
BENCHMARK(inferSweep256)->Unit(benchmark::kMillisecond);

/// Prints layouts per second and each figure relative to one estimate.
void printSummary(const day0::bench::BenchTimes& times)
{
    const double base = times.cpu("singleEstimate");
    if (base <= 0.0) {
        return;
    }
    fmt::print(
        "\nKimi-K2, relative to one memory estimate of one layout ({:.1f} µs):\n", base * 1e6);
    for (const auto& [name, time] : times.byName) {
        const double seconds = time.cpu;
        const auto it = layoutsPerSweep().find(name);
        if (it == layoutsPerSweep().end()) {
            fmt::print("  {:<15} {:10.1f}x one estimate\n", name, seconds / base);
            continue;
        }
        const double perSecond = it->second / seconds;
        fmt::print("  {:<15} {:10.1f}x one estimate for {:.0f} layouts: {:.3g} layouts/s, "
                   "{:.1f}x the estimates/s of the baseline\n",
            name, seconds / base, it->second, perSecond, perSecond * base);
    }
    // The frontier models' sweeps against Kimi-K2's on the same 256 × 8 cluster (goal: at most
    // 1.5× its time): per-layer-kind KV, states and FLOPs must not slow the planner down.
    const double k2 = times.cpu("trainSweep2048");
    if (k2 > 0.0) {
        fmt::print(
            "\nTraining sweeps on h200:256x8 relative to Kimi-K2's ({:.1f} ms):\n", k2 * 1e3);
        for (const char* name : { "deepseekV4Train2048", "kimiK3Train2048" }) {
            const double t = times.cpu(name);
            if (t > 0.0) {
                fmt::print("  {:<20} {:6.2f}x Kimi-K2's sweep (goal <= 1.5x)\n", name, t / k2);
            }
        }
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
