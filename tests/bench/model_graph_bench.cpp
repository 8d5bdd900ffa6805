// How fast the model module turns Kimi-K2 (~140k tensors) into a LayerGraph and counts it.
// Baseline, measured in the same run: a deep copy of the finished graph (every name and shape
// allocated once more), the floor any builder of the same data structure pays. The figures are
// printed as ratios to that baseline after the benchmark table.

#include "bench_support.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <string>

namespace {

using namespace day0::model;

const ModelSpec& kimiK2()
{
    static const ModelSpec spec = [] {
        auto loaded = loadModel("kimi-k2");
        if (!loaded) {
            fmt::print(stderr, "kimi-k2: {}\n", loaded.error().message);
            std::abort();
        }
        return *loaded;
    }();
    return spec;
}

const LayerGraph& kimiGraph()
{
    static const LayerGraph graph = buildLayerGraph(kimiK2());
    return graph;
}

void copyGraph(benchmark::State& state)
{
    for (auto _ : state) {
        LayerGraph copy = kimiGraph();
        benchmark::DoNotOptimize(copy.blocks.data());
    }
    state.counters["tensors"] = double(kimiGraph().tensorCount());
}

void buildGraph(benchmark::State& state)
{
    for (auto _ : state) {
        LayerGraph graph = buildLayerGraph(kimiK2());
        benchmark::DoNotOptimize(graph.blocks.data());
    }
}

void countParameters(benchmark::State& state)
{
    for (auto _ : state) {
        benchmark::DoNotOptimize(kimiGraph().countParameters());
    }
}

void summarize(benchmark::State& state)
{
    for (auto _ : state) {
        benchmark::DoNotOptimize(summarizeBlocks(kimiGraph()));
    }
}

void readConfig(benchmark::State& state)
{
    for (auto _ : state) {
        benchmark::DoNotOptimize(loadModel("kimi-k2"));
    }
}

BENCHMARK(copyGraph)->Unit(benchmark::kMillisecond);
BENCHMARK(buildGraph)->Unit(benchmark::kMillisecond);
BENCHMARK(countParameters)->Unit(benchmark::kMillisecond);
BENCHMARK(summarize)->Unit(benchmark::kMillisecond);
BENCHMARK(readConfig)->Unit(benchmark::kMillisecond);

/// Prints every figure as a ratio to the copy baseline.
void printSummary(const day0::bench::BenchTimes& times)
{
    const double base = times.cpu("copyGraph");
    if (base <= 0.0) {
        return;
    }
    fmt::print("\nKimi-K2 ({} tensors), CPU time relative to deep-copying the finished graph:\n",
        kimiGraph().tensorCount());
    for (const auto& [name, time] : times.byName) {
        fmt::print("  {:<16} {:6.2f}x the copy\n", name, time.cpu / base);
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
