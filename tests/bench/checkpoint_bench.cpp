// Checkpoint throughput, each figure as a ratio to a baseline measured in the same run:
//  - verification: day0's SHA-256 over shard files (one thread, then one per core) against
//    `openssl dgst -sha256` over the same files, the SHA-NI-accelerated tool a user would pick
//    (goal: ≥ 0.95× per core, scaling with cores); skipped, saying so, without openssl;
//  - loading: opening a safetensors file (map, validate) and converting its BF16 tensor to F32
//    from the memory map (the conversion's threads fault the pages in; also with a prefault
//    first; the streamed run reads by pread instead, exec/piece_reader.h), and its FP8 (E4M3)
//    tensor to F32, plain and with 128x128 block scales (F32, as DeepSeek-V3 publishes them), each
//    against a plain memcpy of the same source bytes (goal: >= 0.5x), and the BF16 conversion alone
//    from a file already open. The conversions are the loader's: SSE2 widening with streaming
//    stores (BF16); for FP8 the AVX2 kernel (codes decoded arithmetically, eight per streaming
//    store, the block's scale multiplied in) beside the table lookups it replaced (four per SSE2
//    streaming store, block-scaled through each block's scaled table) as the "before", the two
//    outputs compared bit for bit; the same FP8 figures again interleaved (each round times memcpy
//    and every conversion once, best round kept), which a shared machine's passing load skews less;
//    and FP4 (E2M1 codes, two a byte) to F32 with NVFP4's and MXFP4's group scales, against a
//    memcpy of the codes. All split over up to 8 threads for large tensors (the memcpy baseline is
//    glibc's, one thread);
//  - streaming: `day0 run --stream`'s read rate (exec::runStreamed over a BF16 Llama checkpoint,
//    one token, the bytes it read over its wall time) against a plain sequential read() of the
//    same file, each with the file's pages dropped from the page cache first (posix_fadvise
//    DONTNEED, which needs no privilege for clean pages) (goal: ≥ 0.8×); beside it the time the
//    run spent in the stream's loads (reading on its own thread and waiting for a layer its
//    loader thread read ahead), the loader's time reading ahead, and the CPU time the run took
//    on its own thread and on all the process's threads (the tensor's read split over worker
//    threads, the loader), which bound it from below whatever the disk does: the ratio it
//    could reach with its own thread never waiting, and with every core of the machine its.
// DAY0_BENCH_QUICK=1 (CTest) uses small files; run by hand for real figures.

#include "base/progress.h"
#include "bench_support.h"
#include "checkpoint/dequantize.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint_bench_files.h"
#include "checkpoint_bench_stream.h"
#include "numerics/dtype_convert.h"
#include "numerics/parallel_chunks.h"
#include "numerics/widen_fp8.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace ck = day0::checkpoint;
using namespace day0::bench::checkpoint_files;
using namespace day0::bench::checkpoint_stream;

