// The scheduler's batched decode and batched prefill (#23), in process (no HTTP), on
// llama-3.1-8b shrunk to 4 layers of width 512 (tiny-llama in quick mode), greedy, ignore_eos:
// - decode tokens/s at concurrency 1, 4 and 8, the running sequences' decode steps run as one
//   batched forward against one after another (SchedulerOptions::batchDecode off); each level
//   sends `concurrency` requests at once and times them from the first send to the last token;
// - mean TTFT at concurrency 4 and 8 (prompts of 32 to 256 tokens, all sent at once, so they are
//   admitted at the same step boundary), the prompts prefilled as one batched forward against
//   one prompt per forward (SchedulerOptions::batchPrefill off), from the scheduler's own TTFT
//   sum (arrival to first token).
// - decode tokens/s at concurrency 8 over a plan's sharded ranks (tp=2, the `day0 serve --plan`
//   path: actions::shardedSource), every step one batched forward over the ranks against one
//   sequence per step (batchDecode off: how --plan served before the ranks ran batched steps).
// Both sides alternate within each iteration so they see the same load. Prints the ratios per
// level; nothing is asserted on time.
#include "actions/serve_sharded.h"
#include "bench_support.h"
#include "checkpoint/shrink.h"
#include "exec/precision.h"
#include "parallel/served_ranks.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

