// The scheduler's batched decode (#23): decode tokens/s of `day0 serve`'s scheduler (in process,
// no HTTP) at concurrency 1, 4 and 8, with the running sequences' decode steps run as one batched
// forward against one after another (SchedulerOptions::batchDecode off), alternating within each
// iteration so both see the same load, on
// llama-3.1-8b shrunk to 4 layers of width 512 (tiny-llama in quick mode). Greedy, ignore_eos;
// each level sends `concurrency` requests at once and times them from the first send to the last
// token. Prints the batched/unbatched ratio per level; nothing is asserted on time.
#include "bench_support.h"
#include "checkpoint/shrink.h"
#include "exec/precision.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <algorithm>
#include <chrono>
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
std::map<int, std::vector<double>> g_batched;
std::map<int, std::vector<double>> g_sequential;
std::map<int, std::vector<double>> g_ratios; ///< batched / sequential, per iteration

/// A scheduler over the checkpoint, decode steps batched or not.
std::unique_ptr<day0::serve::Scheduler> makeScheduler(int concurrency, bool batched)
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
    auto s = std::make_unique<day0::serve::Scheduler>(std::move(*loaded->engine), o);
    if (batched && s->decodePath() != "batched") {
        day0::bench::fail("serve_batch_bench", "not batched: " + s->decodePath());
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

/// Each iteration runs the level one after another, then batched, so that both see the same
/// machine load (the figure is the batched time).
void BM_Decode(benchmark::State& state)
{
    const int concurrency = int(state.range(0));
    auto sequential = makeScheduler(concurrency, false);
    auto batched = makeScheduler(concurrency, true);
    level(*sequential, concurrency); // warm-up
    level(*batched, concurrency);
    bool batchedFirst = false;
    for (auto _ : state) {
        // Alternate which goes first, so neither always follows the other's cache footprint.
        std::pair<std::int64_t, double> a;
        std::pair<std::int64_t, double> b;
        if (batchedFirst) {
            b = level(*batched, concurrency);
            a = level(*sequential, concurrency);
        } else {
            a = level(*sequential, concurrency);
            b = level(*batched, concurrency);
        }
        batchedFirst = !batchedFirst;
        g_sequential[concurrency].push_back(double(a.first) / a.second);
        g_batched[concurrency].push_back(double(b.first) / b.second);
        g_ratios[concurrency].push_back(
            (double(b.first) / b.second) / (double(a.first) / a.second));
        state.SetIterationTime(b.second);
    }
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(4)->Arg(8)->UseManualTime()->Iterations(3)->Unit(
    benchmark::kMillisecond);

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

void printSummary(const day0::bench::BenchTimes&)
{
    for (const int c : { 1, 4, 8 }) {
        const double unbatched = median(g_sequential[c]);
        const double batched = median(g_batched[c]);
        fmt::print("concurrency {}: batched decode {:.1f} tokens/s, one after another {:.1f} "
                   "tokens/s (medians): {:.2f}x; median of the per-iteration ratios {:.2f}x{}\n",
            c, batched, unbatched, unbatched > 0 ? batched / unbatched : 0.0, median(g_ratios[c]),
            c == 1 ? " (one sequence runs the same path both ways: this line is the noise)" : "");
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
