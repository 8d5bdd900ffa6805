// The per-position comparison of `day0 eval` (numerics::compareRows: KL, argmaxes, top-5,
// NLLs) over 512 positions × a 152k vocabulary (Qwen3's 151,936), against numpy computing the
// same KL and argmax agreement on arrays of the same size, measured in the same run. Goal: faster
// than numpy. The logits come in blocks of 64 positions (a window's worth, as `day0 eval` holds
// them), for both.
#include "bench_support.h"
#include "numerics/end_to_end.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

namespace {

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

std::int64_t vocab() { return quick() ? 4096 : 151936; }
constexpr std::int64_t kBlock = 64;
std::int64_t blocks() { return quick() ? 1 : 8; } // 8 × 64 = 512 positions

struct Logits {
    std::vector<double> reference;
    std::vector<double> target;
    std::vector<std::int64_t> next;
};

const Logits& logits()
{
    static const Logits l = [] {
        Logits out;
        const auto n = std::size_t(kBlock * vocab());
        out.reference.resize(n);
        out.target.resize(n);
        std::mt19937_64 rng(1);
        std::normal_distribution<double> logit(0.0, 3.0);
        std::normal_distribution<double> noise(0.0, 0.05);
        for (std::size_t i = 0; i < n; ++i) {
            out.reference[i] = logit(rng);
            out.target[i] = out.reference[i] + noise(rng);
        }
        for (std::int64_t r = 0; r < kBlock; ++r) {
            out.next.push_back(std::int64_t(rng() % std::uint64_t(vocab())));
        }
        return out;
    }();
    return l;
}

void BM_Day0CompareRows(benchmark::State& state)
{
    const Logits& l = logits();
    double kl = 0.0;
    for (auto _ : state) {
        for (std::int64_t b = 0; b < blocks(); ++b) {
            const auto rows
                = day0::numerics::compareRows(l.reference, l.target, kBlock, vocab(), l.next, 5);
            kl += rows.front().kl;
        }
    }
    benchmark::DoNotOptimize(kl);
    state.counters["positions"] = double(kBlock * blocks());
}
BENCHMARK(BM_Day0CompareRows)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

/// Seconds numpy takes for the same work (median of several), negative when numpy is missing.
double numpySeconds()
{
    const std::string script
        = fmt::format("import time, numpy as np\n"
                      "rng = np.random.default_rng(1)\n"
                      "r = rng.normal(0, 3, ({0}, {1})); t = r + rng.normal(0, 0.05, r.shape)\n"
                      "def lsm(x):\n"
                      "    m = x.max(axis=-1, keepdims=True)\n"
                      "    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))\n"
                      "times = []\n"
                      "for _ in range({3}):\n"
                      "    t0 = time.perf_counter()\n"
                      "    for b in range({2}):\n"
                      "        lr, lt = lsm(r), lsm(t)\n"
                      "        kl = (np.exp(lr) * (lr - lt)).sum(axis=-1)\n"
                      "        same = r.argmax(axis=-1) == t.argmax(axis=-1)\n"
                      "    times.append(time.perf_counter() - t0)\n"
                      "times.sort(); print(times[len(times) // 2])\n",
            kBlock, vocab(), blocks(), quick() ? 1 : 3);
    const auto file = day0::bench::scratchDir("eval_kl_bench") / "numpy_kl.py";
    std::ofstream(file) << script;
    FILE* pipe
        = ::popen(fmt::format("/usr/bin/python3 {} 2>/dev/null", file.string()).c_str(), "r");
    if (pipe == nullptr) {
        return -1.0;
    }
    char buffer[64] = {};
    const bool read = std::fgets(buffer, sizeof buffer, pipe) != nullptr;
    if (::pclose(pipe) != 0 || !read) {
        return -1.0;
    }
    return std::atof(buffer);
}

void printSummary(const day0::bench::BenchTimes& times)
{
    const double ours = times.real("BM_Day0CompareRows");
    const double numpy = numpySeconds();
    fmt::print("\n{} positions × {} vocabulary: day0 {:.1f} ms (KL, argmax, top-5, NLL), ",
        kBlock * blocks(), vocab(), ours * 1e3);
    if (numpy <= 0.0) {
        fmt::print("no numpy baseline (/usr/bin/python3 without numpy)\n");
        return;
    }
    fmt::print("numpy {:.1f} ms (KL, argmax): day0 is {:.2f}× numpy's speed (goal > 1)\n",
        numpy * 1e3, numpy / ours);
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
