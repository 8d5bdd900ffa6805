// Checkpoint throughput, each figure as a ratio to a baseline measured in the same run:
//  - verification: day0's SHA-256 over shard files (one thread, then one per core) against the
//    system's `sha256sum` over the same files (goal: ≥ 0.95× per core, scaling with cores);
//  - loading: opening a safetensors file (map, validate, prefault) and converting its BF16 tensor
//    to F32 against a plain memcpy of the same bytes (goal: ≥ 0.5×), and the conversion alone
//    from a file already open. The conversion is the loader's: SSE2 widening with streaming
//    stores, split over up to 8 threads for tensors of 4 Mi elements and more (the memcpy
//    baseline is glibc's, one thread).
// DAY0_BENCH_QUICK=1 (CTest) uses small files; run by hand for real figures.

#include "base/progress.h"
#include "bench_support.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "numerics/dtype_convert.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace ck = day0::checkpoint;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

struct Fixture {
    fs::path dir;
    std::vector<std::string> shards;
    std::uint64_t shardBytes = 0;
    fs::path tensorFile;
    std::uint64_t tensorBytes = 0;
    std::vector<float> out;

    Fixture()
    {
        dir = fs::temp_directory_path() / fmt::format("day0_checkpoint_bench_{}", ::getpid());
        fs::create_directories(dir);
        const int files = quick() ? 4 : 8;
        const std::size_t size = quick() ? (std::size_t(8) << 20) : (std::size_t(128) << 20);
        std::vector<char> data(size);
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        for (auto& c : data) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            c = char(x);
        }
        for (int i = 0; i < files; ++i) {
            const auto name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, files);
            data[0] = char(i);
            std::ofstream(dir / name, std::ios::binary)
                .write(data.data(), std::streamsize(data.size()));
            shards.push_back(name);
            shardBytes += size;
        }
        // One BF16 tensor for the load benchmark.
        const std::int64_t n = std::int64_t(size / 2);
        tensorBytes = std::uint64_t(n) * 2;
        tensorFile = dir / "tensor.safetensors";
        std::vector<ck::TensorSource> t;
        t.push_back(ck::tensorFromBytes("w", day0::DType::BF16, { n },
            std::as_bytes(std::span(data.data(), std::size_t(tensorBytes)))));
        if (!ck::writeSafetensors(tensorFile, t).ok()) {
            std::abort();
        }
        out.assign(std::size_t(n), 1.0f); // touched once, so page faults stay out of the loop
    }
    ~Fixture()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

Fixture& fixture()
{
    static Fixture f;
    return f;
}

void sha256sumTool(benchmark::State& state)
{
    auto& f = fixture();
    std::string cmd = "cd '" + f.dir.string() + "' && sha256sum";
    for (const auto& s : f.shards) {
        cmd += " " + s;
    }
    cmd += " > /dev/null";
    for (auto _ : state) {
        if (std::system(cmd.c_str()) != 0) {
            state.SkipWithError("sha256sum failed");
            break;
        }
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.shardBytes));
}

void hashFiles(benchmark::State& state)
{
    auto& f = fixture();
    ck::HashOptions options;
    options.threads = int(state.range(0));
    for (auto _ : state) {
        day0::Progress progress;
        auto r = ck::hashFiles(f.dir, f.shards, options, progress, {});
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            break;
        }
        benchmark::DoNotOptimize(r->data());
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.shardBytes));
}

void memcpyBaseline(benchmark::State& state)
{
    auto& f = fixture();
    auto file = ck::SafetensorsFile::open(f.tensorFile);
    const auto src = file->data(file->tensors()[0]);
    for (auto _ : state) {
        std::memcpy(f.out.data(), src.data(), src.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.tensorBytes));
}

void loadBf16ToF32(benchmark::State& state)
{
    auto& f = fixture();
    for (auto _ : state) {
        auto file = ck::SafetensorsFile::open(f.tensorFile); // map + validate the header each time
        const auto& t = file->tensors()[0];
        file->prefetch(t);
        auto r = day0::numerics::convertElements(file->data(t), day0::DType::BF16,
            std::as_writable_bytes(std::span(f.out)), day0::DType::F32, std::size_t(t.numel()));
        benchmark::DoNotOptimize(r.ok());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.tensorBytes));
}

void loadBf16ToF32Faulting(benchmark::State& state)
{
    // As loadBf16ToF32 without the prefault: the conversion threads fault the pages in side by
    // side instead of one madvise populating them first.
    auto& f = fixture();
    for (auto _ : state) {
        auto file = ck::SafetensorsFile::open(f.tensorFile);
        const auto& t = file->tensors()[0];
        auto r = day0::numerics::convertElements(file->data(t), day0::DType::BF16,
            std::as_writable_bytes(std::span(f.out)), day0::DType::F32, std::size_t(t.numel()));
        benchmark::DoNotOptimize(r.ok());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.tensorBytes));
}

void convertOpenFile(benchmark::State& state)
{
    auto& f = fixture();
    auto file
        = ck::SafetensorsFile::open(f.tensorFile); // mapped once, as a loader reading many tensors
    const auto& t = file->tensors()[0];
    for (auto _ : state) {
        auto r = day0::numerics::convertElements(file->data(t), day0::DType::BF16,
            std::as_writable_bytes(std::span(f.out)), day0::DType::F32, std::size_t(t.numel()));
        benchmark::DoNotOptimize(r.ok());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.tensorBytes));
}

const int kCores = int(std::max(1u, std::thread::hardware_concurrency()));

BENCHMARK(sha256sumTool)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(hashFiles)->Arg(1)->Arg(kCores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(memcpyBaseline)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadBf16ToF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadBf16ToF32Faulting)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(convertOpenFile)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Prints the figures as ratios to their baselines.
void printSummary(const day0::bench::BenchTimes& times)
{
    const double tool = times.real("sha256sumTool/real_time");
    const double one = times.real("hashFiles/1/real_time");
    const double all = times.real(fmt::format("hashFiles/{}/real_time", kCores));
    const double copy = times.real("memcpyBaseline/real_time");
    const double load = times.real("loadBf16ToF32/real_time");
    const double convert = times.real("convertOpenFile/real_time");
    const double faulting = times.real("loadBf16ToF32Faulting/real_time");
    auto& f = fixture();
    fmt::print("\nverification over {} files of {} MiB:\n", f.shards.size(),
        f.shardBytes / f.shards.size() >> 20);
    if (tool > 0 && one > 0) {
        fmt::print(
            "  day0 SHA-256, 1 thread:   {:.2f}x sha256sum (goal >= 0.95x per core)\n", tool / one);
    }
    if (one > 0 && all > 0) {
        fmt::print(
            "  day0 SHA-256, {} threads: {:.2f}x sha256sum, {:.2f}x one thread on {} cores\n",
            kCores, tool / all, one / all, kCores);
    }
    if (copy > 0 && load > 0) {
        fmt::print("load + BF16->F32 of {} MiB: {:.2f}x memcpy of the same bytes (goal >= 0.5x)\n",
            f.tensorBytes >> 20, copy / load);
    }
    if (copy > 0 && faulting > 0) {
        fmt::print("  without the prefault (threads fault the pages in): {:.2f}x memcpy\n",
            copy / faulting);
    }
    if (copy > 0 && convert > 0) {
        fmt::print("BF16->F32 from an open file: {:.2f}x memcpy (the output is twice the bytes)\n",
            copy / convert);
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