void opensslTool(benchmark::State& state)
{
    auto& f = fixture();
    if (!f.openssl) {
        state.SkipWithError("openssl is not installed: no SHA-256 baseline to compare with");
        return;
    }
    std::string cmd = "cd '" + f.dir.string() + "' && openssl dgst -sha256";
    for (const auto& s : f.shards) {
        cmd += " " + s;
    }
    cmd += " > /dev/null";
    for (auto _ : state) {
        if (std::system(cmd.c_str()) != 0) {
            state.SkipWithError("openssl dgst -sha256 failed");
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

void memcpyFp8Baseline(benchmark::State& state)
{
    auto& f = fixture();
    auto file = ck::SafetensorsFile::open(f.fp8File);
    const auto src = file->data(file->tensors()[0]);
    for (auto _ : state) {
        std::memcpy(f.out.data(), src.data(), src.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.fp8Bytes));
}

using day0::numerics::detail::Fp8Kernel;

/// Whether the AVX2 kernel and the table lookups give the same bits on the bench tensor.
bool g_fp8SameBits = false;
bool g_fp8Compared = false;

/// Opens the FP8 file and converts its tensor into the fixture's output from the memory map (no
/// prefault), with `kernel`, plain or block-scaled.
void convertFp8File(Fp8Kernel kernel, bool scaled)
{
    auto& f = fixture();
    auto file = ck::SafetensorsFile::open(f.fp8File);
    const auto bytes = file->data(file->tensors()[0]);
    if (scaled) {
        day0::numerics::detail::widenFp8BlockScaledToF32(bytes.data(), day0::DType::F8E4M3,
            fp8Scales().data(), std::int64_t(bytes.size()) / kFp8Cols, kFp8Cols, kFp8Block,
            kFp8Block, f.out.data(), kernel);
    } else {
        day0::numerics::detail::widenFp8ToF32(bytes.data(), day0::DType::F8E4M3,
            reinterpret_cast<std::byte*>(f.out.data()), bytes.size(), kernel);
    }
}

void loadFp8(benchmark::State& state, Fp8Kernel kernel, bool scaled)
{
    auto& f = fixture();
    const double* scales = fp8Scales().data();
    for (auto _ : state) {
        convertFp8File(kernel, scaled);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.fp8Bytes));
    if (!g_fp8Compared && scaled) {
        // Both kernels' block-scaled outputs side by side, bit for bit.
        g_fp8Compared = true;
        auto file = ck::SafetensorsFile::open(f.fp8File);
        const auto bytes = file->data(file->tensors()[0]);
        std::vector<float> other(f.out.size());
        const auto rows = std::int64_t(bytes.size()) / kFp8Cols;
        day0::numerics::detail::widenFp8BlockScaledToF32(bytes.data(), day0::DType::F8E4M3, scales,
            rows, kFp8Cols, kFp8Block, kFp8Block, f.out.data(), Fp8Kernel::Avx2);
        day0::numerics::detail::widenFp8BlockScaledToF32(bytes.data(), day0::DType::F8E4M3, scales,
            rows, kFp8Cols, kFp8Block, kFp8Block, other.data(), Fp8Kernel::Table);
        g_fp8SameBits = std::memcmp(other.data(), f.out.data(), 4 * other.size()) == 0;
    }
}

void loadFp8Table(benchmark::State& state) { loadFp8(state, Fp8Kernel::Table, false); }
void loadFp8BlockScaled(benchmark::State& state)
{
    loadFp8(state, day0::numerics::detail::fastestFp8Kernel(), true);
}
void loadFp8BlockScaledTable(benchmark::State& state) { loadFp8(state, Fp8Kernel::Table, true); }

/// The FP8 figures again, interleaved: each round times memcpy, then each conversion once, and
/// each keeps its best round, so that load from other processes on a shared machine, which
/// comes and goes, weighs on the baseline and the conversions alike.
struct PairedFp8 {
    double copy = 0.0;
    double plain = 0.0;
    double plainTable = 0.0;
    double block = 0.0;
    double blockTable = 0.0;
    double writeOnly = 0.0; ///< the F32 output alone, streamed by the conversion's threads
    double streamed = 0.0; ///< block-scaled through the streamed run's loader (pread, no faults)
    int rounds = 0;
};
PairedFp8 g_paired;

/// Writes `count` floats of 1.0 at `dst` (16-aligned) with streaming stores, split over threads
/// as the conversions are: the traffic of a conversion's output with no input and no work.
void streamOutput(float* dst, std::size_t count)
{
    day0::numerics::detail::runInParallelChunks(
        count, std::size_t(1) << 22, 8, [dst](std::size_t begin, std::size_t end) {
#if defined(__SSE2__)
            const __m128 one = _mm_set1_ps(1.0f);
            for (std::size_t i = begin; i + 4 <= end; i += 4) {
                _mm_stream_ps(dst + i, one);
            }
            _mm_sfence();
#else
            std::fill(dst + begin, dst + end, 1.0f);
#endif
        });
}

void pairedFp8(benchmark::State& state)
{
    auto& f = fixture();
    auto mapped = ck::SafetensorsFile::open(f.fp8File);
    const auto source = mapped->data(mapped->tensors()[0]);
    const auto timed = [](auto&& work) {
        const auto start = std::chrono::steady_clock::now();
        work();
        benchmark::ClobberMemory();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    const Fp8Kernel fast = day0::numerics::detail::fastestFp8Kernel();
    const int rounds = quick() ? 2 : 15;
    PairedFp8 best { 1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30, rounds };
    if (reinterpret_cast<std::uintptr_t>(f.out.data()) % 16 != 0) {
        state.SkipWithError("the output is not 16-byte aligned");
        return;
    }
    for (auto _ : state) {
        for (int r = 0; r < rounds; ++r) {
            best.copy = std::min(
                best.copy, timed([&] { std::memcpy(f.out.data(), source.data(), source.size()); }));
            best.plain = std::min(best.plain, timed([&] { convertFp8File(fast, false); }));
            best.plainTable = std::min(
                best.plainTable, timed([&] { convertFp8File(Fp8Kernel::Table, false); }));
            best.block = std::min(best.block, timed([&] { convertFp8File(fast, true); }));
            best.blockTable
                = std::min(best.blockTable, timed([&] { convertFp8File(Fp8Kernel::Table, true); }));
            best.writeOnly = std::min(
                best.writeOnly, timed([&] { streamOutput(f.out.data(), source.size()); }));
            best.streamed
                = std::min(best.streamed, timed([&] { readStreamed(streamedLoad().fp8); }));
        }
    }
    g_paired = best;
}

void memcpyFp4Baseline(benchmark::State& state)
{
    auto& f = fixture();
    auto file = ck::SafetensorsFile::open(f.fp4File);
    const auto src = file->data(*file->find("w"));
    for (auto _ : state) {
        std::memcpy(f.out.data(), src.data(), src.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.fp4Bytes));
}

/// Opens the FP4 file and dequantises its codes to F32 with NVFP4's (E4M3 per 16, a global F32)
/// or MXFP4's (E8M0 per 32) scales, as checkpoint::dequantizeFp4 does for the engine's loader.
void loadFp4(benchmark::State& state, ck::Fp4Scale kind)
{
    auto& f = fixture();
    const bool nv = kind == ck::Fp4Scale::E4M3;
    for (auto _ : state) {
        auto file = ck::SafetensorsFile::open(f.fp4File);
        const auto codes = file->data(*file->find("w"));
        const auto scales = file->data(*file->find(nv ? "nvfp4_scale" : "mxfp4_scale"));
        const auto rows = std::int64_t(codes.size()) / (kFp4Cols / 2);
        auto r = ck::dequantizeFp4(codes, scales, kind, nv ? 0.0123f : 1.0f, rows, kFp4Cols,
            nv ? 16 : 32,
            std::as_writable_bytes(std::span(f.out)).first(std::size_t(rows * kFp4Cols * 4)),
            day0::DType::F32);
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.fp4Bytes));
}

void loadNvfp4(benchmark::State& state) { loadFp4(state, ck::Fp4Scale::E4M3); }
void loadMxfp4(benchmark::State& state) { loadFp4(state, ck::Fp4Scale::E8M0); }

void loadFp8ToF32(benchmark::State& state)
{
    auto& f = fixture();
    for (auto _ : state) {
        auto file = ck::SafetensorsFile::open(f.fp8File);
        const auto& t = file->tensors()[0];
        // No prefault: the conversion's threads fault the pages in.
        auto r = day0::numerics::convertElements(file->data(t), day0::DType::F8E4M3,
            std::as_writable_bytes(std::span(f.out)), day0::DType::F32, std::size_t(t.numel()));
        benchmark::DoNotOptimize(r.ok());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.fp8Bytes));
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

BENCHMARK(opensslTool)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(hashFiles)->Arg(1)->Arg(kCores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(memcpyBaseline)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadBf16ToF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadBf16ToF32Faulting)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(convertOpenFile)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(memcpyFp8Baseline)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadFp8ToF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadFp8Table)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadFp8BlockScaled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadFp8BlockScaledTable)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(streamedBf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(streamedFp8BlockScaled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(pairedFp8)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(memcpyFp4Baseline)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadNvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(loadMxfp4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(sequentialRead)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(streamedRun)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

/// Prints the figures as ratios to their baselines.
void printSummary(const day0::bench::BenchTimes& times)
{
    const double tool = times.real("opensslTool/real_time");
    const double one = times.real("hashFiles/1/real_time");
    const double all = times.real(fmt::format("hashFiles/{}/real_time", kCores));
    const double copy = times.real("memcpyBaseline/real_time");
    const double load = times.real("loadBf16ToF32/real_time");
    const double convert = times.real("convertOpenFile/real_time");
    const double faulting = times.real("loadBf16ToF32Faulting/real_time");
    auto& f = fixture();
    fmt::print("\nverification over {} files of {} MiB:\n", f.shards.size(),
        f.shardBytes / f.shards.size() >> 20);
    if (!f.openssl) {
        fmt::print("  SHA-256 against openssl: skipped, openssl is not installed\n");
    }
    if (tool > 0 && one > 0) {
        fmt::print("  day0 SHA-256, 1 thread:   {:.2f}x openssl dgst -sha256 (goal >= 0.95x per "
                   "core)\n",
            tool / one);
    }
    if (tool > 0 && one > 0 && all > 0) {
        fmt::print("  day0 SHA-256, {} threads: {:.2f}x openssl dgst -sha256, {:.2f}x one thread "
                   "on {} cores\n",
            kCores, tool / all, one / all, kCores);
    }
    // The headline is the conversion over the memory map with the conversion threads faulting
    // the pages in; the prefaulted variant beside it.
    if (copy > 0 && faulting > 0) {
        fmt::print("load + BF16->F32 of {} MiB: {:.2f}x memcpy of the same bytes (goal >= 0.5x)\n",
            f.tensorBytes >> 20, copy / faulting);
    }
    if (copy > 0 && load > 0) {
        fmt::print("  with a prefault first (MADV_POPULATE_READ, then convert): {:.2f}x memcpy\n",
            copy / load);
    }
    if (copy > 0 && convert > 0) {
        fmt::print("BF16->F32 from an open file: {:.2f}x memcpy (the output is twice the bytes)\n",
            copy / convert);
    }
    const double streamedBf16 = times.real("streamedBf16/real_time");
    if (copy > 0 && streamedBf16 > 0) {
        // A streamed run's path: no page of the map is faulted in (exec/piece_reader.h).
        fmt::print("BF16->F32 through the streamed run's loader (pread 1 MiB chunks over {} "
                   "workers, page cache warm): {:.2f}x memcpy (goal >= 0.5x: {})\n",
            kCores, copy / streamedBf16, copy / streamedBf16 >= 0.5 ? "met" : "NOT met");
    }
    const double copyFp8 = times.real("memcpyFp8Baseline/real_time");
    const double loadFp8 = times.real("loadFp8ToF32/real_time");
    const double loadFp8Before = times.real("loadFp8Table/real_time");
    const double blockFp8 = times.real("loadFp8BlockScaled/real_time");
    const double blockFp8Before = times.real("loadFp8BlockScaledTable/real_time");
    const bool avx2 = day0::numerics::detail::fastestFp8Kernel() == Fp8Kernel::Avx2;
    const auto met = [](double ratio) { return ratio >= 0.5 ? "met" : "NOT met"; };
    if (copyFp8 > 0 && loadFp8 > 0 && blockFp8 > 0 && loadFp8Before > 0 && blockFp8Before > 0) {
        // The ratio is time against time for the same N source bytes. A memcpy of N bytes moves
        // 2N through memory (glibc streams stores this large); the conversion reads N and writes
        // 4N with streaming stores, 5N, so at memcpy's one-thread bandwidth it reaches 0.4x; the
        // goal needs the conversion's threads to draw 1.25x that bandwidth, which only a kernel
        // cheap enough per byte does (the table lookups were bound by their loads).
        fmt::print("load + FP8(E4M3)->F32 of {} MiB ({} kernel): {:.2f}x memcpy of the same "
                   "bytes (goal >= 0.5x: {}), {:.2f}x with the table lookups before it\n",
            f.fp8Bytes >> 20, avx2 ? "AVX2" : "table", copyFp8 / loadFp8, met(copyFp8 / loadFp8),
            copyFp8 / loadFp8Before);
        fmt::print("  block-scaled (128x128 F32 scales, DeepSeek-V3's layout): {:.2f}x memcpy "
                   "(goal >= 0.5x: {}), {:.2f}x with the scaled tables before it; outputs {}\n",
            copyFp8 / blockFp8, met(copyFp8 / blockFp8), copyFp8 / blockFp8Before,
            g_fp8SameBits ? "bit-identical" : "DIFFER");
    }
    if (g_paired.rounds > 0) {
        const auto& p = g_paired;
        fmt::print("  interleaved, best of {} rounds each: FP8->F32 {:.2f}x memcpy ({:.2f}x with "
                   "the table lookups), block-scaled {:.2f}x ({:.2f}x with the scaled tables) "
                   "(goal >= 0.5x: {})\n",
            p.rounds, p.copy / p.plain, p.copy / p.plainTable, p.copy / p.block,
            p.copy / p.blockTable, met(std::min(p.copy / p.plain, p.copy / p.block)));
        // What bounds it on this machine: writing the output alone, with the same threads.
        fmt::print("  the F32 output alone (4x the bytes, streaming stores, the same threads, "
                   "nothing read): {:.2f}x memcpy, the bound of any FP8->F32 here; the AVX2 "
                   "conversion reaches {:.0f}% of it\n",
            p.copy / p.writeOnly, 100.0 * p.writeOnly / p.plain);
        // The streamed run's loader never faults the map in: what a streamed reference of a
        // DeepSeek-V3-style checkpoint pays per FP8 weight read from the page cache.
        fmt::print("  block-scaled through the streamed run's loader (pread chunks of whole "
                   "128-row blocks over {} workers, page cache warm): {:.2f}x memcpy (goal >= "
                   "0.5x: {}), {:.0f}% of the output-alone bound\n",
            kCores, p.copy / p.streamed, met(p.copy / p.streamed),
            100.0 * p.writeOnly / p.streamed);
    }
    const double copyFp4 = times.real("memcpyFp4Baseline/real_time");
    const double nvfp4 = times.real("loadNvfp4/real_time");
    const double mxfp4 = times.real("loadMxfp4/real_time");
    if (copyFp4 > 0 && nvfp4 > 0 && mxfp4 > 0) {
        // N code bytes hold 2N values: the output is eight times the bytes, 9N moved against
        // memcpy's 2N, so 0.22x at one bandwidth.
        fmt::print("load + FP4(E2M1)->F32 of {} MiB of codes: NVFP4 (E4M3 scales per 16, a "
                   "global F32) {:.2f}x memcpy of the same bytes, MXFP4 (E8M0 per 32) {:.2f}x "
                   "(bound 0.22x at one bandwidth, the output being eight times the bytes)\n",
            f.fp4Bytes >> 20, copyFp4 / nvfp4, copyFp4 / mxfp4);
    }
    const double sequential = times.real("sequentialRead");
    const double streamed = times.real("streamedRun");
    const double loading = g_streamLoadSeconds;
    if (sequential > 0 && streamed > 0) {
        // streamedRun reads the tensors (not the header), a hair less than the file.
        fmt::print("streamed run over {} MiB (page cache dropped): {:.0f} MiB/s against a "
                   "sequential read's {:.0f} MiB/s: {:.2f}x (goal >= 0.8x)\n",
            f.streamBytes >> 20, double(f.streamBytes) / streamed / 1048576.0,
            double(f.streamBytes) / sequential / 1048576.0, sequential / streamed);
    }
    if (sequential > 0 && loading > 0) {
        fmt::print("  the run's time in its loads (read + BF16->F32 on its thread, waiting for "
                   "the layer read ahead; compute excluded): {:.0f} ms, {:.0f} MiB/s of it, "
                   "{:.2f}x the sequential read; {} of its {} layer loads read ahead by the "
                   "loader thread, in {:.0f} ms beside the compute\n",
            1e3 * loading, double(f.streamBytes) / loading / 1048576.0, sequential / loading,
            g_streamLoadsAhead, g_streamLoads, 1e3 * g_streamAheadSeconds);
    }
    if (sequential > 0 && streamed > 0 && g_streamThreadCpu > 0 && g_streamProcessCpu > 0) {
        // The run cannot end before its own thread has run this long, nor before the cores
        // have run all its threads' work: its floors where the disk is never waited for and no
        // other process takes a core.
        const double allCores = g_streamProcessCpu / double(kCores);
        fmt::print("  its CPU time: {:.0f} ms on the calling thread (the forward, the loads it "
                   "did not hand off), {:.0f} ms on all its threads (the workers and the loader "
                   "reading and converting), a run of {:.0f} ms; with the calling thread never "
                   "waiting it would reach at most {:.2f}x the sequential read, with the {} "
                   "cores all its own {:.2f}x\n",
            1e3 * g_streamThreadCpu, 1e3 * g_streamProcessCpu, 1e3 * streamed,
            sequential / g_streamThreadCpu, kCores,
            sequential / std::max(g_streamThreadCpu, allCores));
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