namespace {

using Clock = std::chrono::steady_clock;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

const std::string& checkpoint()
{
    static const std::string path = [] {
        if (quick()) {
            return std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";
        }
        const auto dir = day0::bench::scratchDir("serve_batch_bench") / "m";
        day0::checkpoint::ShrinkOptions o;
        o.layers = 4;
        o.hidden = 512;
        o.vocab = 4096;
        day0::Progress progress;
        auto shrunk = day0::checkpoint::shrinkModel("llama-3.1-8b", dir, o, progress, {});
        if (!shrunk) {
            day0::bench::fail("serve_batch_bench", shrunk.error().message);
        }
        return dir.string();
    }();
    return path;
}

std::int64_t outputTokens() { return quick() ? 8 : 32; }

/// Tokens/s per concurrency, batched and one after another, one value per iteration.

/// Mean TTFT (seconds) per concurrency, prompts prefilled together or one per forward.
std::map<int, std::vector<double>> g_ttftBatched;
std::map<int, std::vector<double>> g_ttftSequential;

/// A scheduler over the checkpoint, decode steps batched or not, prompts prefilled together or
/// not.
std::unique_ptr<day0::serve::Scheduler> makeScheduler(
    int concurrency, bool batched, bool batchPrefill = true)
{
    day0::Progress progress;
    auto loaded = day0::serve::loadServedModel(checkpoint(), false, progress, {});
    if (!loaded) {
        day0::bench::fail("serve_batch_bench", loaded.error().message);
    }
    day0::serve::SchedulerOptions o;
    o.maxRunning = concurrency;
    o.plan = *day0::exec::parsePrecisionPlan("fp32");
    o.batchDecode = batched;
    o.batchPrefill = batchPrefill;
    auto s = std::make_unique<day0::serve::Scheduler>(std::move(*loaded->engine), o);
    if (batched && s->decodePath() != "batched") {
        day0::bench::fail("serve_batch_bench", "not batched: " + s->decodePath());
    }
    return s;
}

/// A scheduler over the checkpoint's ranks under `plan`, steps batched over the ranks or one
/// sequence at a time.
std::unique_ptr<day0::serve::Scheduler> makePlanScheduler(
    int concurrency, bool batched, const std::string& plan)
{
    day0::Progress progress;
    auto loaded = day0::serve::loadServedModel(
        checkpoint(), false, progress, {}, day0::serve::ServedWeights::SpecOnly);
    if (!loaded) {
        day0::bench::fail("serve_batch_bench", loaded.error().message);
    }
    auto layout = day0::checkpoint::parseShardLayout(plan);
    if (!layout) {
        day0::bench::fail("serve_batch_bench", layout.error().message);
    }
    auto ranks = day0::parallel::ServedRanks::start(checkpoint(), *layout, progress, {});
    if (!ranks) {
        day0::bench::fail("serve_batch_bench", ranks.error().message);
    }
    day0::serve::SchedulerOptions o;
    o.maxRunning = concurrency;
    o.plan = *day0::exec::parsePrecisionPlan("fp32");
    o.batchDecode = batched;
    o.source = day0::actions::shardedSource(
        std::shared_ptr<day0::parallel::ServedRanks>(std::move(*ranks)));
    auto s = std::make_unique<day0::serve::Scheduler>(loaded->spec, o);
    if (batched && s->decodePath() != "batched") {
        day0::bench::fail("serve_batch_bench", "not batched over the ranks: " + s->decodePath());
    }
    return s;
}

/// `concurrency` greedy requests sent at once; (tokens, seconds from the first send to the last
/// token).
std::pair<std::int64_t, double> level(day0::serve::Scheduler& scheduler, int concurrency)
{
    std::vector<std::shared_ptr<day0::serve::RequestStream>> streams;
    const auto start = Clock::now();
    for (int i = 0; i < concurrency; ++i) {
        day0::serve::GenerationRequest r;
        for (int t = 0; t < 16; ++t) {
            r.prompt.push_back(1 + (i * 31 + t * 7) % 200);
        }
        r.maxTokens = outputTokens();
        r.ignoreEos = true;
        r.sampling.temperature = 0.0;
        auto submitted = scheduler.submit(std::move(r));
        if (!submitted.stream) {
            day0::bench::fail("serve_batch_bench", submitted.reason);
        }
        streams.push_back(submitted.stream);
    }
    std::int64_t tokens = 0;
    for (auto& s : streams) {
        day0::serve::RequestStream::Batch batch;
        do {
            batch = s->take(std::chrono::milliseconds(200));
            tokens += std::int64_t(batch.tokens.size());
        } while (!batch.finish);
    }
    return { tokens, std::chrono::duration<double>(Clock::now() - start).count() };
}

/// Tokens/s of each iteration's level, one sequence per step and batched, and their ratio.
struct Rates {
    std::vector<double> sequential;
    std::vector<double> batched;
    std::vector<double> ratios; ///< batched / sequential, per iteration
};

/// Each iteration runs the level one after another, then batched, so that both see the same
/// machine load (the figure is the batched time); which goes first alternates, so neither
/// always follows the other's cache footprint.
void alternateLevels(benchmark::State& state, day0::serve::Scheduler& sequential,
    day0::serve::Scheduler& batched, int concurrency, Rates& out)
{
    level(sequential, concurrency); // warm-up
    level(batched, concurrency);
    bool batchedFirst = false;
    for (auto _ : state) {
        std::pair<std::int64_t, double> a;
        std::pair<std::int64_t, double> b;
        if (batchedFirst) {
            b = level(batched, concurrency);
            a = level(sequential, concurrency);
        } else {
            a = level(sequential, concurrency);
            b = level(batched, concurrency);
        }
        batchedFirst = !batchedFirst;
        out.sequential.push_back(double(a.first) / a.second);
        out.batched.push_back(double(b.first) / b.second);
        out.ratios.push_back((double(b.first) / b.second) / (double(a.first) / a.second));
        state.SetIterationTime(b.second);
    }
}

std::map<int, Rates> g_rates; ///< by concurrency

void BM_Decode(benchmark::State& state)
{
    const int concurrency = int(state.range(0));
    auto sequential = makeScheduler(concurrency, false);
    auto batched = makeScheduler(concurrency, true);
    alternateLevels(state, *sequential, *batched, concurrency, g_rates[concurrency]);
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(4)->Arg(8)->UseManualTime()->Iterations(3)->Unit(
    benchmark::kMillisecond);

/// Tokens/s at concurrency 8 over tp=2 ranks, batched steps and one sequence per step.
Rates g_planRates;

/// The same level over a plan's ranks (tp=2).
void BM_PlanDecode(benchmark::State& state)
{
    const int concurrency = int(state.range(0));
    auto sequential = makePlanScheduler(concurrency, false, "tp=2");
    auto batched = makePlanScheduler(concurrency, true, "tp=2");
    alternateLevels(state, *sequential, *batched, concurrency, g_planRates);
    if (batched->metrics().decodeBatches == 0) {
        day0::bench::fail("serve_batch_bench", "no batched step ran over the ranks");
    }
}
BENCHMARK(BM_PlanDecode)->Arg(8)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

/// `concurrency` requests sent at once, 2 tokens each, of 32, 64, ... 256 prompt tokens
/// (cycling) or, `shortPrompts`, of 4 to 11; their mean TTFT by the scheduler's TTFT sum.
double meanTtft(day0::serve::Scheduler& scheduler, int concurrency, bool shortPrompts)
{
    const auto before = scheduler.metrics();
    std::vector<std::shared_ptr<day0::serve::RequestStream>> streams;
    for (int i = 0; i < concurrency; ++i) {
        day0::serve::GenerationRequest r;
        const int length
            = shortPrompts ? 4 + i % 8 : (quick() ? 8 + 4 * (i % 8) : 32 * (1 + i % 8));
        for (int t = 0; t < length; ++t) {
            r.prompt.push_back(1 + (i * 31 + t * 7) % 200);
        }
        r.maxTokens = 2;
        r.ignoreEos = true;
        r.sampling.temperature = 0.0;
        auto submitted = scheduler.submit(std::move(r));
        if (!submitted.stream) {
            day0::bench::fail("serve_batch_bench", submitted.reason);
        }
        streams.push_back(submitted.stream);
    }
    for (auto& s : streams) {
        day0::serve::RequestStream::Batch batch;
        do {
            batch = s->take(std::chrono::milliseconds(200));
        } while (!batch.finish);
    }
    const auto after = scheduler.metrics();
    std::int64_t count = 0;
    for (std::size_t b = 0; b < after.ttftCounts.size(); ++b) {
        count += after.ttftCounts[b] - before.ttftCounts[b];
    }
    return count > 0 ? (after.ttftSum - before.ttftSum) / double(count) : 0.0;
}

/// Mean TTFT with the prompts prefilled one per forward and together, alternating.
void BM_PrefillTtft(benchmark::State& state)
{
    const int concurrency = int(state.range(0));
    const bool shortPrompts = state.range(1) != 0;
    const int key = shortPrompts ? -concurrency : concurrency;
    auto sequential = makeScheduler(concurrency, true, false);
    auto batched = makeScheduler(concurrency, true, true);
    meanTtft(*sequential, concurrency, shortPrompts); // warm-up
    meanTtft(*batched, concurrency, shortPrompts);
    bool batchedFirst = false;
    for (auto _ : state) {
        double a = 0;
        double b = 0;
        if (batchedFirst) {
            b = meanTtft(*batched, concurrency, shortPrompts);
            a = meanTtft(*sequential, concurrency, shortPrompts);
        } else {
            a = meanTtft(*sequential, concurrency, shortPrompts);
            b = meanTtft(*batched, concurrency, shortPrompts);
        }
        batchedFirst = !batchedFirst;
        g_ttftSequential[key].push_back(a);
        g_ttftBatched[key].push_back(b);
        state.SetIterationTime(b);
    }
    // Long prompts exceed the batch's token cap (SchedulerOptions::prefillBatchTokens) and
    // prefill alone; short ones must have run together.
    if (shortPrompts && batched->metrics().prefillBatches == 0) {
        day0::bench::fail("serve_batch_bench", "no batched prefill ran");
    }
}
BENCHMARK(BM_PrefillTtft)
    ->Args({ 4, 0 })
    ->Args({ 8, 0 })
    ->Args({ 8, 1 })
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

void printSummary(const day0::bench::BenchTimes&)
{
    for (const int c : { 1, 4, 8 }) {
        const double unbatched = median(g_rates[c].sequential);
        const double batched = median(g_rates[c].batched);
        fmt::print("concurrency {}: batched decode {:.1f} tokens/s, one after another {:.1f} "
                   "tokens/s (medians): {:.2f}x; median of the per-iteration ratios {:.2f}x{}\n",
            c, batched, unbatched, unbatched > 0 ? batched / unbatched : 0.0,
            median(g_rates[c].ratios),
            c == 1 ? " (one sequence runs the same path both ways: this line is the noise)" : "");
    }
    {
        const double unbatched = median(g_planRates.sequential);
        const double batched = median(g_planRates.batched);
        fmt::print("concurrency 8 over --plan tp=2: batched steps over the ranks {:.1f} tokens/s, "
                   "one sequence per step {:.1f} tokens/s (medians): {:.2f}x; median of the "
                   "per-iteration ratios {:.2f}x\n",
            batched, unbatched, unbatched > 0 ? batched / unbatched : 0.0,
            median(g_planRates.ratios));
    }
    for (const int key : { 4, 8, -8 }) {
        const double one = median(g_ttftSequential[key]);
        const double together = median(g_ttftBatched[key]);
        fmt::print("concurrency {}, {} prompts: mean TTFT with the prompts prefilled together "
                   "{:.1f} ms, one per forward {:.1f} ms (medians): one per forward / together "
                   "{:.2f}x\n",
            std::abs(key), key < 0 ? "4-11 token" : "32-256 token", together * 1e3, one * 1e3,
            together > 0 ? one / together : 0.0);
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
