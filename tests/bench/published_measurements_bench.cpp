// The planner's time estimates against the published measurements
// (resources/plan/published_measurements.json): after the timing table it prints, per case, the
// estimate, the measurement, the error and where the estimated time goes, then the mean absolute
// percentage error of the fit and held-out cases, training and serving apart. The figures of
// record for issue 17 are this program's output.
// Timed, with its baseline measured in the same run: estimating every case of the table
// (layouts resolved, serving batches searched) relative to one training estimate of one case.

#include "base/resources.h"
#include "bench_support.h"
#include "plan/published_measurements.h"
#include "test_models.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace {

using namespace day0;
using namespace day0::plan;

/// A case's model: an inline GPT shape (Megatron's, tied head) or a bundled config, each
/// summarised once for the whole run.
const CaseModelResolver modelOf = cachingResolver(test::publishedCaseModel);

const std::vector<PublishedCase>& cases()
{
    static const std::vector<PublishedCase> table = [] {
        setResourceDir(DAY0_RESOURCE_DIR);
        auto read = readPublishedMeasurements(publishedMeasurementsFile());
        if (!read) {
            bench::fail("published_measurements_bench", read.error().message);
        }
        return *read;
    }();
    return table;
}

void oneEstimate(benchmark::State& state)
{
    const auto& c = cases().front();
    auto model = modelOf(c.row.at("model"));
    if (!model) {
        bench::fail("oneEstimate", model.error().message);
    }
    for (auto _ : state) {
        auto e = estimatePublishedCase(c, *model);
        benchmark::DoNotOptimize(e);
    }
}
BENCHMARK(oneEstimate)->Unit(benchmark::kMicrosecond);

void wholeTable(benchmark::State& state)
{
    for (auto _ : state) {
        auto ev = evaluatePublished(cases(), modelOf);
        if (!ev) {
            bench::fail("wholeTable", ev.error().message);
        }
        benchmark::DoNotOptimize(ev);
    }
}
BENCHMARK(wholeTable)->Unit(benchmark::kMillisecond);

void printSummary(const bench::BenchTimes& times)
{
    auto ev = evaluatePublished(cases(), modelOf);
    if (!ev) {
        bench::fail("published_measurements_bench", ev.error().message);
    }
    fmt::print("\n{} published measurements ({}):\n{}", ev->rows.size(),
        publishedMeasurementsFile().filename().string(), ev->format());
    auto cal = calibrateOnFitCases(cases(), modelOf);
    if (!cal) {
        bench::fail("published_measurements_bench", cal.error().message);
    }
    fmt::print("Constants {}.\n", cal->describe());
    const double base = times.cpu("oneEstimate");
    const double all = times.cpu("wholeTable");
    if (base > 0.0 && all > 0.0) {
        fmt::print("\nThe whole table takes {:.0f}x one training estimate ({:.1f} µs) for {} "
                   "cases.\n",
            all / base, base * 1e6, ev->rows.size());
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
