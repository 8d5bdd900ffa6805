// What the runs panel does when two runs are selected, on two Kimi-K2-shaped runs of 100,000
// per-anchor layer metrics each. Baseline, measured in the same run: loading both runs from the
// store (RunStore::load), which the panel has to do anyway. Measured against it:
//  - history::compareRuns (aligning the rows by anchor and metric);
//  - the plot views: layerGrid and layerChanges of every metric, the depth curve of every metric,
//    memoryBars (what the panel draws after each change of a chooser).
// Also the search box: listing 10,000 runs with a search text against listing them unfiltered.
// The figures are printed after the benchmark table, as ratios to their baselines.

#include "bench_support.h"
#include "history/comparison_views.h"
#include "history/run_compare.h"
#include "history/run_store.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace {

using namespace day0;
using namespace day0::history;

// DAY0_BENCH_QUICK=1 (CTest) uses a fifth of the rows and runs; run by hand for real figures.
bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }
const std::size_t kLayerRows = quick() ? 20'000 : 100'000;
const int kListedRuns = quick() ? 2'000 : 10'000;

[[noreturn]] void fail(const std::string& what) { bench::fail("runs_compare_bench", what); }

const std::filesystem::path& benchDir() { return bench::scratchDir("runs_compare_bench"); }

// 61 layers of Kimi-K2 modules (attention, norms, 384 experts), four metrics, 100,000 rows; `seed`
// changes the values, not the anchors.
RunRecord kimiRun(std::uint64_t seed)
{
    RunRecord r(RunKind::Run);
    r.info.modelName = "kimi-k2";
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> value(1e-4, 1e-1);
    r.layers.reserve(kLayerRows);
    for (int layer = 0; r.layers.size() < kLayerRows; ++layer) {
        std::vector<std::string> anchors;
        for (const char* sub : { "input_layernorm", "self_attn.q_a_proj", "self_attn.o_proj",
                 "self_attn", "post_attention_layernorm", "mlp.gate", "mlp.shared_experts" }) {
            anchors.push_back(fmt::format("model.layers.{}.{}", layer, sub));
        }
        for (int expert = 0; expert < 384; ++expert) {
            anchors.push_back(fmt::format("model.layers.{}.mlp.experts.{}", layer, expert));
        }
        anchors.push_back(fmt::format("model.layers.{}.mlp", layer));
        anchors.push_back(fmt::format("model.layers.{}", layer));
        for (const auto& anchor : anchors) {
            for (const char* metric : { "rel_l2", "max_abs", "cosine", "snr_db" }) {
                if (r.layers.size() < kLayerRows) {
                    r.layers.add(anchor, metric, value(rng));
                }
            }
        }
    }
    for (int rank = 0; rank < 64; ++rank) {
        for (const char* component : { "weights", "gradients", "optimizer", "activations" }) {
            r.addMemory(rank, rank / 8, component, Bytes(std::int64_t(value(rng) * 1e12)));
        }
    }
    return r;
}

struct Pair {
    RunStore store;
    RunId a;
    RunId b;
};

Pair& storedPair()
{
    static Pair pair = [] {
        auto store = RunStore::open(benchDir() / "pair.sqlite");
        if (!store) {
            fail(store.error().message);
        }
        const auto a = store->commit(kimiRun(1));
        const auto b = store->commit(kimiRun(2));
        if (!a || !b) {
            fail("seeding pair.sqlite");
        }
        return Pair { std::move(store).value(), *a, *b };
    }();
    return pair;
}

const std::pair<RunRecord, RunRecord>& loadedPair()
{
    static const auto pair = [] {
        auto& p = storedPair();
        return std::pair(p.store.load(p.a).value(), p.store.load(p.b).value());
    }();
    return pair;
}

void loadBoth(benchmark::State& state)
{
    auto& p = storedPair();
    for (auto _ : state) {
        auto a = p.store.load(p.a);
        auto b = p.store.load(p.b);
        if (!a || !b || a->layers.size() != kLayerRows) {
            fail("loading");
        }
        benchmark::DoNotOptimize(b->layers.rows().data());
    }
}

void compare(benchmark::State& state)
{
    const auto& [a, b] = loadedPair();
    for (auto _ : state) {
        const RunComparison c = compareRuns(a, b);
        benchmark::DoNotOptimize(c.layers.data());
    }
}

void views(benchmark::State& state)
{
    const auto& [a, b] = loadedPair();
    const RunComparison c = compareRuns(a, b);
    for (auto _ : state) {
        std::size_t cells = 0;
        for (const auto& s : c.layerSummary) {
            const LayerGrid grid = layerGrid(c, s.metric);
            cells += layerChanges(grid, LayerChange::Log10Ratio).size();
            cells += depthCurves(c, s.metric).size();
        }
        cells += memoryBars(c).components.size();
        benchmark::DoNotOptimize(cells);
    }
}

RunStore& listedStore()
{
    static RunStore store = [] {
        auto s = RunStore::open(benchDir() / "list.sqlite");
        if (!s) {
            fail(s.error().message);
        }
        std::vector<RunRecord> runs;
        runs.reserve(kListedRuns);
        const Timestamp start = now();
        for (int i = 0; i < kListedRuns; ++i) {
            RunRecord r(RunKind(i % 6));
            r.info.created = start - std::chrono::minutes(i);
            r.info.label = fmt::format("nightly {}", i);
            r.info.modelName = i % 2 ? "kimi-k2" : "deepseek-v3";
            r.info.plan = "tp=8,pp=4,ep=16";
            r.info.precision = i % 3 ? "bf16" : "fp8";
            r.info.message = i % 7 ? "ok" : "first divergence at model.layers.40.mlp";
            runs.push_back(std::move(r));
        }
        if (!s->commitAll(runs)) {
            fail("seeding list.sqlite");
        }
        return std::move(s).value();
    }();
    return store;
}

void listAll(benchmark::State& state)
{
    RunStore& store = listedStore();
    for (auto _ : state) {
        auto runs = store.list();
        if (!runs || runs->size() != std::size_t(kListedRuns)) {
            fail("listing");
        }
        benchmark::DoNotOptimize(runs->data());
    }
}

void listSearched(benchmark::State& state)
{
    RunStore& store = listedStore();
    RunFilter filter;
    filter.text = "divergence";
    for (auto _ : state) {
        auto runs = store.list(filter);
        if (!runs || runs->empty()) {
            fail("searching");
        }
        benchmark::DoNotOptimize(runs->data());
    }
}

BENCHMARK(loadBoth)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(compare)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(views)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(listAll)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(listSearched)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Prints the figures as ratios to their baselines.
void printSummary(const day0::bench::BenchTimes& times)
{
    const auto ms
        = [&](const char* name) { return times.real(name + std::string("/real_time")) * 1e3; };
    const double load = ms("loadBoth");
    if (load > 0.0) {
        fmt::print(
            "\ncomparing two runs of {} layer metrics (baseline: loading both, {:.1f} ms):\n",
            kLayerRows, load);
        fmt::print("  compareRuns          {:8.1f} ms  {:5.2f}x loading\n", ms("compare"),
            ms("compare") / load);
        fmt::print("  every plot view      {:8.1f} ms  {:5.2f}x loading\n", ms("views"),
            ms("views") / load);
    }
    const double all = ms("listAll");
    if (all > 0.0) {
        fmt::print(
            "listing {} runs with a search text: {:.1f} ms, {:.2f}x listing all ({:.1f} ms)\n",
            kListedRuns, ms("listSearched"), ms("listSearched") / all, all);
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
